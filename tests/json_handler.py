"""The half every fake JSON API server of the tests shares: answering JSON, quietly; and
``serving``, a server answering from a thread for a block."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, HTTPServer

SHUTDOWN_POLL_S = 0.02
"""How often a serving thread looks for its stop: ``serve_forever``'s default, 0.5 s, made every
test with a fake server wait half a second in its teardown."""


@contextmanager
def serving(server: HTTPServer) -> Iterator[HTTPServer]:
    """``server`` answering from a daemon thread until the block ends; then stopped and closed."""
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": SHUTDOWN_POLL_S}, daemon=True
    )
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


class JsonHandler(BaseHTTPRequestHandler):
    """A request handler whose routes answer with `answer`; it logs nothing (a test's output
    shows what failed, not every request)."""

    def answer(self, code: int, body: dict | bytes) -> None:
        """``body`` as JSON (bytes as they are: a test's malformed answer)."""
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass
