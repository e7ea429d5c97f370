"""Submitting and tracking CustomJobs with the real `google-cloud-aiplatform` JobServiceClient.

- GCP stacks: the regional endpoint ``{region}-aiplatform.googleapis.com`` with default
  credentials (google-auth refreshes expired tokens itself).
- The local platform (``stack.vertex_endpoint`` set): the REST transport against
  ``http://127.0.0.1:PORT`` with anonymous credentials; the transport keeps an explicit
  ``http://`` scheme (see ``_BaseJobServiceRestTransport.__init__`` in the installed sources).

Failures are kept apart the way SkyPilot does: transient ones (503, 429 while polling, a lapsed
token) are retried with exponential backoff by ``google.api_core.retry.Retry``; everything else
becomes a ``VertexError`` whose message says what to do. Creating a job is the exception: it is
not idempotent, so ``Vertex.create`` checks whether a failed attempt landed before retrying.
aiplatform is imported lazily."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jobs.catalog import load_catalog
from jobs.contract import LABEL_RUN_ID
from jobs.plan import Plan
from jobs.stack import StackOutputs

if TYPE_CHECKING:
    from google.api_core.retry import Retry
    from google.cloud import aiplatform_v1

log = logging.getLogger(__name__)

TERMINAL_STATES = ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED")
QUOTA_METRIC = re.compile(r"aiplatform\.googleapis\.com/[a-z0-9_]+")


class VertexError(Exception):
    """An API failure explained: what happened and what to do."""


@dataclass(frozen=True)
class Backoff:
    """Retry schedule for transient errors (seconds); tests shrink it."""

    initial_s: float = 1.0
    maximum_s: float = 30.0
    multiplier: float = 2.0
    deadline_s: float = 300.0


def parent(stack: StackOutputs) -> str:
    return f"projects/{stack.project}/locations/{stack.region}"


def make_client(stack: StackOutputs) -> aiplatform_v1.JobServiceClient:
    from google.cloud import aiplatform_v1

    if stack.vertex_endpoint:
        from google.auth.credentials import AnonymousCredentials

        return aiplatform_v1.JobServiceClient(
            transport="rest",
            credentials=AnonymousCredentials(),
            client_options={"api_endpoint": stack.vertex_endpoint},
        )
    return aiplatform_v1.JobServiceClient(
        client_options={"api_endpoint": f"{stack.region}-aiplatform.googleapis.com"}
    )


def _retry(backoff: Backoff) -> Retry:
    """For calls that are safe to repeat (all but create): 503s, rate limits (429), gateway
    timeouts and a token that lapsed between refreshes (401) all pass on their own."""
    from google.api_core import exceptions, retry

    transient = (
        exceptions.ServiceUnavailable,
        exceptions.TooManyRequests,
        exceptions.ResourceExhausted,
        exceptions.DeadlineExceeded,
        exceptions.GatewayTimeout,
        exceptions.Unauthenticated,
    )

    def on_error(exc: Exception) -> None:
        log.warning("transient Vertex error, retrying: %s", exc)

    return retry.Retry(
        predicate=retry.if_exception_type(*transient),
        initial=backoff.initial_s,
        maximum=backoff.maximum_s,
        multiplier=backoff.multiplier,
        timeout=backoff.deadline_s,
        on_error=on_error,
    )


def _quota_entry(metric: str, units: int | None) -> str | None:
    """The stack config entry that requests ``metric`` (infra's vtx:platform ``quotas`` list)."""
    for acc in load_catalog().accelerators.values():
        for spot in (False, True):
            if acc.quota_key and acc.metric(spot) == metric:
                count = f"count: {units}" if units else "count: N"
                return f"{{accelerator: {acc.name}, {count}, spot: {str(spot).lower()}}}"
    return None


def quota_message(exc: Exception, stack: StackOutputs, needed: dict[str, int] | None) -> str:
    """A 429 on create: name the metric and point at the stack's quota config."""
    needed = needed or {}
    metrics = sorted(set(QUOTA_METRIC.findall(str(exc))))
    if not metrics:
        metrics = sorted(m for m in needed if "gpus" in m or "tpu" in m) or sorted(needed)
    wanted = ", ".join(f"{m} (this job needs {needed[m]})" if m in needed else m for m in metrics)
    entries = [e for m in metrics if (e := _quota_entry(m, needed.get(m)))]
    where = f"Pulumi.{stack.environment}.yaml under vtx:platform quotas"
    fix = f"add {'; '.join(entries)} to {where}" if entries else f"raise it in {where}"
    return (
        f"quota exceeded in {stack.region}: {wanted or 'unknown metric'}. To fix: {fix}, then "
        "`pulumi up` (Cloud Quotas may take a while to grant it); or pick a smaller machine, or "
        f"`--set scheduling.strategy=spot` to use the preemptible quota. Vertex said: {exc}"
    )


def explain(
    exc: Exception, stack: StackOutputs, needed: dict[str, int] | None = None
) -> VertexError:
    from google.api_core import exceptions

    if isinstance(exc, exceptions.ResourceExhausted | exceptions.TooManyRequests):
        return VertexError(quota_message(exc, stack, needed))
    if isinstance(exc, exceptions.PermissionDenied):
        return VertexError(
            f"permission denied in {stack.project}: the submitter needs roles/aiplatform.user and "
            f"roles/iam.serviceAccountUser on {stack.trainer_service_account}. Vertex said: {exc}"
        )
    if isinstance(exc, exceptions.Unauthenticated):
        return VertexError(
            f"not authenticated: run `gcloud auth application-default login`. Vertex said: {exc}"
        )
    if isinstance(exc, exceptions.BadRequest):  # InvalidArgument and FailedPrecondition too
        return VertexError(
            f"Vertex rejected the job: {exc}. `vtx validate` did not catch this: please report it "
            "with the output of `vtx render --format json`."
        )
    if isinstance(exc, exceptions.NotFound):
        return VertexError(f"not found: {exc}")
    if isinstance(exc, exceptions.ServiceUnavailable | exceptions.RetryError):
        return VertexError(f"Vertex stayed unavailable after retries: {exc}. Try again later.")
    return VertexError(f"Vertex API error: {exc}")


@dataclass(frozen=True)
class Submitted:
    job: aiplatform_v1.CustomJob
    attempt: int
    """1 for a new run; more when a run is resubmitted (it resumes from its checkpoints)."""


class Vertex:
    """The JobService calls vtx makes, with retries and explained errors."""

    def __init__(
        self,
        stack: StackOutputs,
        client: aiplatform_v1.JobServiceClient | None = None,
        backoff: Backoff = Backoff(),
    ) -> None:
        self.stack = stack
        self.client = client or make_client(stack)
        self.backoff = backoff

    def _call(
        self,
        method: str,
        needed: dict[str, int] | None = None,
        *,
        retry: bool = True,
        **kwargs: Any,
    ) -> Any:
        import requests
        from google.api_core import exceptions

        try:
            return getattr(self.client, method)(
                **kwargs, retry=_retry(self.backoff) if retry else None
            )
        except exceptions.GoogleAPICallError as exc:
            raise explain(exc, self.stack, needed) from exc
        except exceptions.RetryError as exc:
            raise explain(exc, self.stack, needed) from exc
        except requests.RequestException as exc:
            # The REST transport (the local platform) lets connection failures through as is.
            where = self.stack.vertex_endpoint or f"{self.stack.region}-aiplatform.googleapis.com"
            local = " Is the local platform up? `vtx local status`." if self.stack.is_local else ""
            raise VertexError(f"cannot reach Vertex AI at {where}: {exc}.{local}") from exc

    def create(
        self,
        job: aiplatform_v1.CustomJob,
        needed: dict[str, int] | None = None,
        existing: Collection[str] | None = None,
    ) -> aiplatform_v1.CustomJob:
        """Submit ``job``, retrying 503s without ever starting it twice.

        CreateCustomJob is not idempotent and a 503 can arrive after Vertex accepted the job; a
        blind retry would start a second attempt writing the same checkpoint prefix. So before
        each retry, look for a job of this run (its ``vtx-run-id`` label) that was not there
        before the first try (``existing``: the run's job names, listed here if not given), and
        return it if one landed."""
        from google.api_core import exceptions

        run_id = job.labels.get(LABEL_RUN_ID)
        if existing is None:
            existing = {j.name for j in self.list(run_id)} if run_id else set()
        delay_s, deadline = self.backoff.initial_s, time.monotonic() + self.backoff.deadline_s
        while True:
            try:
                return self._call(
                    "create_custom_job",
                    needed,
                    retry=False,
                    parent=parent(self.stack),
                    custom_job=job,
                )
            except VertexError as err:
                transient = isinstance(err.__cause__, exceptions.ServiceUnavailable)
                if not transient or time.monotonic() + delay_s > deadline:
                    raise
                log.warning("transient Vertex error on create, checking before retrying: %s", err)
            time.sleep(delay_s)
            delay_s = min(delay_s * self.backoff.multiplier, self.backoff.maximum_s)
            landed = [j for j in self.list(run_id) if j.name not in existing] if run_id else []
            if landed:
                return landed[0]

    def submit(self, plan: Plan) -> Submitted:
        """The submit stage: create the planned job as the next attempt of its run. Refused while
        an earlier attempt is still live: two attempts would write one checkpoint prefix."""
        run_id = plan.job.run_id
        attempts = self.list(run_id)
        live = [j for j in attempts if not is_terminal(j)]
        if live:
            raise VertexError(
                f"run {run_id} is still active as {live[0].name} ({state_name(live[0])}): "
                f"`vtx cancel {run_id}` first, or wait for it to end"
            )
        created = self.create(
            plan.job.to_proto(),
            needed=plan.quota,
            existing={j.name for j in attempts},  # listed just above: no second request
        )
        return Submitted(created, attempt=len(attempts) + 1)

    def get(self, name: str) -> aiplatform_v1.CustomJob:
        return self._call("get_custom_job", name=name)

    def cancel(self, name: str) -> None:
        self._call("cancel_custom_job", name=name)

    def list(self, run_id: str | None = None) -> list[aiplatform_v1.CustomJob]:
        """Jobs vtx launched in this stack (newest first), optionally one run's attempts.

        The filter also runs client-side: a server that ignores ``filter`` still gives the right
        answer."""
        from google.cloud import aiplatform_v1

        wanted = f'labels.{LABEL_RUN_ID}="{run_id}"' if run_id else f"labels.{LABEL_RUN_ID}:*"
        request = aiplatform_v1.ListCustomJobsRequest(parent=parent(self.stack), filter=wanted)
        pager = self._call("list_custom_jobs", request=request)
        jobs = [
            j
            for j in pager  # the pager fetches further pages itself
            if LABEL_RUN_ID in j.labels and (run_id is None or j.labels[LABEL_RUN_ID] == run_id)
        ]
        return sorted(jobs, key=lambda j: j.create_time, reverse=True)

    def resolve(self, ref: str) -> aiplatform_v1.CustomJob:
        """A job by full resource name, numeric id, or run id (its newest attempt)."""
        if ref.startswith("projects/"):
            return self.get(ref)
        if ref.isdigit():
            return self.get(f"{parent(self.stack)}/customJobs/{ref}")
        attempts = self.list(run_id=ref)
        if not attempts:
            raise VertexError(f"no job with run id {ref!r} in {parent(self.stack)}: see `vtx list`")
        return attempts[0]


def state_name(job: aiplatform_v1.CustomJob) -> str:
    return job.state.name if hasattr(job.state, "name") else str(job.state)


def is_terminal(job: aiplatform_v1.CustomJob) -> bool:
    return state_name(job) in TERMINAL_STATES
