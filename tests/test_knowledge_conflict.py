"""Supersession decisions: the offline rules on the labelled pairs, the structural rules, and the
LLM variant with its fallback to the rules."""

from __future__ import annotations

import msgspec
import pytest
import trio

from memoryd.knowledge.conflict import (
    CONFLICT_SYSTEM_PROMPT,
    LlmConflictAnswer,
    Statement,
    decide,
    decide_with_llm,
)
from memoryd.knowledge.evaluate import DEFAULT_PAIRS, evaluate, format_table, load_pairs, main
from memoryd.knowledge.people import KnownPerson, person_resolver

#: What the rules reach on tests/data/supersession_pairs.jsonl today (0.904), minus a margin.
RECALL_FLOOR = 0.85


def test_labelled_pairs_are_many_and_balanced():
    pairs = load_pairs()
    conflicts = sum(p.label == "conflict" for p in pairs)
    assert len(pairs) >= 120 and conflicts / len(pairs) >= 0.4
    assert len(set(pairs)) == len(pairs)  # no pair twice (with the same subjects and speakers)


def test_offline_rules_are_precise_on_the_labelled_pairs():
    overall, _ = evaluate(load_pairs())
    # A wrong supersession hides a true fact: precision matters more than recall.
    assert overall.precision >= 0.95, format_table(overall, {})
    assert overall.recall >= RECALL_FLOOR, format_table(overall, {})


@pytest.mark.parametrize(
    "name",
    ["supersession_holdout.jsonl", "supersession_holdout2.jsonl", "supersession_holdout3.jsonl"],
)
def test_offline_rules_are_precise_on_pairs_written_after_them(name):
    # Written after the rules (the first one then used to fix wording gaps, the second never):
    # recall there is lower and not asserted; precision must hold everywhere.
    overall, _ = evaluate(load_pairs(DEFAULT_PAIRS.with_name(name)))
    assert overall.total >= 40 and overall.precision >= 0.95, format_table(overall, {})


@pytest.mark.parametrize("name", ["supersession_holdout3.jsonl", "supersession_holdout4.jsonl"])
def test_open_attributes_recall_notes_and_changes_without_false_supersessions(name):
    # holdout3 was written before the open-vocabulary rules (and its errors then read while
    # writing them); holdout4 after them, and scored once.  Half of each pair set coexists.
    overall, _ = evaluate(load_pairs(DEFAULT_PAIRS.with_name(name)))
    assert overall.precision == 1.0 and overall.recall >= 0.9, format_table(overall, {})


def test_a_verb_object_change_needs_a_named_subject_and_a_change_word():
    # A bare clause names nobody; "after the" / "since" date a statement, they do not say it changed.
    assert not decide(s("written before the lock"), s("written after the lock")).supersedes
    assert not decide(s("Ren drives a Honda Civic"), s("Ren drives a Tesla after the service")).supersedes
    assert decide(s("Ren drives a Honda Civic"), s("Ren drives a Tesla nowadays")).supersedes
    assert not decide(s("Ren drives a Honda Civic"), s("Ana drives a Tesla now")).supersedes


def test_now_before_the_verb_and_new_before_the_key_say_the_value_changed():
    assert decide(s("I drive a Toyota Corolla"), s("I now drive a Honda Accord")).supersedes
    assert decide(s("Ren drives a Honda Civic"), s("Ren now drives a Tesla")).supersedes
    assert not decide(s("Kenji plays the violin"), s("Kenji currently plays the piano")).supersedes
    assert decide(s("My phone number is 555-1234"), s("My new phone number is 555-9876")).supersedes
    assert decide(s("Gate code: 4411"), s("New gate code: 9020")).supersedes
    assert not decide(s("My phone number is 555-1234"), s("My new work phone number is 555-9876")).supersedes
    assert not decide(s("My hobby is chess"), s("My new hobby is climbing")).supersedes


def test_we_speaks_for_the_household_and_a_switch_names_a_key_of_several_words():
    assert decide(s("Our wifi password is sunflower"), s("We changed the wifi password to moonbeam")).supersedes
    assert decide(s("Our internet provider is Comcast"), s("We switched internet provider to Starlink")).supersedes
    assert decide(s("The office code is 1234"), s("The new office code is 9981")).supersedes
    assert not decide(s("The office code is 1234"), s("The garage code is 9981")).supersedes
    assert not decide(
        s("Our wifi password is sunflower"), s("We changed the guest wifi password to moonbeam")
    ).supersedes


@pytest.mark.parametrize("name", ["supersession_holdout5.jsonl", "supersession_holdout6.jsonl"])
def test_offline_rules_keep_precision_on_pairs_written_before_a_change(name):
    # Each was written before a change of the rules above and scored once after it (see
    # docs/lifecycle.md): precision must hold, recall is not asserted.
    overall, _ = evaluate(load_pairs(DEFAULT_PAIRS.with_name(name)))
    assert overall.total >= 30 and overall.precision == 1.0, format_table(overall, {})


def test_evaluate_prints_the_table(capsys):
    assert main(["--errors"]) == 0
    out = capsys.readouterr().out
    assert "precision" in out and "ALL" in out


def s(content, subjects=(), speaker=None):
    return Statement(content, tuple(subjects), speaker)


def test_newer_value_of_a_single_valued_attribute_wins():
    decision = decide(s("My favorite color is red"), s("My favorite color is blue"))
    assert decision.supersedes and decision.key == "favorite:color"
    assert "'red' -> 'blue'" in decision.reason


def test_a_note_that_leaves_out_its_owner_is_the_owners_favorite():
    # A terse note, as agents store them: no "my", the owner's all the same.
    decision = decide(s("Favorite color is red"), s("favorite color is blue"))
    assert decision.supersedes and decision.key == "favorite:color"
    assert decide(s("Favourite colour is red"), s("My favorite color is blue")).supersedes
    # About Sarah (by its subjects) it stays hers: a general fact never replaces it.
    assert decide(s("Favorite color is green", subjects=["Sarah"]), s("Favorite color is blue")).verdict != "conflict"


def test_similar_wording_alone_never_supersedes():
    assert decide(s("I like cats"), s("I like dogs")).verdict == "coexist"
    assert decide(s("I went to the gym today"), s("I went to the cinema today")).verdict == "unknown"


def test_a_fact_about_a_person_and_a_general_fact_never_supersede_each_other():
    general, sarahs = s("My favorite color is blue"), s("Sarah's favorite color is green")
    for old, new in ((general, sarahs), (sarahs, general)):
        decision = decide(old, new)
        assert decision.verdict == "coexist" and decision.final


def test_multi_valued_attributes_coexist_unless_denied():
    peanuts, shellfish = s("I'm allergic to peanuts"), s("I'm allergic to shellfish")
    assert decide(peanuts, shellfish).verdict == "coexist"
    assert decide(peanuts, shellfish).final
    assert decide(peanuts, s("I'm no longer allergic to peanuts")).supersedes


def test_first_person_beats_hearsay_and_not_the_reverse():
    hearsay = s("Sarah lives in Boston", speaker="Tom")
    own_word = s("I live in Chicago", speaker="Sarah")
    assert decide(hearsay, own_word).supersedes
    reverse = decide(own_word, hearsay)
    assert reverse.verdict == "coexist" and reverse.final and "hearsay" in reverse.reason


def test_negation_supersedes_the_same_value_only():
    acme = s("I work at Acme")
    assert decide(acme, s("I no longer work at Acme")).supersedes
    assert not decide(s("I work at Globex"), s("I no longer work at Acme")).supersedes
    assert not decide(s("I no longer work at Acme"), s("I work at Globex")).supersedes
    assert decide(acme, s("I quit my job")).supersedes


def test_a_past_home_or_job_told_in_the_simple_past_is_not_replaced_by_the_current_one():
    # "lived in X while at university" is still true when the user lives elsewhere now
    assert not decide(s("I lived in Aberdeen while I was at university"), s("These days I live in Leeds")).supersedes
    assert not decide(s("I worked at Siemens for ten years"), s("I work at Bosch")).supersedes
    # and it says the home or the job of that value is over
    assert decide(s("I live in Lyon"), s("I lived in Lyon for two years")).supersedes
    assert decide(s("I live in Oslo"), s("I've lived in Bergen for a month")).supersedes


def test_an_older_statement_with_more_attributes_is_kept():
    decision = decide(s("I work at Acme as an engineer"), s("I'm a manager now"))
    assert decision.verdict == "coexist" and "employer" in decision.reason


def test_resolver_joins_a_relationship_and_a_name():
    people = [KnownPerson("p1", "Sarah", ("my wife",), "wife")]
    old, new = s("My wife's favorite color is green"), s("Sarah's favorite color is blue")
    assert not decide(old, new).supersedes  # without knowing who "my wife" is
    assert decide(old, new, person_resolver(people)).supersedes


def test_a_fragment_is_about_its_one_subject_or_else_its_speaker():
    assert decide(s("Works at Acme", ["Tom"]), s("Tom works at Globex", ["Tom"])).supersedes
    assert decide(s("Works at Acme"), s("I work at Globex")).supersedes
    assert not decide(s("Works at Acme", ["Tom"]), s("I work at Globex")).supersedes


def test_the_owner_speaking_in_a_chat_is_the_owner():
    resolve = person_resolver([], owner_names=["alice_k", "Alice"])
    by_hand, in_chat = s("I live in Leeds"), s("I moved to York", speaker="alice_k")
    assert not decide(by_hand, in_chat).supersedes  # without knowing alice_k is the owner
    assert decide(by_hand, in_chat, resolve).supersedes


def test_speakers_are_people_too():
    # Two group members each saying "I live in ..." are two subjects.
    assert not decide(s("I live in Chicago", speaker="Sarah"), s("I live in Denver", speaker="Tom")).supersedes
    assert decide(s("I live in Chicago", speaker="Sarah"), s("I moved to Denver", speaker="sarah")).supersedes


# -- the LLM variant --------------------------------------------------------------------------


class ScriptedModel:
    """A complete_json stand-in that answers from a script and records what it was asked."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.calls = []

    async def __call__(self, system, messages, struct_type):
        self.calls.append((system, messages, struct_type))
        await trio.lowlevel.checkpoint()
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer


async def test_llm_is_asked_with_both_texts_dates_and_speakers():
    model = ScriptedModel(LlmConflictAnswer("conflict", "a new car replaces the old one"))
    old = Statement("My car is a Honda Civic", created_at="2025-01-02T10:00:00Z")
    new = Statement("I now drive a Tesla", created_at="2026-03-04T10:00:00Z")
    decision = await decide_with_llm(old, new, model)
    assert decision.supersedes and decision.decided_by == "llm"
    assert decision.reason == "a new car replaces the old one"
    ((system, messages, struct_type),) = model.calls
    assert system == CONFLICT_SYSTEM_PROMPT and struct_type is LlmConflictAnswer
    text = messages[0]["content"]
    for needle in (
        "Honda Civic",
        "Tesla",
        "2025-01-02T10:00:00Z",
        "2026-03-04T10:00:00Z",
        "Said by: the user themselves",
    ):
        assert needle in text


async def test_llm_may_keep_what_the_rules_would_supersede():
    model = ScriptedModel(LlmConflictAnswer("coexist", "restated"))
    decision = await decide_with_llm(s("I live in Paris"), s("I live in Lyon"), model)
    assert decision.verdict == "coexist" and decision.decided_by == "llm"


async def test_structural_rules_are_not_sent_to_the_llm():
    model = ScriptedModel()
    decision = await decide_with_llm(s("My favorite color is blue"), s("Sarah's favorite color is red"), model)
    assert decision.verdict == "coexist" and decision.decided_by == "rules"
    assert model.calls == []


@pytest.mark.parametrize(
    "failure",
    [
        RuntimeError("server down"),
        msgspec.ValidationError("Expected `str`"),
        TimeoutError(),
    ],
)
async def test_any_llm_error_falls_back_to_the_rules(failure):
    model = ScriptedModel(failure)
    decision = await decide_with_llm(s("I work at Acme"), s("I work at Globex"), model)
    assert decision.supersedes and decision.decided_by == "rules"
    assert type(failure).__name__ in decision.reason


async def test_a_reply_of_the_wrong_type_falls_back_to_the_rules():
    model = ScriptedModel({"decision": "conflict"})
    decision = await decide_with_llm(s("I like cats"), s("I like dogs"), model)
    assert decision.verdict == "coexist" and decision.decided_by == "rules"


async def test_cancellation_is_not_swallowed_by_the_fallback():
    async def never_answers(system, messages, struct_type):
        await trio.sleep_forever()

    with trio.move_on_after(0.01) as scope:
        await decide_with_llm(s("I work at Acme"), s("I work at Globex"), never_answers)
        pytest.fail("decide_with_llm returned after being cancelled")
    assert scope.cancelled_caught
