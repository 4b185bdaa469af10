"""A BERT encoder forward pass in numpy (float32), for sentence-transformers models without torch.

It reproduces Hugging Face ``BertModel`` in eval mode: embeddings + LayerNorm, then post-LN encoder
layers with exact (erf) GELU.  Weights come from a ``model.safetensors`` already read into memory.
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

I64 = npt.NDArray[np.int64]

# Abramowitz & Stegun 7.1.26: erf with |error| <= 1.5e-7, below float32 resolution near 1.
# numpy has no erf, and the tanh GELU differs from the erf one by up to ~1e-3.  Folded in:
# the 1/sqrt(2) of Phi into p, and the 1/2 of Phi into the coefficients.
_P = np.float32(0.3275911 / math.sqrt(2.0))
_A = [np.float32(0.5 * a) for a in (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)]
#: GELU runs on row blocks this tall so its ~20 elementwise passes stay in the CPU cache.
_GELU_BLOCK_ROWS = 32


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


def gelu_(x: F32) -> F32:
    """Exact-erf GELU of a 2-D array, in place; returns ``x``."""
    for start in range(0, x.shape[0], _GELU_BLOCK_ROWS):
        _gelu_block(x[start : start + _GELU_BLOCK_ROWS])
    return x


def _gelu_block(x: F32) -> None:
    # GELU(x) = x * Phi(x).  With e = 1 - erf(|x|/sqrt(2)) = poly(t) * exp(-x^2/2), Phi(x) is
    # 1 - e/2 for x >= 0 and e/2 for x < 0, so GELU(x) = max(x, 0) - |x| * e/2 without a branch.
    a = np.abs(x)
    t = a * _P
    t += 1.0
    np.reciprocal(t, out=t)
    half_e = t * _A[4]
    for coefficient in (_A[3], _A[2], _A[1], _A[0]):
        half_e += coefficient
        half_e *= t
    gauss = np.square(x)
    gauss *= np.float32(-0.5)
    np.exp(gauss, out=gauss)
    half_e *= gauss
    half_e *= a
    np.maximum(x, 0.0, out=x)
    x -= half_e


def layer_norm_(x: F32, gamma: F32, beta: F32, eps: float) -> F32:
    """LayerNorm over the last axis, in place; returns ``x``."""
    mean = x.mean(axis=-1, keepdims=True)
    x -= mean
    var = np.einsum("ij,ij->i", x, x)[:, None]
    var /= x.shape[-1]
    var += eps
    np.sqrt(var, out=var)
    x /= var
    x *= gamma
    x += beta
    return x


class BertEncoder:
    """Encoder weights plus :meth:`forward`.  Thread-safe: forward only reads the weights."""

    runtime = "numpy"

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

    def forward(self, ids: I64, mask: npt.NDArray[np.bool_] | None) -> F32:
        """Last hidden states (batch, seq, hidden) for token ids (batch, seq).

        ``mask`` is False at padding positions; None means no padding at all.
        """
        cfg = self.config
        batch, seq = ids.shape
        hidden, heads = cfg.hidden_size, cfg.num_heads
        head_dim = hidden // heads
        x = self.word[ids.reshape(-1)]  # fancy indexing makes a fresh array we may modify
        x.reshape(batch, seq, hidden)[...] += self.position[:seq]
        layer_norm_(x, self.emb_ln_g, self.emb_ln_b, cfg.layer_norm_eps)
        bias = None
        if mask is not None:
            # Large negative (not -inf) so a fully padded row cannot produce NaN.
            bias = np.where(mask, np.float32(0.0), np.float32(-1e9)).astype(np.float32)[:, None, None, :]
        for layer in self.layers:
            qkv: F32 = x @ layer.qkv_w
            qkv += layer.qkv_b
            # (batch, seq, 3, heads, head_dim) -> three (batch, heads, seq, head_dim) views.
            qkv5 = qkv.reshape(batch, seq, 3, heads, head_dim).transpose(2, 0, 3, 1, 4)
            scores = qkv5[0] @ qkv5[1].transpose(0, 1, 3, 2)
            if bias is not None:
                scores += bias
            scores -= scores.max(axis=-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(axis=-1, keepdims=True)
            context = (scores @ qkv5[2]).transpose(0, 2, 1, 3).reshape(batch * seq, hidden)
            attn: F32 = context @ layer.out_w
            attn += layer.out_b
            attn += x
            x = layer_norm_(attn, layer.ln1_g, layer.ln1_b, cfg.layer_norm_eps)
            inter: F32 = x @ layer.inter_w
            inter += layer.inter_b
            gelu_(inter)
            out: F32 = inter @ layer.down_w
            out += layer.down_b
            out += x
            x = layer_norm_(out, layer.ln2_g, layer.ln2_b, cfg.layer_norm_eps)
        return x.reshape(batch, seq, hidden)


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
