"""A params fuzzer driven by the method table: every method, every field, through a live daemon.

The methods and their fields are read from the daemon's own method table (``MethodTable.params_type``)
and ``msgspec.inspect``, so a method or field added later is fuzzed without touching this file.
Against a daemon subprocess on its real Unix socket, one per variant (SQLite in trust mode;
PostgreSQL with the local embedder in token mode):

* a value of a JSON type the field does not accept, and an unknown extra field, are refused
  with -32602 whose ``data.field`` names that field (the message too);
* type-valid extreme values (empty, blank, over the limits, NUL, lone surrogates, control
  characters, huge and negative numbers, long and duplicated lists, ids that do not exist or
  belong to someone else) never get -32603 and never drop the connection: a result, or an error
  with a code from the table; a -32602 names a field the call set (or one it left out that a
  rule across fields requires), a -32001 one it sent;
* a refused call leaves the caller's memories as they were, and another user's memory named by
  id is never touched;
* after every example the daemon answers system.health, and a second client of another user on
  another connection still adds and finds its memories, also while a flood of extreme calls is
  in flight on the first client's connection.

The budget is small in the suite.  For a long run by hand:
``MEMORYD_FUZZ_LONG=1 ./dev test tests/test_params_fuzz.py -s`` (or ``--fuzz-long``): 5,000
extreme calls and 500 floods per variant, and ``-s`` shows how they were answered.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import os
import shutil
import socket
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from msgspec import inspect as mi

from memoryd.auth import Authenticator
from memoryd.config import LimitsConfig
from memoryd.server.wiring import build_services
from memoryd.store.backends import open_store
from memoryd_client import mint_token
from memoryd_client.errors import ErrorCode
from tests.conftest import DaemonProcess, make_config
from tests.fake_llm import Answer, FakeLlm

LONG = os.environ.get("MEMORYD_FUZZ_LONG") == "1"
CODES = {int(code) for code in ErrorCode}
EXTREME_FUZZ = settings(
    max_examples=5_000 if LONG else 60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)
PIPELINED_FUZZ = settings(
    max_examples=500 if LONG else 15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)
#: The user whose client misbehaves, another user it may name, and the bystander it must not hurt.
ATTACKER, OTHER, BYSTANDER = "fuzz-a", "fuzz-b", "fuzz-bystander"
#: The token mode daemon's secret: its callers send a context token instead of a user_id.
SECRET = "5e" * 32
CHAT = "fuzz-chat"
#: The attacker's own memories (live.ids[0] and [1]), added again whenever a call removed one.
OWN_MEMORIES: tuple[dict[str, Any], ...] = (
    {"content": "the attacker likes tea"},
    {"content": "the attacker walks at dawn", "subjects": ["Alice"]},
)
#: What the fake LLM extracts from any conversation.
FACT = {
    "content": "The attacker drinks tea at dawn.",
    "memory_type": "preference",
    "confidence": 0.9,
    "subjects": ["Alice"],
}
MAX_MESSAGE_BYTES = LimitsConfig().max_message_bytes


# -- the method table, as the daemon builds it ----------------------------------------------------


def method_params() -> dict[str, type[msgspec.Struct]]:
    """Method name → params Struct, from the method table the daemon serves."""
    base = Path(tempfile.mkdtemp(prefix="md-pt-", dir="/tmp"))
    try:
        config = make_config(base)
        (base / "data").mkdir()
        store = open_store(config)
        try:
            services = build_services(config, store, None, None, Authenticator.from_config(config.auth), lambda: b"{}")
            return {name: services.table.params_type(name) for name in services.table.names()}
        finally:
            store.close()
    finally:
        shutil.rmtree(base, ignore_errors=True)


METHODS = method_params()

# -- reading types ----------------------------------------------------------------------------------

KINDS = ("str", "int", "float", "bool", "null", "array", "object")
#: One JSON value of each kind: a field refuses every one whose kind it does not accept.
WRONG = {"str": "not-a-number", "int": 7, "float": 2.5, "bool": True, "null": None, "array": [1], "object": {"k": 1}}


def unwrap(t: mi.Type) -> mi.Type:
    while isinstance(t, mi.Metadata):
        t = t.type
    return t


def members(t: mi.Type) -> list[mi.Type]:
    t = unwrap(t)
    return [unwrap(m) for m in t.types] if isinstance(t, mi.UnionType) else [t]


def kinds(t: mi.Type) -> set[str]:
    """The JSON kinds a value of type ``t`` may be written as."""
    found: set[str] = set()
    for m in members(t):
        if isinstance(m, mi.AnyType):
            return set(KINDS)
        if isinstance(m, mi.StrType | mi.DateTimeType | mi.DateType | mi.TimeType | mi.UUIDType | mi.BytesType):
            found.add("str")
        elif isinstance(m, mi.BoolType):
            found.add("bool")
        elif isinstance(m, mi.IntType):
            found.add("int")
        elif isinstance(m, mi.FloatType):
            found |= {"int", "float"}
        elif isinstance(m, mi.NoneType):
            found.add("null")
        elif isinstance(m, mi.ListType | mi.SetType | mi.FrozenSetType | mi.VarTupleType | mi.TupleType):
            found.add("array")
        elif isinstance(m, mi.DictType | mi.StructType | mi.TypedDictType | mi.DataclassType):
            found.add("object")
        elif isinstance(m, mi.LiteralType | mi.EnumType):
            for value in m.values if isinstance(m, mi.LiteralType) else [member.value for member in m.cls]:
                found.add("str" if isinstance(value, str) else "int" if isinstance(value, int) else "null")
        else:
            raise AssertionError(f"the fuzzer does not know the type {m!r}: teach it")
    return found


def samples(t: mi.Type) -> list[Any]:
    """Valid values of ``t`` to build a request that passes, most ordinary first."""
    out: list[Any] = []
    for m in members(t):
        if isinstance(m, mi.StrType):
            low, high = m.min_length or 1, m.max_length or 64
            out.append(("fuzz value " * 8)[: max(low, min(high, 10))])
        elif isinstance(m, mi.BoolType):
            out += [False, True]
        elif isinstance(m, mi.IntType | mi.FloatType):
            low = m.ge if m.ge is not None else (m.gt + 1 if m.gt is not None else 1)
            out.append(max(1, low) if m.le is None or m.le >= 1 else low)
        elif isinstance(m, mi.LiteralType):
            out += list(m.values)
        elif isinstance(m, mi.EnumType):
            out += [member.value for member in m.cls]
        elif isinstance(m, mi.ListType):
            out.append([samples(m.item_type)[0] for _ in range(max(1, m.min_length or 0))])
        elif isinstance(m, mi.StructType):
            out.append({f.encode_name: samples(f.type)[0] for f in m.fields if f.required})
        elif isinstance(m, mi.DictType):
            out.append({})
        elif isinstance(m, mi.DateTimeType):
            out.append("2024-01-02T03:04:05Z")
        elif isinstance(m, mi.NoneType | mi.AnyType):
            out.append(None)
    return out


@dataclass(frozen=True)
class Field:
    """One field of a method's params, at ``path`` in the params object (``messages[0].role``)."""

    path: tuple[str | int, ...]
    type: mi.Type
    required: bool

    @property
    def name(self) -> str:
        text = ""
        for part in self.path:
            text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
        return text

    @property
    def root(self) -> str:
        return str(self.path[0])


def fields_of(struct: mi.StructType, prefix: tuple[str | int, ...] = ()) -> Iterator[Field]:
    """Every field, and the fields of the objects inside a required list field's first item
    (the request that passes holds that item)."""
    for f in struct.fields:
        path = (*prefix, f.encode_name)
        yield Field(path, f.type, f.required)
        for m in members(f.type) if f.required else []:
            if isinstance(m, mi.ListType) and isinstance(unwrap(m.item_type), mi.StructType):
                yield from fields_of(unwrap(m.item_type), (*path, 0))  # type: ignore[arg-type]


def struct_info(method: str) -> mi.StructType:
    info = mi.type_info(METHODS[method])
    assert isinstance(info, mi.StructType)
    return info


def with_value(params: dict[str, Any], path: tuple[str | int, ...], value: Any) -> dict[str, Any]:
    """A deep copy of ``params`` with ``value`` at ``path``."""
    copy: Any = json.loads(json.dumps(params))
    node = copy
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return copy  # type: ignore[no-any-return]


def names_field(error: dict[str, Any], roots: set[str]) -> bool:
    """The -32602 names one of ``roots`` (or a path inside it) in its data and its message."""
    data = error.get("data")
    field = data.get("field") if isinstance(data, dict) else None
    if not isinstance(field, str) or field not in error["message"]:
        return False
    return any(field == root or field.startswith((root + ".", root + "[")) for root in roots)


# -- talking to the daemon --------------------------------------------------------------------------


class Client:
    """One NDJSON connection, kept open across calls (a dropped connection is a failure)."""

    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(30)
        self.sock.connect(str(path))
        self.buffer = b""
        self.ids = itertools.count(1)

    def call(self, method: str, params: Any) -> dict[str, Any]:
        id_ = next(self.ids)
        payload = json.dumps({"jsonrpc": "2.0", "method": method, "params": params, "id": id_}).encode()
        try:
            self.sock.sendall(payload + b"\n")
        except BrokenPipeError:
            # Past max_message_bytes the daemon answers -32004 and closes without reading on.
            assert len(payload) > MAX_MESSAGE_BYTES, (method, len(payload))
        while b"\n" not in self.buffer:
            chunk = self.sock.recv(1 << 20)
            assert chunk, f"the daemon closed the connection on {method} {payload[:300]!r}"
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        reply: dict[str, Any] = json.loads(line)
        assert reply.get("id") == id_ or reply["error"]["code"] == ErrorCode.PAYLOAD_TOO_LARGE, (method, params, reply)
        return reply

    def result(self, method: str, params: Any) -> Any:
        reply = self.call(method, params)
        assert "result" in reply, (method, params, reply)
        return reply["result"]

    def close(self) -> None:
        self.sock.close()


def trusting(user: str, chat: str | None = None) -> dict[str, Any]:
    """Identity params for a daemon in trust mode: the ids themselves."""
    return {"user_id": user, **({} if chat is None else {"chat_id": chat})}


def tokens(user: str, chat: str | None = None) -> dict[str, Any]:
    """Identity params for a daemon in token mode: a context token signed by the host."""
    return {"context_token": mint_token(SECRET, user, chat, ttl="1d")}


@dataclass
class Live:
    process: DaemonProcess
    identity: Callable[..., dict[str, Any]]
    attacker: Client
    bystander: Client
    #: Ids of memories the attacker may name: its own, another user's, a group's.
    ids: list[str]
    bases: dict[str, dict[str, Any]]
    checks: int = 0
    examples: int = 0
    #: Replies by error code (0: a result), for the long run's summary.
    codes: Counter[int] = dataclasses.field(default_factory=Counter)

    def reconnect(self) -> None:
        self.attacker.close()
        self.attacker = Client(self.process.socket)

    def still_serves_everyone(self, health_on: Client | None = None) -> None:
        """The daemon answers health (on the attacker's connection unless told), and the
        bystander adds a memory and finds it."""
        assert (health_on or self.attacker).result("system.health", {})["status"] == "ok"
        self.checks += 1
        word = f"bystander{self.checks}marker"
        added = self.bystander.result("memory.add", {**self.identity(BYSTANDER), "content": f"the {word} is safe"})
        hits = self.bystander.result("memory.search", {**self.identity(BYSTANDER), "query": word})
        assert added["id"] in [hit["id"] for hit in hits], hits
        assert self.process.proc is not None and self.process.proc.poll() is None

    def revive(self) -> None:
        """Add the attacker's own memories again where a call deleted, erased or replaced them,
        so that the calls naming them keep reaching a memory (not only "not found")."""
        for index, memory in enumerate(OWN_MEMORIES):
            old = self.ids[index]
            if "result" in self.attacker.call("memory.get", {**self.identity(ATTACKER), "memory_id": old}):
                continue
            new = self.attacker.result("memory.add", {**self.identity(ATTACKER), **memory})["id"]
            self.ids[index] = new
            for params in self.bases.values():
                for name, value in params.items():
                    if value == old:
                        params[name] = new

    def attacker_ids(self) -> set[str]:
        page = self.attacker.result(
            "memory.list",
            {**self.identity(ATTACKER), "limit": 1000, "include_expired": True, "include_superseded": True},
        )
        return {item["id"] for item in page}


def base_params(client: Client, method: str, id_pool: list[str], identity: dict[str, Any]) -> dict[str, Any]:
    """The smallest params the method accepts: required fields, then whatever a -32602 asks for.

    Rules beyond the types (one of two fields required, a confirmation, an id that must look
    like one) are learnt from the daemon's own refusals, trying the field's sample values and
    the known memory ids until the refusal no longer names that field."""
    struct = struct_info(method)
    by_name = {f.encode_name: f for f in struct.fields}
    params: dict[str, Any] = dict(identity) if "user_id" in by_name else {}
    for f in struct.fields:
        if f.required:
            params[f.encode_name] = samples(f.type)[0]
    tried: set[tuple[str, str]] = set()
    for _ in range(40):
        reply = client.call(method, params)
        error = reply.get("error")
        if error is None or error["code"] != ErrorCode.INVALID_PARAMS:
            return params
        field = str(error["data"]["field"]).split(".")[0].split("[")[0]
        assert field in by_name, (method, params, error)
        candidates = samples(by_name[field].type)
        if "str" in kinds(by_name[field].type):
            candidates += id_pool
        for candidate in candidates:
            key = (field, json.dumps(candidate))
            if key not in tried:
                tried.add(key)
                params[field] = candidate
                break
        else:
            raise AssertionError(f"no params found that {method} accepts: {params} -> {error}")
    raise AssertionError(f"no params found that {method} accepts: {params}")


@pytest.fixture(scope="module", params=["sqlite-llm", "postgres-local-token"])
def live(request: pytest.FixtureRequest) -> Iterator[Live]:
    """One daemon subprocess per storage engine, its state kept across the examples.  The SQLite
    one extracts with a fake LLM on loopback (the extract methods run through to the store).
    The PostgreSQL one embeds with the local model (vector search and query embedding in the
    path) and runs in token mode (identity and routing from signed claims, as ash's sandboxes call)."""
    with contextlib.ExitStack() as stack:
        yield from _live(request.param, stack)


def _live(variant: str, stack: contextlib.ExitStack) -> Iterator[Live]:
    env: dict[str, str] = {}
    args: list[str] = []
    identity = trusting
    if variant.endswith("-token"):
        env |= {"MEMORYD_AUTH_MODE": "token", "MEMORYD_AUTH_TOKEN_SECRET": SECRET}
        identity = tokens
    if variant.startswith("postgres"):
        pytest.importorskip("psycopg")
        from tests.postgres_server import shared

        env |= {"MEMORYD_STORAGE_BACKEND": "postgres", "MEMORYD_STORAGE_URL": shared().fresh_database()}
    if "-local" in variant:
        args = ["--embedder", "local"]
    if "-llm" in variant:
        fake = stack.enter_context(FakeLlm())
        fake.default = Answer({"facts": [FACT]})
        env |= {
            "MEMORYD_LLM_PROVIDER": "openai",
            "MEMORYD_LLM_URL": fake.url,
            "MEMORYD_LLM_MODEL": "fake-model",
            "MEMORYD_LLM_RETRIES": "0",
        }
    base = Path(tempfile.mkdtemp(prefix="md-pf-", dir="/tmp"))
    process = DaemonProcess(base, *args, env=env).start()
    attacker, bystander = Client(process.socket), Client(process.socket)
    ids = [
        attacker.result("memory.add", {**identity(user, chat), **memory})["id"]
        for user, chat, memory in [
            (ATTACKER, None, OWN_MEMORIES[0]),
            (ATTACKER, None, OWN_MEMORIES[1]),
            (OTHER, None, {"content": "another user's secret plan"}),
            (OTHER, CHAT, {"content": "a group plan in the chat", "shared": True}),
        ]
    ]
    bystander.result("memory.add", {**identity(BYSTANDER), "content": "the bystander keeps this"})
    live = Live(process, identity, attacker, bystander, ids, {})
    live.bases = {method: base_params(attacker, method, ids, identity(ATTACKER)) for method in METHODS}
    yield live
    print(f"\nparams fuzz: {live.checks} checks of health and a bystander, {live.examples} extreme calls, {live.codes}")
    attacker.close()
    bystander.close()
    alive = process.proc is not None and process.proc.poll() is None
    process.stop()
    log = process.stderr()
    shutil.rmtree(base, ignore_errors=True)
    assert alive, f"the daemon died during the fuzz: {log[-3000:]}"
    assert "Traceback" not in log, log[-5000:]


def check_reply(reply: dict[str, Any], roots: set[str], sent: set[str], context: Any) -> None:
    """A result, or an error from the table that is never -32603; a -32602 names one of
    ``roots``, a -32001 (no such memory or person) one of the fields ``sent``."""
    assert ("result" in reply) != ("error" in reply), (context, reply)
    if "error" in reply:
        error = reply["error"]
        assert error["code"] in CODES, (context, reply)
        assert error["code"] != ErrorCode.INTERNAL_ERROR, (context, reply)
        assert isinstance(error["message"], str) and error["message"], (context, reply)
        if error["code"] == ErrorCode.INVALID_PARAMS:
            assert names_field(error, roots), (context, reply)
        if error["code"] == ErrorCode.NOT_FOUND:
            assert error["data"]["field"] in sent, (context, reply)


# -- every field, a value of the wrong JSON type, an unknown field ------------------------------------


def wrong_type_cases() -> list[tuple[str, Field, Any]]:
    cases = []
    for method in METHODS:
        for field in fields_of(struct_info(method)):
            accepted = kinds(field.type)
            cases += [(method, field, WRONG[kind]) for kind in KINDS if kind not in accepted]
    return cases


def test_the_table_is_read_not_listed() -> None:
    """Every method is here, with fields and wrong values to send (an empty walk would pass anything)."""
    assert {"memory.add", "memory.search", "person.merge", "system.health"} <= set(METHODS)
    cases = wrong_type_cases()
    assert {method for method, _, _ in cases} == set(METHODS)
    assert any(field.name == "messages[0].role" for _, field, _ in cases)
    assert any(field.name == "from" for _, field, _ in cases)  # the encoded name, not from_


def test_every_field_refuses_a_value_of_the_wrong_type(live: Live) -> None:
    cases = wrong_type_cases()
    for method, field, value in cases:
        params = with_value(live.bases[method], field.path, value)
        reply = live.attacker.call(method, params)
        assert reply.get("error", {}).get("code") == ErrorCode.INVALID_PARAMS, (method, field.name, value, reply)
        error = reply["error"]
        assert error["data"]["field"] == field.name, (method, field.name, value, reply)
        assert field.name in error["message"], (method, field.name, value, reply)
    live.still_serves_everyone()


def test_every_method_refuses_an_unknown_field(live: Live) -> None:
    for method in METHODS:
        objects: list[tuple[str | int, ...]] = [()]
        objects += [f.path[:-1] for f in fields_of(struct_info(method)) if f.path[:-1] not in objects]
        for at in objects:
            params = live.bases[method]
            known = {f.path[-1] for f in fields_of(struct_info(method)) if f.path[:-1] == at}
            for name in {"zz_unknown", "User_ID", "from_", ""} - known:
                field = Field((*at, name), mi.AnyType(), False)
                reply = live.attacker.call(method, with_value(params, field.path, 1))
                error = reply.get("error", {})
                assert error.get("code") == ErrorCode.INVALID_PARAMS, (method, field.name, reply)
                assert error["data"]["field"] == field.name, (method, field.name, reply)
    live.still_serves_everyone()


# -- type-valid extreme values ----------------------------------------------------------------------

LONE_SURROGATES = ["\ud800", "a\udfffb", "\udc00x", "\ud83d"]
ODD_TEXT = [
    "",
    " ",
    " \t\n\r ",
    "\u00a0\u2028\u3000",
    "a\x00b",
    "\x00",
    "\x01\x02\x1b[31m\x7f",
    "\u200b\u200e\u202e",
    "\ufeff",
    "😀" * 3,
    "e\u0301" * 5,
    "%s%n{0}",
    "'; DROP TABLE memories; --",
    '"',
    "\\",
    "NEAR(a b)",
    "a* OR b",
    "-",
    "0",
    "00",
    "null",
    "user:" + OTHER,
    OTHER,
    CHAT,
    *LONE_SURROGATES,
]


def text_values(t: mi.StrType, ids: list[str]) -> st.SearchStrategy[str]:
    limits = [n for n in (t.min_length, t.max_length) if n is not None]
    lengths = sorted({0, 1, *limits, *(n - 1 for n in limits if n > 0), *(n + 1 for n in limits), 4097, 70_000})
    sized = st.builds(lambda n, ch: ch * n, st.sampled_from(lengths), st.sampled_from(["x", "é", "😀", " ", "\x00"]))
    id_like = (
        st.sampled_from(ids)
        | st.builds(lambda i, n: i[:n], st.sampled_from(ids), st.integers(1, 30))
        | st.builds(str.lower, st.sampled_from(ids))
        | st.sampled_from(["0" * 26, "Z" * 26, "I" * 26, "U" * 26])
    )
    return st.one_of(st.sampled_from(ODD_TEXT), sized, id_like, st.text(max_size=40))


def int_values(t: mi.IntType | mi.FloatType) -> st.SearchStrategy[int]:
    edges = [0, 1, -1, 2**31, 2**53 + 1, 2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**64, 10**30, -(10**30)]
    for bound in (t.ge, t.gt, t.le, t.lt):
        if bound is not None:
            edges += [int(bound) - 1, int(bound), int(bound) + 1]
    return st.sampled_from(edges) | st.integers(-(2**70), 2**70)


def float_values(t: mi.FloatType) -> st.SearchStrategy[Any]:
    edges: list[Any] = [0.0, -0.0, 1e308, -1e308, 5e-324, -5e-324, 1e-300, 0.5, 1.0, 1.0000000001]
    for bound in (t.ge, t.gt, t.le, t.lt):
        if bound is not None:
            edges += [float(bound), float(bound) * (1 + 1e-15) + 1e-300, float(bound) - 1e-9, float(bound) + 1e-9]
    return st.sampled_from(edges) | st.floats(allow_nan=False, allow_infinity=False) | int_values(t)


def extreme_values(t: mi.Type, ids: list[str], depth: int = 0) -> st.SearchStrategy[Any]:
    """Values of a type ``t`` accepts as JSON, chosen at and past the edges."""
    options: list[st.SearchStrategy[Any]] = []
    for m in members(t):
        if isinstance(m, mi.StrType):
            options.append(text_values(m, ids))
        elif isinstance(m, mi.BoolType):
            options.append(st.booleans())
        elif isinstance(m, mi.IntType):
            options.append(int_values(m))
        elif isinstance(m, mi.FloatType):
            options.append(float_values(m))
        elif isinstance(m, mi.NoneType):
            options.append(st.none())
        elif isinstance(m, mi.LiteralType | mi.EnumType):
            values = list(m.values) if isinstance(m, mi.LiteralType) else [e.value for e in m.cls]
            options.append(st.sampled_from(values) | st.sampled_from([str(v).upper() for v in values] + [""]))
        elif isinstance(m, mi.DateTimeType):
            options.append(
                st.sampled_from(["2024-01-02T03:04:05Z", "0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "2024-13-40"])
            )
        elif isinstance(m, mi.ListType) and depth < 2:
            item = extreme_values(m.item_type, ids, depth + 1)
            limits = [n for n in (m.min_length, m.max_length) if n is not None]
            sizes = sorted({0, 1, 2, *limits, *(n + 1 for n in limits), 1000})
            same = st.builds(lambda v, n: [v] * n, item, st.sampled_from(sizes))
            options.append(st.lists(item, max_size=5) | same)
        elif isinstance(m, mi.StructType) and depth < 3:
            fields = {f.encode_name: extreme_values(f.type, ids, depth + 1) for f in m.fields}
            required = {f.encode_name: fields[f.encode_name] for f in m.fields if f.required}
            optional = {name: s for name, s in fields.items() if name not in required}
            options.append(st.fixed_dictionaries(required, optional=optional))
        elif isinstance(m, mi.DictType | mi.AnyType) and depth < 2:
            leaf = (
                st.none()
                | st.booleans()
                | st.integers(-(2**70), 2**70)
                | st.floats(allow_nan=False, allow_infinity=False)
                | st.text(max_size=8)
            )
            deep: Any = "x"
            for _ in range(200):
                deep = {"k": deep}
            options.append(
                st.dictionaries(st.text(max_size=6), leaf, max_size=4)
                | st.just({"k": "v" * 5000})
                | st.just({f"k{i}": i for i in range(600)})
                | st.just(deep)
            )
    return st.one_of(options) if options else st.none()


def field_choices(method: str) -> list[Field]:
    return list(fields_of(struct_info(method)))


@st.composite
def extreme_calls(draw: st.DrawFn, ids: list[str]) -> tuple[str, dict[str, Any], set[str], list[str]]:
    method = draw(st.sampled_from(sorted(METHODS)))
    fields = draw(st.lists(st.sampled_from(field_choices(method)), min_size=1, max_size=3, unique_by=lambda f: f.name))
    # A field inside another that is set whole (messages[0].role beside messages) is left out.
    fields = [f for f in fields if not any(g.path == f.path[: len(g.path)] and g != f for g in fields)]
    return (
        method,
        {f.name: draw(extreme_values(f.type, ids)) for f in fields},
        {f.root for f in fields},
        [f.name for f in fields],
    )


def extreme_params(live: Live, call: tuple[str, dict[str, Any], set[str], list[str]]) -> dict[str, Any]:
    method, values, _, _ = call
    params = live.bases[method]
    by_name = {f.name: f for f in field_choices(method)}
    for name, value in values.items():
        params = with_value(params, by_name[name].path, value)
    return params


@EXTREME_FUZZ
@given(st.data())
def test_extreme_values_never_break_the_daemon(live: Live, data: st.DataObject) -> None:
    method, values, roots, names = call = data.draw(extreme_calls(live.ids))
    live.revive()
    params = extreme_params(live, call)
    before = live.attacker_ids()
    live.examples += 1
    try:
        reply = live.attacker.call(method, params)
    except (AssertionError, OSError):
        live.reconnect()
        raise
    if reply.get("error", {}).get("code") == ErrorCode.PAYLOAD_TOO_LARGE:
        # The one refusal that closes the connection (the rest of the stream cannot be trusted).
        size = len(json.dumps({"jsonrpc": "2.0", "method": method, "params": params, "id": 1}))
        assert size > MAX_MESSAGE_BYTES, (method, size, reply)
        live.reconnect()
    # A rule across fields may name the one the call left out ("chat_id: is required for a
    # shared memory"): a field of the method the params do not set counts as named well too.
    unset = {f.encode_name for f in struct_info(method).fields if params.get(f.encode_name) is None}
    check_reply(reply, roots | unset, set(params), (method, names, params))
    live.codes[reply["error"]["code"] if "error" in reply else 0] += 1
    if "error" in reply:
        assert live.attacker_ids() == before, ("a refused call changed the caller's memories", method, params, reply)
    if params.get("user_id") != OTHER:
        # Naming another user's memory never reaches it (only that user may change it).
        reply = live.bystander.call("memory.get", {**live.identity(OTHER), "memory_id": live.ids[2]})
        assert "result" in reply, ("another user's memory was touched", method, params, reply)
    live.still_serves_everyone()


@PIPELINED_FUZZ
@given(st.data())
def test_a_pipelined_flood_of_extremes_holds_up_no_one_else(live: Live, data: st.DataObject) -> None:
    """Extreme calls sent without waiting, on one connection: while they are in flight another
    user's client adds and finds its memory, then every call gets its own reply."""
    live.revive()
    calls = data.draw(st.lists(extreme_calls(live.ids), min_size=2, max_size=12))
    sent: dict[int, tuple[str, dict[str, Any], set[str]]] = {}
    stream = b""
    for method, values, roots, _ in calls:
        params = extreme_params(live, (method, values, roots, []))
        size = len(json.dumps(params))
        if size > MAX_MESSAGE_BYTES // 16:
            continue  # the flood stays well under the daemon's buffers (a reply is owed to each)
        id_ = next(live.attacker.ids)
        unset = {f.encode_name for f in struct_info(method).fields if params.get(f.encode_name) is None}
        sent[id_] = (method, params, roots | unset)
        stream += json.dumps({"jsonrpc": "2.0", "method": method, "params": params, "id": id_}).encode() + b"\n"
    try:
        live.attacker.sock.sendall(stream)
        live.still_serves_everyone(health_on=live.bystander)
        for _ in range(len(sent)):
            while b"\n" not in live.attacker.buffer:
                chunk = live.attacker.sock.recv(1 << 20)
                assert chunk, "the daemon closed the flooding connection"
                live.attacker.buffer += chunk
            line, _, live.attacker.buffer = live.attacker.buffer.partition(b"\n")
            reply = json.loads(line)
            method, params, roots = sent.pop(reply["id"])
            check_reply(reply, roots, set(params), (method, params))
            live.examples += 1
            live.codes[reply["error"]["code"] if "error" in reply else 0] += 1
    except BaseException:
        live.reconnect()  # replies still owed must not reach the next example
        raise
    assert not sent
