"""Start-up work begun before the rest of memoryd is imported: the integrity check and the model.

``memoryd serve`` spends ~0.3 s importing its modules (CPU, holding the GIL) before the daemon
runs.  The two long parts of start-up barely need the GIL: SQLite's quick_check of the file and
the local model's load (file read, sha256, onnxruntime's session build).  Begun here, they run
while the main thread imports the daemon, and the integrity wait counts from when the check
began.  ``Daemon.run`` takes a head start that was begun for it, or begins one itself.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from memoryd.config import Config
from memoryd.server.integrity import IntegrityCheck

if TYPE_CHECKING:
    from memoryd.embed import Embedder


class HeadStart:
    def __init__(self, config: Config, *, embedder: Embedder | None = None) -> None:
        """Checks an existing store file at once, and starts loading the configured local
        model unless ``embedder`` (the caller's own) replaces it."""
        self.integrity = IntegrityCheck(config.db_path, busy_timeout_ms=config.storage.busy_timeout_ms)
        self._embedder: Embedder | None = None
        self._embedder_error: Exception | None = None
        self._preparing: threading.Thread | None = None
        if embedder is None and config.embedder != "none":
            # The embedder's libraries (numpy, tokenizers, safetensors, onnx: ~0.1 s) are
            # imported in a thread of their own, so the model's file read and hash, which need
            # no GIL, begin while this thread imports the daemon.
            self._preparing = threading.Thread(
                target=self._prepare, args=(config,), name="memoryd-model-load", daemon=True
            )
            self._preparing.start()

    def _prepare(self, config: Config) -> None:
        try:
            from memoryd.embed import make_embedder
            from memoryd.embed.local import LocalEmbedder

            embedder = make_embedder(config.embedder, config.embed)
        except Exception as exc:  # a ConfigError: raised where start-up raised it before
            self._embedder_error = exc
            return
        if isinstance(embedder, LocalEmbedder):
            embedder.load_ahead()
        self._embedder = embedder

    def wait_for_embedder(self) -> None:
        """Until the configured embedder is built (and the local model's load begun)."""
        if self._preparing is not None:
            self._preparing.join()

    @property
    def embedder(self) -> Embedder | None:
        """The configured embedder, already loading when it is the local one; None for
        ``embedder = "none"``, when the caller brought its own, or when building it failed."""
        self.wait_for_embedder()
        return self._embedder

    @property
    def embedder_error(self) -> Exception | None:
        """Why the configured embedder could not be built (a bad setting), else None."""
        self.wait_for_embedder()
        return self._embedder_error

    def stop(self) -> None:
        """Interrupt what is still running (start-up failed, or shutdown)."""
        self.integrity.stop()
