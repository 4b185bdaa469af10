"""Knowledge that evolves: which memory supersedes which, and who the people in them are.

Pure functions over plain values (no store, no I/O; only :func:`decide_with_llm` awaits the
caller's LLM).  ``attributes`` maps statements to attribute keys, ``conflict`` decides
supersession, ``people`` parses relationships and resolves names, ``mentions`` finds known people in a
query, ``evaluate`` scores
the rules on tests/data/supersession_pairs.jsonl.
"""

from memoryd.knowledge.attributes import SELF, Attribute, Subject, attribute_keys, parse_attributes
from memoryd.knowledge.conflict import (
    CONFLICT_SYSTEM_PROMPT,
    CompleteJson,
    Decision,
    LlmConflictAnswer,
    Resolver,
    Statement,
    conflict_messages,
    decide,
    decide_with_llm,
)
from memoryd.knowledge.mentions import Mention, MentionFinder, find_mentions
from memoryd.knowledge.people import (
    KnownPerson,
    PersonIndex,
    RelationshipFact,
    merge_target,
    normalise_name,
    parse_relationships,
    person_resolver,
    resolve_person,
)

__all__ = [
    "CONFLICT_SYSTEM_PROMPT",
    "SELF",
    "Attribute",
    "CompleteJson",
    "Decision",
    "KnownPerson",
    "PersonIndex",
    "LlmConflictAnswer",
    "Mention",
    "MentionFinder",
    "RelationshipFact",
    "Resolver",
    "Statement",
    "Subject",
    "attribute_keys",
    "conflict_messages",
    "decide",
    "decide_with_llm",
    "find_mentions",
    "merge_target",
    "normalise_name",
    "parse_attributes",
    "parse_relationships",
    "person_resolver",
    "resolve_person",
]
