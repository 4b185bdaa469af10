"""The offline supersession rules on changes told in other words: a verb of change with the
new value after it ("changed my number, it's ..."), notes with other separators ("home =
Rotterdam"), leaving an employer, moving into a new home, couples' idioms, what to be called;
and the near misses each must leave alone (another person, another key, a one-off, a second
value, hearsay)."""

from __future__ import annotations

from pathlib import Path

import pytest

from memoryd.knowledge.conflict import decide
from memoryd.knowledge.evaluate import DEFAULT_PAIRS, evaluate, format_table, load_pairs
from memoryd.knowledge.paraphrases import rewritten
from tests.knowledge_helpers import s, supersedes


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("Text me on 020 7946 0011", "I've changed my number, it's 020 7946 0958 now"),
        ("My email is ana@old.example", "Updated my email - the new one is ana@new.example"),
        ("door code 4471", "we reset the door code, it's 9902"),
        ("mob: 07700 900111", "new mobile no. 07700 900222"),
        ("email -> ana@old.example", "please use ana@new.example, not the old one"),
        ("Reach me at ana@old.example", "I closed that account, so please email me at ana@new.example"),
    ],
)
def test_contacts_and_codes_changed_in_other_words(old: str, new: str) -> None:
    assert supersedes(old, new)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("My number is 020 7946 0011", "Sarah changed her number, it's 020 7946 0958 now"),  # hers
        ("door code 4471", "the gate code is 9902"),  # another code
        ("My email is ana@old.example", "please use the side door, not the front"),
        ("My email is ana@old.example", "Sarah emailed me at ana@new.example"),
        ("called mum 3 times", "called mum 5 times"),  # no note
        ("My number is 020 7946 0011", "call the clinic on 020 7946 0958"),
    ],
)
def test_near_misses_of_contacts_and_codes(old: str, new: str) -> None:
    assert not supersedes(old, new)


def test_notes_with_other_separators() -> None:
    assert supersedes("home = Rotterdam", "Living in Utrecht since the move in Feb")
    assert supersedes("title - Sr. Account Manager", "got bumped up to Head of Accounts")
    assert supersedes("email → kofi@old.example", "my email is kofi@new.example")
    assert not supersedes("home = Rotterdam", "Living in a van this summer")
    assert not supersedes("hometown = Rotterdam", "Living in Utrecht now")  # a hometown stays
    assert rewritten("I moved - finally") == "I moved - finally"  # a sentence, not a note
    assert rewritten("Moved to Leeds - love it") == "Moved to Leeds - love it"


def test_leaving_an_employer_in_other_words() -> None:
    assert supersedes("Ingrid works for Maersk in Copenhagen", "Ingrid left Maersk and has been at Vestas since March")
    assert decide(
        s("Rosa works at the bakery on Mill St", speaker="Viktor"),
        s("I've left the bakery, I'm at the garden centre now", speaker="Rosa"),
    ).supersedes
    assert not supersedes("Ingrid works for Maersk", "Tom left Maersk and is at Vestas now")  # someone else
    assert not supersedes("Ingrid works for Maersk", "Ingrid left Copenhagen and moved to Aarhus")
    assert not supersedes("I work at the bakery", "I left the office at six")
    # hearsay does not override what she said herself
    assert not decide(
        s("I work at the bakery on Mill St", speaker="Rosa"), s("Rosa left the bakery", speaker="Viktor")
    ).supersedes


def test_homes_moved_into_and_rented() -> None:
    assert supersedes("I'm renting a flat in Glasgow", "We got the keys to our house in Edinburgh and moved in")
    assert supersedes("My mum lives in a flat in Swansea", "Mum has moved into a care home in Cardiff")
    assert not supersedes("I live in Glasgow", "We got the keys to our holiday house in Spain")
    assert not supersedes("I live in Glasgow", "I rent out a flat in Leeds")  # a landlord lives elsewhere
    assert not supersedes("My mum lives in Swansea", "My sister lives in a flat in Cardiff")


def test_couples_jobs_ages_and_names_in_other_words() -> None:
    assert supersedes("I'm engaged to Rafael", "Rafael and I got hitched at the registry office last Friday")
    assert supersedes("My partner Declan and I have been together for six years", "Declan and I broke up in the spring")
    assert not supersedes("My friend Declan and I have been friends for years", "Declan and I broke up")
    assert supersedes("I'm a paralegal", "I passed the bar and I'm practising as a solicitor now")
    assert supersedes("Beatriz is 16", "Beatriz celebrated her 17th birthday on Sunday")
    assert not supersedes("Beatriz is 16", "Beatriz celebrated her brother's 17th birthday")
    assert not supersedes("Beatriz is 16", "Tom celebrated his 17th birthday")
    assert supersedes("The user goes by Bex", "The user has asked to be called Rebecca, not Bex")
    assert not supersedes("The user goes by Bex", "The user's son wants to be called Max")


@pytest.mark.parametrize("name", ["supersession_holdout11.jsonl", "supersession_holdout12.jsonl"])
def test_sets_written_without_the_rules_keep_precision(name: str) -> None:
    # Written by someone who never read the rules (first scored 0.033 recall each); their
    # misses were then read for the general shapes above.  Precision must be exact.
    overall, _ = evaluate(load_pairs(DEFAULT_PAIRS.with_name(name)))
    assert overall.precision == 1.0, format_table(overall, {})
    assert overall.recall >= 0.25, format_table(overall, {})


@pytest.mark.parametrize("path", sorted(DEFAULT_PAIRS.parent.glob("supersession_*.jsonl")), ids=lambda p: p.stem)
def test_no_labelled_set_has_a_false_supersession(path: Path) -> None:
    # A wrong supersession hides a true fact: every set, whoever wrote it, keeps exact precision.
    overall, _ = evaluate(load_pairs(path))
    assert overall.precision == 1.0, format_table(overall, {})


def test_favourites_schools_and_addresses_in_other_words() -> None:
    old = "My favourite author is Kazuo Ishiguro"
    assert supersedes(old, "These days nobody beats Ursula K. Le Guin for me; she's my favourite writer")
    assert not supersedes(old, "She's my favourite writer")  # whom "she" is, nobody said
    assert not supersedes(old, "I met Ursula K. Le Guin once; she's my mum's favourite writer")
    assert supersedes("My favourite film is Heat", "My favourite movie is Alien")
    assert supersedes("Oskar goes to Hollybank Primary", "Oskar started secondary school at Westfield Academy")
    assert not supersedes("Oskar goes to Hollybank Primary", "Mia started school at Westfield Academy")
    assert not supersedes("Oskar goes to Hollybank Primary", "Oskar goes to Westfield Academy for football")
    assert supersedes(
        "Our mailing address is 14 Maple Ave, Evanston", "Please send anything for us to 22 N. Halsted St"
    )
    assert not supersedes("Our mailing address is 14 Maple Ave", "Please send the parcel to 22 N. Halsted St")


def test_people_notes_retirement_doses_partners_and_degrees() -> None:
    assert supersedes("Uma - senior nurse, St Thomas'", "Uma retired in August, no more nursing for her")
    assert not supersedes("Uma - senior nurse, St Thomas'", "Tom retired in August")
    assert not supersedes("I work as a nurse", "I retired the old laptop")
    assert supersedes("Dmitri, 41", "Dmitri turned 42")
    assert not supersedes("Dmitri, 41", "Anna, 42")
    assert supersedes("I take 20 mg of citalopram each morning", "My doctor raised my citalopram dose to 30 mg")
    assert not supersedes("I take 20 mg of citalopram", "I take 50 mg of sertraline")  # two medicines
    assert not supersedes("I take 20 mg of citalopram", "My doctor raised my sertraline dose to 30 mg")
    assert supersedes("Tariq's girlfriend is called Leila", "Tariq is seeing someone new, a nurse called Amani")
    assert not supersedes("Tariq's girlfriend is called Leila", "Omar is seeing someone new, a nurse called Amani")
    assert supersedes("I'm studying for an MSc at Warwick", "I graduated from Warwick in July")
    assert not supersedes("I'm studying for an MSc at Warwick", "My sister graduated from Warwick")
    assert not supersedes("I'm studying for an MSc at Warwick", "I graduated from Leeds in 2015")  # an earlier one


def test_reported_habits_and_school_moves() -> None:
    assert supersedes("The user votes Green.", "The user says they'll vote Lib Dem from now on, done with the Greens.")
    assert not supersedes("The user votes Green.", "The user says their sister will vote Lib Dem from now on")
    assert not supersedes("The user votes Green.", "The user will vote Lib Dem in the by-election")  # once
    assert supersedes("Esme: year 9 @ St Anne's", "Esme moved schools, she's at Parkside now")
    assert not supersedes("Esme: year 9 @ St Anne's", "Esme moved house, she's at Parkside now")
    assert not supersedes("Esme: year 9 @ St Anne's", "Tom moved schools, he's at Parkside now")


def test_terse_notes_are_codes_and_times_not_counts() -> None:
    assert supersedes("gate code 4471", "gate code 9902")
    assert supersedes("kids pickup 3:15pm", "kids pickup 3:40pm")
    assert not supersedes("b note 5", "b note 6")  # a sequence of notes, each kept
    assert not supersedes("chapter notes 12", "chapter notes 13")
    assert not supersedes("load fact 3-12", "load fact 3-13")
    assert not supersedes("chapter notes 4.2", "chapter notes 4.3")


def test_what_looks_like_a_note_of_a_person_or_a_habit_but_is_not() -> None:
    assert not supersedes("Total: 2", "I'm 34")
    assert not supersedes("The user says they like tea", "The user says their sister will vote Lib Dem from now on")
    assert not supersedes("Ingrid works at Copenhagen Airport", "Ingrid left Copenhagen and moved to Aarhus")
