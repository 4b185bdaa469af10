"""A BERT checkpoint's weights read from ``model.safetensors`` and laid out for the encoder graph.

``onnx_bert.py`` runs the encoder on onnxruntime (Hugging Face ``BertModel`` in eval mode:
embeddings + LayerNorm, then post-LN encoder layers with exact (erf) GELU).  This module checks
the tensors' names and shapes, so a wrong file fails clearly, and prepares them once: projections
transposed to (in, out), Q, K and V fused into one matrix with the 1/sqrt(head_dim) attention
scale folded into Q, the segment-0 embedding folded into the position table.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from memoryd.embed.vectors import F32
from memoryd.errors import EmbedderError


@dataclass(frozen=True, slots=True)
class BertConfig:
    hidden_size: int
    num_layers: int
    num_heads: int
    intermediate_size: int
    max_position_embeddings: int
    layer_norm_eps: float
    hidden_act: str

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> BertConfig:
        try:
            config = cls(
                hidden_size=int(raw["hidden_size"]),
                num_layers=int(raw["num_hidden_layers"]),
                num_heads=int(raw["num_attention_heads"]),
                intermediate_size=int(raw["intermediate_size"]),
                max_position_embeddings=int(raw.get("max_position_embeddings", 512)),
                layer_norm_eps=float(raw.get("layer_norm_eps", 1e-12)),
                hidden_act=str(raw.get("hidden_act", "gelu")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise EmbedderError(f"config.json is not a BERT config: {exc!r}") from None
        if config.hidden_act != "gelu":
            raise EmbedderError(f"config.json: hidden_act {config.hidden_act!r} is not supported (only gelu)")
        if config.hidden_size % config.num_heads:
            raise EmbedderError("config.json: hidden_size is not a multiple of num_attention_heads")
        return config


@dataclass(frozen=True, slots=True)
class _Layer:
    # Weights are stored transposed ((in, out), C-contiguous) so every projection is one
    # plain GEMM; Q, K and V are fused into one (hidden, 3*hidden) matrix with the 1/sqrt(d)
    # attention scale folded into the Q part.
    qkv_w: F32
    qkv_b: F32
    out_w: F32
    out_b: F32
    ln1_g: F32
    ln1_b: F32
    inter_w: F32
    inter_b: F32
    down_w: F32
    down_b: F32
    ln2_g: F32
    ln2_b: F32


class BertWeights:
    """The encoder's weights, checked against ``config`` and laid out for the graph."""

    def __init__(self, config: BertConfig, tensors: Mapping[str, npt.NDArray[Any]]) -> None:
        self.config = config
        get = _Getter(tensors)
        hidden = config.hidden_size
        self.word = get("embeddings.word_embeddings.weight", (None, hidden))
        self.position = get("embeddings.position_embeddings.weight", (config.max_position_embeddings, hidden))
        # Segment embedding 0 is the same for every token: fold it into the position table.
        token_type = get("embeddings.token_type_embeddings.weight", (None, hidden))[0]
        self.position = self.position + token_type
        self.emb_ln_g = get("embeddings.LayerNorm.weight", (hidden,))
        self.emb_ln_b = get("embeddings.LayerNorm.bias", (hidden,))
        scale = np.float32(1.0 / math.sqrt(hidden // config.num_heads))
        self.layers: list[_Layer] = []
        for i in range(config.num_layers):
            p = f"encoder.layer.{i}."
            q_w = get(p + "attention.self.query.weight", (hidden, hidden)) * scale
            q_b = get(p + "attention.self.query.bias", (hidden,)) * scale
            inter = config.intermediate_size
            self.layers.append(
                _Layer(
                    qkv_w=_transposed(
                        np.concatenate(
                            [
                                q_w,
                                get(p + "attention.self.key.weight", (hidden, hidden)),
                                get(p + "attention.self.value.weight", (hidden, hidden)),
                            ]
                        )
                    ),
                    qkv_b=np.concatenate(
                        [
                            q_b,
                            get(p + "attention.self.key.bias", (hidden,)),
                            get(p + "attention.self.value.bias", (hidden,)),
                        ]
                    ),
                    out_w=_transposed(get(p + "attention.output.dense.weight", (hidden, hidden))),
                    out_b=get(p + "attention.output.dense.bias", (hidden,)),
                    ln1_g=get(p + "attention.output.LayerNorm.weight", (hidden,)),
                    ln1_b=get(p + "attention.output.LayerNorm.bias", (hidden,)),
                    inter_w=_transposed(get(p + "intermediate.dense.weight", (inter, hidden))),
                    inter_b=get(p + "intermediate.dense.bias", (inter,)),
                    down_w=_transposed(get(p + "output.dense.weight", (hidden, inter))),
                    down_b=get(p + "output.dense.bias", (hidden,)),
                    ln2_g=get(p + "output.LayerNorm.weight", (hidden,)),
                    ln2_b=get(p + "output.LayerNorm.bias", (hidden,)),
                )
            )


def _transposed(weight: F32) -> F32:
    return np.ascontiguousarray(weight.T)


class _Getter:
    """Fetches a float32 tensor by name with a shape check, so a wrong file fails clearly."""

    def __init__(self, tensors: Mapping[str, npt.NDArray[Any]]) -> None:
        self.tensors = tensors
        # Some checkpoints prefix every key with "bert." (BertForX exports).
        self.prefix = "" if "embeddings.word_embeddings.weight" in tensors else "bert."

    def __call__(self, name: str, shape: tuple[int | None, ...]) -> F32:
        tensor = self.tensors.get(self.prefix + name)
        if tensor is None:
            raise EmbedderError(f"model.safetensors has no tensor {name!r}; is this a BERT model?")
        if len(tensor.shape) != len(shape) or any(
            want is not None and got != want for got, want in zip(tensor.shape, shape, strict=True)
        ):
            raise EmbedderError(f"model.safetensors: {name} has shape {tensor.shape}, expected {shape}")
        return np.asarray(tensor, dtype=np.float32)
