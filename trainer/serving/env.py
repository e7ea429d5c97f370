"""What Vertex tells a serving container: its port, its two routes and where the model is.

`ServingEnv.from_environ()` is the only reader of the serving variables (`AIP_HTTP_PORT`,
`AIP_HEALTH_ROUTE`, `AIP_PREDICT_ROUTE`, `AIP_STORAGE_URI`, `AIP_MODE`, `AIP_DEPLOYED_MODEL_ID`,
`AIP_ENDPOINT_ID`), as `trainer.config.env` is of a training job's. Vertex sets all of them on a
deployed model's container (docs/vertex-facts.md, "Serving containers"); the defaults below are for
a person running `python -m trainer.serve` by hand. Ours (`VTX_*`, set in the Model's
containerSpec.env) are read here too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

DEFAULT_HTTP_PORT = 8080
"""Vertex's port when the Model's containerSpec.ports names none."""
BASE_MODEL_ENV = "VTX_BASE_MODEL"
"""Ours, not Vertex's: the base model of a LoRA adapter, when the adapter's own record of it
(`base_model_name_or_path`) is not readable where the container runs."""


VERTEX_HOST = "0.0.0.0"
"""Vertex routes to the container from outside it: the contract requires every interface."""
HOST_ENV = "VTX_SERVE_HOST"
MAX_BATCH_ENV = "VTX_SERVE_MAX_BATCH"
BATCH_TOKENS_ENV = "VTX_SERVE_BATCH_TOKENS"


class ServingEnvError(ValueError):
    """A serving variable that cannot be used; the message names it."""


@dataclass(frozen=True)
class BatchLimits:
    """How many of a request's instances one `model.generate` call takes. A padded batch holds
    keys and values for instances x (longest prompt + max_new_tokens) positions: per position
    2 x layers x kv_heads x head_dim values (Llama 3 8B in bf16: 128 KiB, so the default budget
    is 2 GiB)."""

    max_instances: int = 16
    """`VTX_SERVE_MAX_BATCH`: at most this many instances per batch. A batch gives several times
    the tokens/s of one instance at a time (measured: bench/RESULTS.md, "Serving: our container
    over HTTP vs transformers.pipeline"); 1 turns batching off."""
    max_tokens: int = 16_384
    """`VTX_SERVE_BATCH_TOKENS`: at most this many padded positions per batch (see above). An
    instance over it on its own is generated alone, as without batching."""


@dataclass(frozen=True)
class ServingEnv:
    """The container's view of its deployment."""

    storage_uri: str
    """`AIP_STORAGE_URI`: Vertex's copy of the Model's artifactUri (gs://), or a local directory."""
    http_port: int = DEFAULT_HTTP_PORT
    health_route: str = "/health"
    predict_route: str = "/predict"
    mode: str | None = None
    """`AIP_MODE`: `PREDICTION` on Vertex."""
    deployed_model_id: str | None = None
    endpoint_id: str | None = None
    base_model: str | None = None
    """`VTX_BASE_MODEL`: overrides a LoRA adapter's recorded base model."""
    host: str = VERTEX_HOST
    """Where to listen: every interface, as Vertex's contract requires; `VTX_SERVE_HOST`
    narrows it (the local platform sets 127.0.0.1: it serves local clients only)."""
    batch: BatchLimits = BatchLimits()
    """`VTX_SERVE_MAX_BATCH`, `VTX_SERVE_BATCH_TOKENS`: how a request's instances are batched."""

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> ServingEnv:
        storage_uri = environ.get("AIP_STORAGE_URI", "").strip()
        if not storage_uri:
            raise ServingEnvError(
                "AIP_STORAGE_URI is not set: Vertex sets it to the Model's artifacts when the "
                "Model has an artifactUri; by hand, set it to an exported model's directory "
                "(the run's model/ prefix)"
            )
        return cls(
            storage_uri=storage_uri,
            http_port=_port(environ.get("AIP_HTTP_PORT")),
            health_route=_route(environ, "AIP_HEALTH_ROUTE", cls.health_route),
            predict_route=_route(environ, "AIP_PREDICT_ROUTE", cls.predict_route),
            mode=environ.get("AIP_MODE") or None,
            deployed_model_id=environ.get("AIP_DEPLOYED_MODEL_ID") or None,
            endpoint_id=environ.get("AIP_ENDPOINT_ID") or None,
            base_model=environ.get(BASE_MODEL_ENV) or None,
            host=environ.get(HOST_ENV) or VERTEX_HOST,
            batch=BatchLimits(
                max_instances=_positive(environ, MAX_BATCH_ENV, BatchLimits.max_instances),
                max_tokens=_positive(environ, BATCH_TOKENS_ENV, BatchLimits.max_tokens),
            ),
        )


def _port(value: str | None) -> int:
    if not value:
        return DEFAULT_HTTP_PORT
    try:
        port = int(value)
    except ValueError:
        port = 0
    if not 1 <= port <= 65535:
        raise ServingEnvError(f"AIP_HTTP_PORT: {value!r} is not a port number (1-65535)")
    return port


def _route(environ: Mapping[str, str], name: str, default: str) -> str:
    route = environ.get(name) or default
    if not route.startswith("/"):
        raise ServingEnvError(f"{name}: {route!r} is not a path; it must start with /")
    return route


def _positive(environ: Mapping[str, str], name: str, default: int) -> int:
    value = environ.get(name, "").strip()
    if not value:
        return default
    if not value.isdigit() or int(value) < 1:
        raise ServingEnvError(
            f"{name}: {value!r} is not a positive integer; unset it for the default, {default}"
        )
    return int(value)
