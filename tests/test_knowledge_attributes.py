"""The offline attribute rules: statement -> attributes, written `subject key=value [multi] [negated]`."""

from __future__ import annotations

import pytest

from memoryd.knowledge.attributes import parse_attributes
from memoryd.knowledge.trailing import TRAILING_PATTERN, EndAnchored

CASES = [
    ("My favorite color is blue", "self favorite:color=blue"),
    ("My favourite colour is red.", "self favorite:color=red"),
    ("Blue is my favorite color", "self favorite:color=blue"),
    ("My favorite movies are the Godfather films", "self favorite:movie=godfather films"),
    ("One of my favorite foods is sushi", "self favorites:food=sushi multi"),
    ("I moved to Berlin", "self residence=berlin"),
    ("I now live in Paris", "self residence=paris"),
    ("I am currently living in Madrid", "self residence=madrid"),
    ("i live in berlin", "self residence=berlin"),
    ("We live in Toronto", "self residence=toronto"),
    ("I'm 34", "self age=34"),
    ("I just turned 30", "self age=30"),
    ("I work at Acme", "self employer=acme"),
    ("I work for the city council", "self employer=city council"),
    ("I got a new job at Stripe", "self employer=stripe"),
    ("I work at Acme as a software engineer", "self employer=acme; self job=software engineer"),
    ("I'm a teacher", "self job=teacher"),
    ("I'm German", "self nationality=german"),
    ("Sarah's favorite food is sushi", "name:sarah favorite:food=sushi"),
    ("Sarah lives in Boston", "name:sarah residence=boston"),
    ("Tom works at Google", "name:tom employer=google"),
    ("Sarah Connor works at Cyberdyne", "name:sarah connor employer=cyberdyne"),
    ("My wife's favorite color is green", "rel:spouse favorite:color=green"),
    ("My husband Tom works at Google", "rel:spouse employer=google"),
    ("My new boss is Linda", "rel:boss name=linda"),
    ("The user's manager is now Daniel", "rel:manager name=daniel"),
    ("My son Leo is 7", "name:leo age=7"),
    ("She works at IBM", "pronoun employer=ibm"),
    ("The user lives in Austin", "self residence=austin"),
    ("User's favorite drink is coffee", "self favorite:drink=coffee"),
    ("Sarah is my wife", "rel:spouse name=sarah"),
    ("My wife's name is Sarah", "rel:spouse name=sarah"),
    ("My wife is Italian", "rel:spouse nationality=italian"),
    ("I have a dog named Rex", "rel:dog name=rex multi"),
    ("My kids are Emma and Leo", "rel:child name=emma multi; rel:child name=leo multi"),
    ("I'm married to Sarah", "self relationship_status=married; self partner_name=sarah"),
    ("I'm allergic to peanuts and shellfish", "self allergy=peanuts multi; self allergy=shellfish multi"),
    ("I speak English and a little German", "self language=english multi; self language=german multi"),
    ("I also work at a bar", "self employer=bar multi"),
    ("I'm vegetarian", "self diet=vegetarian"),
    ("I follow a keto diet", "self diet=keto"),
    ("I like cats", "self opinion:cats=positive"),
    ("I don't like cats anymore", "self opinion:cats=negative"),
    ("My work email is bob@acme.example", "self email:work=bob@acme.example"),
    ("I was born on May 3", "self birthday=may 3"),
    ("I was born in 1990", "self birth_year=1990"),
    ("I grew up in Ohio", "self hometown=ohio"),
    ("I have two kids", "self count:child=two"),
    ("Works at Acme", "implicit employer=acme"),  # extraction fragment
    ("Today I moved to Berlin", "self residence=berlin"),
    ("I've been living in Oslo for two years", "self residence=oslo"),
    ("I turned 28 yesterday", "self age=28"),
    ("My best friend is Priya now", "rel:best friend name=priya"),
    # negation and the past
    ("I no longer work at Acme", "self employer=acme negated"),
    ("I used to live in Paris", "self residence=paris negated"),
    ("I was living in Rome", "self residence=rome negated"),
    ("I lived in Lyon for two years", "self residence=lyon negated"),  # the simple past: a past home
    ("I worked at Siemens for ten years", "self employer=siemens negated"),
    ("I have lived in Leeds for 10 years", "self residence=leeds"),  # the perfect: still true
    ("I've worked at Bosch since 2019", "self employer=bosch"),
    ("I'm not allergic to peanuts anymore", "self allergy=peanuts multi negated"),
    ("I'm no longer vegan", "self diet=vegan negated"),
    ("I quit my job", "self employer= negated"),
    ("I'm retired", "self job=retired; self employer= negated"),
    ("I moved out of Madrid", "self residence=madrid negated"),
]

NOTHING = [
    "I live in a small flat",  # a flat is no place
    "I work from home",
    "I work at night",
    "I'm 5 minutes away",
    "I'm a big fan of jazz",
    "my wife and I went out",
    "I went to the gym today",
    "My ex-wife lives in Ohio",  # not my wife: no relationship subject, and no name either
    "We had pizza for dinner",
    "I like it",  # "it" may be anything
    "I'm a good cook",  # a judgement, not a job
    "I work at the front desk",  # a position, not an employer
    "I work with Tom",
    "I'm moving to Paris next year",  # not moved yet
    "Call me tomorrow",
    "My favorite part is the ending",  # a favorite of some film, not of a person
    "I'm turning 28 next week",  # not yet
    "Just Mike",  # a capitalised adverb is no subject
    # hypotheticals, wishes, questions and beliefs state nothing
    "If I moved to Paris, I would be happy",
    "Does Sarah live in Boston?",
    "I think Sarah moved to Paris",
    "I want to work at Google",
    "I'd love to live in Paris",
]


def _written(attributes):
    """The attributes as CASES writes them: ``subject key=value [multi] [negated]``, joined by "; "."""
    return "; ".join(
        f"{a.subject.key} {a.key}={a.value}" + " multi" * a.multi_valued + " negated" * a.negated for a in attributes
    )


@pytest.mark.parametrize(("text", "expected"), CASES, ids=[c[0] for c in CASES])
def test_statement_maps_to_attributes(text, expected):
    assert _written(parse_attributes(text)) == expected


@pytest.mark.parametrize("text", NOTHING)
def test_statements_the_rules_do_not_know_yield_nothing(text):
    assert parse_attributes(text) == []


def test_a_relation_one_may_have_several_of_is_an_ambiguous_subject():
    (brother,) = parse_attributes("My brother lives in Denver")
    (wife,) = parse_attributes("My wife lives in Denver")
    (named,) = parse_attributes("My brother Sam lives in Denver")
    assert brother.subject.ambiguous and not wife.subject.ambiguous
    assert named.subject.key == "name:sam" and not named.subject.ambiguous


def test_unique_relationships_name_a_single_valued_attribute():
    (wife,) = parse_attributes("My wife's name is Sarah")
    (son,) = parse_attributes("My son's name is Leo")
    assert not wife.multi_valued and son.multi_valued
    assert wife.subject.phrase == "my wife"


def _trailing_corpus() -> list[str]:
    """Every labelled statement, each with every clause ending the rules know, odd Unicode
    that case-folds onto ASCII letters, and a trailing newline (which ``$`` may skip)."""
    import json
    from pathlib import Path

    data = Path(__file__).parent / "data"
    texts = [c[0] for c in CASES] + list(NOTHING)
    for name in ("supersession_pairs.jsonl", "supersession_holdout.jsonl", "supersession_holdout2.jsonl"):
        for line in (data / name).read_text().splitlines():
            pair = json.loads(line)
            texts += [pair["old"], pair["new"]]
    endings = [
        "now",
        "after all",
        "these days",
        "nowadays",
        "again",
        "anymore",
        "any more",
        "any longer",
        "too",
        "as well",
        "currently",
        "at the moment",
        "right now",
        "full-time",
        "for now",
        "since May",
        "since May 2020",
        "since forever",
        "for the past three weeks",
        "for two years",
        "yesterday",
        "today",
        "recently",
        "lately",
        "last night",
        "this month",
        "a year ago",
        "10 days ago",
        "NOW",
        "Right Now",
        "agaİn",
        "dayſ",
        "ſince june",
        "wee\u212a",
        "know",
        "snow",
        "ago.",
        "x",
        "(note 1-2)",
        "",
    ]
    return (
        texts
        + [f"{text} {ending}" for text in texts[:60] for ending in endings]
        + [f"{t}\n" for t in texts[:60]]
        + endings
        + [f"lives in Paris {e}" for e in endings]
        + [f"works at Acme, {e}\n" for e in endings]
    )


def test_the_trailing_time_words_quick_test_answers_as_the_full_pattern():
    """memory.add parses every new memory: the quick test in front of the trailing-words
    pattern must never change what it finds, only skip texts where it cannot match."""
    quick = EndAnchored(TRAILING_PATTERN)
    for text in _trailing_corpus():
        slow = TRAILING_PATTERN.search(text)
        fast = quick.search(text)
        assert (fast and fast.span()) == (slow and slow.span()), text
        assert quick.sub("", text) == TRAILING_PATTERN.sub("", text), text
