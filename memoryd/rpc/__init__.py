"""The JSON-RPC layer: framing and envelope are sans-io; dispatch runs handlers under trio."""

from memoryd.rpc.dispatch import CallContext, Handler, MethodTable, serve_message
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
from memoryd.rpc.framing import FrameDecoder, Framing, encode_frame

__all__ = [
    "BadCall",
    "CallContext",
    "FrameDecoder",
    "Framing",
    "Handler",
    "Id",
    "Message",
    "MethodTable",
    "Request",
    "encode_batch",
    "encode_error",
    "encode_frame",
    "encode_result",
    "parse_message",
    "serve_message",
]
