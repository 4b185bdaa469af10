"""The calendar arithmetic behind :mod:`memoryd.knowledge.expiry_phrases`: a span added to a
moment ("2 months" from January 31 ends on the last day of March), the end of a day, week, month
or year in the caller's zone, and the end of the day an "until ..." names ("until Friday",
"until the 3rd of May", "until the end of next month").
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

#: Seconds per unit; months and years go by the calendar (:func:`plus_months`).
_UNITS = {"minute": 60, "hour": 3600, "day": 86400, "night": 86400, "week": 7 * 86400, "fortnight": 14 * 86400}
MONTH_NAMES = [
    "january", "february", "march", "april", "may", "june",
    "july", "august", "september", "october", "november", "december",
]  # fmt: skip
WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]


def later_by(now: datetime, count: float, unit: str) -> datetime | None:
    """``now`` plus ``count`` of ``unit``; None for a span of nothing (or less)."""
    if count <= 0:
        return None
    if unit in ("month", "year"):
        months = count * (12 if unit == "year" else 1)
        if months != int(months):
            return now + timedelta(days=30.44 * months)
        return plus_months(now, int(months))
    return now + timedelta(seconds=count * _UNITS[unit])


def plus_months(now: datetime, months: int) -> datetime:
    month_index = now.month - 1 + months
    year, month = now.year + month_index // 12, month_index % 12 + 1
    day = min(now.day, days_in(year, month))
    return now.replace(year=year, month=month, day=day)


def days_in(year: int, month: int) -> int:
    following = datetime(year + (month == 12), month % 12 + 1, 1)
    return (following - timedelta(days=1)).day


def day_end(day: datetime, now: datetime) -> datetime:
    """The first moment after ``day`` (midnight that ends it), in ``now``'s zone."""
    start = datetime(day.year, day.month, day.day, tzinfo=now.tzinfo)
    following = start + timedelta(days=1)
    return datetime(following.year, following.month, following.day, tzinfo=now.tzinfo)


def week_end(now: datetime) -> datetime:
    return day_end(now + timedelta(days=6 - now.weekday()), now)


def month_end(now: datetime) -> datetime:
    return day_end(now.replace(day=days_in(now.year, now.month)), now)


def year_end(now: datetime) -> datetime:
    return day_end(now.replace(month=12, day=31), now)


_ORDINAL = r"(?P<day>\d{1,2})(?:st|nd|rd|th)?"
_MONTH = r"(?P<month>" + "|".join(name[:3] + r"(?:" + name[3:] + r")?" for name in MONTH_NAMES) + r")\.?"
_DATES = [
    re.compile(r"^(?P<year>\d{4})-(?P<mon>\d{2})-(?P<day>\d{2})\b"),
    re.compile(r"^(?:the\s+)?" + _ORDINAL + r"(?:\s+of)?\s+" + _MONTH + r"(?:\s+(?P<year>\d{4}))?\b"),
    re.compile(r"^" + _MONTH + r"\s+" + _ORDINAL + r"(?:,?\s+(?P<year>\d{4}))?\b"),
    re.compile(r"^the\s+" + _ORDINAL + r"\b"),
]


def calendar_end(what: str, now: datetime) -> datetime | None:
    """The end of the day, week, month or year an "until ..." names; None if it names none."""
    what = re.sub(r"^(?:at\s+least\s+|about\s+|around\s+|on\s+)", "", what)
    if what.startswith(("further notice", "i ", "we ", "you ", "he ", "she ", "they ", "it ")):
        return None
    if what.startswith(("tonight", "today", "the end of the day", "the end of today")):
        return day_end(now, now)
    if what.startswith("tomorrow"):
        return day_end(now + timedelta(days=1), now)
    span = re.match(r"^(?:the\s+)?end\s+of\s+(?:the\s+|this\s+)?(?P<span>week|weekend|month|year)\b", what)
    if span:
        return {"week": week_end, "weekend": week_end, "month": month_end, "year": year_end}[span["span"]](now)
    span = re.match(r"^(?:the\s+)?end\s+of\s+next\s+(?P<span>week|month)\b", what)
    if span:
        return week_end(now + timedelta(days=7)) if span["span"] == "week" else month_end(plus_months(now, 1))
    if re.match(r"^(?:the\s+)?(?:this\s+)?weekend\b", what):
        return week_end(now)
    if re.match(r"^next\s+week\b", what):
        return week_end(now + timedelta(days=7))
    weekday = re.match(r"^(?P<next>next\s+|this\s+(?:coming\s+)?)?(?P<day>" + "|".join(WEEKDAYS) + r")\b", what)
    if weekday:
        ahead = (WEEKDAYS.index(weekday["day"]) - now.weekday()) % 7 or 7
        if (weekday["next"] or "").startswith("next") and ahead <= 6 - now.weekday():
            ahead += 7  # "next Friday" said on a Monday: the Friday of next week
        return day_end(now + timedelta(days=ahead), now)
    for pattern in _DATES:
        match = pattern.match(what)
        if match:
            return _date_end(match.groupdict(), now)
    return None


def _date_end(parts: dict[str, str | None], now: datetime) -> datetime | None:
    day = int(parts["day"] or 0)
    if parts.get("mon"):
        month = int(parts["mon"] or 0)
    elif parts.get("month"):
        month = next(i for i, name in enumerate(MONTH_NAMES, 1) if name.startswith(str(parts["month"])[:3]))
    else:
        month = now.month if day > now.day else now.month % 12 + 1
    year = int(parts["year"] or now.year) if parts.get("year") else now.year
    if not parts.get("year") and (month, day) < (now.month, now.day):
        year += 1  # "until March 3" said in April: next year's
    if not 1 <= month <= 12 or not 1 <= day <= days_in(year, month):
        return None
    return day_end(datetime(year, month, day, tzinfo=now.tzinfo), now)
