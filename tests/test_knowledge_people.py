"""People: relationship statements, name resolution and mentions in a query."""

from __future__ import annotations

import pytest

from memoryd.knowledge.mentions import MentionFinder, find_mentions
from memoryd.knowledge.people import (
    KnownPerson,
    RelationshipFact,
    merge_target,
    normalise_name,
    parse_relationships,
    resolve_person,
)
from memoryd.knowledge.relationships import canonical

PARSES = [
    ("My wife's name is Sarah", [("Sarah", "wife", ("my wife",))]),
    ("my wife's name is sarah", [("Sarah", "wife", ("my wife",))]),
    ("Sarah is my wife", [("Sarah", "wife", ("my wife",))]),
    ("my boss Tom said the deadline moved", [("Tom", "boss", ("my boss",))]),
    ("My new boss is Linda.", [("Linda", "boss", ("my boss",))]),
    ("my sister, Anna, lives in Rome", [("Anna", "sister", ("my sister",))]),
    ("Tom, my boss, is strict", [("Tom", "boss", ("my boss",))]),
    ("I'm married to Sarah", [("Sarah", "spouse", ("my spouse",))]),
    ("I'm engaged to Sam", [("Sam", "fiance", ("my fiance",))]),
    ("our dog Rex loves the park", [("Rex", "dog", ("my dog",))]),
    ("I have a cat named Luna", [("Luna", "cat", ("my cat",))]),
    ("My mom Linda is visiting", [("Linda", "mother", ("my mother", "my mom"))]),
    ("My kids are Emma and Leo", [("Emma", "child", ("my child",)), ("Leo", "child", ("my child",))]),
    (
        "Emma, Mia and Leo are my children",
        [("Emma", "child", ("my child",)), ("Mia", "child", ("my child",)), ("Leo", "child", ("my child",))],
    ),
    ("My husband Tom Baker works at Google", [("Tom Baker", "husband", ("my husband",))]),
    # A title belongs to the name: "Dr." alone is nobody.
    ("My dentist is Dr. Okafor.", [("Dr. Okafor", "doctor", ("my doctor", "my dentist"))]),
    ("My boss is Mrs Patel", [("Mrs Patel", "boss", ("my boss",))]),
    ("Dr. Smith is my doctor", [("Dr. Smith", "doctor", ("my doctor",))]),
]

NAMES_NOBODY = [
    "my wife and I went out",
    "My dentist is Dr. Okafor on Woodhouse Lane.",  # not "Dr": a title alone names nobody
    "My wife is Italian",
    "my boss is angry today",
    "my sister is a Doctor",
    "Sarah Connor is a movie character",
    "I met my friend Monday",
    "I have a dog",
    "my wife's birthday is in May",
]


@pytest.mark.parametrize(("text", "expected"), PARSES, ids=[p[0] for p in PARSES])
def test_relationship_statements_name_people(text, expected):
    assert parse_relationships(text) == [RelationshipFact(n, r, a) for n, r, a in expected]


@pytest.mark.parametrize("text", NAMES_NOBODY)
def test_statements_without_a_named_relationship_yield_nobody(text):
    assert parse_relationships(text) == []


@pytest.mark.parametrize(
    ("word", "canon"),
    [
        ("mom", "mother"),
        ("Mum", "mother"),
        ("dad", "father"),
        ("kids", "child"),
        ("kid", "child"),
        ("colleague", "coworker"),
        ("co-worker", "coworker"),
        ("best friend", "best friend"),
        ("hubby", "husband"),
        ("puppy", "dog"),
        ("table", None),
    ],
)
def test_relationship_words_are_normalised(word, canon):
    assert canonical(word) == canon


SARAH = KnownPerson("p1", "Sarah", ("my wife",), "wife")
TOM = KnownPerson("p2", "Tom Baker", (), "boss")
REX = KnownPerson("p3", "Rex", ("our dog",), "dog")
EMMA = KnownPerson("p4", "Emma", (), "daughter")
MIA = KnownPerson("p5", "Mia", (), "daughter")
PEOPLE = [SARAH, TOM, REX, EMMA, MIA]


@pytest.mark.parametrize(
    ("phrase", "person"),
    [
        ("my wife", SARAH),
        ("wife", SARAH),
        ("Sarah", SARAH),
        ("sarah", SARAH),
        ("Sarah's", SARAH),
        ("SARAH ", SARAH),
        ("my husband", SARAH),  # one spouse, whatever the word
        ("Tom", TOM),
        ("tom baker", TOM),
        ("my boss", TOM),
        ("our dog", REX),
        ("my daughter", None),  # two daughters: which one is unknown
        ("Bob", None),
        ("my mother", None),
    ],
)
def test_phrases_resolve_to_one_person(phrase, person):
    assert resolve_person(phrase, PEOPLE) == person


def _mentions(query):
    return [(m.person.name if m.person else None, m.via, m.relationship) for m in find_mentions(query, PEOPLE)]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("what does my wife like?", [("Sarah", "relationship", "wife")]),
        ("does Sarah like sushi?", [("Sarah", "name", "wife")]),
        ("what's sarah's birthday", [("Sarah", "name", "wife")]),
        ("what did my boss say", [("Tom Baker", "relationship", "boss")]),
        ("where is Tom", [("Tom Baker", "name", "boss")]),
        ("what does Rex eat", [("Rex", "name", "dog")]),
        ("what should I get my mom", [(None, "relationship", "mother")]),
        ("gifts for my daughters", [("Emma", "relationship", "daughter"), ("Mia", "relationship", "daughter")]),
        ("Sarah and my boss", [("Sarah", "name", "wife"), ("Tom Baker", "relationship", "boss")]),
        ("what does my wife think of Sarah", [("Sarah", "relationship", "wife")]),  # one person, once
    ],
)
def test_query_mentions_known_people(query, expected):
    assert _mentions(query) == expected


def test_a_known_name_followed_by_another_surname_is_someone_else():
    miller = KnownPerson("p9", "Sarah Miller", (), "friend")
    assert [m.person for m in find_mentions("the Sarah Connor movie", [miller])] == []
    assert [m.person for m in find_mentions("what does Sarah like", [miller])] == [miller]
    # Known by first name only, "Sarah" may be her: a mention.
    assert [m.person for m in find_mentions("the Sarah Connor movie", [SARAH])] == [SARAH]


@pytest.mark.parametrize(
    "query",
    [
        "should I get a dog",  # not our dog
        "a wife and a husband",
        "what does her husband do",  # someone else's
        "recommend a Thai place",
    ],
)
def test_queries_that_mention_nobody_known(query):
    assert _mentions(query) == []


def test_unknown_names_are_never_mentions():
    assert find_mentions("does Sarah like sushi?", []) == []
    assert find_mentions("the Sarah Connor movie", [TOM, REX]) == []


def test_a_new_name_for_a_one_at_a_time_relationship_merges():
    assert merge_target(RelationshipFact("Sara", "wife", ("my wife",)), PEOPLE) == SARAH
    assert merge_target(RelationshipFact("Sarah", "coworker", ("my coworker",)), PEOPLE) == SARAH
    assert merge_target(RelationshipFact("Lily", "daughter", ("my daughter",)), PEOPLE) is None
    assert merge_target(RelationshipFact("Ann", "sister", ("my sister",)), PEOPLE) is None


def test_names_normalise_for_comparison():
    assert normalise_name("  Sarah's ") == normalise_name("SARAH") == "sarah"


def test_one_finder_serves_many_texts_and_multi_word_relationships():
    mil = KnownPerson("p6", "Gloria", (), "mother-in-law")
    finder = MentionFinder([*PEOPLE, mil])
    assert [m.person for m in finder.find("my mother in law visits")] == [mil]
    assert [(m.person, m.text) for m in finder.find("what did my new boss say?")] == [(TOM, "my new boss")]
    assert [(m.text, m.via) for m in finder.find("is my wife's car fixed")] == [("my wife's", "relationship")]
    assert [(m.text, m.via) for m in finder.find("ask Tom Baker")] == [("Tom Baker", "name")]


def test_an_alias_that_is_a_name_is_a_mention():
    finder = MentionFinder([KnownPerson("p7", "Elizabeth", ("Liz",), "sister")])
    (mention,) = finder.find("did liz call?")
    assert mention.via == "alias" and mention.text == "liz"
