"""Start-up refuses a sqlite-vec outside the supported versions: one line naming both versions,
exit status 5 and systemd's STATUS=, before the store is touched."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from memoryd.errors import UnsupportedSqliteVec
from memoryd.store.sqlite import vec_support
from tests.test_systemd_notify import NotifyListener

UNSUPPORTED_SQLITE_VEC = 5


def test_the_installed_sqlite_vec_is_supported() -> None:
    assert vec_support.check() == vec_support.installed_version()


@pytest.mark.parametrize("version", ["v0.1.8", "v0.2.0", "v1.0.0", "0.0.1", "vX", ""])
def test_a_version_outside_the_range_is_refused_with_both_versions_named(version: str) -> None:
    with pytest.raises(UnsupportedSqliteVec) as refused:
        vec_support.check(version)
    assert f"sqlite-vec {version} is installed" in str(refused.value)
    assert "0.1.9" in str(refused.value) and "0.2.0" in str(refused.value)
    assert refused.value.exit_status == UNSUPPORTED_SQLITE_VEC


@pytest.mark.parametrize("version", ["v0.1.9", "v0.1.10", "0.1.12-alpha.1"])
def test_a_version_inside_the_range_passes(version: str) -> None:
    assert vec_support.check(version) == version


def test_the_daemon_refuses_to_start_on_an_unsupported_sqlite_vec(daemon_process: Any, short_tmp: Path) -> None:
    # The daemon process starts with a supported range that leaves the installed version out
    # (sitecustomize runs before memoryd's own code): the real check against the real library.
    hook = short_tmp / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(
        "from memoryd.store.sqlite import vec_support\nvec_support.SUPPORTED = ((9, 0, 0), (10, 0, 0))\n"
    )
    listener = NotifyListener(f"@memoryd-test-{uuid.uuid4().hex}")
    try:
        process = daemon_process(env={"NOTIFY_SOCKET": listener.address, "PYTHONPATH": str(hook)})
        process.start(wait=False)
        assert process.proc.wait(60) == UNSUPPORTED_SQLITE_VEC, process.stderr()
        errors = [line for line in process.stderr().splitlines() if line.startswith("memoryd: ")]
        installed = vec_support.installed_version()
        assert len(errors) == 1 and "Traceback" not in process.stderr(), process.stderr()
        assert f"sqlite-vec {installed} is installed" in errors[0] and "9.0.0" in errors[0]
        assert not process.socket.exists()
        assert not (short_tmp / "data" / "memoryd.db").exists()  # refused before the store is opened
        message, _ = listener.receive()
        assert message["STATUS"].startswith("failed: ") and f"sqlite-vec {installed} is installed" in message["STATUS"]
    finally:
        listener.close()
