"""SQLite: the generated column ``memories.disclosure`` agrees with ``Disclosure.code`` (the rules
themselves are tested on every backend in ``tests/contract/test_contract_disclosure.py``)."""

from __future__ import annotations

import itertools

from memoryd.store import Provenance
from memoryd.store.sqlite import Store
from memoryd.store.visibility import Disclosure
from tests.store_helpers import note, sql

LEARNED_TYPES = (None, "private", "group", "supergroup", "channel")
SENSITIVITIES = (None, "public", "personal", "sensitive")


def test_disclosure_codes_agree_with_the_generated_column(store: Store) -> None:
    combos = list(itertools.product(LEARNED_TYPES, SENSITIVITIES, (False, True)))
    store.memories.add_many(
        note(f"c{i}", provenance=Provenance(chat_type=t, sensitivity=s, conversation_private=p))
        for i, (t, s, p) in enumerate(combos)
    )
    rows = dict(sql(store.path, "SELECT content, disclosure FROM memories"))
    for i, (kind, sensitivity, private) in enumerate(combos):
        assert rows[f"c{i}"] == Disclosure.of(kind, sensitivity, private).code
