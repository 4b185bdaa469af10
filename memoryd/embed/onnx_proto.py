"""Writes the few ONNX protobuf messages a hand-built graph needs, straight to wire bytes.

onnxruntime takes a serialized ``ModelProto``.  Kept over the ``onnx`` package's helpers
(``onnx.helper.make_node``/``make_graph``/``make_model``) because it is the simpler of the two to
maintain here: ~15 message fields, whose numbers (onnx/onnx.proto, proto2) protobuf's rules
never let change, against a second dependency with its own protobuf runtime, C++ extension and
release cadence to pin and upgrade beside onnxruntime's; and nothing else of ``onnx`` (checker,
shape inference, file I/O) is wanted.  Mistakes cannot hide: every graph built here is loaded
by onnxruntime at start and its vectors are checked against sentence-transformers' in the tests.

Repeated scalars are written unpacked, one key per value, which every protobuf parser accepts.
Tensors are only declared here (name, type, shape, "external" location): their data reaches
onnxruntime as OrtValues at load, so the model is a few KB of graph.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence

import numpy as np
import numpy.typing as npt

#: TensorProto.DataType values
FLOAT = 1
INT32 = 6
INT64 = 7
_DATA_TYPES = {np.dtype(np.float32): FLOAT, np.dtype(np.int32): INT32, np.dtype(np.int64): INT64}
#: AttributeProto.AttributeType values
_ATTR_FLOAT = 1
_ATTR_INT = 2


def _varint(value: int) -> bytes:
    if value < 0:
        value += 1 << 64  # int64 fields carry negatives as ten-byte two's complement
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _int_field(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value)


def _bytes_field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _str_field(number: int, text: str) -> bytes:
    return _bytes_field(number, text.encode("utf-8"))


def _float_field(number: int, value: float) -> bytes:
    return _varint(number << 3 | 5) + struct.pack("<f", value)


def external_tensor(name: str, array: npt.NDArray[np.generic]) -> bytes:
    """A TensorProto declaring ``array``'s name, type and shape, its data "external" (supplied at
    load with ``SessionOptions.add_external_initializers``, which matches by name)."""
    dims = b"".join(_int_field(1, size) for size in array.shape)
    # external_data (13) is a list of key/value entries; data_location (14) 1 = EXTERNAL.
    location = _bytes_field(13, _str_field(1, "location") + _str_field(2, "memory"))
    return dims + _int_field(2, _data_type(array)) + _str_field(8, name) + location + _int_field(14, 1)


def _data_type(array: npt.NDArray[np.generic]) -> int:
    data_type = _DATA_TYPES.get(array.dtype)
    if data_type is None or array.dtype.byteorder == ">":
        raise ValueError(f"no ONNX data type for {array.dtype}")
    return data_type


def node(
    op_type: str,
    inputs: Sequence[str],
    outputs: Sequence[str],
    *,
    domain: str = "",
    **attributes: int | float,
) -> bytes:
    """A NodeProto; an input named "" is an omitted optional input."""
    fields = [_str_field(1, name) for name in inputs] + [_str_field(2, name) for name in outputs]
    fields += [_str_field(3, f"{op_type}_{outputs[0]}"), _str_field(4, op_type)]
    for name, value in attributes.items():
        if isinstance(value, int):
            attribute = _str_field(1, name) + _int_field(3, value) + _int_field(20, _ATTR_INT)
        else:
            attribute = _str_field(1, name) + _float_field(2, value) + _int_field(20, _ATTR_FLOAT)
        fields.append(_bytes_field(5, attribute))
    if domain:
        fields.append(_str_field(7, domain))
    return b"".join(fields)


def value_info(name: str, elem_type: int, shape: Sequence[int | str]) -> bytes:
    """A ValueInfoProto for a graph input or output; a str dimension is symbolic (``batch``)."""
    dims = b"".join(
        _bytes_field(1, _str_field(2, size) if isinstance(size, str) else _int_field(1, size)) for size in shape
    )
    tensor_type = _int_field(1, elem_type) + _bytes_field(2, dims)
    return _str_field(1, name) + _bytes_field(2, _bytes_field(1, tensor_type))


def model(
    name: str,
    nodes: Iterable[bytes],
    initializers: Iterable[bytes],
    inputs: Iterable[bytes],
    outputs: Iterable[bytes],
    *,
    opsets: dict[str, int],
    ir_version: int = 8,
) -> bytes:
    """A serialized ModelProto; ``opsets`` maps a domain ("" is the default one) to its version."""
    graph = b"".join(
        [_str_field(2, name)]
        + [_bytes_field(1, n) for n in nodes]
        + [_bytes_field(5, t) for t in initializers]
        + [_bytes_field(11, v) for v in inputs]
        + [_bytes_field(12, v) for v in outputs]
    )
    opset_imports = b"".join(
        _bytes_field(8, _str_field(1, domain) + _int_field(2, version)) for domain, version in opsets.items()
    )
    return _int_field(1, ir_version) + _str_field(2, "memoryd") + opset_imports + _bytes_field(7, graph)
