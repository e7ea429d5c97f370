"""The half every fake JSON API server of the tests shares: answering JSON, quietly."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler


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
