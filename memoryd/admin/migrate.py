"""`memoryd migrate --to postgres|sqlite --url URL`: copy the store from one engine to the other.

``--to postgres`` copies the SQLite file under data_dir into the PostgreSQL database ``--url``
names; ``--to sqlite`` copies that database into the SQLite file under data_dir.  The copy goes
through the export format (every memory and person, in one snapshot of the source) and the
import (one transaction in the target, ids already there skipped), so it can be re-run safely:
a second run copies only what is new.  Vectors are not copied (the export has none): the target
records the source's vector space and queues an embed job per live memory, which the first
daemon started on it embeds.

Then it checks: the memories by state and the people counted in both stores must be equal, and
a sample of memories must each be found by a keyword search for their own words in the target
as in the source.  Exit status 0 when both checks pass, 1 otherwise.
"""

from __future__ import annotations

import random
import sys
import tempfile
from collections.abc import Iterator
from typing import TextIO

import msgspec

from memoryd.admin.common import EXIT_OK, EXIT_PROBLEMS
from memoryd.admin.import_file import parse_header, parse_line, read_lines
from memoryd.config import Config
from memoryd.errors import StoreError
from memoryd.store import Scope, backends
from memoryd.store.admin_records import MemoryLine, PersonLine
from memoryd.store.interfaces import Backend

#: Memories searched for in both stores after the copy.
SAMPLE = 20


def run(config: Config, *, to: str, url: str, out: TextIO = sys.stdout) -> int:
    if config.storage.backend != "sqlite" and to == "postgres":
        raise StoreError(
            'memoryd migrate --to postgres copies the SQLite file of data_dir: run it with [storage] backend = "sqlite"'
        )
    sqlite_config = msgspec.structs.replace(config, storage=msgspec.structs.replace(config.storage, backend="sqlite"))
    if to == "postgres":
        if not config.db_path.exists():
            raise StoreError(f"no database at {config.db_path} (check --data-dir / data_dir)")
        source = backends.open_store(sqlite_config, readers=1, whole_scans=True)
        target = backends.open_postgres(config, url=url)
    else:
        config.db_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        source = backends.open_postgres(config, url=url)
        target = backends.open_store(sqlite_config, readers=1, whole_scans=True)
    with source, target:
        space = source.vector_space()
        if space is not None:
            target.configure_vector_space(space.model, space.dim)
        with tempfile.TemporaryFile() as buffer:
            exported = source.maintenance.export(buffer.write, user=None)
            buffer.seek(0)
            report = target.maintenance.import_memories(_lines(buffer))
        out.write(
            f"copied {report.imported} memories ({report.already_present} already there) of {exported}, "
            f"{report.people.imported + report.people.merged} people ({report.people.already_present} already there); "
            f"{report.embed_jobs} embed jobs queued in the target\n"
        )
        problems = _compare(source, target)
    for problem in problems:
        out.write(f"  mismatch: {problem}\n")
    out.write("check: " + ("counts and sample searches agree\n" if not problems else f"{len(problems)} problems\n"))
    return EXIT_OK if not problems else EXIT_PROBLEMS


def _lines(buffer: object) -> Iterator[MemoryLine | PersonLine]:
    lines = read_lines(buffer)  # type: ignore[arg-type]
    parse_header(*next(lines))
    for number, raw in lines:
        yield parse_line(number, raw)


def _compare(source: Backend, target: Backend) -> list[str]:
    import trio

    problems = []
    before, after = source.maintenance.stats(), target.maintenance.stats()
    for state, count in before["memories"].items():
        if after["memories"].get(state) != count:
            problems.append(f"{state} memories: {count} in the source, {after['memories'].get(state)} in the target")

    async def sample() -> None:
        users = [row["user"] for row in before["by_user"]]
        picked: list[tuple[str, str]] = []
        for user in users[:SAMPLE]:
            records = await source.memories.list(Scope(user), limit=50)
            if records:
                choice = random.Random(user).choice(records)
                picked.append((user, choice.content))
        for user, content in picked[:SAMPLE]:
            people_before = len(await source.people.people_of(user))
            people_after = len(await target.people.people_of(user))
            if people_before != people_after:
                problems.append(f"{user}'s people: {people_before} in the source, {people_after} in the target")
            query = " ".join(content.split()[:8])
            found_before = content in {h.content for h in await source.memories.search(Scope(user), query, limit=10)}
            found_after = content in {h.content for h in await target.memories.search(Scope(user), query, limit=10)}
            if found_before and not found_after:
                problems.append(f"a memory of {user} found by its own words in the source is not found in the target")

    trio.run(sample)
    return problems
