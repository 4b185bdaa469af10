"""memoryd_client without a daemon: socket path and identity rules, error mapping, packaging."""

from __future__ import annotations

import ast
import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import memoryd_client
from memoryd_client import errors, resolve_identity
from memoryd_client.paths import default_socket_path, resolve_socket_path

CLIENT_PACKAGE = Path(memoryd_client.__file__).resolve().parent


def make_token(claims: dict[str, object]) -> str:
    def part(data: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'HS256', 'typ': 'JWT'})}.{part(claims)}.c2lnbmF0dXJl"


def test_default_socket_path_is_under_xdg_runtime_dir() -> None:
    assert default_socket_path({"XDG_RUNTIME_DIR": "/run/user/1000"}) == "/run/user/1000/memoryd/memoryd.sock"


def test_default_socket_path_falls_back_to_tmp_per_uid() -> None:
    expected = f"/tmp/memoryd-{os.getuid()}/memoryd.sock"
    assert default_socket_path({}) == expected
    assert default_socket_path({"XDG_RUNTIME_DIR": ""}) == expected


def test_default_socket_path_reads_the_process_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", "/run/user/42")
    assert default_socket_path() == "/run/user/42/memoryd/memoryd.sock"


@pytest.mark.parametrize(
    ("explicit", "env", "expected"),
    [
        ("/x/explicit.sock", {"MEMORYD_SOCKET": "/x/m.sock", "ASH_RPC_SOCKET": "/x/a.sock"}, "/x/explicit.sock"),
        (None, {"MEMORYD_SOCKET": "/x/m.sock", "ASH_RPC_SOCKET": "/x/a.sock"}, "/x/m.sock"),
        (None, {"ASH_RPC_SOCKET": "/x/a.sock", "XDG_RUNTIME_DIR": "/run/u"}, "/x/a.sock"),
        (None, {"MEMORYD_SOCKET": "", "ASH_RPC_SOCKET": "/x/a.sock"}, "/x/a.sock"),
        (None, {"XDG_RUNTIME_DIR": "/run/u"}, "/run/u/memoryd/memoryd.sock"),
    ],
)
def test_socket_path_resolution_order(explicit: str | None, env: dict[str, str], expected: str) -> None:
    assert resolve_socket_path(explicit, env) == expected


def test_socket_path_env_vars_are_read_from_the_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMORYD_SOCKET", raising=False)
    monkeypatch.setenv("ASH_RPC_SOCKET", "/x/ash.sock")
    assert resolve_socket_path() == "/x/ash.sock"
    monkeypatch.setenv("MEMORYD_SOCKET", "/x/memoryd.sock")
    assert resolve_socket_path() == "/x/memoryd.sock"
    assert memoryd_client.MemoryClient(user_id="u").socket_path == "/x/memoryd.sock"


FULL_ENV = {
    "MEMORY_USER_ID": "mem-user",
    "MEMORY_CHAT_ID": "mem-chat",
    "ASH_USER_ID": "ash-user",
    "ASH_CHAT_ID": "ash-chat",
}


@pytest.mark.parametrize(
    ("args", "env", "expected"),
    [
        ({"user_id": "arg-user", "chat_id": "arg-chat"}, FULL_ENV, ("arg-user", "arg-chat")),
        ({}, FULL_ENV, ("mem-user", "mem-chat")),
        ({}, {"ASH_USER_ID": "ash-user", "ASH_CHAT_ID": "ash-chat"}, ("ash-user", "ash-chat")),
        ({}, {"MEMORY_USER_ID": "mem-user", "ASH_CHAT_ID": "ash-chat"}, ("mem-user", "ash-chat")),
        ({"user_id": "arg-user"}, FULL_ENV, ("arg-user", "mem-chat")),
        ({"user_id": "arg-user", "chat_id": ""}, FULL_ENV, ("arg-user", None)),
        ({}, {}, (None, None)),
    ],
)
def test_identity_resolution_order(
    args: dict[str, str], env: dict[str, str], expected: tuple[str | None, str | None]
) -> None:
    identity = resolve_identity(**args, environ=env)
    assert (identity.user_id, identity.chat_id) == expected


def test_context_token_comes_from_argument_then_memory_then_ash_env() -> None:
    env = {"MEMORY_CONTEXT_TOKEN": "mem.tok.en", "ASH_CONTEXT_TOKEN": "ash.tok.en"}
    assert resolve_identity(context_token="arg.tok.en", environ=env).context_token == "arg.tok.en"
    assert resolve_identity(environ=env).context_token == "mem.tok.en"
    assert resolve_identity(environ={"ASH_CONTEXT_TOKEN": "ash.tok.en"}).context_token == "ash.tok.en"
    assert resolve_identity(user_id="u", environ={}).context_token is None


def test_identity_params_omit_absent_chat_and_token() -> None:
    assert resolve_identity(user_id="u", environ={}).params() == {"user_id": "u"}
    assert resolve_identity(user_id="u", chat_id="c", context_token="t", environ={}).params() == {
        "user_id": "u",
        "chat_id": "c",
        "context_token": "t",
    }


def test_missing_user_id_raises_a_clear_error_naming_the_env_var() -> None:
    with pytest.raises(errors.MissingIdentity, match="MEMORY_USER_ID"):
        resolve_identity(environ={}).params()


def test_identity_falls_back_to_unverified_token_claims() -> None:
    token = make_token({"sub": "tok-user", "chat_id": "tok-chat", "exp": 9999999999})
    identity = resolve_identity(environ={"MEMORY_CONTEXT_TOKEN": token})
    assert (identity.user_id, identity.chat_id) == ("tok-user", "tok-chat")
    assert identity.params() == {"user_id": "tok-user", "chat_id": "tok-chat", "context_token": token}
    # Explicit ids still win; an explicit "" chat opts out of the token's chat too.
    identity = resolve_identity(user_id="arg", chat_id="", context_token=token, environ={})
    assert (identity.user_id, identity.chat_id) == ("arg", None)


@pytest.mark.parametrize(
    "token",
    [
        "not-a-jwt",
        "a.%%%.c",
        "a." + base64.urlsafe_b64encode(b"not json").decode() + ".c",
        "a." + base64.urlsafe_b64encode(b"[1, 2]").decode() + ".c",
        make_token({"sub": 42, "chat_id": ["x"]}),
        make_token({"sub": ""}),
    ],
)
def test_undecodable_token_yields_no_identity_and_goes_alone_for_the_daemon_to_judge(token: str) -> None:
    identity = resolve_identity(environ={"MEMORY_CONTEXT_TOKEN": token})
    assert (identity.user_id, identity.chat_id) == (None, None)
    assert identity.params() == {"context_token": token}


@pytest.mark.parametrize(("code", "cls"), sorted(errors.RPC_ERRORS_BY_CODE.items()))
def test_every_error_code_maps_to_its_exception(code: int, cls: type[errors.MemorydRpcError]) -> None:
    error = errors.error_from_object({"code": code, "message": "boom", "data": {"k": 1}})
    assert type(error) is cls
    assert isinstance(error, errors.MemorydRpcError) and isinstance(error, errors.MemoryClientError)
    assert (error.code, error.message, error.data) == (code, "boom", {"k": 1})


def test_each_error_code_has_one_class_named_after_it_in_the_client_and_the_daemon() -> None:
    from memoryd import errors as daemon_errors

    named = {member: "".join(word.title() for word in member.name.split("_")) for member in errors.ErrorCode}
    for by_code in (errors.RPC_ERRORS_BY_CODE, daemon_errors.RPC_ERRORS_BY_CODE):
        assert {code: cls.__name__ for code, cls in by_code.items()} == named
    for member, name in named.items():
        assert getattr(errors, name).code is member and getattr(daemon_errors, name).code is member


def test_the_daemon_reads_its_codes_from_the_client_package() -> None:
    from memoryd import errors as daemon_errors

    assert daemon_errors.ErrorCode is errors.ErrorCode


def test_unknown_error_code_becomes_the_base_rpc_error() -> None:
    error = errors.error_from_object({"code": -32099, "message": "new"})
    assert type(error) is errors.MemorydRpcError
    assert (error.code, error.message, error.data) == (-32099, "new", None)


def test_request_timeout_is_also_a_builtin_timeout_error() -> None:
    assert issubclass(errors.RequestTimeout, TimeoutError)
    assert issubclass(errors.RequestTimeout, errors.MemoryClientError)


def test_importing_the_client_does_not_import_trio() -> None:
    code = "import sys, memoryd_client; memoryd_client.MemoryClient; print('trio' in sys.modules)"
    env = {**os.environ, "PYTHONPATH": str(CLIENT_PACKAGE.parent)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_client_package_imports_only_the_standard_library() -> None:
    allowed = set(sys.stdlib_module_names)
    for module in sorted(CLIENT_PACKAGE.glob("*.py")):
        tree = ast.parse(module.read_text(), str(module))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top == "trio" and module.name == "_trio_client.py":
                    continue
                assert top in allowed, f"{module.name} imports {name}"


def test_async_client_without_trio_says_how_to_install_it() -> None:
    code = (
        "import sys; sys.modules['trio'] = None\n"
        "import memoryd_client\n"
        "try:\n    memoryd_client.AsyncMemoryClient\n"
        "except ImportError as exc:\n    print(exc)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(CLIENT_PACKAGE.parent)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert "memoryd-client[trio]" in out.stdout
