"""The shipped systemd files: systemd's own tools check them; the example config matches the code."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import msgspec
import pytest

from memoryd.config import Config, load_config
from memoryd_client.paths import default_socket_path
from tests.conftest import REPO

UNITS = REPO / "systemd"
ANALYZE = shutil.which("systemd-analyze")
needs_analyze = pytest.mark.skipif(ANALYZE is None, reason="systemd-analyze is not installed")
MEMORYD = Path(sys.executable).parent / "memoryd"  # the venv's console script


def _copy_units(source: Path, target: Path) -> Path:
    """Copies of the units whose ExecStart= names this venv's memoryd (verify wants it to exist)."""
    target.mkdir(parents=True, exist_ok=True)
    for unit in ("memoryd.service", "memoryd.socket"):
        text = (source / unit).read_text()
        text = re.sub(r"^ExecStart=\S+/memoryd ", f"ExecStart={MEMORYD} ", text, flags=re.MULTILINE)
        (target / unit).write_text(text)
    return target


def _analyze(*args: str, runtime_dir: Path) -> subprocess.CompletedProcess[str]:
    assert ANALYZE is not None
    # --user needs a runtime directory; give it an empty private one.
    env = {"PATH": "/usr/bin:/bin", "XDG_RUNTIME_DIR": str(runtime_dir), "SYSTEMD_LOG_COLOR": "0"}
    return subprocess.run([ANALYZE, *args], capture_output=True, text=True, env=env, timeout=60)


def _unit_value(path: Path, key: str) -> str:
    (value,) = re.findall(rf"^{key}=(.*)$", path.read_text(), flags=re.MULTILINE)
    return value


@pytest.fixture
def runtime_dir(tmp_path: Path) -> Path:
    path = tmp_path / "runtime"
    path.mkdir(mode=0o700)
    return path


def test_exec_start_names_an_absolute_memoryd_serve() -> None:
    assert _unit_value(UNITS / "memoryd.service", "ExecStart").startswith("/opt/memoryd/bin/memoryd serve ")
    assert _unit_value(UNITS / "user/memoryd.service", "ExecStart").startswith("%h/.local/bin/memoryd serve")


@needs_analyze
def test_system_units_pass_systemd_analyze_verify(tmp_path: Path, runtime_dir: Path) -> None:
    units = _copy_units(UNITS, tmp_path / "system")
    result = _analyze("verify", str(units / "memoryd.service"), str(units / "memoryd.socket"), runtime_dir=runtime_dir)
    assert result.returncode == 0, result.stderr
    assert "memoryd" not in result.stderr + result.stdout  # no warning about our units either


@needs_analyze
def test_user_units_pass_systemd_analyze_verify(tmp_path: Path, runtime_dir: Path) -> None:
    units = _copy_units(UNITS / "user", tmp_path / "user")
    result = _analyze(
        "--user", "verify", str(units / "memoryd.service"), str(units / "memoryd.socket"), runtime_dir=runtime_dir
    )
    assert result.returncode == 0, result.stderr
    assert "memoryd" not in result.stderr + result.stdout


@needs_analyze
def test_system_service_security_exposure_is_ok_or_better(tmp_path: Path, runtime_dir: Path) -> None:
    units = _copy_units(UNITS, tmp_path / "system")
    result = _analyze(
        "security", "--offline=true", "--no-pager", str(units / "memoryd.service"), runtime_dir=runtime_dir
    )
    if "--offline" in result.stderr and result.returncode != 0:
        pytest.skip("this systemd-analyze has no --offline")
    match = re.search(r"Overall exposure level for memoryd\.service: ([0-9.]+) (\w+)", result.stdout)
    assert match, result.stdout + result.stderr
    exposure, label = float(match.group(1)), match.group(2)
    print(f"systemd-analyze security memoryd.service: {exposure} {label}")
    assert label in {"PERFECT", "SAFE", "OK"}  # systemd's scale: SAFE < 1.0 <= OK < 5.0 <= MEDIUM
    # 1.2 with systemd 252 (docs/systemd.md); dropping a hardening option shows up here first.
    assert exposure < 2.0


def test_the_socket_unit_and_the_service_agree_on_the_socket_path() -> None:
    assert _unit_value(UNITS / "memoryd.socket", "ListenStream") == "/run/memoryd/memoryd.sock"
    assert "MEMORYD_SOCKET=%t/memoryd/memoryd.sock" in _unit_value(UNITS / "memoryd.service", "Environment")
    assert _unit_value(UNITS / "memoryd.socket", "SocketMode") == "0660"
    assert _unit_value(UNITS / "memoryd.socket", "SocketGroup") == "memoryd"


def _settings(path: Path) -> dict[str, list[str]]:
    """Every ``Key=value`` of a unit file (a key set twice keeps both values, in order)."""
    found: dict[str, list[str]] = {}
    for key, value in re.findall(r"^(\w+)=(.*)$", path.read_text(), flags=re.MULTILINE):
        found.setdefault(key, []).append(value)
    return found


def test_the_system_service_has_every_operating_and_hardening_setting() -> None:
    unit = _settings(UNITS / "memoryd.service")
    expected = {
        "Type": ["notify"],
        "Restart": ["on-failure"],
        "User": ["memoryd"],  # made by sysusers.d/memoryd.conf
        "StateDirectory": ["memoryd"],
        "RuntimeDirectory": ["memoryd"],
        "ProtectSystem": ["strict"],
        "ProtectHome": ["yes"],
        "PrivateTmp": ["yes"],
        "NoNewPrivileges": ["yes"],
        "MemoryDenyWriteExecute": ["yes"],
    }
    assert {key: unit.get(key) for key in expected} == expected
    assert int(unit["WatchdogSec"][0]) > 0
    assert unit["SystemCallFilter"][0] == "@system-service"
    # AF_UNIX, plus only what the HTTP embedders and LLM servers need.
    assert set(unit["RestrictAddressFamilies"][0].split()) == {"AF_UNIX", "AF_INET", "AF_INET6"}


def test_the_user_service_is_a_notify_service_with_a_watchdog_and_restarts() -> None:
    unit = _settings(UNITS / "user/memoryd.service")
    assert unit["Type"] == ["notify"] and unit["Restart"] == ["on-failure"] and int(unit["WatchdogSec"][0]) > 0
    assert _unit_value(UNITS / "user/memoryd.service", "ExecStart").split()[1] == "serve"


def test_the_user_socket_is_where_clients_look_by_default() -> None:
    listen = _unit_value(UNITS / "user/memoryd.socket", "ListenStream")
    # %t is $XDG_RUNTIME_DIR in a user manager.
    assert listen.replace("%t", "/run/user/1000") == default_socket_path({"XDG_RUNTIME_DIR": "/run/user/1000"})


@pytest.mark.skipif(shutil.which("systemd-sysusers") is None, reason="systemd-sysusers is not installed")
def test_sysusers_file_creates_the_memoryd_user_and_group(tmp_path: Path) -> None:
    (tmp_path / "etc").mkdir()
    conf = (UNITS / "sysusers.d/memoryd.conf").read_bytes()
    # --root: a scratch /etc, the host's users are not touched.
    subprocess.run(["systemd-sysusers", f"--root={tmp_path}", "-"], input=conf, check=True, capture_output=True)
    passwd = (tmp_path / "etc/passwd").read_text()
    assert re.search(r"^memoryd:x:\d+:\d+:[^:]*:/var/lib/memoryd:", passwd, flags=re.MULTILINE)
    assert re.search(r"^memoryd:x:\d+:", (tmp_path / "etc/group").read_text(), flags=re.MULTILINE)


def _example_settings(uncomment: bool) -> dict[str, object]:
    text = (UNITS / "config.example.toml").read_text()
    if uncomment:
        text = re.sub(r"^# (\w+ = )", r"\1", text, flags=re.MULTILINE)
    return tomllib.loads(text)


def test_the_example_config_lists_every_key_with_its_default() -> None:
    assert _example_settings(uncomment=True) == msgspec.to_builtins(Config())


def test_the_example_config_loads_as_is(tmp_path: Path) -> None:
    example = UNITS / "config.example.toml"
    assert load_config(config_file=example, environ={}) == Config()
    uncommented = tmp_path / "config.toml"
    uncommented.write_text(re.sub(r"^# (\w+ = )", r"\1", example.read_text(), flags=re.MULTILINE))
    assert load_config(config_file=uncommented, environ={}) == Config()
