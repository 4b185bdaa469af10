"""The offline expiry parser: phrases that set an end, and phrases that must not."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from memoryd.knowledge.expiry_phrases import TEMPORARY, expires_at_ms, expiry

# Wednesday 2026-03-11 15:00 in Paris.
PARIS = ZoneInfo("Europe/Paris")
NOW = datetime(2026, 3, 11, 15, 0, tzinfo=PARIS)


def midnight(year: int, month: int, day: int) -> datetime:
    return datetime(year, month, day, tzinfo=PARIS)


SETS = [
    ("Remember for 2 weeks: my parking spot is B12", NOW + timedelta(weeks=2)),
    ("My parking spot is B12 for 2 weeks", NOW + timedelta(weeks=2)),
    ("I'm staying at the Hilton for the next 3 days", NOW + timedelta(days=3)),
    ("The office wifi password is tulip42 for the next three days", NOW + timedelta(days=3)),
    ("I'm on antibiotics for 10 days", NOW + timedelta(days=10)),
    ("We are in Lisbon for a week", NOW + timedelta(days=7)),
    ("I'll be working from home for a couple of days", NOW + timedelta(days=2)),
    ("Note: the gate code is 4411 for the coming two weeks", NOW + timedelta(weeks=2)),
    ("Keep in mind I'm vegetarian for a month", midnight(2026, 4, 11) + timedelta(hours=15)),
    ("The car is at the garage for the next 48 hours", NOW + timedelta(hours=48)),
    ("My sister is visiting for a fortnight", NOW + timedelta(days=14)),
    ("The pool is closed until Friday", midnight(2026, 3, 14)),
    ("Use the side entrance until Monday", midnight(2026, 3, 17)),
    ("Dave is covering my shifts until next Friday", midnight(2026, 3, 21)),
    ("My budget is tight until the end of the month", midnight(2026, 4, 1)),
    ("I'm off sugar until the end of the week", midnight(2026, 3, 16)),
    ("The shop is open late until the end of the year", midnight(2027, 1, 1)),
    ("The lift is out of order until tomorrow", midnight(2026, 3, 13)),
    ("I'm at my parents' until March 20", midnight(2026, 3, 21)),
    ("Roadworks on Elm Street until the 25th", midnight(2026, 3, 26)),
    ("My desk is 4B until 2026-04-02", midnight(2026, 4, 3)),
    ("The 10% discount code is SPRING, this week only", midnight(2026, 3, 16)),
    ("Lunch is served in the atrium, just for this week", midnight(2026, 3, 16)),
    ("The canteen does vegan dishes this month only", midnight(2026, 4, 1)),
    ("I'm using the spare laptop today only", midnight(2026, 3, 12)),
    ("My number is temporarily 555-0101", NOW + TEMPORARY),
    ("Temporarily, send invoices to accounts@example.com", NOW + TEMPORARY),
    ("I'm sleeping in the guest room for the time being", NOW + TEMPORARY),
    ("The dog is with my neighbour over the weekend until Sunday", midnight(2026, 3, 16)),
    ("Meetings are in room 3 for the next 2 weeks, then back to room 1", NOW + timedelta(weeks=2)),
    ("The password stays hunter2 until next week", midnight(2026, 3, 23)),
    # "have"/"has" of what someone holds now is not a perfect tense.
    ("I have a rental car until the end of the month", midnight(2026, 4, 1)),
    ("She has the car until Friday", midnight(2026, 3, 14)),
    ("We have a babysitter this week only", midnight(2026, 3, 16)),
    ("My wife has a cold for the next few days", NOW + timedelta(days=3)),
]

UNSET = [
    "I worked there for 2 weeks",
    "I have lived here for 3 months",
    "I've been vegetarian for 2 years",
    "We were in Paris for 3 days last summer",
    "She stayed with us for a week",
    "I spent the next 3 days in bed",
    "I waited until Friday to call him",
    "I studied in Rome until the end of the year",
    "My allergy to peanuts is severe",
    "I've known Anna for 10 years",
    "The course took 2 weeks",
    "He moved to Oslo 2 weeks ago",
    "I'm allergic to shellfish",
    "My favourite colour is blue",
    "The trial ran for a month before it was cancelled",
    "I kept the receipt until Friday",
    "I was temporarily unemployed in 2019",
    "Keep the secret until I say otherwise",
    "Stay here until further notice",
    "I have a 2 weeks holiday in August",
    "She has worked at the bank for 3 years",
    "I have had this car for 2 years",
    "We have been married for 5 years",
    "He has taught maths for 20 years",
    "I have never smoked for a week",
    # How long each time lasts, or a span that starts later, is not how long the memory holds.
    "I'm going to the gym for 2 hours every day",
    "I'm learning Spanish for 2 hours a week",
    "I'm going on vacation for 2 weeks in July",
    "I'm planning to visit Japan for 10 days next year",
    "We are in Rome for a week this summer",
]


@pytest.mark.parametrize(("text", "expected"), SETS)
def test_a_forward_looking_phrase_sets_the_expiry(text: str, expected: datetime) -> None:
    assert expiry(text, NOW) == expected


@pytest.mark.parametrize("text", UNSET)
def test_a_past_or_lasting_statement_sets_no_expiry(text: str) -> None:
    assert expiry(text, NOW) is None


def test_there_are_at_least_thirty_phrasings() -> None:
    assert len(SETS) + len(UNSET) >= 30 and len(SETS) >= 20


def test_calendar_bounds_follow_the_callers_timezone() -> None:
    # 23:30 UTC on Wednesday is already Thursday in Tokyo: "until tomorrow" ends Friday there.
    now_ms = int(datetime(2026, 3, 11, 23, 30, tzinfo=UTC).timestamp() * 1000)
    tokyo = expires_at_ms("The lift is out of order until tomorrow", now_ms, "Asia/Tokyo")
    utc = expires_at_ms("The lift is out of order until tomorrow", now_ms, None)
    assert tokyo == int(datetime(2026, 3, 14, tzinfo=ZoneInfo("Asia/Tokyo")).timestamp() * 1000)
    assert utc == int(datetime(2026, 3, 13, tzinfo=UTC).timestamp() * 1000)


def test_an_unknown_timezone_falls_back_to_utc() -> None:
    now_ms = int(datetime(2026, 3, 11, 12, tzinfo=UTC).timestamp() * 1000)
    assert expires_at_ms("Closed until tomorrow", now_ms, "Mars/Olympus") == int(
        datetime(2026, 3, 13, tzinfo=UTC).timestamp() * 1000
    )


def test_a_bound_already_past_sets_nothing() -> None:
    assert expiry("The pool is closed until 2026-03-01", NOW) is None


def test_naive_now_is_refused() -> None:
    with pytest.raises(ValueError):
        expiry("for 2 weeks", NOW.replace(tzinfo=None))
