"""Fixtures: real daemons on real sockets in short temp dirs (AF_UNIX paths are capped at 108 bytes)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio

from memoryd.config import Config, load_config
from memoryd.llm import LlmClient, OllamaChat, OpenAIChat
from memoryd.server.daemon import Daemon
from memoryd.store.sqlite import Store
from tests.fake_llm import FakeLlm
from tests.store_helpers import Clock
from tests.wire import NdjsonPeer

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="md-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def clock() -> Clock:
    """The store fixture's clock: real time until a test sets ``clock.at``."""
    return Clock()


@pytest.fixture
def clean_client_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """None of the caller's socket or identity variables reaches the client under test."""
    for name in (
        "MEMORYD_SOCKET",
        "ASH_RPC_SOCKET",
        "MEMORY_USER_ID",
        "MEMORY_CHAT_ID",
        "ASH_USER_ID",
        "ASH_CHAT_ID",
        "MEMORY_CONTEXT_TOKEN",
        "ASH_CONTEXT_TOKEN",
    ):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def no_memoryd_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """None of the caller's MEMORYD_* variables reaches the configuration under test."""
    for name in [name for name in os.environ if name.startswith("MEMORYD_")]:
        monkeypatch.delenv(name)


@pytest.fixture
def store(tmp_path: Path, clock: Clock) -> Iterator[Store]:
    """A fresh store file (no vector space: a test module may override this fixture to add one)."""
    with Store(tmp_path / "memory.db", readers=2, clock=clock) as opened:
        yield opened


def make_config(base: Path, **overrides: Any) -> Config:
    """A Config for a daemon living in ``base``; ``limits={...}`` etc. override sections."""
    flags: dict[str, Any] = {
        "socket": str(base / "memoryd.sock"),
        "data_dir": str(base / "data"),
        "embedder": "none",
    }
    sections = {
        key: overrides.pop(key)
        for key in ("limits", "embed", "storage", "llm", "extraction", "lifecycle")
        if key in overrides
    }
    flags.update(overrides)
    config = load_config(flags=flags, environ={})
    for name, values in sections.items():
        config = msgspec.structs.replace(config, **{name: msgspec.structs.replace(getattr(config, name), **values)})
    return config


@pytest.fixture
async def daemon(short_tmp: Path, nursery: trio.Nursery) -> AsyncIterator[Daemon]:
    """A keyword-only daemon (embedder none), serving in-process."""
    instance = Daemon(make_config(short_tmp))
    await nursery.start(instance.run)
    yield instance
    instance.request_stop()


@pytest.fixture
async def peer(daemon: Daemon) -> NdjsonPeer:
    """An NDJSON connection to ``daemon`` (modules that need another daemon define their own)."""
    return await NdjsonPeer.connect(daemon.config.socket_path)


@pytest.fixture
async def local_peer(short_tmp: Path, nursery: trio.Nursery, local_embedder: Any) -> AsyncIterator[NdjsonPeer]:
    """An NDJSON connection to a daemon that embeds with the session's local model.

    A generous add_wait: a lone add embeds its own text before it answers, and a loaded machine
    once stalled one past the default 2 s (the test would then see embedded: false).  Yielded
    once the vector space is set up: an add that comes before it is answered embedded: false
    (the backfill embeds it), and these tests are about adds on a ready, idle embedder."""
    instance = Daemon(make_config(short_tmp, embedder="local", embed={"add_wait": 60.0}), embedder=local_embedder)
    await nursery.start(instance.run)
    peer = await NdjsonPeer.connect(instance.config.socket_path)
    with trio.fail_after(30):
        while not (await peer.call("system.health", {}))["result"]["embedder"]["vector_space_ready"]:
            await trio.sleep(0.02)
    yield peer
    instance.request_stop()


@pytest.fixture(scope="session")
def local_embedder() -> Any:
    """One loaded all-MiniLM-L6-v2 for the whole session (loading it is the slow part)."""
    from memoryd.config import EmbedConfig
    from memoryd.embed import make_embedder

    return make_embedder("local", EmbedConfig())


class DaemonProcess:
    """``memoryd serve`` as a child process, for signals, restarts and start-up checks."""

    def __init__(self, base: Path, *extra_args: str, env: dict[str, str] | None = None) -> None:
        self.base = base
        self.socket = base / "memoryd.sock"
        self.args = [
            sys.executable,
            "-m",
            "memoryd",
            "serve",
            "--socket",
            str(self.socket),
            "--data-dir",
            str(base / "data"),
            *extra_args,
        ]
        if "--embedder" not in extra_args:
            self.args += ["--embedder", "none"]
        # The caller's MEMORYD_* variables are not inherited: an unknown one stops the daemon,
        # and a developer's own settings must not change what a test sees.
        clean = {key: value for key, value in os.environ.items() if not key.startswith("MEMORYD_")}
        self.env = {**clean, **(env or {})}
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, wait: bool = True, timeout: float = 30.0) -> DaemonProcess:
        # stderr goes to a file: a pipe nobody reads would fill up and block the daemon's logging.
        self.log_path = self.base / f"daemon-{time.monotonic_ns()}.log"
        with open(self.log_path, "wb") as log_file:
            self.proc = subprocess.Popen(self.args, env=self.env, stderr=log_file, cwd=REPO)
        if wait:
            deadline = time.monotonic() + timeout
            while not self.accepts_connections():
                if self.proc.poll() is not None:
                    raise AssertionError(f"daemon exited: {self.stderr()}")
                if time.monotonic() > deadline:
                    raise AssertionError("daemon did not become ready")
                time.sleep(0.02)
        return self

    def accepts_connections(self) -> bool:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            try:
                probe.connect(str(self.socket))
            except OSError:
                return False
        return True

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout)

    def stderr(self) -> str:
        return self.log_path.read_text(errors="replace")


@pytest.fixture
def daemon_process(short_tmp: Path) -> Iterator[Any]:
    """A factory of daemon subprocesses in one temp dir; all are killed at the end."""
    made: list[DaemonProcess] = []

    def factory(*args: str, env: dict[str, str] | None = None) -> DaemonProcess:
        process = DaemonProcess(short_tmp, *args, env=env)
        made.append(process)
        return process

    yield factory
    for process in made:
        if process.proc is not None and process.proc.poll() is None:
            process.proc.kill()
            process.proc.wait()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--fuzz-long", action="store_true", help="run the protocol fuzzer for long (minutes)")


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("--fuzz-long", default=False):
        os.environ["MEMORYD_FUZZ_LONG"] = "1"


@pytest.fixture
def fake() -> Iterator[FakeLlm]:
    """A fake LLM server on loopback (both APIs), scripted by the test."""
    with FakeLlm() as server:
        yield server


@pytest.fixture(params=["openai", "ollama"])
def llm(request: pytest.FixtureRequest, fake: FakeLlm) -> LlmClient:
    """A client of ``fake`` for each API, retrying fast."""
    backend = OpenAIChat if request.param == "openai" else OllamaChat
    return backend(fake.url, "test-model", timeout=5.0, retries=1, backoff=0.01, max_backoff=0.05)
