"""Unknown config keys stop start-up, in the environment as in the file, naming the nearest valid
key; the MEMORYD_* variables that are not config keys are allowed and listed in one place."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from memoryd.config import load_config
from memoryd.config.loading import NOT_CONFIG_KEYS, env_names
from memoryd.errors import ConfigError
from tests.conftest import REPO

ENV_NAME = re.compile(r"\bMEMORYD_[A-Z0-9_]*[A-Z0-9]\b")


@pytest.mark.parametrize(
    ("name", "nearest"),
    [
        ("MEMORYD_LIMITS_IDLE_TIMOUT", "MEMORYD_LIMITS_IDLE_TIMEOUT"),
        ("MEMORYD_EMBEDER", "MEMORYD_EMBEDDER"),
        ("MEMORYD_LLM_PROVDER", "MEMORYD_LLM_PROVIDER"),
        ("MEMORYD_AUTH_TOKEN_SECERT", "MEMORYD_AUTH_TOKEN_SECRET"),
        ("MEMORYD_CONFG", "MEMORYD_CONFIG"),
    ],
)
def test_a_misspelt_variable_is_an_error_naming_it_and_the_nearest_valid_one(name: str, nearest: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load_config(environ={name: "60"})
    message = str(raised.value)
    assert f"unknown variable {name}" in message
    assert f"did you mean {nearest}?" in message


def test_a_variable_like_no_key_is_an_error_without_a_guess() -> None:
    with pytest.raises(ConfigError, match=r"unknown variable MEMORYD_XYZZY$"):
        load_config(environ={"MEMORYD_XYZZY": "1"})


def test_every_config_key_has_its_variable() -> None:
    names = env_names()
    assert {"MEMORYD_SOCKET", "MEMORYD_LIMITS_IDLE_TIMEOUT", "MEMORYD_AUTH_TRUSTED_UIDS"} <= set(names)
    config = load_config(environ={"MEMORYD_LIMITS_IDLE_TIMEOUT": "61", "MEMORYD_AUTH_TRUSTED_UIDS": "0,7"})
    assert config.limits.idle_timeout == 61 and config.auth.trusted_uids == [0, 7]


def test_the_variables_that_are_not_keys_are_allowed(tmp_path: Path) -> None:
    config_file = tmp_path / "memoryd.toml"
    config_file.write_text("[limits]\nidle_timeout = 9\n")
    environ = {name: "1" for name in NOT_CONFIG_KEYS}
    environ["MEMORYD_CONFIG"] = str(config_file)
    assert load_config(environ=environ).limits.idle_timeout == 9
    assert not set(NOT_CONFIG_KEYS) & set(env_names())


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[limits]\nidle_timout = 5\n", "unknown key 'limits.idle_timout' (did you mean limits.idle_timeout?)"),
        ("embeder = 'none'\n", "unknown key 'embeder' (did you mean embedder?)"),
        ("[limts]\nidle_timeout = 5\n", "unknown key 'limts' (did you mean limits?)"),
        ("surprise = 1\n", "unknown key 'surprise'"),
    ],
)
def test_an_unknown_file_key_names_the_nearest_valid_one(tmp_path: Path, text: str, message: str) -> None:
    config_file = tmp_path / "memoryd.toml"
    config_file.write_text(text)
    with pytest.raises(ConfigError) as raised:
        load_config(config_file=config_file, environ={})
    assert str(raised.value).endswith(message)


def test_the_client_and_the_cli_read_only_variables_the_daemon_allows() -> None:
    """A sandbox's environment often reaches a daemon started from it: whatever MEMORYD_* name
    the client or the CLI reads must not stop the daemon."""
    allowed = set(env_names()) | set(NOT_CONFIG_KEYS)
    read: set[str] = set()
    for folder in ("client", "sandbox-cli"):
        for source in (REPO / folder).rglob("*.py"):
            read |= set(ENV_NAME.findall(source.read_text(encoding="utf-8")))
    assert "MEMORYD_SOCKET" in read  # the scan sees what the client reads
    assert read <= allowed, sorted(read - allowed)


def test_memoryd_serve_refuses_to_start_on_a_misspelt_variable(short_tmp: Path) -> None:
    env = {key: value for key, value in os.environ.items() if not key.startswith("MEMORYD_")}
    env["MEMORYD_LIMITS_IDLE_TIMOUT"] = "60"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "memoryd",
            "serve",
            "--socket",
            str(short_tmp / "s"),
            "--data-dir",
            str(short_tmp / "d"),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=30,
        env=env,
    )
    assert result.returncode == 2, result
    assert "MEMORYD_LIMITS_IDLE_TIMOUT" in result.stderr and "MEMORYD_LIMITS_IDLE_TIMEOUT" in result.stderr
    assert not (short_tmp / "s").exists()
