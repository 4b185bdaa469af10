"""The onnxruntime encoder: padding never leaks into real tokens, the session owns its weights,
telemetry stays off, and without onnxruntime the local embedder fails start with a clear error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import safetensors.numpy
import trio

from memoryd.embed import LocalEmbedder
from memoryd.embed.bert import BertConfig, BertWeights
from memoryd.embed.local import bundled_model_path
from memoryd.embed.onnx_bert import OrtBertEncoder, import_onnxruntime
from memoryd.errors import EmbedderError

MIN_COSINE = 0.99999
WORDS = "remind me to call the dentist about my daughter's braces before the school trip".split()


async def started(embedder: LocalEmbedder) -> LocalEmbedder:
    with trio.fail_after(30):
        await embedder.start()
    return embedder


def texts_of_every_length() -> list[str]:
    # "" is the shortest input ([CLS] [SEP]); 400 words is past the 256-token cap.
    counts = [0, 1, 2, 3, 5, 8, 11, 14, 16, 24, 40, 64, 90, 127, 128, 180, 250, 254, 255, 256, 300, 400]
    return [" ".join(WORDS[i % len(WORDS)] for i in range(count)) for count in counts]


def bundled_weights() -> BertWeights:
    folder = bundled_model_path()
    config = BertConfig.from_json(json.loads((folder / "config.json").read_text(encoding="utf-8")))
    return BertWeights(config, safetensors.numpy.load_file(str(folder / "model.safetensors")))


async def test_a_padded_batch_gives_each_text_its_vector_alone_from_the_shortest_text_to_past_the_cap() -> None:
    embedder = await started(LocalEmbedder())
    texts = texts_of_every_length()
    alone = np.concatenate([await embedder.embed([text]) for text in texts])  # unpadded: the query path
    cosines = (alone * await embedder.embed(texts)).sum(axis=1)  # padded, in length chunks
    assert cosines.min() >= MIN_COSINE, texts[int(cosines.argmin())][:40]
    assert embedder.describe()["runtime"].startswith("onnxruntime ")


@pytest.mark.parametrize("threads", [1, 2])
def test_padding_rows_do_not_reach_the_real_tokens_hidden_states(threads: int) -> None:
    # The layer below pooling: each row of a padded batch has the hidden states it has alone.
    # With 2 threads onnxruntime splits each op (the layer norms' rows too) over both.
    encoder = OrtBertEncoder(import_onnxruntime(), bundled_weights(), threads=threads)
    rng = np.random.default_rng(7)
    ids = rng.integers(1000, 30000, size=(3, 19))
    lengths = [19, 1, 11]  # one row of a single token
    mask = np.arange(19)[None, :] < np.array(lengths)[:, None]
    ids[~mask] = 0
    batch = encoder.forward(ids, mask)
    assert batch.shape == (3, 19, 384)
    for row, length in enumerate(lengths):
        alone = encoder.forward(ids[row : row + 1, :length], None)[0]
        np.testing.assert_allclose(batch[row, :length], alone, atol=1e-4)


def test_the_session_keeps_its_own_copy_of_the_weights() -> None:
    # SentenceModel drops the prepared weights once the session exists; that is only safe while
    # onnxruntime copies external initializers rather than pointing at our arrays.
    weights = bundled_weights()
    encoder = OrtBertEncoder(import_onnxruntime(), weights, threads=1)
    ids = np.array([[101, 7592, 2088, 102]])
    before = encoder.forward(ids, None)
    weights.word[...] = 0
    for layer in weights.layers:
        layer.qkv_w[...] = 0
        layer.inter_w[...] = 0
    np.testing.assert_array_equal(encoder.forward(ids, None), before)


async def test_without_onnxruntime_the_local_embedder_fails_start_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # makes `import onnxruntime` raise ImportError
    embedder = LocalEmbedder()
    with pytest.raises(EmbedderError, match="the local model needs onnxruntime"):
        await embedder.start()
    assert embedder.describe()["state"] == "failed"


def test_onnxruntime_telemetry_stays_off(tmp_path: Path) -> None:
    # Official wheels queue usage events for Microsoft under ~/.cache/Microsoft unless
    # ORT_DISABLE_TELEMETRY is set before onnxruntime initialises: a fresh interpreter, so the
    # variable is not already set by this test process.
    env = {k: v for k, v in os.environ.items() if k != "ORT_DISABLE_TELEMETRY"}
    env |= {"HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / ".cache")}
    script = (
        "import trio\n"
        "from memoryd.embed import LocalEmbedder\n"
        "async def main():\n"
        "    embedder = LocalEmbedder()\n"
        "    await embedder.start()\n"
        "    await embedder.embed(['hello'])\n"
        "    print(embedder.describe()['runtime'])\n"
        "trio.run(main)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("onnxruntime ")
    assert [str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")] == []
