"""The `:predict` body, checked: `{"instances": [...], "parameters": {...}}` -> prompts + options.

An instance is `{"prompt": "text"}` or the text itself; `parameters` (optional) holds
`max_new_tokens`, `temperature` and `top_p`. Anything else is refused with a `RequestError`
naming the field, which the server answers with 400.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

MAX_REQUEST_BYTES = 1_572_864
"""1.5 MiB: Vertex's limit on a prediction request (docs/vertex-facts.md, "Serving containers");
checked here too so that a container run by hand or locally refuses what Vertex would."""
MAX_INSTANCES = 64
"""Instances are generated a batch at a time (trainer.serving.env.BatchLimits), and a request's
batches one after another: more per request would outlast Vertex's timeout for anything but the
smallest models. Send more requests instead."""
MAX_NEW_TOKENS = 4096
DEFAULT_MAX_NEW_TOKENS = 128
MAX_TEMPERATURE = 100.0
"""Far beyond any useful value (2 is already near uniform); refuses typos like 1e9."""


class RequestError(ValueError):
    """A request Vertex's contract or ours refuses; the message names the field."""


@dataclass(frozen=True)
class GenerationOptions:
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS
    temperature: float = 0.0
    """0 is greedy decoding: the same prompt always gives the same text."""
    top_p: float = 1.0


@dataclass(frozen=True)
class PredictRequest:
    prompts: list[str]
    options: GenerationOptions


def parse_request(body: bytes) -> PredictRequest:
    """`body` (at most MAX_REQUEST_BYTES, checked by the caller) as a PredictRequest."""
    try:
        data = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise RequestError(f"the body is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise RequestError('the body must be a JSON object: {"instances": [...]}')
    unknown = sorted(set(data) - {"instances", "parameters"})
    if unknown:
        raise RequestError(f"unknown field(s) {', '.join(unknown)}: only instances and parameters")
    return PredictRequest(
        prompts=_prompts(data.get("instances")),
        options=_options(data.get("parameters")),
    )


def _prompts(instances: Any) -> list[str]:
    if not isinstance(instances, list) or not instances:
        raise RequestError(
            'instances: a non-empty list is required, e.g. [{"prompt": "Hello"}] or ["Hello"]'
        )
    if len(instances) > MAX_INSTANCES:
        raise RequestError(
            f"instances: {len(instances)} given, at most {MAX_INSTANCES} per request"
        )
    return [_prompt(index, instance) for index, instance in enumerate(instances)]


def _prompt(index: int, instance: Any) -> str:
    where = f"instances[{index}]"
    if isinstance(instance, dict):
        unknown = sorted(set(instance) - {"prompt"})
        if unknown:
            raise RequestError(f"{where}: unknown field(s) {', '.join(unknown)}: only prompt")
        instance = instance.get("prompt")
        where += ".prompt"
    if not isinstance(instance, str) or not instance:
        raise RequestError(
            f'{where}: a non-empty string is required ({{"prompt": "text"}} or "text")'
        )
    return instance


def _options(parameters: Any) -> GenerationOptions:
    if parameters is None:
        return GenerationOptions()
    if not isinstance(parameters, dict):
        raise RequestError('parameters: must be an object, e.g. {"max_new_tokens": 64}')
    allowed = {"max_new_tokens", "temperature", "top_p"}
    unknown = sorted(set(parameters) - allowed)
    if unknown:
        raise RequestError(
            f"parameters: unknown field(s) {', '.join(unknown)}: only {', '.join(sorted(allowed))}"
        )
    defaults = GenerationOptions()
    max_new_tokens = parameters.get("max_new_tokens", defaults.max_new_tokens)
    if not _is_int(max_new_tokens) or not 1 <= max_new_tokens <= MAX_NEW_TOKENS:
        raise RequestError(
            f"parameters.max_new_tokens: {max_new_tokens!r} is not an integer from 1 to "
            f"{MAX_NEW_TOKENS}"
        )
    temperature = parameters.get("temperature", defaults.temperature)
    if not _is_number(temperature) or not 0 <= temperature <= MAX_TEMPERATURE:
        raise RequestError(
            f"parameters.temperature: {temperature!r} is not a number from 0 (greedy) to "
            f"{MAX_TEMPERATURE:g}"
        )
    top_p = parameters.get("top_p", defaults.top_p)
    if not _is_number(top_p) or not 0 < top_p <= 1:
        raise RequestError(f"parameters.top_p: {top_p!r} is not a number in (0, 1]")
    return GenerationOptions(int(max_new_tokens), float(temperature), float(top_p))


def _is_int(value: Any) -> bool:
    # JSON true/false arrive as bool, a subclass of int: not a count.
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
