"""How an attribute's key and value are written down, so that two wordings of one fact compare
equal: favorite:Foods -> favorite:food, favorite:colour -> favorite:color, "Acme Corp, since
2020" -> acme corp.
"""

from __future__ import annotations

import re

from memoryd.knowledge.trailing import TRAILING as _TRAILING

_SPELLING = {"colour": "color", "favourite": "favorite", "tv": "tv", "flavour": "flavor"}


def normalise_key(key: str) -> str:
    head, sep, thing = key.partition(":")
    if not sep or not head.startswith("favorite") and head != "opinion":
        return key.casefold()
    words = [_SPELLING.get(w, w) for w in _TRAILING.sub("", thing).casefold().split()]
    if head != "opinion" and words:  # "favorite foods" and "favorite food" are one key
        words[-1] = _singular(words[-1])
    return f"{head}:{' '.join(words)}" if head != "opinion" else "opinion:" + normalise_value(" ".join(words))


_IES_WORDS = frozenset("movies cookies pies series species ties lies brownies smoothies zombies calories".split())


def _singular(word: str) -> str:
    if word.endswith("ies") and len(word) > 4 and word not in _IES_WORDS:
        return word[:-3] + "y"
    if word.endswith("s") and not word.endswith("ss") and len(word) > 3:
        return word[:-1]
    return word


def normalise_value(value: str) -> str:
    """ "Acme Corp, since 2020" -> "acme corp"; "the Netherlands" -> "netherlands"."""
    value = re.split(r"\s*(?:,|;|\s-\s|\bbecause\b|\bbut\b|\bsince\b|\bwhere\b|\bwhich\b)", value, maxsplit=1)[0]
    value = _TRAILING.sub("", value.strip()).casefold().strip(" .!?'\"")
    value = re.sub(r"^(?:a|an|the)\s+", "", value)
    return " ".join(value.split())
