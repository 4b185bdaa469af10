"""The relationship vocabulary shared by the attribute rules and the people parser.

Surface words ("mom", "hubby", "kids") map to one canonical relationship ("mother", "husband",
"child"), so "my mom" and "my mother" are the same person and the same attribute subject.
"""

from __future__ import annotations

import re

#: canonical relationship -> the surface words that mean it (singular and plural).
_SYNONYMS: dict[str, tuple[str, ...]] = {
    "wife": ("wife", "wives", "wifey"),
    "husband": ("husband", "husbands", "hubby"),
    "spouse": ("spouse", "spouses"),
    "partner": ("partner", "partners", "significant other"),
    "fiance": ("fiance", "fiancee", "fiancé", "fiancée"),
    "girlfriend": ("girlfriend", "girlfriends", "gf"),
    "boyfriend": ("boyfriend", "boyfriends", "bf"),
    "child": ("child", "children", "kid", "kids"),
    "son": ("son", "sons"),
    "daughter": ("daughter", "daughters"),
    "mother": ("mother", "mom", "mum", "mommy", "mummy", "mama", "mothers", "moms", "mums"),
    "father": ("father", "dad", "daddy", "papa", "fathers", "dads"),
    "parent": ("parent", "parents"),
    "brother": ("brother", "brothers", "bro"),
    "sister": ("sister", "sisters", "sis"),
    "sibling": ("sibling", "siblings"),
    "grandmother": ("grandmother", "grandma", "granny", "nana", "grandmothers"),
    "grandfather": ("grandfather", "grandpa", "grandad", "granddad", "grandfathers"),
    "grandchild": ("grandchild", "grandchildren", "grandson", "granddaughter", "grandkid", "grandkids"),
    "aunt": ("aunt", "aunts", "auntie"),
    "uncle": ("uncle", "uncles"),
    "cousin": ("cousin", "cousins"),
    "niece": ("niece", "nieces"),
    "nephew": ("nephew", "nephews"),
    "mother-in-law": ("mother-in-law", "mother in law"),
    "father-in-law": ("father-in-law", "father in law"),
    "boss": ("boss", "bosses"),
    "manager": ("manager", "managers", "supervisor"),
    "coworker": ("coworker", "coworkers", "co-worker", "co-workers", "colleague", "colleagues"),
    "employee": ("employee", "employees", "report", "direct report"),
    "friend": ("friend", "friends", "buddy", "pal"),
    "best friend": ("best friend", "best friends", "bff", "bestie"),
    "roommate": ("roommate", "roommates", "flatmate", "flatmates", "housemate"),
    "neighbor": ("neighbor", "neighbors", "neighbour", "neighbours"),
    "doctor": ("doctor", "dentist", "therapist"),
    "teacher": ("teacher", "teachers"),
    "dog": ("dog", "dogs", "puppy", "puppies", "pup"),
    "cat": ("cat", "cats", "kitten", "kittens", "kitty"),
    "pet": ("pet", "pets"),
    "horse": ("horse", "horses"),
    "bird": ("bird", "birds", "parrot"),
    "rabbit": ("rabbit", "rabbits", "bunny"),
    "fish": ("fish", "goldfish"),
    "hamster": ("hamster", "hamsters"),
}

_CANONICAL: dict[str, str] = {word: canon for canon, words in _SYNONYMS.items() for word in words}

#: Relationships one normally has once at a time: a new name for "my wife" replaces the old one.
#: Everything else (son, friend, dog...) can be several people at once, so names coexist.
UNIQUE = frozenset(
    {
        "wife",
        "husband",
        "spouse",
        "partner",
        "fiance",
        "girlfriend",
        "boyfriend",
        "mother",
        "father",
        "boss",
        "manager",
        "mother-in-law",
        "father-in-law",
        "best friend",
    }
)
PETS = frozenset({"dog", "cat", "pet", "horse", "bird", "rabbit", "fish", "hamster"})

#: Attribute subjects compare by this class, so "my wife" and "my spouse" are one subject.
_SUBJECT_CLASS = {
    "wife": "spouse",
    "husband": "spouse",
    "girlfriend": "partner",
    "boyfriend": "partner",
    "fiance": "partner",
}

#: First words of every relationship phrase ("best" for "best friend"): a quick "could start one".
FIRST_WORDS = frozenset(word.split()[0] for word in _CANONICAL)

#: One regex alternative matching any surface word, longest first ("best friend" before "friend").
PATTERN = "|".join(re.escape(word).replace(r"\ ", r"\s+") for word in sorted(_CANONICAL, key=len, reverse=True))


def canonical(word: str) -> str | None:
    """ "Mom" -> "mother", "kids" -> "child"; None for a word that is not a relationship."""
    return _CANONICAL.get(" ".join(word.casefold().split()))


def subject_class(relationship: str) -> str:
    """The class attribute subjects are compared by: wife/husband/spouse are one."""
    return _SUBJECT_CLASS.get(relationship, relationship)


def is_unique(relationship: str) -> bool:
    return relationship in UNIQUE


def normalise_name(name: str) -> str:
    """ "Sarah's" / " SARAH " -> "sarah": the form names are compared in."""
    folded = " ".join(name.replace("’", "'").split()).casefold()
    return re.sub(r"'s?$", "", folded).strip()
