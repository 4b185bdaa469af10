"""The onnxruntime encoder: same vectors as the numpy one, and numpy whenever onnxruntime is missing."""

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
from memoryd.embed.bert import BertConfig, BertEncoder
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


def numpy_encoder() -> BertEncoder:
    folder = bundled_model_path()
    config = BertConfig.from_json(json.loads((folder / "config.json").read_text(encoding="utf-8")))
    return BertEncoder(config, safetensors.numpy.load_file(str(folder / "model.safetensors")))


async def test_onnxruntime_and_numpy_give_the_same_vectors_from_the_shortest_text_to_past_the_cap() -> None:
    fast = await started(LocalEmbedder(runtime="onnxruntime"))
    slow = await started(LocalEmbedder(runtime="numpy"))
    texts = texts_of_every_length()
    alone = np.concatenate([await fast.embed([text]) for text in texts])  # unpadded: the query path
    for batch in (await fast.embed(texts), await slow.embed(texts)):  # padded, in length chunks
        cosines = (alone * batch).sum(axis=1)
        assert cosines.min() >= MIN_COSINE, texts[int(cosines.argmin())][:40]
    assert fast.describe()["runtime"].startswith("onnxruntime ")
    assert slow.describe()["runtime"] == "numpy"


@pytest.mark.parametrize("threads", [1, 2])
async def test_onnxruntime_hidden_states_match_numpy_on_a_padded_batch(threads: int) -> None:
    # The layer below pooling: padding rows must not leak into the real tokens' states.  With 2
    # threads onnxruntime splits each op (the layer norms' rows too) over both.
    encoder = numpy_encoder()
    ort = import_onnxruntime()
    assert ort is not None
    fast = OrtBertEncoder(ort, encoder, threads=threads)
    rng = np.random.default_rng(7)
    ids = rng.integers(1000, 30000, size=(3, 19))
    mask = np.arange(19)[None, :] < np.array([[19], [1], [11]])  # one row of a single token
    ids[~mask] = 0
    expected = encoder.forward(ids, mask)
    got = fast.forward(ids, mask)
    assert got.shape == expected.shape == (3, 19, 384)
    assert np.abs(got - expected)[mask].max() < 1e-4
    lone = ids[1:2, :1]  # the same single token, unpadded
    np.testing.assert_allclose(fast.forward(lone, None)[0, 0], expected[1, 0], atol=1e-4)


def test_the_session_keeps_its_own_copy_of_the_weights() -> None:
    # SentenceModel drops the numpy encoder once the session exists; that is only safe while
    # onnxruntime copies external initializers rather than pointing at our arrays.
    encoder = numpy_encoder()
    ort = import_onnxruntime()
    assert ort is not None
    fast = OrtBertEncoder(ort, encoder, threads=1)
    ids = np.array([[101, 7592, 2088, 102]])
    before = fast.forward(ids, None)
    encoder.word[...] = 0
    for layer in encoder.layers:
        layer.qkv_w[...] = 0
        layer.inter_w[...] = 0
    np.testing.assert_array_equal(fast.forward(ids, None), before)


async def test_numpy_is_used_when_onnxruntime_cannot_be_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # makes `import onnxruntime` raise ImportError
    assert import_onnxruntime() is None
    embedder = await started(LocalEmbedder())
    assert embedder.describe()["runtime"] == "numpy"
    reference = await started(LocalEmbedder(runtime="numpy"))
    texts = ["Where does Emma live now?", " ".join(WORDS * 3)]
    cosines = ((await embedder.embed(texts)) * (await reference.embed(texts))).sum(axis=1)
    assert cosines.min() >= MIN_COSINE


async def test_insisting_on_onnxruntime_without_it_fails_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    embedder = LocalEmbedder(runtime="onnxruntime")
    with pytest.raises(EmbedderError, match="onnxruntime is not installed"):
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
        "    embedder = LocalEmbedder(runtime='onnxruntime')\n"
        "    await embedder.start()\n"
        "    await embedder.embed(['hello'])\n"
        "    print(embedder.describe()['runtime'])\n"
        "trio.run(main)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("onnxruntime ")
    assert [str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")] == []
