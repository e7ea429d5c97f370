"""A fault-injecting HTTP proxy in front of the GCS emulator, for the storage drills.

A real aiohttp server on 127.0.0.1 forwards every request to the emulator, except that, by a
seeded draw per request, it breaks some object uploads and object reads the ways GCS and the
network break them in practice:

- `503`: answered by the proxy with GCS's JSON error body, never forwarded;
- `drop`: the connection is closed before anything is forwarded;
- `lost-reply` (single-request uploads): forwarded and stored, then the connection is closed
  before the answer, so the client cannot know the upload succeeded. Not applied to the last
  request of a resumable upload: GCS answers a repeat of it with the finished object, the
  emulator with 404 (it forgets completed sessions), so the drill would test the emulator;
- `truncate` (reads): the answer starts with its full Content-Length, then the connection is
  closed half-way through the body.

At most `max_consecutive` requests in a row of one kind are broken, so a client that retries
a few times (gcsfs retries 6 times) always gets through: the drill checks that retries happen
and lose nothing, not that an outage of unbounded length is survived.

aiohttp is already installed (gcsfs is built on it); a hand-written socket server would have
to reimplement HTTP/1.1 framing to truncate bodies convincingly.
"""

from __future__ import annotations

import asyncio
import random
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from aiohttp import ClientSession, web

# Hop-by-hop or recomputed headers that must not be copied from one leg to the other.
_SKIP_HEADERS = {"host", "content-length", "transfer-encoding", "connection", "content-encoding"}
UPLOAD, RESUMABLE, OTHER = "upload", "resumable-upload", "other"
DATA_READ, CHECKPOINT_READ = "data-read", "checkpoint-read"


def classify(method: str, path: str, query: dict[str, str]) -> str:
    """Object uploads (single-request or resumable), reads of checkpoint objects, reads of
    anything else (the training data), and everything else (metadata, listings, deletes)."""
    if method in ("POST", "PUT") and path.startswith("/upload/"):
        return UPLOAD if query.get("uploadType") == "multipart" else RESUMABLE
    if method == "GET" and query.get("alt") == "media":
        return CHECKPOINT_READ if "/checkpoints/" in unquote(path) else DATA_READ
    return OTHER


# Probability that one request of a kind is broken, and at most how many are. A resume reads
# each checkpoint file in blocks of 16 MiB (trainer.checkpoint.store), a handful of requests
# here: reads fail often, and the caps keep the drill's retry back-offs (gcsfs sleeps 1-3 s per
# retry) to about half a minute in all.
DEFAULT_RATES = {UPLOAD: 0.3, RESUMABLE: 0.2, DATA_READ: 0.5, CHECKPOINT_READ: 0.5}
DEFAULT_CAPS = {UPLOAD: 6, RESUMABLE: 3, DATA_READ: 3, CHECKPOINT_READ: 3}


@dataclass
class FaultPlan:
    seed: int
    rates: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_RATES))
    caps: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_CAPS))
    max_consecutive: int = 2
    _rngs: dict[str, random.Random] = field(default_factory=dict)
    _streak: Counter = field(default_factory=Counter)
    _count: Counter = field(default_factory=Counter)

    def draw(self, category: str) -> str | None:
        """The fault to inject into the next request of `category`, or None.

        One random stream per category: the n-th upload meets the same fate whatever reads
        happened in between, so thread timing cannot change the schedule."""
        rate = self.rates.get(category, 0.0)
        rng = self._rngs.setdefault(category, random.Random(f"{self.seed}-{category}"))
        spent = self._count[category] >= self.caps.get(category, 0)
        if spent or self._streak[category] >= self.max_consecutive or rng.random() >= rate:
            self._streak[category] = 0
            return None
        self._streak[category] += 1
        self._count[category] += 1
        extra = {UPLOAD: ["lost-reply"], DATA_READ: ["truncate"], CHECKPOINT_READ: ["truncate"]}
        return rng.choice(["503", "drop", *extra.get(category, [])])


class FaultProxy:
    """Start with `start()`, point STORAGE_EMULATOR_HOST at `.endpoint`, `stop()` after.

    `.injected` counts faults by (category, kind); `.requests` counts requests by category."""

    def __init__(self, upstream: str, plan: FaultPlan) -> None:
        self.upstream = upstream.rstrip("/")
        self.plan = plan
        self.injected: Counter[tuple[str, str]] = Counter()
        self.requests: Counter[str] = Counter()
        self.endpoint = ""
        self.enabled = True
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None
        self._session: ClientSession | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> FaultProxy:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=30)
        return self

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(timeout=30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)
        self._loop.close()

    async def _start(self) -> None:
        self._session = ClientSession(auto_decompress=False)
        app = web.Application(client_max_size=1 << 30)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        self.endpoint = f"http://{host}:{port}"

    async def _stop(self) -> None:
        assert self._runner is not None and self._session is not None
        await self._runner.cleanup()
        await self._session.close()

    # ------------------------------------------------------------------ proxying

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        category = classify(request.method, request.path, dict(request.query))
        self.requests[category] += 1
        fault = self.plan.draw(category) if self.enabled else None
        if fault:
            self.injected[(category, fault)] += 1
        if fault == "503":
            error = {"code": 503, "message": "injected fault: service unavailable, retry"}
            return web.json_response({"error": error}, status=503)
        if fault == "drop":
            return self._hang_up(request)
        status, headers, payload = await self._forward(request, body)
        if fault == "lost-reply":
            return self._hang_up(request)
        if fault == "truncate" and len(payload) > 1:
            response = web.StreamResponse(status=status, headers=headers)
            response.content_length = len(payload)
            await response.prepare(request)
            await response.write(payload[: len(payload) // 2])
            return self._hang_up(request, response)
        return web.Response(status=status, headers=headers, body=payload)

    async def _forward(self, request: web.Request, body: bytes) -> tuple[int, Any, bytes]:
        assert self._session is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _SKIP_HEADERS}
        async with self._session.request(
            request.method,
            self.upstream + request.rel_url.raw_path_qs,
            headers=headers,
            data=body,
            allow_redirects=False,
        ) as answer:
            payload = await answer.read()
            out = {k: v for k, v in answer.headers.items() if k.lower() not in _SKIP_HEADERS}
            if "Location" in out:  # resumable upload sessions must come back through us
                out["Location"] = out["Location"].replace(self.upstream, self.endpoint)
            return answer.status, out, payload

    @staticmethod
    def _hang_up(
        request: web.Request, response: web.StreamResponse | None = None
    ) -> web.StreamResponse:
        """Close the client's connection; the client sees a disconnect, not an answer."""
        if request.transport is not None:
            request.transport.close()
        return response or web.Response(status=599)
