"""The contract suite's fixtures: every test runs once per backend, through the interfaces only.

A backend joins the suite with one entry in ``BACKENDS``: a function that opens a fresh, empty
store of that engine on the given clock (the suite moves time for expiry, leases, backoff and
retention).  Nothing else here names an engine; the tests see a ``store.interfaces.Backend``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from memoryd.store.interfaces import Backend
from tests.contract.helpers import DIM
from tests.postgres_server import Server, session_server
from tests.store_helpers import Clock


def open_sqlite(tmp_path: Path, clock: Clock) -> Backend:
    from memoryd.store.sqlite import Store

    return Store(tmp_path / "memory.db", readers=2, clock=clock)


def open_postgres(tmp_path: Path, clock: Clock) -> Backend:
    from memoryd.store.postgres import PostgresStore

    url = (tmp_path / "postgres.url").read_text()
    return PostgresStore(url, pool_size=4, clock=clock, node=f"test-{tmp_path.name}")


#: name -> opens a fresh store of that backend on ``clock``.
BACKENDS: dict[str, Callable[[Path, Clock], Backend]] = {"sqlite": open_sqlite, "postgres": open_postgres}


@pytest.fixture(scope="session")
def postgres_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One PostgreSQL for the whole session (skipped without the test extra)."""
    yield from session_server(tmp_path_factory)


@pytest.fixture
def fresh_databases(backend_name: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[None]:
    """postgres: a fresh database for each store the test opens (its URL left in the store's
    folder for ``open_postgres``)."""
    if backend_name != "postgres":
        yield
        return
    server: Server = request.getfixturevalue("postgres_server")
    folders = [tmp_path, tmp_path / "another"] if "another" in request.fixturenames else [tmp_path]
    urls = []
    for folder in folders:
        folder.mkdir(exist_ok=True)
        urls.append(server.fresh_database())
        (folder / "postgres.url").write_text(urls[-1])
    yield
    for url in urls:
        server.drop(url)


@pytest.fixture(params=sorted(BACKENDS))
def backend_name(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def backend(backend_name: str, tmp_path: Path, clock: Clock, fresh_databases: None) -> Iterator[Backend]:
    """A fresh store of each backend, with a vector space configured."""
    store = BACKENDS[backend_name](tmp_path, clock)
    store.configure_vector_space("contract:test", DIM)
    with store:
        yield store


@pytest.fixture
def another(backend_name: str, tmp_path: Path, clock: Clock, fresh_databases: None) -> Iterator[Backend]:
    """A second, empty store of the same backend (an import's target)."""
    (tmp_path / "another").mkdir(exist_ok=True)
    store = BACKENDS[backend_name](tmp_path / "another", clock)
    store.configure_vector_space("contract:test", DIM)
    with store:
        yield store
