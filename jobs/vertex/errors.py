"""Vertex's failures in the user's words: what happened, where, and what to write instead. The
SDK client (`jobs.vertex.client`) and the REST clients (`jobs.vertex.rest` and those built on
it) word every HTTP status the same way here."""

from __future__ import annotations

import re

from jobs.core.catalog import load_catalog
from jobs.core.stack import StackOutputs

QUOTA_METRIC = re.compile(r"aiplatform\.googleapis\.com/[a-z0-9_]+")


class VertexError(Exception):
    """An API failure explained: what happened and what to do."""

    def __init__(self, message: str, http_code: int | None = None) -> None:
        super().__init__(message)
        self.http_code = http_code
        """The HTTP status Vertex answered with, when it answered."""


def still_active(run_id: str, name: str, state: str) -> VertexError:
    """Why a run's next attempt is refused while ``name`` (in ``state``) lives: two attempts
    would write one checkpoint prefix."""
    return VertexError(
        f"run {run_id} is still active as {name} ({state}): "
        f"`vtx cancel {run_id}` first, or wait for it to end"
    )


NOT_FOUND = 404


def _quota_entry(metric: str, units: int | None) -> str | None:
    """The stack config entry that requests ``metric`` (infra's vtx:platform ``quotas`` list)."""
    for acc in load_catalog().accelerators.values():
        for spot in (False, True):
            if acc.quota_key and acc.metric(spot) == metric:
                count = f"count: {units}" if units else "count: N"
                return f"{{accelerator: {acc.name}, {count}, spot: {str(spot).lower()}}}"
    return None


def quota_message(said: object, stack: StackOutputs, needed: dict[str, int] | None) -> str:
    """A 429 on create: name the metric and point at the stack's quota config. ``said`` is
    Vertex's error (an exception or its message)."""
    needed = needed or {}
    metrics = sorted(set(QUOTA_METRIC.findall(str(said))))
    if not metrics:
        metrics = sorted(m for m in needed if "gpus" in m or "tpu" in m) or sorted(needed)
    wanted = ", ".join(f"{m} (this job needs {needed[m]})" if m in needed else m for m in metrics)
    entries = [e for m in metrics if (e := _quota_entry(m, needed.get(m)))]
    where = f"Pulumi.{stack.environment}.yaml under vtx:platform quotas"
    fix = f"add {'; '.join(entries)} to {where}" if entries else f"raise it in {where}"
    return (
        f"quota exceeded in {stack.region}: {wanted or 'unknown metric'}. To fix: {fix}, then "
        "`pulumi up` (Cloud Quotas may take a while to grant it); or pick a smaller machine, or "
        f"`--set scheduling.strategy=spot` to use the preemptible quota. Vertex said: {said}"
    )


def explain(
    exc: Exception, stack: StackOutputs, needed: dict[str, int] | None = None
) -> VertexError:
    """An SDK exception explained; api_core's exceptions carry the HTTP status as ``code``."""
    from google.api_core import exceptions

    if isinstance(exc, exceptions.RetryError):
        return VertexError(f"Vertex stayed unavailable after retries: {exc}. Try again later.")
    code = exc.code if isinstance(exc, exceptions.GoogleAPICallError) else None
    return explain_status(code if isinstance(code, int) else None, str(exc), stack, needed)


def explain_status(
    code: int | None, said: str, stack: StackOutputs, needed: dict[str, int] | None = None
) -> VertexError:
    """An HTTP status and Vertex's message, explained (the SDK and REST paths share this)."""
    if code == 429:
        return VertexError(quota_message(said, stack, needed))
    if code == 403:
        return VertexError(
            f"permission denied in {stack.project}: the submitter needs roles/aiplatform.user and "
            f"roles/iam.serviceAccountUser on {stack.trainer_service_account}. Vertex said: {said}"
        )
    if code == 401:
        return VertexError(
            f"not authenticated: run `gcloud auth application-default login`. Vertex said: {said}"
        )
    if code == 400:  # InvalidArgument and FailedPrecondition too
        return VertexError(
            f"Vertex rejected the job: {said}. `vtx validate` did not catch this: please report "
            "it with the output of `vtx render --format json`."
        )
    if code == NOT_FOUND:
        return VertexError(f"not found: {said}", NOT_FOUND)
    if code == 503:
        return VertexError(f"Vertex stayed unavailable after retries: {said}. Try again later.")
    return VertexError(f"Vertex API error: {said}")


def unreachable(stack: StackOutputs, exc: Exception) -> VertexError:
    """A connection failure (no HTTP answer at all), with where to look when it is local."""
    where = stack.vertex_endpoint or f"{stack.region}-aiplatform.googleapis.com"
    local = " Is the local platform up? `vtx local status`." if stack.is_local else ""
    return VertexError(f"cannot reach Vertex AI at {where}: {exc}.{local}")
