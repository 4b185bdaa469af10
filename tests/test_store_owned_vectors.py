"""Store: memoryd reads and writes only tables it owns (never sqlite-vec's internal tables), and
every schema step is self-contained (it imports nothing of memoryd but its own package)."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import memoryd
from memoryd.store.sqlite.schema import ladder as schema

ROOT = Path(memoryd.__file__).parent

#: vec0 keeps each virtual table's data in tables named after it: ``<table>_chunks``,
#: ``_rowids``, ``_info``, ``_auxiliary``, ``_vector_chunksNN``, ``_metadatachunksNN``,
#: ``_metadatatextNN``.  sqlite-vec documents them as internal.  A name is caught after a
#: formatted table (``{table}_chunks``, ``{space.table}_rowids``) or a literal one (``vec_g1_info``);
#: the numbered ones anywhere.
SHADOW = re.compile(
    r"(?:\}|\bvec_\w*?)_(?:chunks|rowids|info|auxiliary)\b"
    r"|(?:vector_chunks|metadatachunks|metadatatext)\d\d|_auxiliary\b"
)


def shadow_table_names(text: str) -> list[str]:
    return [match.group(0) for match in SHADOW.finditer(text)]


def memoryd_imports(source: str) -> list[str]:
    """The memoryd modules a module's source imports (relative imports resolved against it)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if alias.name.split(".")[0] == "memoryd"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                found.append("." * node.level + (node.module or ""))
            elif node.module and node.module.split(".")[0] == "memoryd":
                found += [f"{node.module}.{alias.name}" for alias in node.names]
    return found


def test_the_checker_finds_the_shadow_tables_vec0_keeps() -> None:
    read_before = [
        'f"SELECT chunk_id, validity, rowids FROM {table}_chunks WHERE partition00 = ?"',
        'f"CROSS JOIN {table}_rowids AS r ON r.rowid = w.value"',
        'auxiliary = f"{space.table}_auxiliary"',
        'fill("vector_chunks00", "vectors", bits)',
        'fill("metadatachunks01", "data", integers)',
        '"UPDATE vec_g1_metadatachunks01 SET data = zeroblob(12)"',
        '"SELECT * FROM vec_g1_info"',
    ]
    assert all(shadow_table_names(line) for line in read_before)
    fine = ['"SELECT memory_rowid FROM vector_copies"', "def drop_jobs_of(db, memory_rowids)", "rowids = np.fromiter()"]
    assert not any(shadow_table_names(line) for line in fine)


def test_no_code_names_a_vec0_shadow_table() -> None:
    named = {
        str(path.relative_to(ROOT)): names
        for path in sorted(ROOT.rglob("*.py"))
        if (names := shadow_table_names(path.read_text()))
    }
    assert named == {}


def test_the_checker_finds_an_import_of_live_code() -> None:
    assert memoryd_imports("from memoryd.store import vectors\n") == ["memoryd.store.vectors"]
    assert memoryd_imports("import memoryd.store.visibility as v\n") == ["memoryd.store.visibility"]
    assert memoryd_imports("from . import vector_formats\n") == ["."]
    assert memoryd_imports("import apsw\nimport numpy as np\n") == []


def test_every_schema_step_imports_only_its_own_package() -> None:
    package = importlib.import_module(schema.MIGRATIONS[1].__module__).__package__
    assert package is not None
    folder = Path(importlib.import_module(package).__file__ or "").parent
    modules = sorted(folder.glob("*.py"))
    assert len(modules) > len(schema.MIGRATIONS)
    outside = {
        path.name: imported
        for path in modules
        if (imported := [name for name in memoryd_imports(path.read_text()) if not name.startswith(package + ".")])
    }
    # Relative imports stay inside the package only at one level ("." is the package itself).
    outside = {
        name: [i for i in imported if not (i.startswith(".") and not i.startswith(".."))]
        for name, imported in outside.items()
    }
    assert {name: imported for name, imported in outside.items() if imported} == {}


def test_every_step_is_registered_under_its_own_number() -> None:
    """A step's number is in its module's name (``m014_...``): the ladder keys it by that number,
    so a step registered under another one (or a step module left out) fails here."""
    registered = {number: step.__module__.rsplit(".", 1)[-1] for number, step in schema.MIGRATIONS.items()}
    assert all(name.startswith(f"m{number:03d}_") for number, name in registered.items()), registered
    folder = Path(importlib.import_module(schema.MIGRATIONS[1].__module__).__file__ or "").parent
    on_disk = {path.stem for path in folder.glob("m[0-9][0-9][0-9]_*.py")}
    assert on_disk == set(registered.values())
    assert schema.LATEST == max(schema.MIGRATIONS)
    assert schema.version_before(schema.MIGRATIONS[1]) == 0
