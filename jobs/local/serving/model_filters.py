"""The ``filter`` of ListModels and ListModelVersions, as model_service.proto documents it.

ListModels: ``model`` (the model id, the last segment of its name) with ``=`` and ``!=``,
``display_name`` (or ``displayName``) with ``=`` and ``!=``, ``labels.KEY`` with ``=``, ``!=``
and ``:`` (``labels.KEY:*`` tests presence). ListModelVersions: ``labels.KEY`` only. Terms may
be negated by ``NOT`` or ``-`` and joined by ``AND`` / ``OR`` (AND binds tighter; no
parentheses), as jobs/local/platform/filters.py reads the jobs' filter. ``base_model_name`` (Model
Garden models) is not served: it is refused with a message, like anything else outside this.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from jobs.local.platform.filters import Term, matcher, parse_terms

MODEL_FIELDS = ("model", "display_name", "displayName", "labels")
VERSION_FIELDS = ("labels",)


class ModelFilterError(ValueError):
    """The filter uses something outside the supported subset."""


def _model_hit(term: Term, model: dict) -> bool:
    actual = _value(model, term.field)
    if term.op == ":":
        return actual is not None if term.value == "*" else term.value in (actual or "")
    return actual == term.value if term.op == "=" else actual != term.value


def _value(model: dict, field: str) -> str | None:
    if field == "model":
        return str(model.get("name", "")).rsplit("/", 1)[-1]
    if field in ("display_name", "displayName"):
        return model.get("displayName")
    return (model.get("labels") or {}).get(field.removeprefix("labels."))


def _check_field(field: str, op: str, allowed: Collection[str]) -> None:
    base = "labels" if field.startswith("labels.") else field
    if base not in allowed or field == "labels":
        raise ModelFilterError(
            f"cannot filter on {field!r}: supported here are "
            f"{', '.join(f for f in allowed if f != 'displayName')}"
            f"{'.KEY' if allowed == VERSION_FIELDS else ' (labels.KEY)'}"
        )
    if op not in ("=", "!=", ":") or (op == ":" and base != "labels"):
        supported = "=, != and ':'" if base == "labels" else "= and !="
        raise ModelFilterError(f"{field!r} supports {supported} only")


def parse_model_filter(
    text: str, allowed: Collection[str] = MODEL_FIELDS
) -> Callable[[dict], bool]:
    """A predicate over REST-form models; ModelFilterError names what could not be parsed."""
    alternatives = parse_terms(text, ModelFilterError)
    for terms in alternatives:
        for term in terms:
            _check_field(term.field, term.op, allowed)
    return matcher(alternatives, _model_hit)
