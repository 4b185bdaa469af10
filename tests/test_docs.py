"""The documentation agrees with the code: reference tables name every method, config key and
error code, no page tells the project's history, and every runnable example runs."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import msgspec
import pytest

from memoryd.config.sections import Config
from memoryd_client.errors import ErrorCode

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
PAGES = [REPO / "README.md", REPO / "bench" / "README.md", *sorted(DOCS.rglob("*.md"))]
SHELL_LANGS = {"sh", "shell", "bash", "console"}
PYTHON_LANGS = {"python", "py"}
FENCE = re.compile(r"^([ \t]*)```([^\n`]*)\n(.*?)^[ \t]*```[ \t]*$", re.M | re.S)


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def code_blocks(path: Path) -> list[tuple[str, set[str], str]]:
    """(language, the info string's other words, body) of each fenced block."""
    blocks = []
    for match in FENCE.finditer(read(path)):
        words = match.group(2).split()
        language = words[0] if words else ""
        body = textwrap.dedent(match.group(3)) if match.group(1) else match.group(3)
        blocks.append((language, set(words[1:]), body))
    return blocks


def config_keys() -> list[tuple[str, object]]:
    keys: list[tuple[str, object]] = []

    def walk(section: msgspec.Struct, prefix: str) -> None:
        for field in msgspec.structs.fields(section):
            value = getattr(section, field.name)
            if isinstance(value, msgspec.Struct):
                walk(value, prefix + field.name + ".")
            else:
                keys.append((prefix + field.name, value))

    walk(Config(), "")
    return keys


def shown(value: object) -> str:
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, str):
        return f'`"{value}"`'
    if isinstance(value, (list, tuple)):
        return "`[]`" if not value else f"`{list(value)}`"
    return f"`{value}`"


def test_the_readme_is_a_front_door() -> None:
    lines = read(REPO / "README.md").splitlines()
    assert len(lines) <= 260, f"README.md has {len(lines)} lines; reference material goes in docs/"
    text = "\n".join(lines)
    assert "./dev serve" in text and "./dev test" in text


def test_every_page_the_readme_links_exists() -> None:
    for page in PAGES:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", read(page)):
            if "://" in target:
                continue
            assert (page.parent / target).exists(), f"{page.relative_to(REPO)} links to missing {target}"


def test_every_config_key_is_documented_with_its_default_and_variable() -> None:
    rows = {}
    for line in read(DOCS / "configuration.md").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = cells
    missing = [key for key, _ in config_keys() if key not in rows]
    assert not missing, f"configuration.md has no row for {missing}"
    for key, default in config_keys():
        _, environment, documented_default, *_ = rows[key]
        assert environment == f"`MEMORYD_{key.replace('.', '_').upper()}`", key
        assert documented_default == shown(default), f"{key}: documented {documented_default}, code {shown(default)}"


def test_every_method_is_in_the_protocol_reference() -> None:
    source = read(REPO / "memoryd" / "service" / "methods.py")
    methods = set(re.findall(r'\("((?:memory|person|system)\.[a-z_]+)"', source))
    assert "memory.add" in methods and "system.health" in methods
    protocol = read(DOCS / "protocol.md")
    missing = sorted(method for method in methods if f"| `{method}` |" not in protocol)
    assert not missing, f"protocol.md's method table lacks {missing}"


def test_every_error_code_is_in_the_error_table() -> None:
    protocol = read(DOCS / "protocol.md")
    missing = [code for code in ErrorCode if f"| {int(code)} |" not in protocol]
    assert not missing, f"protocol.md's error table lacks {missing}"


HISTORY = re.compile(r"\b(issues? \d+|wave \d+|waves|the \w+ branch|helpers? (?:wrote|did))\b", re.I)


def test_no_page_tells_the_projects_history() -> None:
    for page in PAGES:
        found = HISTORY.findall(read(page))
        assert not found, f"{page.relative_to(REPO)} speaks of {found}; history belongs in git and CHANGELOG.md"


def test_every_shell_and_python_example_is_runnable_or_marked_illustrative() -> None:
    unmarked = []
    for page in PAGES:
        for language, words, body in code_blocks(page):
            if language not in SHELL_LANGS | PYTHON_LANGS or "runnable" in words:
                continue
            if not body.lstrip().lower().startswith("# illustrative"):
                unmarked.append(f"{page.relative_to(REPO)}: {body.splitlines()[0] if body else ''}")
    assert not unmarked, "blocks neither runnable nor marked '# Illustrative':\n" + "\n".join(unmarked)


def runnable_blocks() -> list[tuple[str, str, str]]:
    return [
        (f"{page.relative_to(REPO)}#{index}", language, body)
        for page in PAGES
        for index, (language, words, body) in enumerate(code_blocks(page))
        if "runnable" in words
    ]


@pytest.fixture(scope="module")
def docs_daemon(tmp_path_factory: pytest.TempPathFactory):
    """The daemon on embedded defaults, found at its default socket path, as the README starts it."""
    base = Path(f"/tmp/mdocs-{os.getpid()}")
    base.mkdir(exist_ok=True)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("MEMORYD_", "MEMORY_", "ASH_"))},
        "XDG_RUNTIME_DIR": str(base / "run"),
        "XDG_DATA_HOME": str(base / "data"),
    }
    sock = base / "run" / "memoryd" / "memoryd.sock"
    log = open(base / "daemon.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "memoryd", "serve"], env=env, stderr=log, cwd=REPO)
    deadline = time.monotonic() + 60
    while True:
        with socket.socket(socket.AF_UNIX) as probe:
            try:
                probe.connect(str(sock))
                break
            except OSError:
                pass
        assert proc.poll() is None, (base / "daemon.log").read_text()
        assert time.monotonic() < deadline, "daemon did not become ready"
        time.sleep(0.05)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    yield env
    proc.send_signal(signal.SIGTERM)
    proc.wait(30)
    log.close()
    subprocess.run(["rm", "-rf", str(base)], check=False)


@pytest.mark.parametrize(("where", "language", "body"), runnable_blocks(), ids=[b[0] for b in runnable_blocks()])
def test_runnable_example(where: str, language: str, body: str, docs_daemon: dict[str, str]) -> None:
    if language in PYTHON_LANGS:
        command = [sys.executable, "-c", body]
    else:
        command = ["bash", "-euo", "pipefail", "-c", body]
    result = subprocess.run(command, env=docs_daemon, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"{where} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
    assert "Error" not in result.stderr, f"{where}: {result.stderr}"


def test_config_prints_the_paths_in_use(tmp_path: Path) -> None:
    env = {**os.environ, "XDG_RUNTIME_DIR": str(tmp_path / "run"), "XDG_DATA_HOME": str(tmp_path / "data")}
    env = {k: v for k, v in env.items() if not k.startswith("MEMORYD_")}
    result = subprocess.run(
        [sys.executable, "-m", "memoryd", "config"], env=env, capture_output=True, text=True, check=True
    )
    effective = msgspec.json.decode(result.stdout)
    assert effective["socket"] == str(tmp_path / "run" / "memoryd" / "memoryd.sock")
    assert effective["data_dir"] == str(tmp_path / "data" / "memoryd")


def test_start_up_logs_no_sql_text_at_info(daemon_process) -> None:
    process = daemon_process()
    logs = []
    # The first start creates the schema while readers have statements prepared (SQLITE_SCHEMA);
    # the second opens an existing store.
    for _ in range(2):
        process.start()
        assert process.stop() == 0
        logs.append(process.stderr())
    log = "".join(logs)
    assert "daemon.ready" in log
    assert "SQLITE_LOG" not in log and "SELECT" not in log
