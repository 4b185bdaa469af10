"""Start-up work begun before the rest of memoryd is imported: the integrity check and the model.

``memoryd serve`` spends ~0.3 s importing its modules (CPU, holding the GIL) before the daemon
runs.  The two long parts of start-up barely need the GIL: SQLite's quick_check of the file and
the local model's load (file read, sha256, onnxruntime's session build).  Begun here, they run
while the main thread imports the daemon, and the integrity wait counts from when the check
began.  ``Daemon.run`` takes a head start that was begun for it, or begins one itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memoryd.config import Config
from memoryd.store import backends

if TYPE_CHECKING:
    from memoryd.embed import Embedder


class HeadStart:
    def __init__(self, config: Config, *, embedder: Embedder | None = None) -> None:
        """Checks an existing store file at once, and starts loading the configured local
        model unless ``embedder`` (the caller's own) replaces it."""
        self.integrity = backends.startup_check(config)
        #: The configured embedder, already loading when it is the local one; None for
        #: ``embedder = "none"`` or when the caller brought its own.
        self.embedder: Embedder | None = None
        self.embedder_error: Exception | None = None
        if embedder is None and config.embedder != "none":
            # Imported only now: the check is already running (numpy, tokenizers: ~0.1 s).
            from memoryd.embed import make_embedder

            try:
                self.embedder = make_embedder(config.embedder, config.embed)
            except Exception as exc:  # a ConfigError: raised where start-up raised it before
                self.embedder_error = exc
            if config.embedder == "local":  # the HTTP backends never import the local model
                from memoryd.embed.local import LocalEmbedder

                if isinstance(self.embedder, LocalEmbedder):
                    self.embedder.load_ahead()

    def stop(self) -> None:
        """Interrupt what is still running (start-up failed, or shutdown)."""
        self.integrity.stop()
