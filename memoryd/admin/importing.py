"""`memoryd import FILE`: load a `memoryd export` file; all of it or nothing.

Two passes: the whole file is parsed and validated first, without touching the database (a
bad line is reported with its number and nothing is imported); then every memory is inserted
in ONE write transaction.  A person line that would give its owner more than
``limits.max_people_per_owner`` people is the exception: the bound depends on what the store
holds, so it is applied in the insert pass, where that line alone is left out, reported by
number, and the command exits 1.  Ids already in the store are skipped, so importing twice is
harmless.  Live memories get embed jobs; a running daemon's backfill finds them within its
idle poll (30 s).  The write lock is held for the insert pass (about 0.7 s per 10k
memories), during which the daemon's adds wait up to ``storage.busy_timeout_ms``; import files
of more than ~50k memories while the daemon is stopped, or raise that timeout.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from memoryd.admin.common import EXIT_OK, EXIT_PROBLEMS, open_store
from memoryd.admin.import_file import ImportRules, LineError, parse_header, parse_line, read_lines
from memoryd.config import Config
from memoryd.errors import StoreError
from memoryd.store.admin_records import MemoryLine, PersonLine

#: Problems listed before giving up on a bad file.
MAX_REPORTED = 20


#: memory.add's default bounds, for a caller that names none.
_DEFAULT_RULES = ImportRules()


def validate(path: Path, rules: ImportRules = _DEFAULT_RULES) -> tuple[int, list[LineError]]:
    """(memories in the file, problems found): a full pass that never touches the database."""
    errors: list[LineError] = []
    first_line_of: dict[str, int] = {}
    people_first_line_of: dict[str, int] = {}
    with open(path, "rb") as file:
        lines = read_lines(file)
        header = next(lines, None)
        if header is None:
            return 0, [LineError(1, "the file is empty (expected a memoryd export header)")]
        try:
            parse_header(*header)
        except LineError as exc:
            return 0, [exc]
        for number, raw in lines:
            try:
                line = parse_line(number, raw, rules)
            except LineError as exc:
                errors.append(exc)
            else:
                seen = people_first_line_of if isinstance(line, PersonLine) else first_line_of
                previous = seen.setdefault(line.id, number)
                if previous != number:
                    errors.append(LineError(number, f"duplicate id {line.id} (first on line {previous})"))
            if len(errors) >= MAX_REPORTED:
                break
    return len(first_line_of), errors


def _memories(path: Path, rules: ImportRules, line_of: dict[str, int]) -> Iterator[MemoryLine | PersonLine]:
    """The file's lines, parsed again; ``line_of`` gets each person line's number by id (the
    store reports a refused person by its id)."""
    with open(path, "rb") as file:
        lines = read_lines(file)
        next(lines)  # the header, validated already
        for number, raw in lines:
            line = parse_line(number, raw, rules)
            if isinstance(line, PersonLine):
                line_of[line.id] = number
            yield line


def run(config: Config, *, path: Path, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    rules = ImportRules(max_subjects=config.limits.max_subjects_per_memory, secrets=config.extraction.secrets)
    try:
        count, errors = validate(path, rules)
    except OSError as exc:
        raise StoreError(f"cannot read {path}: {exc.strerror or exc}") from None
    if errors:
        err.writelines(f"memoryd: {path}: {error}\n" for error in errors)
        more = " (stopped after the first problems)" if len(errors) >= MAX_REPORTED else ""
        err.write(f"memoryd: nothing imported: {len(errors)} bad lines{more}\n")
        return EXIT_PROBLEMS
    max_people = config.limits.max_people_per_owner or None
    line_of: dict[str, int] = {}
    with open_store(config, create=True) as store:
        try:
            report = store.maintenance.import_memories(_memories(path, rules, line_of), max_people=max_people)
        except LineError as exc:  # the file changed between the passes
            err.write(f"memoryd: {path}: {exc}\nmemoryd: nothing imported\n")
            return EXIT_PROBLEMS
    people = report.people
    out.write(
        f"imported {report.imported} of {count} memories ({report.already_present} already present); "
        f"{report.embed_jobs} queued for embedding\n"
    )
    if people.imported or people.already_present or people.merged:
        out.write(
            f"imported {people.imported} people ({people.already_present} already present, "
            f"{people.merged} merged into a person of the same name)\n"
        )
    if people.refused:
        err.writelines(
            f"memoryd: {path}: line {line_of.get(person_id, '?')}: person {person_id} not imported: its owner "
            f"already has {max_people} people (limits.max_people_per_owner)\n"
            for person_id in people.refused
        )
        err.write(
            f"memoryd: {len(people.refused)} people not imported (limits.max_people_per_owner = {max_people}); "
            "everything else was; their memories are imported without the link to them\n"
        )
        return EXIT_PROBLEMS
    return EXIT_OK
