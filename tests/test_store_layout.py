"""The store's seam: SQLite stays inside ``memoryd/store/sqlite/``, and only the backend factory
reaches into it.

A new engine plugs in beside ``sqlite/`` and passes ``tests/contract/``; that works only while
the service, the admin commands and the server talk to the interfaces alone and no SQL leaks
out of the engine's package.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "memoryd"
SQLITE = ROOT / "store" / "sqlite"
POSTGRES = ROOT / "store" / "postgres"
FACTORY = ROOT / "store" / "backends.py"
#: The PostgreSQL engine's own SQL lives in its package; it tokenizes with SQLite FTS5's porter
#: tokenizer (store/fts5_tokenizer.py, which both engines use; postgres/tokens.py runs it on an
#: in-memory apsw connection), so that both engines rank with the same words.  The query terms
#: and term weights both read come from the engine-neutral layer (store/query_terms.py,
#: store/term_match.py), never from the other engine.
APSW_REACHES = {ROOT / "store" / "fts5_tokenizer.py": {"apsw"}, POSTGRES / "tokens.py": {"apsw"}}

#: The shape of an SQL statement or clause in a string (upper-case keywords, as memoryd writes them).
SQL = re.compile(
    r"\b(SELECT\b.+\bFROM|INSERT (OR \w+ )?INTO|UPDATE \w+ SET|DELETE FROM|CREATE (TABLE|INDEX|VIRTUAL TABLE|TRIGGER|VIEW)"
    r"|ALTER TABLE|DROP (TABLE|INDEX)|PRAGMA \w+|WHERE \w+|IS (NOT )?NULL|CASE WHEN|ORDER BY \w+)",
    re.S,
)
ENGINE_MODULES = ("apsw", "sqlite3", "sqlite_vec")


def python_files(outside: Path, *also: Path) -> list[Path]:
    return [path for path in sorted(ROOT.rglob("*.py")) if not {outside, *also} & set(path.parents)]


def docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def sql_strings(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    skip = docstrings(tree)
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in skip
        and SQL.search(node.value)
    ]


def imported_modules(path: Path) -> list[str]:
    """Every module ``path`` imports (``from a import b`` gives both ``a`` and ``a.b``), and every
    dotted ``memoryd.`` name in a string (lazy imports name their modules in strings)."""
    tree = ast.parse(path.read_text(), str(path))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
            names.extend(f"{node.module}.{alias.name}" for alias in node.names)
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and re.fullmatch(r"memoryd(\.\w+)+", node.value)
        ):
            names.append(node.value)
    return names


def test_the_checks_find_what_they_look_for() -> None:
    # The detectors themselves, on the engine's own package: it must hold SQL and apsw imports.
    assert any(sql_strings(path) for path in SQLITE.rglob("*.py"))
    assert any(name == "apsw" for path in SQLITE.rglob("*.py") for name in imported_modules(path))
    assert SQL.search("SELECT id FROM memories") and SQL.search("x.deleted_at_ms IS NULL")
    assert not SQL.search("Select the best memories from the store")


@pytest.mark.parametrize("path", python_files(SQLITE, POSTGRES), ids=lambda path: str(path.relative_to(ROOT)))
def test_no_sql_outside_the_sqlite_package(path: Path) -> None:
    assert sql_strings(path) == []


@pytest.mark.parametrize("path", python_files(SQLITE), ids=lambda path: str(path.relative_to(ROOT)))
def test_no_sqlite_library_is_imported_outside_the_sqlite_package(path: Path) -> None:
    engines = [name for name in imported_modules(path) if name.split(".")[0] in ENGINE_MODULES]
    assert set(engines) <= APSW_REACHES.get(path, set())


@pytest.mark.parametrize(
    ("engine", "path"),
    [(engine, path) for engine in (SQLITE, POSTGRES) for path in python_files(engine)],
    ids=lambda value: str(value.relative_to(ROOT)),
)
def test_only_the_backend_factory_reaches_into_an_engine_package(engine: Path, path: Path) -> None:
    package = ".".join(engine.relative_to(ROOT.parent).parts)
    reached = [name for name in imported_modules(path) if name == package or name.startswith(package + ".")]
    if path == FACTORY:
        assert reached  # it is the one that opens it
    else:
        assert reached == []


def test_no_engine_imports_the_other() -> None:
    # Both checks above, stated for the engines themselves: what they share lives in memoryd/store/.
    crossings = [
        (str(path.relative_to(ROOT)), name)
        for package, other in ((SQLITE, "memoryd.store.postgres"), (POSTGRES, "memoryd.store.sqlite"))
        for path in sorted(package.rglob("*.py"))
        for name in imported_modules(path)
        if name == other or name.startswith(other + ".")
    ]
    assert crossings == []
    # The detector sees an engine's import where there is one.
    assert any(name.startswith("memoryd.store.postgres") for name in imported_modules(FACTORY))


async def test_the_configured_backend_is_opened_by_the_factory(tmp_path: Path) -> None:
    from memoryd.config import load_config
    from memoryd.errors import ConfigError
    from memoryd.store import NewMemory, Scope, backends
    from tests.conftest import make_config

    config = make_config(tmp_path)
    assert config.storage.backend == "sqlite"
    config.data_path.mkdir(parents=True)
    with backends.open_store(config) as store:
        record, _ = await store.memories.add(
            NewMemory(content="tea", owner="alice", chat_id=None, shared=False, source="t")
        )
        assert await store.memories.get(Scope("alice"), record.id) is not None
    assert config.db_path.exists()
    with pytest.raises(ConfigError, match="storage.backend"):
        load_config(environ={"MEMORYD_STORAGE_BACKEND": "oracle"})
