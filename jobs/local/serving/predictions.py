"""A prediction proxied to a deployed model's serving process, in Vertex's words: the body the
container gets (``integral``), the endpoint's deadline, and the PredictResponse or error its
answer stands for."""

from __future__ import annotations

import json
from typing import Any

from jobs.local.serving.models import ModelError

PREDICT_TIMEOUT_S = 60.0
"""A prediction's deadline: a shared public endpoint's inference timeout (docs/vertex-facts.md,
"Local endpoints and serving processes"); an endpoint's clientConnectionConfig.inferenceTimeout
replaces it, up to MAX_INFERENCE_TIMEOUT_S."""
MAX_INFERENCE_TIMEOUT_S = 3600.0


def inference_timeout_s(endpoint: dict) -> float:
    """How long a prediction on ``endpoint`` may take: its clientConnectionConfig's
    inferenceTimeout (a JSON Duration, ``"120s"``), capped at Vertex's maximum, else
    PREDICT_TIMEOUT_S."""
    text = str((endpoint.get("clientConnectionConfig") or {}).get("inferenceTimeout") or "")
    try:
        seconds = float(text.removesuffix("s")) if text.endswith("s") else 0.0
    except ValueError:
        seconds = 0.0
    return min(seconds, MAX_INFERENCE_TIMEOUT_S) if seconds > 0 else PREDICT_TIMEOUT_S


def deadline_exceeded(deployed: dict, timeout_s: float) -> ModelError:
    """A prediction the model did not answer in time: google.rpc's DEADLINE_EXCEEDED, HTTP 504
    (the SDK raises GatewayTimeout)."""
    return ModelError(
        504,
        f"Deployed model {deployed['id']} ({deployed['model']}) did not answer the prediction "
        f"within {timeout_s:g} s, the endpoint's inference timeout: make the prediction smaller "
        f"or faster, or raise the endpoint's clientConnectionConfig.inferenceTimeout",
        "DEADLINE_EXCEEDED",
    )


def prediction_response(deployed: dict, status: int, answer: bytes) -> dict:
    """The PredictResponse of a container's answer, or the error it stands for."""
    try:
        parsed = json.loads(answer)
    except ValueError:
        parsed = None
    if status != 200:
        raise container_error(status, parsed, answer)
    if not isinstance(parsed, dict) or not isinstance(parsed.get("predictions"), list):
        raise ModelError(
            500,
            f"Deployed model {deployed['id']} answered without a predictions list: "
            f"{answer[:200]!r}",
            "INTERNAL",
        )
    response = {
        "predictions": parsed["predictions"],
        "deployedModelId": deployed["id"],
        "model": deployed["model"],
        "modelVersionId": deployed["modelVersionId"],
        "modelDisplayName": deployed.get("displayName", ""),
    }
    if "metadata" in parsed:
        response["metadata"] = parsed["metadata"]
    return response


def integral(value: Any) -> Any:
    """JSON numbers as protobuf's C++ JSON printer writes a ``Value``'s doubles: without a
    fraction when they have none (8.0 -> 8). A request passes through ``google.protobuf.Value``
    (the SDK's REST transport writes ``8.0`` for the user's 8); the container gets ``8``."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, list):
        return [integral(v) for v in value]
    if isinstance(value, dict):
        return {k: integral(v) for k, v in value.items()}
    return value


def container_error(status: int, parsed: Any, raw: bytes) -> ModelError:
    """A container's non-200 answer, passed on: its Google-shaped error as it is, else its
    status with the start of its body."""
    error = parsed.get("error") if isinstance(parsed, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return ModelError(status, error["message"], str(error.get("status") or "UNKNOWN"))
    names = {
        400: "INVALID_ARGUMENT",
        404: "NOT_FOUND",
        429: "RESOURCE_EXHAUSTED",
        503: "UNAVAILABLE",
    }
    return ModelError(
        status,
        f"the model server answered HTTP {status}: {raw[:500].decode(errors='replace')}",
        names.get(status, "INTERNAL"),
    )
