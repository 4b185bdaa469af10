"""The in-process MiniLM embedder against vectors computed by sentence-transformers itself."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import trio

from memoryd.config import EmbedConfig
from memoryd.embed import BUNDLED_MODEL_ID, BUNDLED_SHA256, LocalEmbedder, make_embedder
from memoryd.embed.local import bundled_model_path
from memoryd.embed.sentence_model import MAX_CHUNK_ROWS, TOKEN_BUDGET, length_buckets, spread_over_workers
from memoryd.errors import ConfigError, EmbedderError

FIXTURE = Path(__file__).parent / "fixtures" / "minilm_reference.json"
REFERENCE = json.loads(FIXTURE.read_text(encoding="utf-8"))["cases"]
TEXTS = [case["text"] for case in REFERENCE]
EXPECTED = np.array([case["vector"] for case in REFERENCE], dtype=np.float32)
EXPECTED /= np.linalg.norm(EXPECTED, axis=1, keepdims=True)
MIN_COSINE = 0.99999


async def started(embedder: LocalEmbedder) -> LocalEmbedder:
    with trio.fail_after(30):
        await embedder.start()
    return embedder


def assert_unit_rows(vectors: np.ndarray, rows: int) -> None:
    assert vectors.dtype == np.float32
    assert vectors.shape == (rows, 384)
    assert np.isfinite(vectors).all()
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def copy_model(tmp_path: Path, name: str = "copied-minilm") -> Path:
    target = tmp_path / name
    shutil.copytree(bundled_model_path(), target)
    return target


async def test_bundled_model_matches_sentence_transformers_reference_in_one_batch() -> None:
    embedder = await started(LocalEmbedder())
    vectors = await embedder.embed(TEXTS)
    assert_unit_rows(vectors, len(TEXTS))
    cosines = (vectors * EXPECTED).sum(axis=1)
    for text, cosine in zip(TEXTS, cosines, strict=True):
        assert cosine >= MIN_COSINE, (text[:40], float(cosine))
    assert embedder.model_id == BUNDLED_MODEL_ID == "local:all-MiniLM-L6-v2"
    assert embedder.dim == 384
    await embedder.aclose()


async def test_each_text_alone_matches_the_reference_too() -> None:
    # One text per call has no padding at all; the batch above mixes lengths 3..256 tokens.
    embedder = await started(LocalEmbedder())
    for text, expected in zip(TEXTS, EXPECTED, strict=True):
        vector = (await embedder.embed([text]))[0]
        assert float(vector @ expected) >= MIN_COSINE, text[:40]


async def test_one_text_alone_and_in_a_padded_batch_give_the_same_vector() -> None:
    # A lone text is one unpadded forward pass (the query path); in a batch it is padded and
    # masked inside a chunk of similar lengths.  From 3 tokens to past the 256-token cap.
    words = "remind me to call the dentist about my daughter's braces before the school trip".split()
    texts = [
        " ".join(words[i % len(words)] for i in range(count)) for count in (1, 2, 5, 11, 16, 40, 90, 180, 250, 400)
    ]
    texts += [TEXTS[-1], "", "Why did Gina start her own clothing store?"]
    embedder = await started(LocalEmbedder())
    batched = await embedder.embed(texts)
    for text, in_batch in zip(texts, batched, strict=True):
        alone = (await embedder.embed([text]))[0]
        assert float(alone @ in_batch) >= 0.99999, text[:40]


async def test_batch_results_follow_input_order_whatever_the_lengths() -> None:
    embedder = await started(LocalEmbedder())
    order = [12, 7, 0, 11, 5, 12, 3, 7]  # long, short, repeats: chunking sorts by length internally
    vectors = await embedder.embed([TEXTS[i] for i in order])
    cosines = (vectors * EXPECTED[order]).sum(axis=1)
    assert (cosines >= MIN_COSINE).all()


async def test_very_long_text_is_truncated_at_256_tokens() -> None:
    embedder = await started(LocalEmbedder())
    long_text = TEXTS[-1]  # ~600 tokens
    longer, longest = await embedder.embed([long_text, long_text * 20])
    # Only the first 256 tokens count, so more text after them changes nothing.
    assert float(longer @ longest) > 0.99999
    assert float(longer @ EXPECTED[-1]) >= MIN_COSINE


async def test_empty_whitespace_and_odd_unicode_inputs_give_unit_vectors() -> None:
    embedder = await started(LocalEmbedder())
    odd = [
        "",
        "   \t\n  ",
        "\x00\x01 control characters \x7f",
        "🙂" * 300,
        "混合 text with 漢字 and Ελληνικά",
        "e\u0301 combining accent, zero\u200bwidth, rtl \u05e9\u05dc\u05d5\u05dd",
        "\ud7ff\ue000\U0010fffd private use and edges",
    ]
    vectors = await embedder.embed(odd)
    assert_unit_rows(vectors, len(odd))
    # sentence-transformers strips texts, so whitespace-only is the same as empty.
    assert float(vectors[0] @ vectors[1]) > 0.99999


async def test_empty_list_gives_zero_rows() -> None:
    embedder = await started(LocalEmbedder())
    vectors = await embedder.embed([])
    assert vectors.shape == (0, 384)
    assert vectors.dtype == np.float32


async def test_concurrent_calls_all_get_their_own_vectors() -> None:
    embedder = await started(LocalEmbedder())
    results: dict[int, np.ndarray] = {}

    async def one(i: int) -> None:
        results[i] = (await embedder.embed([TEXTS[i]]))[0]

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            for i in range(6):
                nursery.start_soon(one, i)
    for i, vector in results.items():
        assert float(vector @ EXPECTED[i]) >= MIN_COSINE


async def test_embed_before_start_raises_embedder_error() -> None:
    with pytest.raises(EmbedderError, match="not loaded"):
        await LocalEmbedder().embed(["hello"])


async def test_tampered_weights_are_refused_with_a_clear_error(tmp_path: Path) -> None:
    folder = copy_model(tmp_path)
    weights = bytearray((folder / "model.safetensors").read_bytes())
    weights[-1] ^= 0x01  # one bit in the last tensor
    (folder / "model.safetensors").write_bytes(bytes(weights))
    embedder = LocalEmbedder(folder, expected_sha256=BUNDLED_SHA256)
    with pytest.raises(EmbedderError, match=r"model\.safetensors: sha256 .* does not match the pinned"):
        await embedder.start()
    assert embedder.describe()["state"] == "failed"
    assert "sha256" in embedder.describe()["last_error"]
    with pytest.raises(EmbedderError, match="not loaded"):
        await embedder.embed(["hello"])


async def test_tampered_tokenizer_is_refused(tmp_path: Path) -> None:
    folder = copy_model(tmp_path)
    tokenizer = folder / "tokenizer.json"
    tokenizer.write_text(tokenizer.read_text(encoding="utf-8").replace('"[UNK]"', '"[UNK2]"', 1), encoding="utf-8")
    with pytest.raises(EmbedderError, match=r"tokenizer\.json: sha256"):
        await LocalEmbedder(folder, expected_sha256=BUNDLED_SHA256).start()


async def test_bundled_pins_give_the_bundled_model_id_wherever_the_folder_is(tmp_path: Path) -> None:
    embedder = await started(LocalEmbedder(copy_model(tmp_path), expected_sha256=BUNDLED_SHA256))
    assert embedder.model_id == BUNDLED_MODEL_ID
    assert embedder.describe()["verified"] is True


async def test_model_path_folder_is_loaded_without_pin(tmp_path: Path) -> None:
    folder = copy_model(tmp_path, "my-minilm")
    # Unpinned: other bytes are accepted (here: the README, which the loader ignores anyway).
    (folder / "README.md").write_text("changed", encoding="utf-8")
    embedder = await started(LocalEmbedder(folder))
    assert embedder.model_id == "local:my-minilm"
    assert embedder.describe()["verified"] is False
    vectors = await embedder.embed(TEXTS[:3])
    assert ((vectors * EXPECTED[:3]).sum(axis=1) >= MIN_COSINE).all()


async def test_model_path_without_weights_fails_start_naming_the_file(tmp_path: Path) -> None:
    folder = copy_model(tmp_path)
    (folder / "model.safetensors").unlink()
    embedder = LocalEmbedder(folder)
    with pytest.raises(EmbedderError, match=r"model file missing: .*model\.safetensors"):
        await embedder.start()


async def test_missing_model_folder_fails_start(tmp_path: Path) -> None:
    with pytest.raises(EmbedderError, match="model folder not found"):
        await LocalEmbedder(tmp_path / "nope").start()


async def test_model_path_naming_the_bundled_folder_is_still_pinned() -> None:
    embedder = LocalEmbedder(bundled_model_path())
    assert embedder.model_id == BUNDLED_MODEL_ID
    assert embedder.describe()["verified"] is True


def test_factory_builds_the_bundled_local_embedder() -> None:
    embedder = make_embedder("local", EmbedConfig())
    assert isinstance(embedder, LocalEmbedder)
    assert embedder.model_id == BUNDLED_MODEL_ID


def test_factory_refuses_a_model_path_that_is_not_a_folder(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"embed\.model_path"):
        make_embedder("local", EmbedConfig(model_path=str(tmp_path / "missing")))


@pytest.mark.parametrize(
    "lengths",
    [[], [5], [3] * 100, [256] * 20, list(range(1, 257)), [7, 200, 12, 9, 256, 3, 40, 41, 39]],
    ids=["none", "one", "many-short", "many-long", "every-length", "mixed"],
)
def test_chunking_covers_every_text_once_within_the_budgets(lengths: list[int]) -> None:
    ids = [[0] * n for n in lengths]
    chunks = spread_over_workers(length_buckets(ids), lengths, workers=2)
    assert sorted(i for chunk in chunks for i in chunk) == list(range(len(lengths)))
    for chunk in chunks:
        assert len(chunk) <= MAX_CHUNK_ROWS
        assert len(chunk) == 1 or len(chunk) * max(lengths[i] for i in chunk) <= TOKEN_BUDGET


async def test_describe_names_the_onnxruntime_version() -> None:
    import onnxruntime

    embedder = await started(LocalEmbedder())
    assert embedder.describe()["runtime"] == f"onnxruntime {onnxruntime.__version__}"
    assert "blas_kernel" not in embedder.describe()


async def test_a_query_started_at_once_is_the_vector_embed_gives() -> None:
    # The search's fast path (embed_query_now, on the model's own thread) and the batched path
    # (embed) give the same vectors, the reference's.
    embedder = await started(LocalEmbedder())
    try:
        for i, text in enumerate(TEXTS):
            under_way = embedder.embed_query_now(text)
            assert under_way is not None  # nothing else is running: it starts
            vector = under_way.result(timeout=30)
            assert vector.dtype == np.float32 and vector.shape == (384,)
            assert float(vector @ EXPECTED[i]) >= MIN_COSINE
            np.testing.assert_allclose(vector, (await embedder.embed([text]))[0], rtol=0, atol=1e-6)
    finally:
        await embedder.aclose()
    assert embedder.embed_query_now(TEXTS[0]) is None  # closed: nothing starts


async def test_a_query_never_starts_while_another_pass_runs() -> None:
    # embed() of a long batch holds the model for about a second; a query asked meanwhile is
    # refused (None: the search awaits embed() instead), and those that did start are right.
    embedder = await started(LocalEmbedder())
    batch = [" ".join(TEXTS) * 4] * 48
    refused, vectors = 0, []
    with trio.fail_after(120):
        async with trio.open_nursery() as nursery:
            done = trio.Event()

            async def long_pass() -> None:
                assert_unit_rows(await embedder.embed(batch), len(batch))
                done.set()

            nursery.start_soon(long_pass)
            while not done.is_set():
                under_way = embedder.embed_query_now(TEXTS[0])
                if under_way is None:
                    refused += 1
                else:
                    vectors.append(await trio.to_thread.run_sync(under_way.result))
                await trio.sleep(0.001)
    assert refused > 0
    assert all(float(vector @ EXPECTED[0]) >= MIN_COSINE for vector in vectors)
    again = embedder.embed_query_now(TEXTS[1])  # the pass is over: a query starts again
    assert again is not None and float(again.result(timeout=30) @ EXPECTED[1]) >= MIN_COSINE


async def test_a_query_the_model_cannot_take_fails_as_an_embedder_error() -> None:
    # The tokenizer refuses a lone surrogate (the daemon's validation never lets one through):
    # the future fails as the EmbedderError a search handles, and the model is free again.
    embedder = await started(LocalEmbedder())
    under_way = embedder.embed_query_now("\ud800")
    assert under_way is not None
    with pytest.raises(EmbedderError, match="embedding backend failed: TypeError"):
        under_way.result(timeout=30)
    again = embedder.embed_query_now(TEXTS[0])
    assert again is not None and float(again.result(timeout=30) @ EXPECTED[0]) >= MIN_COSINE
