"""A Vertex AI custom serving container for a model the trainer exported, started by
`python -m trainer.serve` (the entry point whose name the platform's Models carry).

Vertex's contract (docs/vertex-facts.md, "Serving containers"): listen on 0.0.0.0:AIP_HTTP_PORT;
GET AIP_HEALTH_ROUTE answers 200 only once the model is loaded (503 before); POST
AIP_PREDICT_ROUTE takes `{"instances": [...], "parameters": {...}}` and answers
`{"predictions": [...]}`, one `{"generated_text": "..."}` per instance (Vertex adds
`deployedModelId` itself). The model comes from AIP_STORAGE_URI (trainer.serving.served_model),
which generates a request's instances as padded batches (VTX_SERVE_MAX_BATCH,
VTX_SERVE_BATCH_TOKENS).

The server listens first and loads in a background thread: Vertex's liveness probe gives a
container about 40 s to accept a TCP connection, less than a large model takes to copy and load.
A load that fails is logged and ends the process (exit 1), so Vertex reports the deployment's
failure instead of waiting on a health check that would never pass.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from trainer.serving.env import ServingEnv, ServingEnvError
from trainer.serving.request import MAX_REQUEST_BYTES, RequestError, parse_request
from trainer.serving.served_model import ServedModel
from trainer.tracking.metrics import setup_logging

log = logging.getLogger(__name__)


class ModelSlot:
    """The model once loaded; until then, None. Set once, from the loading thread."""

    def __init__(self) -> None:
        self.model: ServedModel | None = None
        self.failed = threading.Event()

    def load(self, loader: Callable[[], ServedModel]) -> None:
        try:
            self.model = loader()
        except Exception:
            log.exception("the model could not be loaded")
            self.failed.set()


def error(status: int, message: str) -> JSONResponse:
    """Google's error shape (google.rpc.Status as JSON), which Vertex's own API answers with."""
    names = {400: "INVALID_ARGUMENT", 413: "INVALID_ARGUMENT", 503: "UNAVAILABLE"}
    body = {"error": {"code": status, "message": message, "status": names.get(status, "INTERNAL")}}
    return JSONResponse(body, status_code=status)


def create_app(env: ServingEnv, slot: ModelSlot) -> FastAPI:
    """The two routes of Vertex's contract, at the paths Vertex gave."""
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)

    @app.get(env.health_route)
    def health() -> JSONResponse:
        if slot.model is None:
            return error(503, "the model is loading")
        return JSONResponse({})

    @app.post(env.predict_route)
    async def predict(request: Request) -> JSONResponse:
        body = await read_body(request)
        if body is None:
            return error(413, f"the request is over {MAX_REQUEST_BYTES} bytes, Vertex's limit")
        model = slot.model
        if model is None:
            return error(503, "the model is loading")
        try:
            parsed = parse_request(body)
        except RequestError as exc:
            return error(400, str(exc))
        started = time.monotonic()
        try:
            # Generation holds the CPU or GPU for seconds: off the event loop, so health checks
            # are still answered meanwhile.
            texts = await run_in_threadpool(model.generate_all, parsed.prompts, parsed.options)
        except RequestError as exc:
            return error(400, str(exc))
        # Counts and time only: prompts and outputs are the caller's data, never logged.
        log.info(
            "predicted",
            extra={
                "instances": len(parsed.prompts),
                "max_new_tokens": parsed.options.max_new_tokens,
                "duration_s": round(time.monotonic() - started, 3),
            },
        )
        return JSONResponse({"predictions": [{"generated_text": text} for text in texts]})

    return app


async def read_body(request: Request) -> bytes | None:
    """The body, or None when it is over MAX_REQUEST_BYTES (read no further than that)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_REQUEST_BYTES:
        return None
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_REQUEST_BYTES:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def main(environ: dict[str, str] | None = None) -> int:
    """Serve until Vertex stops the container (SIGTERM) or the model fails to load."""
    import uvicorn

    setup_logging(rank=0)
    try:
        env = ServingEnv.from_environ(os.environ if environ is None else environ)
    except ServingEnvError as exc:
        log.error(str(exc))
        return 2
    slot = ModelSlot()
    config = uvicorn.Config(
        create_app(env, slot),
        host=env.host,
        port=env.http_port,
        log_config=None,  # uvicorn's records go through our JSON handler
        access_log=False,  # one line per prediction is ours, without the caller's address
        timeout_graceful_shutdown=25,  # within the 30 s Vertex waits after SIGTERM
    )
    server = uvicorn.Server(config)

    def load() -> None:
        slot.load(lambda: ServedModel.load(env.storage_uri, env.base_model, env.batch))
        if slot.failed.is_set():
            server.should_exit = True

    threading.Thread(target=load, name="vtx-load-model", daemon=True).start()
    log.info(
        "serving",
        extra={
            "port": env.http_port,
            "health_route": env.health_route,
            "predict_route": env.predict_route,
            "storage_uri": env.storage_uri,
            "max_batch": env.batch.max_instances,
            "batch_tokens": env.batch.max_tokens,
        },
    )
    server.run()
    return 1 if slot.failed.is_set() else 0


if __name__ == "__main__":
    sys.exit(main())
