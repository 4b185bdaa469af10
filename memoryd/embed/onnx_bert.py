"""The BERT encoder on onnxruntime: a graph of ORT's fused transformer ops, built from the weights
:class:`~memoryd.embed.bert.BertWeights` prepared (pinned safetensors, no .onnx file).

One short query is ~0.25 GFLOP of 13-row GEMMs against 42 MB of weights: onnxruntime's MLAS
kernels run on weights prepacked once at load, and its fused com.microsoft ops
(EmbedLayerNormalization, Attention, BiasGelu) and the standard LayerNormalization replace ~20
small passes per layer (a numpy forward pass took ~7 ms per query, ORT ~3 ms).  onnxruntime is
a hard dependency, and this is the one encoder: its vectors are checked against
sentence-transformers' own (``tests/fixtures/minilm_reference.json``).
"""

from __future__ import annotations

import dataclasses
import os
from types import ModuleType
from typing import Any

import numpy as np
import numpy.typing as npt

from memoryd.embed import onnx_proto as proto
from memoryd.embed.bert import BertWeights
from memoryd.embed.vectors import F32
from memoryd.errors import EmbedderError

_MS = "com.microsoft"
#: A forward pass over at least this many padded tokens hands its scratch memory back when it
#: ends.  ORT's arena otherwise keeps its peak for good: measured +150 MB of RSS after one
#: batch of 64 texts of 256 tokens.  Queries and small chunks keep the arena (and their speed).
SHRINK_ARENA_TOKENS = 512


def import_onnxruntime() -> ModuleType:
    """onnxruntime with its telemetry off; EmbedderError when it is not installed or does not load.

    Official onnxruntime wheels since 1.29 send usage events to Microsoft from Linux too, and keep
    a device id and an event queue under ~/.cache/Microsoft.  A memory daemon sends nothing
    anywhere: ORT_DISABLE_TELEMETRY must be set before ORT initialises (checked by strace: no
    file is created then); disable_telemetry_events() covers builds that predate the variable.
    """
    os.environ["ORT_DISABLE_TELEMETRY"] = "1"
    try:
        import onnxruntime
    except ImportError as exc:
        raise EmbedderError(f"the local model needs onnxruntime, which does not load: {exc}") from None
    onnxruntime.disable_telemetry_events()
    # Errors only: its warnings (e.g. "cpuinfo_initialize failed" under systemd's ProcSubset=pid,
    # where MLAS still picks its kernels by CPUID) are not the operator's to act on.
    onnxruntime.set_default_logger_severity(3)
    module: ModuleType = onnxruntime
    return module


def bert_graph(encoder: BertWeights) -> tuple[dict[str, F32], bytes]:
    """The weights by name, and a serialized ONNX model naming them as external initializers:
    (input_ids, attention_mask) int32 (batch, seq) -> ``hidden`` float32 (batch, seq, hidden).

    The mask must be right padding (ones, then zeros): EmbedLayerNormalization turns it into
    each row's length, which is what Attention masks with.
    """
    cfg = encoder.config
    eps = float(cfg.layer_norm_eps)
    weights: dict[str, F32] = {
        "word": encoder.word,
        "position": encoder.position,  # token type 0 already folded in
        "emb_ln_g": encoder.emb_ln_g,
        "emb_ln_b": encoder.emb_ln_b,
    }
    nodes = [
        proto.node(
            "EmbedLayerNormalization",
            ["input_ids", "", "word", "position", "", "emb_ln_g", "emb_ln_b", "attention_mask"],
            ["x0", "lengths"],
            domain=_MS,
            epsilon=eps,
        )
    ]
    x = "x0"
    for i, layer in enumerate(encoder.layers):
        w = {field.name: f"l{i}.{field.name}" for field in dataclasses.fields(layer)}
        weights.update({w[name]: getattr(layer, name) for name in w})
        att, proj, mid, up, act, down, out = (f"l{i}.{s}" for s in ("att", "proj", "mid", "up", "act", "down", "out"))
        nodes += [
            # scale=1: BertWeights already folded 1/sqrt(head_dim) into the Q weights.
            proto.node("Attention", [x, w["qkv_w"], w["qkv_b"], "lengths"], [att], domain=_MS,
                       num_heads=cfg.num_heads, scale=1.0),
            proto.node("MatMul", [att, w["out_w"]], [proj]),
            *residual_layer_norm(proj, w["out_b"], x, w["ln1_g"], w["ln1_b"], mid, eps),
            proto.node("MatMul", [mid, w["inter_w"]], [up]),
            proto.node("BiasGelu", [up, w["inter_b"]], [act], domain=_MS),  # the exact (erf) GELU
            proto.node("MatMul", [act, w["down_w"]], [down]),
            *residual_layer_norm(down, w["down_b"], mid, w["ln2_g"], w["ln2_b"], out, eps),
        ]  # fmt: skip
        x = out
    nodes.append(proto.node("Identity", [x], ["hidden"]))
    ids_shape: list[int | str] = ["batch", "seq"]
    return weights, proto.model(
        "memoryd-bert",
        nodes,
        [proto.external_tensor(name, value) for name, value in weights.items()],
        [proto.value_info(name, proto.INT32, ids_shape) for name in ("input_ids", "attention_mask")],
        [proto.value_info("hidden", proto.FLOAT, ["batch", "seq", cfg.hidden_size])],
        opsets={"": 17, _MS: 1},
    )


#: ORT's graph optimizers kept off: SkipLayerNormFusion would fuse residual_layer_norm's plain
#: ops back into the slower SkipLayerNormalization.
UNFUSED = ["SkipLayerNormFusion"]


def residual_layer_norm(x: str, bias: str, skip: str, gamma: str, beta: str, out: str, eps: float) -> list[bytes]:
    """``out = LayerNorm(x + bias + skip)`` as Add, Add and the standard LayerNormalization.

    Not com.microsoft's fused SkipLayerNormalization: on a query's 13 x 384 floats ORT 1.32's
    CPU kernel for it took ~23 us a call against ~6-9 us for these three ops (12 calls per
    query), and with 2 threads it splits its 13 rows over both, one more wake-up and wait per
    call.  On the whole graph, interleaved with the fused version in one process on a loaded
    2-core machine: ~0.1 ms less CPU per query on average (of ~5 ms, within the noise), 7-16 %
    less per text in the backfill's batches, where the layer norms are large; same vectors.
    """
    return [
        proto.node("Add", [x, bias], [f"{out}.biased"]),
        proto.node("Add", [f"{out}.biased", skip], [f"{out}.sum"]),
        proto.node("LayerNormalization", [f"{out}.sum", gamma, beta], [out], axis=-1, epsilon=eps),
    ]


class OrtBertEncoder:
    """The encoder on an onnxruntime session.  Thread-safe (a session's run is).

    The session copies the weights at load (prepacking the GEMM ones), so the BertWeights it was
    built from can be dropped: the process then holds the weights once, in ORT.
    """

    def __init__(self, ort: ModuleType, encoder: BertWeights, *, threads: int) -> None:
        self.config = encoder.config
        self.runtime = f"onnxruntime {ort.__version__}"
        weights, graph = bert_graph(encoder)
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # A spinning pool answers a query ~0.7 ms sooner on 2 cores but burns ~40 % more CPU
        # per query, taken from the event loop and every other process (measured, 2 threads).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3  # warnings about unused optional outputs are noise
        # External initializers: ORT reads the weights from our arrays once, with no 90 MB
        # protobuf in between (load 0.06 s instead of 0.6 s).
        values = [ort.OrtValue.ortvalue_from_numpy(w) for w in weights.values()]
        options.add_external_initializers(list(weights), values)
        try:
            self._session: Any = ort.InferenceSession(
                graph, sess_options=options, providers=["CPUExecutionProvider"], disabled_optimizers=UNFUSED
            )
        except Exception as exc:  # onnxruntime raises its own Fail/InvalidGraph/... classes
            raise EmbedderError(f"onnxruntime could not build the BERT graph: {exc}") from None
        self._shrink_arena = ort.RunOptions()
        self._shrink_arena.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")

    def forward(self, ids: npt.NDArray[np.int64], mask: npt.NDArray[np.bool_] | None) -> F32:
        """Last hidden states (batch, seq, hidden); ``mask`` False at (right) padding, None for none."""
        feed = {
            "input_ids": ids.astype(np.int32),
            "attention_mask": np.ones(ids.shape, np.int32) if mask is None else mask.astype(np.int32),
        }
        options = self._shrink_arena if ids.size >= SHRINK_ARENA_TOKENS else None
        hidden: F32 = self._session.run(["hidden"], feed, options)[0]
        return hidden
