"""`memoryd serve` as a real process: socket file rules, config errors, signals, shutdown under load."""

from __future__ import annotations

import grp
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from memoryd_client.tokens import mint_token
from tests.conftest import REPO
from tests.wire import sync_call, sync_listed_ids


def test_socket_appears_with_mode_0600_and_is_removed_on_sigterm(daemon_process: Any) -> None:
    process = daemon_process().start()
    info = process.socket.lstat()
    assert stat.S_ISSOCK(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o600
    assert sync_call(process.socket, "system.health")["result"]["status"] == "ok"
    assert process.stop(signal.SIGTERM) == 0
    assert not process.socket.exists()
    wal = process.base / "data" / "memoryd.db-wal"
    assert not wal.exists() or wal.stat().st_size == 0  # checkpointed on the way out


def test_sigint_also_stops_cleanly(daemon_process: Any) -> None:
    process = daemon_process().start()
    assert process.stop(signal.SIGINT) == 0
    assert not process.socket.exists()


def test_socket_mode_is_configurable(daemon_process: Any) -> None:
    process = daemon_process(env={"MEMORYD_SOCKET_MODE": "0660"}).start()
    assert stat.S_IMODE(process.socket.lstat().st_mode) == 0o660


def test_socket_group_is_configurable_and_an_unknown_one_stops_start_up(daemon_process: Any) -> None:
    # A group other than the one the socket would get anyway, when this process may use one:
    # root may give any group; others a supplementary group of their own.
    others = [g.gr_gid for g in grp.getgrall()] if os.geteuid() == 0 else os.getgroups()
    gid = next((g for g in others if g != os.getegid()), os.getegid())
    name = grp.getgrgid(gid).gr_name
    process = daemon_process(env={"MEMORYD_SOCKET_MODE": "0660", "MEMORYD_SOCKET_GROUP": name}).start()
    info = process.socket.lstat()
    assert (stat.S_IMODE(info.st_mode), info.st_gid) == (0o660, gid)
    process.stop()
    unknown = daemon_process(env={"MEMORYD_SOCKET_GROUP": "no-such-group-here"}).start(wait=False)
    assert unknown.proc.wait(30) != 0
    assert "socket_group 'no-such-group-here'" in unknown.stderr() and not unknown.socket.exists()


def test_second_daemon_on_a_live_socket_refuses(daemon_process: Any) -> None:
    first = daemon_process().start()
    second = daemon_process().start(wait=False)
    assert second.proc.wait(30) == 1
    assert "already serving" in second.stderr()
    assert sync_call(first.socket, "system.health")["result"]["status"] == "ok"


def test_stale_socket_file_is_replaced(daemon_process: Any, short_tmp: Path) -> None:
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(short_tmp / "memoryd.sock"))
    stale.close()  # the file stays, nobody listens
    process = daemon_process().start()
    assert sync_call(process.socket, "system.health")["result"]["status"] == "ok"


def test_a_regular_file_at_the_socket_path_is_not_clobbered(daemon_process: Any, short_tmp: Path) -> None:
    (short_tmp / "memoryd.sock").write_text("precious")
    process = daemon_process().start(wait=False)
    assert process.proc.wait(30) == 1
    assert "not a socket" in process.stderr()
    assert (short_tmp / "memoryd.sock").read_text() == "precious"


def test_config_errors_name_the_key(short_tmp: Path) -> None:
    config = short_tmp / "config.toml"
    cases = [
        ('embedder = "none"\nsurprise = 1\n', "surprise"),
        ('embedder = "none"\n[limits]\nidle_timeout = "soon"\n', "limits.idle_timeout"),
        ('embedder = "none"\n[limits]\nmax_conections = 5\n', "max_conections"),
        ('embedder = "quantum"\n', "embedder"),
    ]
    for text, key in cases:
        config.write_text(text)
        result = subprocess.run(
            [sys.executable, "-m", "memoryd", "serve", "--config", str(config), "--socket", str(short_tmp / "s")],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=30,
        )
        assert result.returncode == 2, result
        assert key in result.stderr, result.stderr


def test_env_overrides_file_and_flags_override_env(short_tmp: Path) -> None:
    config = short_tmp / "config.toml"
    config.write_text('embedder = "none"\nlog_level = "debug"\n[limits]\nidle_timeout = 11\nrequest_timeout = 5\n')
    env = {**os.environ, "MEMORYD_LIMITS_IDLE_TIMEOUT": "22", "MEMORYD_EMBEDDER": "local"}
    result = subprocess.run(
        [sys.executable, "-m", "memoryd", "config", "--config", str(config), "--embedder", "none"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=30,
        env=env,
    )
    effective = json.loads(result.stdout)
    assert effective["limits"]["idle_timeout"] == 22  # env beats file
    assert effective["limits"]["request_timeout"] == 5  # file beats default
    assert effective["embedder"] == "none"  # flag beats env
    assert effective["log_level"] == "debug"


def test_info_logs_carry_no_memory_contents(daemon_process: Any) -> None:
    process = daemon_process().start()
    secret = "the vault code is 4411"
    sync_call(process.socket, "memory.add", {"user_id": "u", "content": secret})
    sync_call(process.socket, "memory.search", {"user_id": "u", "query": "vault code"})
    process.stop()
    logs = process.stderr()
    assert "daemon.ready" in logs and "memory.added" in logs
    assert "vault" not in logs and "4411" not in logs


def test_info_logs_carry_no_tokens_or_secret(daemon_process: Any) -> None:
    secret = "0123456789abcdef0123456789abcdef"
    env = {"MEMORYD_AUTH_MODE": "token", "MEMORYD_AUTH_TOKEN_SECRET": secret}
    process = daemon_process(env=env).start()
    good = mint_token(secret, "u", "c")
    expired = mint_token(secret, "u", "c", ttl=60, now=time.time() - 3600)
    forged = mint_token("f" * 32, "u", "c")
    calls = [
        ("memory.add", {"context_token": good, "content": "a note"}),
        ("memory.add", {"context_token": good, "user_id": "someone-else", "content": "a note"}),
        ("memory.search", {"context_token": expired, "query": "note"}),
        ("memory.list", {"context_token": forged}),
        ("memory.list", {"context_token": good[:-4] + "AAAA"}),
    ]
    answers = [sync_call(process.socket, method, params) for method, params in calls]
    assert "result" in answers[0] and all(answer["error"]["code"] == -32002 for answer in answers[1:])
    process.stop()
    logs = process.stderr()
    assert "daemon.ready" in logs
    for token in (good, expired, forged, good[:-4] + "AAAA"):
        # Any of a token's three parts would let a reader replay or study it.
        assert not any(part in logs for part in token.split(".")), token
    assert secret not in logs


def test_sigterm_under_load_answers_every_request(daemon_process: Any) -> None:
    process = daemon_process().start()
    outcomes: list[str] = []
    acknowledged: list[str] = []
    lock = threading.Lock()
    stop_sending = threading.Event()

    def client(n: int) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(30)
        sock.connect(str(process.socket))
        reader = sock.makefile("rb")
        i = 0
        while not stop_sending.is_set():
            request = {
                "jsonrpc": "2.0",
                "method": "memory.add",
                "id": i,
                "params": {"user_id": f"u{n}", "content": f"load fact {n}-{i}"},
            }
            try:
                sock.sendall(json.dumps(request).encode() + b"\n")
            except OSError:
                with lock:
                    outcomes.append("send-refused")  # the daemon had closed: nothing was delivered
                break
            line = reader.readline()
            if not line:
                with lock:
                    outcomes.append("LOST")  # delivered, then the connection closed with no reply
                break
            reply = json.loads(line)
            with lock:
                if "result" in reply:
                    outcomes.append("ok")
                    acknowledged.append(reply["result"]["id"])
                else:
                    assert reply["error"]["code"] == -32006, reply
                    outcomes.append("shutting-down")
            if "error" in reply:
                break
            i += 1
        sock.close()

    threads = [threading.Thread(target=client, args=(n,)) for n in range(16)]
    for thread in threads:
        thread.start()
    # Signal it under load: once the adds are flowing (a fixed sleep got fewer on a busy machine).
    deadline = time.monotonic() + 60
    while outcomes.count("ok") <= 50:
        assert time.monotonic() < deadline and "LOST" not in outcomes, outcomes
        time.sleep(0.01)
    process.proc.send_signal(signal.SIGTERM)
    assert process.proc.wait(60) == 0
    stop_sending.set()
    for thread in threads:
        thread.join(30)
    assert "LOST" not in outcomes

    restarted = daemon_process().start()
    stored = set()
    for n in range(16):
        stored |= sync_listed_ids(restarted.socket, f"u{n}")
    assert set(acknowledged) <= stored
