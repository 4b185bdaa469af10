"""`memoryd serve` and the admin commands on bad disks, as real processes: a read-only mount, a
full tmpfs, a directory the user cannot write, a damaged or empty database file; file modes."""

from __future__ import annotations

import ctypes
import os
import signal
import stat
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.admin_cli import memoryd, text
from tests.disk_faults import build_store, corrupt_mid_file, fill, remount_read_only, tmpfs
from tests.test_systemd_notify import NotifyListener
from tests.wire import sync_call

STORAGE_UNUSABLE = 3
STORE_REFUSED = 4
NOBODY = 65534
# <linux/prctl.h>, <linux/capability.h>
PR_CAPBSET_DROP = 24
CAP_DAC_OVERRIDE = 1
CAP_DAC_READ_SEARCH = 2


@contextmanager
def read_only_data_dir(memories: int) -> Iterator[Path]:
    """A data dir holding a store of ``memories``, on a tmpfs remounted read-only."""
    with tmpfs() as disk:
        build_store(disk / "data" / "memoryd.db", memories=memories)
        remount_read_only(disk)
        yield disk / "data"


def _fails_with_one_line(process: Any, status: int) -> str:
    """The daemon exits with ``status`` and says why in one line, no traceback; that line."""
    assert process.proc.wait(60) == status, process.stderr()
    errors = [line for line in process.stderr().splitlines() if line.startswith("memoryd: ")]
    assert len(errors) == 1 and "Traceback" not in process.stderr(), process.stderr()
    assert not process.socket.exists()
    return errors[0]


def test_a_read_only_mount_stops_start_up_with_one_line_status_3_and_tells_systemd(daemon_process: Any) -> None:
    listener = NotifyListener(f"@memoryd-test-{uuid.uuid4().hex}")
    try:
        with tmpfs() as disk:
            (disk / "data").mkdir()
            remount_read_only(disk)
            process = daemon_process("--data-dir", str(disk / "data"), env={"NOTIFY_SOCKET": listener.address})
            process.start(wait=False)
            line = _fails_with_one_line(process, STORAGE_UNUSABLE)
            assert f"{disk / 'data'}: Read-only file system" in line
            message, _ = listener.receive()
            assert message["STATUS"].startswith("failed: ") and "Read-only file system" in message["STATUS"]
            assert message["ERRNO"] == "30"  # EROFS
    finally:
        listener.close()


def test_a_full_disk_stops_start_up_with_one_line_and_status_3(daemon_process: Any) -> None:
    with tmpfs("1m") as disk:
        fill(disk)
        process = daemon_process("--data-dir", str(disk / "data")).start(wait=False)
        assert "No space left on device" in _fails_with_one_line(process, STORAGE_UNUSABLE)


def _without_dac_override() -> None:
    """In the child before exec: root without the capabilities that let it write anywhere, so
    file permissions bind it as they bind any user (the venv's interpreter stays reachable)."""
    libc = ctypes.CDLL(None, use_errno=True)
    for capability in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH):
        if libc.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def test_a_data_dir_the_user_cannot_write_stops_start_up_with_one_line_and_status_3(short_tmp: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root, to drop root's power to write anywhere")
    data = short_tmp / "data"
    data.mkdir(mode=0o755)
    os.chown(data, NOBODY, NOBODY)  # someone else's directory
    done = memoryd(
        "serve", "--embedder", "none", "--socket", str(short_tmp / "s"), data_dir=data, preexec_fn=_without_dac_override
    )
    output = text(done)
    assert done.returncode == STORAGE_UNUSABLE, output
    assert f"memoryd: cannot start: {data}: Permission denied" in output
    assert "Traceback" not in output


def test_a_corrupt_store_is_not_served_and_the_message_names_check_and_backup(
    daemon_process: Any, short_tmp: Path
) -> None:
    db_path = short_tmp / "data" / "memoryd.db"
    build_store(db_path)
    corrupt_mid_file(db_path)
    process = daemon_process().start(wait=False)
    line = _fails_with_one_line(process, STORE_REFUSED)
    # The integrity check finds it, or, when the check is still running, opening the file does.
    assert "integrity check" in line or "malformed" in line, line
    assert "`memoryd check`" in line and "`memoryd backup`" in line


def test_memoryd_check_reports_a_corrupt_store_and_exits_1(short_tmp: Path) -> None:
    db_path = short_tmp / "data" / "memoryd.db"
    build_store(db_path)
    corrupt_mid_file(db_path)
    done = memoryd("check", data_dir=db_path.parent)
    output = text(done)
    assert done.returncode == 1, output
    assert "PROBLEM  sqlite" in output and "restore a backup" in output
    assert "Traceback" not in output


def test_an_empty_database_among_other_files_is_refused_unless_asked(daemon_process: Any, short_tmp: Path) -> None:
    data = short_tmp / "data"
    data.mkdir(mode=0o700)
    (data / "memoryd.db").touch()
    (data / "memoryd.db-wal").write_bytes(b"\0" * 4096)  # what a truncated store may leave
    process = daemon_process().start(wait=False)
    line = _fails_with_one_line(process, STORE_REFUSED)
    assert "empty (0 bytes)" in line and "memoryd.db-wal" in line and "--accept-empty-db" in line
    (data / "memoryd.db-wal").unlink()
    (data / "notes.txt").write_text("another file")
    accepted = daemon_process("--accept-empty-db").start()
    assert sync_call(accepted.socket, "system.health")["result"]["status"] == "ok"
    assert accepted.stop() == 0


def test_an_empty_database_alone_in_its_directory_is_a_new_store(daemon_process: Any, short_tmp: Path) -> None:
    data = short_tmp / "data"
    data.mkdir(mode=0o700)
    (data / "memoryd.db").touch()  # e.g. a first start killed before its first write
    process = daemon_process().start()
    assert sync_call(process.socket, "system.health")["result"]["status"] == "ok"
    assert process.stop() == 0


def test_admin_commands_never_turn_an_empty_database_among_other_files_into_a_new_store(short_tmp: Path) -> None:
    data = short_tmp / "data"
    data.mkdir(mode=0o700)
    (data / "memoryd.db").touch()
    (data / "memoryd.db-wal").write_bytes(b"\0" * 4096)  # what a truncated store may leave
    export = short_tmp / "export.jsonl"
    export.write_text('{"format":"memoryd-export","version":4,"exported_at":"2026-01-01T00:00:00.000Z","user":null}\n')
    for command in (("gc",), ("import", str(export)), ("stats",), ("check",), ("gc", "--dry-run")):
        refused = memoryd(*command, data_dir=data)
        assert refused.returncode == 1, (command, text(refused))
        assert "empty (0 bytes)" in text(refused) and "Traceback" not in text(refused), text(refused)
    # Had gc or import made a store of it, `memoryd serve` would now serve it as if nothing was lost.
    assert (data / "memoryd.db").stat().st_size == 0


_DIGITS_TO_LETTERS = str.maketrans("0123456789", "ghijklmnop")


def test_sigterm_on_a_full_disk_exits_0_and_says_the_wal_is_durable(daemon_process: Any) -> None:
    with tmpfs("4m") as disk:
        process = daemon_process("--data-dir", str(disk / "data")).start()
        for i in range(20):
            # Letters only: random hex holds digit runs that pass Luhn, which memory.add refuses
            # as card numbers.
            content = f"note {i} " + os.urandom(3000).hex().translate(_DIGITS_TO_LETTERS)
            assert "result" in sync_call(process.socket, "memory.add", {"user_id": "alice", "content": content})
        fill(disk)
        assert process.stop(signal.SIGTERM) == 0, process.stderr()
        log = process.stderr()
        assert "daemon.checkpoint_failed" in log and "durable" in log
        assert "Traceback" not in log
        # Nothing acknowledged was lost: the WAL is folded in once there is room.
        (disk / "filler").unlink()
        listed = memoryd("export", data_dir=disk / "data")
        assert listed.returncode == 0 and listed.stdout.count(b'"content"') == 20


def test_check_and_stats_work_on_a_read_only_data_dir() -> None:
    with read_only_data_dir(memories=50) as data:
        checked = memoryd("check", data_dir=data)
        assert checked.returncode == 0, text(checked)
        assert "the database is consistent" in text(checked)
        stats = memoryd("stats", "--json", data_dir=data)
        assert stats.returncode == 0, text(stats)
        assert b'"active": 50' in stats.stdout


def test_every_reading_admin_command_works_on_a_read_only_data_dir_and_writers_fail_in_one_line() -> None:
    with read_only_data_dir(memories=50) as data:
        exported = memoryd("export", data_dir=data)
        assert exported.returncode == 0, text(exported)
        assert exported.stdout.count(b'"content"') == 50
        dry = memoryd("gc", "--dry-run", data_dir=data)
        assert dry.returncode == 0 and "gc would remove 0 memories" in text(dry), text(dry)
        with tmpfs() as elsewhere:
            copied = memoryd("backup", str(elsewhere / "copy.db"), data_dir=data)
            assert copied.returncode == 0, text(copied)
            assert (elsewhere / "copy.db").stat().st_size > 0
        # Commands that must write say so in one line, no traceback.
        for command in (("gc",), ("check", "--repair")):
            refused = memoryd(*command, data_dir=data)
            assert refused.returncode == 1, text(refused)
            assert "Traceback" not in text(refused)
            assert f"cannot open database {data / 'memoryd.db'}" in text(refused), text(refused)


def test_a_backup_onto_a_full_disk_says_so_in_one_line_and_leaves_nothing(short_tmp: Path) -> None:
    build_store(short_tmp / "data" / "memoryd.db", memories=2000)  # about 2 MB
    with tmpfs("1m") as disk:
        for compact in ((), ("--compact",)):
            done = memoryd("backup", str(disk / "copy.db"), *compact, data_dir=short_tmp / "data")
            assert done.returncode == 1, text(done)
            assert text(done) == f"memoryd: backup failed: {disk}: No space left on device\n", text(done)
            assert list(disk.iterdir()) == []  # neither the copy nor its partial file


def test_admin_commands_on_a_full_data_dir_name_the_cause_in_one_line() -> None:
    with tmpfs("8m") as disk:
        build_store(disk / "data" / "memoryd.db", memories=2000)
        fill(disk)  # no room left for the -shm file a reader of a WAL database needs
        for command in ("stats", "gc"):
            done = memoryd(command, data_dir=disk / "data")
            assert done.returncode == 1, text(done)
            assert text(done) == (
                f"memoryd: cannot open database {disk / 'data' / 'memoryd.db'}: disk I/O error (No space left on device)\n"
            )


def test_check_and_stats_work_in_a_data_dir_the_user_cannot_write(short_tmp: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root, to drop root's power to write anywhere")
    data = short_tmp / "data"
    build_store(data / "memoryd.db", memories=50)
    data.chmod(0o755)
    os.chown(data, NOBODY, NOBODY)  # someone else's directory; the database file is still ours
    checked = memoryd("check", data_dir=data, preexec_fn=_without_dac_override)
    assert checked.returncode == 0 and "the database is consistent" in text(checked), text(checked)
    stats = memoryd("stats", data_dir=data, preexec_fn=_without_dac_override)
    assert stats.returncode == 0, text(stats)
    assert sorted(path.name for path in data.iterdir()) == ["memoryd.db"]  # nothing created


def test_database_files_and_backups_are_0600_whatever_the_umask(daemon_process: Any, short_tmp: Path) -> None:
    data = short_tmp / "data"
    data.mkdir(mode=0o755)
    data.chmod(0o755)
    previous = os.umask(0o022)  # the child inherits it
    try:
        process = daemon_process().start()
        assert "result" in sync_call(process.socket, "memory.add", {"user_id": "alice", "content": "private"})
        modes = {path.name: stat.S_IMODE(path.stat().st_mode) for path in data.iterdir()}
        assert "data_dir.readable_by_others" in process.stderr()
        assert process.stop() == 0
    finally:
        os.umask(previous)
    assert modes == {"memoryd.db": 0o600, "memoryd.db-wal": 0o600, "memoryd.db-shm": 0o600}
    target = short_tmp / "copy.db"
    done = memoryd("backup", str(target), data_dir=data, umask=0o022)
    assert done.returncode == 0, text(done)
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
