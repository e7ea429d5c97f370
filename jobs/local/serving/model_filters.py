"""The ``filter`` of ListModels, ListModelVersions and ListEndpoints, as model_service.proto and
endpoint_service.proto document it (the same words as the v1 discovery document).

ListModels: ``model`` (the model id, the last segment of its name) with ``=`` and ``!=``.
ListEndpoints: ``endpoint`` (the endpoint id, likewise) with ``=`` and ``!=``. Both:
``display_name`` (or ``displayName``) with ``=`` and ``!=``. All three: ``labels`` as "general
map functions": ``labels.KEY=VALUE`` (and ``!=``), ``labels.KEY:*`` or ``labels:KEY`` (the key
exists), a key with a space quoted (``labels."a key"``). Terms may be negated by ``NOT`` or
``-`` and joined by ``AND`` / ``OR`` (AND binds tighter; no parentheses), as
jobs/local/platform/filters.py reads the jobs' filter. ``base_model_name`` (Model Garden
models, "only supports =") is not served: the docs do not say which field of a Model or an
Endpoint it compares, and the local registry holds no Model Garden model; it is refused with a
message, like anything else outside this.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from jobs.local.platform.filters import Term, matcher, parse_terms

MODEL_FIELDS = ("model", "display_name", "displayName", "labels")
VERSION_FIELDS = ("labels",)
ENDPOINT_FIELDS = ("endpoint", "display_name", "displayName", "labels")
_ID_FIELDS = ("model", "endpoint")
_BASE_MODEL = ("base_model_name", "baseModelName")


class ModelFilterError(ValueError):
    """The filter uses something outside the supported subset."""


def _hit(term: Term, resource: dict) -> bool:
    if term.field == "labels":  # labels:KEY, the key exists
        return term.value in (resource.get("labels") or {})
    actual = _value(resource, term.field)
    if term.op == ":":
        return actual is not None if term.value == "*" else term.value in (actual or "")
    return actual == term.value if term.op == "=" else actual != term.value


def _value(resource: dict, field: str) -> str | None:
    if field in _ID_FIELDS:
        return str(resource.get("name", "")).rsplit("/", 1)[-1]
    if field in ("display_name", "displayName"):
        return resource.get("displayName")
    return (resource.get("labels") or {}).get(field.removeprefix("labels."))


def _check_field(field: str, op: str, allowed: Collection[str]) -> None:
    base = "labels" if field.startswith("labels.") else field
    if base in _BASE_MODEL and allowed != VERSION_FIELDS:
        raise ModelFilterError(
            f"cannot filter on {field!r} here: the local platform serves no Model Garden "
            f"models; filter on {', '.join(f for f in allowed if f != 'displayName')} instead"
        )
    if base not in allowed:
        raise ModelFilterError(
            f"cannot filter on {field!r}: supported here are "
            f"{', '.join(f for f in allowed if f != 'displayName')}"
            f"{'.KEY' if allowed == VERSION_FIELDS else ' (labels.KEY)'}"
        )
    if field == "labels":
        if op != ":":
            raise ModelFilterError(
                "'labels' alone supports ':' only (labels:KEY, the key exists); "
                'compare a value with labels.KEY="VALUE"'
            )
        return
    if op not in ("=", "!=", ":") or (op == ":" and base != "labels"):
        supported = "=, != and ':'" if base == "labels" else "= and !="
        raise ModelFilterError(f"{field!r} supports {supported} only")


def parse_model_filter(
    text: str, allowed: Collection[str] = MODEL_FIELDS
) -> Callable[[dict], bool]:
    """A predicate over REST-form models or endpoints (``allowed``: the fields of the List call);
    ModelFilterError names what could not be parsed."""
    alternatives = parse_terms(text, ModelFilterError)
    for terms in alternatives:
        for term in terms:
            _check_field(term.field, term.op, allowed)
    return matcher(alternatives, _hit)
