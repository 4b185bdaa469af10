"""The JSON-RPC layer.  Sans-io: framing, envelope, the per-connection protocol state; under
trio: the method table, the request deadline, and the one mapping from errors to replies."""

from memoryd.rpc.connection import Close, CloseReason, ConnectionLimits, RpcConnection, Wait
from memoryd.rpc.context import CallContext, Handler
from memoryd.rpc.deadlines import RequestGuard
from memoryd.rpc.dispatch import MethodTable, serve_message
from memoryd.rpc.envelope import (
    BadCall,
    Id,
    Message,
    Request,
    encode_batch,
    encode_error,
    encode_result,
    parse_message,
)
from memoryd.rpc.errormap import ERROR_REPLIES, rpc_error_for
from memoryd.rpc.framing import FrameDecoder, Framing, detect_framing, encode_frame

__all__ = [
    "BadCall",
    "CallContext",
    "Close",
    "CloseReason",
    "ConnectionLimits",
    "ERROR_REPLIES",
    "FrameDecoder",
    "Framing",
    "Handler",
    "Id",
    "Message",
    "MethodTable",
    "Request",
    "RequestGuard",
    "RpcConnection",
    "Wait",
    "detect_framing",
    "encode_batch",
    "encode_error",
    "encode_frame",
    "encode_result",
    "parse_message",
    "rpc_error_for",
    "serve_message",
]
