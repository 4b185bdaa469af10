"""A real HTTP server on 127.0.0.1 in a daemon thread, the base of the fake backends."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


class QuietHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes: with Nagle on, the body waits for the client's
    # delayed ACK (about 40 ms a reply), which would swamp what the benchmarks measure.
    disable_nagle_algorithm = True

    def send_json(self, status: int, body: bytes, headers: dict[str, str]) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)
        except OSError:
            pass  # the client gave up (timeout tests)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class LoopbackServer:
    """``with`` starts it and stops it; ``stopping`` wakes handlers sleeping in a delay."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.stopping = threading.Event()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.01,), daemon=True)

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()
