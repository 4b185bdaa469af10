"""The offline supersession rules on general shapes of change: contact phrasings read by the
value's type, relationship-status and diet transitions, relatives' moves, key-value changes
("<key> went up to <value>"), and the near misses each must leave alone."""

from __future__ import annotations

import pytest

from memoryd.knowledge.attribute_values import value_type
from memoryd.knowledge.attributes import parse_attributes
from memoryd.knowledge.conflict import decide
from memoryd.knowledge.evaluate import DEFAULT_PAIRS, evaluate, format_table, load_pairs
from tests.knowledge_helpers import s, supersedes


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("My email is sam@old.example", "You can reach me at sam@new.example now"),
        ("My email is sam@old.example", "Drop me a line at sam@new.example"),
        ("My cell is 415-555-0188", "My number changed to 628-555-0142"),
        ("My phone number is 555-0111", "Text me on 555-0199 from now on"),
        ("My phone number is 555-0111", "New mobile number: 555-0199"),
        ("Best way to reach me is mo@old.example", "I'm moving everything to mo@new.example, email me there"),
    ],
)
def test_contact_phrasings_replace_the_address_of_their_type(old: str, new: str) -> None:
    assert supersedes(old, new)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("My phone number is 555-0101", "Call me at 5"),  # a time, not a number
        ("My phone number is 555-0101", "Call me on Saturday"),
        ("My email is a@example.com", "Sarah emailed me at b@example.com"),  # someone else did
        ("My email is a@example.com", "Reach my husband at h@example.com"),  # his address
        ("My email is a@example.com", "My work email changed to a@work.example"),  # another kind
    ],
)
def test_contact_near_misses_coexist(old: str, new: str) -> None:
    assert not supersedes(old, new)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("I'm engaged to Marco", "Marco and I got married in June"),
        ("I'm married to Priya", "Priya and I got divorced last year"),
        ("I'm married", "My husband and I are separated now"),
        ("I'm in a relationship with Theo", "Theo and I broke up"),
        ("I'm dating Sam", "I'm single now"),  # single denies whoever the partner was
        ("I'm single", "I've started dating someone"),  # "single" implied no partner; none named now
        ("I'm engaged", "I'm a married woman now"),
    ],
)
def test_relationship_status_transitions(old: str, new: str) -> None:
    assert supersedes(old, new)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("I'm married to Priya", "Priya and I went to Rome"),
        ("I'm married to Priya", "Tom and I separated the recycling"),
        ("I'm married", "My sister just got divorced"),
        ("I'm single", "My roommate started dating someone"),
        ("I'm divorced", "I'm single"),  # both true
        ("My brother is single", "My brother got engaged to Ana"),  # maybe another brother
    ],
)
def test_relationship_status_near_misses_coexist(old: str, new: str) -> None:
    assert not supersedes(old, new)


def test_diet_returns_and_remote_employers() -> None:
    assert supersedes("I'm vegetarian", "I started eating fish again")
    assert supersedes("I don't eat meat", "I've gone back to eating chicken")
    assert not supersedes("I'm vegan", "I'm eating chicken tonight")
    assert not supersedes("I'm vegetarian", "My son started eating meat again")
    assert supersedes("I work at Stripe", "I work remotely for Shopify now")
    assert not supersedes("I work at Stripe", "I work remotely on Fridays")
    assert not supersedes("I work part-time at the library", "I work at a bakery on Sundays")


def test_an_unnamed_relative_changes_only_by_a_transition() -> None:
    # "my sister" may be one of two: only a newer statement that tells of the change replaces.
    assert supersedes("My sister lives in Boston", "My sister moved to Seattle")
    assert supersedes("My sister is a lawyer", "My sister became a judge")
    assert supersedes("My son is 7", "My son just turned 8")
    assert not supersedes("My son is 7", "My son turned 5")  # one only grows older
    assert not supersedes("My sister moved to Seattle", "My sister lives in Boston")
    assert not supersedes("My sister lives in Boston", "My sister visited Seattle")
    assert supersedes("My dad lives in Cork", "Dad is living in Galway these days")  # "Dad" is my dad


def test_key_value_changes_by_shape_and_by_the_kind_of_value() -> None:
    assert supersedes("My rent is $1,800 a month", "My rent went up to $2,050")
    assert supersedes("My standup is at 9:30", "Standup moved to 10:00")
    assert supersedes("Our internet is 300 Mbps", "Our internet was upgraded to 1 Gbps")
    assert supersedes("My alarm is set for 6:30", "My alarm goes off at 7:15 now")
    assert supersedes("The office wifi password is tulip-88", "The office wifi password changed to orchid-19")
    # a value of another kind is about something else
    assert not supersedes("Standup is at 9:30", "Standup is on Mondays")
    assert not supersedes("The meeting is at 3pm", "The meeting moved to Room 4")
    assert not supersedes("Standup starts at 9:30", "Standup ends at 10:00")
    assert [value_type(v) for v in ("7:15", "on mondays", "$2,050", "1 gbps", "a@b.io", "555-0199", "ally")] == [
        "time",
        "day",
        "amount",
        "number",
        "email",
        "phone",
        "text",
    ]


def test_carers_are_one_of_each_kind() -> None:
    assert supersedes("My therapist is Dr. Okafor", "My therapist is Dr. Haines now")
    assert supersedes("Our dentist is Dr. Moore", "We changed dentists to Dr. Khan")
    assert not supersedes("Our doctor is Dr. Alvarez", "Our dentist is Dr. Chen")
    assert not supersedes("My therapist is Dr. Lee", "My son's therapist is Dr. Patel")
    assert not supersedes("My dog is named Rex", "We got a new dog named Max")
    name = parse_attributes("My dentist is Dr. Moore")[0]
    assert (name.subject.key, name.value) == ("rel:dentist", "dr. moore")  # the title stays with the name


def test_frames_read_before_opinions() -> None:
    assert supersedes("I like my coffee black", "I like my coffee with milk")
    assert supersedes("I drink my coffee black", "I take my coffee with oat milk now")
    assert not supersedes("I take my coffee black", "I like my tea with milk")
    assert supersedes("Prefers the window seat", "Prefers the aisle seat")
    assert supersedes("I love dogs", "I'm scared of dogs now")
    assert not supersedes("I love dogs", "I'm scared of spiders")
    assert supersedes("I study law at UCL", "I study medicine at UCL")
    assert supersedes("I live in Austin", "Home is Portland these days")
    assert not supersedes("I live in Austin", "My home is in a quiet street")


def test_hearsay_and_other_people_still_coexist_with_the_new_shapes() -> None:
    assert not decide(s("I live in Oslo", speaker="Anna"), s("Anna moved to Bergen", speaker="Ola")).supersedes
    assert not supersedes("My phone number is 555-0101", "My wife's number changed to 555-0199")
    assert not supersedes("I'm 34", "My partner just turned 36")


@pytest.mark.parametrize(
    "name",
    [
        "supersession_dev.jsonl",
        "supersession_holdout7.jsonl",
        "supersession_holdout8.jsonl",
        "supersession_holdout9.jsonl",
        "supersession_holdout10.jsonl",
    ],
)
def test_fresh_wording_sets_keep_precision_and_recall(name: str) -> None:
    # The development set was written before these shapes (recall 0.280 then); holdout7-10 each
    # after most of them (first scored 0.800, 0.741, 0.724, 0.750 recall), their general misses
    # then read.  Precision must be exact; recall must not fall back.
    overall, _ = evaluate(load_pairs(DEFAULT_PAIRS.with_name(name)))
    assert overall.total >= 40 and overall.precision == 1.0, format_table(overall, {})
    assert overall.recall >= 0.85, format_table(overall, {})


def test_new_keys_inverted_homes_and_jobs_taken() -> None:
    assert supersedes("My email is a@example.com", "I have a new email: c@example.com")
    assert supersedes("My phone number is 555-0101", "Got a new number, 555-0199")
    assert not supersedes("I have a cat", "I got a new cat, Milo")  # one more cat
    assert supersedes("I live in Austin", "Berlin is home now")
    assert not supersedes("I live in Austin", "Where I grew up is home")
    assert supersedes("I work at Infosys", "I joined Wipro as an engineer")
    assert not supersedes("I work at Infosys", "I joined a choir as a tenor")  # no job
    assert supersedes("My boss is Linda", "Raj is my new boss")
    assert supersedes("I go by Kate", "I am going by Katherine now")


def test_facets_of_a_note_verb_forms_and_fragments() -> None:
    # a value led by its preposition names a facet: floor and neighbourhood are two facts
    assert not supersedes("My office is on the 3rd floor", "My office is near the station")
    assert supersedes("My office is on the 3rd floor", "My office moved to the 5th floor")
    assert supersedes("My car insurance is with Geico", "I changed my car insurance to Progressive")
    # "works" and "work" are one verb
    assert decide(
        s("Maya works at the bakery", speaker="Leo"), s("I work at the florist now", speaker="Maya")
    ).supersedes
    assert supersedes("Vegetarian", "Eats fish again")  # notes of one word
    assert supersedes("I'm vegetarian", "I eat fish")
    assert not supersedes("I don't eat meat", "I eat fish")  # both hold
    assert not supersedes("I don't eat pork", "I started eating chicken")
    assert supersedes("I'm single", "Been seeing someone for a few weeks")
    assert supersedes("My granddaughter is 9", "My granddaughter turned 10 on Sunday")


def test_a_couple_is_the_speaker_and_a_partner() -> None:
    assert not supersedes("I'm married", "My friend and I broke up")  # a friendship, not a marriage
    assert supersedes("I'm dating Sam", "I broke up with my boyfriend")


def test_idioms_of_partners_employers_and_homes() -> None:
    assert supersedes("I'm engaged to Femi", "Femi and I tied the knot in May")
    assert supersedes("I'm single", "I have a girlfriend now")
    assert not supersedes("I'm single", "My brother has a girlfriend now")
    assert supersedes("I work at Airbnb", "I quit Airbnb")
    assert not supersedes("I work at Airbnb", "I quit smoking")
    assert supersedes("I live in Tampa", "Just moved into a place in Orlando")
    assert supersedes("My flight leaves at 9:40", "My flight now leaves at 11:05")
    assert not supersedes("My flight leaves at 9:40", "My flight now lands at 11:05")
