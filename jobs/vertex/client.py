"""Submitting CustomJobs and studies with the real `google-cloud-aiplatform` JobServiceClient.

- GCP stacks: the regional endpoint ``{region}-aiplatform.googleapis.com`` with default
  credentials (google-auth refreshes expired tokens itself).
- The local platform (``stack.vertex_endpoint`` set): the REST transport against
  ``http://127.0.0.1:PORT`` with anonymous credentials; the transport keeps an explicit
  ``http://`` scheme (see ``_BaseJobServiceRestTransport.__init__`` in the installed sources).

Failures are kept apart the way SkyPilot does: transient ones (503, 429 while polling, a lapsed
token) are retried with exponential backoff by ``google.api_core.retry.Retry``; everything else
becomes a ``VertexError`` (`jobs.vertex.errors`) whose message says what to do. Creating a job
is the exception: it is not idempotent, so ``Vertex.create`` checks whether a failed request
landed before sending it again. aiplatform is imported lazily, and only by the calls that need
it. Watching and stopping go over plain REST (`jobs.vertex.rest.VertexRest`)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from jobs.core.contract import LABEL_RUN_ID, region_of
from jobs.core.stack import StackOutputs
from jobs.core.states import is_final, rest_name
from jobs.vertex.errors import VertexError, explain, still_active, unreachable
from jobs.vertex.locations import parent, region_endpoint
from jobs.vertex.retry import Backoff, create_once

if TYPE_CHECKING:
    from google.api_core.retry import Retry
    from google.cloud import aiplatform_v1

log = logging.getLogger(__name__)
T = TypeVar("T")


def service_client(client_class: Any, stack: StackOutputs, region: str | None = None) -> Any:
    """An aiplatform_v1 service client (JobService, ModelService, EndpointService...) for the
    stack: the local platform's one endpoint over REST, else the region's own endpoint."""
    if stack.vertex_endpoint:
        from google.auth.credentials import AnonymousCredentials

        return client_class(
            transport="rest",
            credentials=AnonymousCredentials(),
            client_options={"api_endpoint": stack.vertex_endpoint},
        )
    return client_class(client_options={"api_endpoint": region_endpoint(region or stack.region)})


def make_client(stack: StackOutputs, region: str | None = None) -> aiplatform_v1.JobServiceClient:
    from google.cloud import aiplatform_v1

    return service_client(aiplatform_v1.JobServiceClient, stack, region)


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


def create_and_wait(
    stack: StackOutputs,
    what: str,
    send: Callable[[], T],
    landed: Callable[[], T | None],
    backoff: Backoff,
    timeout_s: float,
    shown_by: str,
    explained: Callable[[Exception], VertexError] | None = None,
) -> T:
    """``create_once`` for a call whose long-running operation ``send`` waits for (an upload,
    an endpoint, a deployment): every way it can fail said in the user's words. ``explained``
    words an API error (default ``explain``); ``shown_by`` is the command that shows the
    resource once an operation outlives ``timeout_s``."""
    import requests
    from google.api_core import exceptions

    try:
        return create_once(send, landed, backoff, what)
    except (exceptions.GoogleAPICallError, exceptions.RetryError) as exc:
        raise (explained(exc) if explained else explain(exc, stack)) from exc
    except TimeoutError as exc:
        raise VertexError(
            f"the {what} is still running after {timeout_s:.0f} s: {shown_by} shows it once done"
        ) from exc
    except requests.RequestException as exc:
        # The REST transport (the local platform) lets connection failures through as is.
        raise unreachable(stack, exc) from exc


@dataclass(frozen=True)
class Submitted:
    job: aiplatform_v1.CustomJob
    attempt: int
    """1 for a new run; more when a run is resubmitted (it resumes from its checkpoints)."""


class Vertex:
    """Submitting through the SDK's JobServiceClient, with retries and explained errors (watching
    and stopping use `VertexRest`, which needs no aiplatform import)."""

    def __init__(
        self,
        stack: StackOutputs,
        client: aiplatform_v1.JobServiceClient | None = None,
        backoff: Backoff = Backoff(),
    ) -> None:
        self.stack = stack
        self._client = client
        self._clients: dict[str, aiplatform_v1.JobServiceClient] = {}
        self.backoff = backoff

    @property
    def client(self) -> aiplatform_v1.JobServiceClient:
        """The stack's own region's client."""
        return self.client_for(self.stack.region)

    def client_for(self, region: str) -> aiplatform_v1.JobServiceClient:
        """Built on first use: constructing one imports aiplatform_v1 (seconds). A client given
        to the constructor serves every region (tests, the local platform's one endpoint)."""
        if self._client is not None:
            return self._client
        if region not in self._clients:
            self._clients[region] = make_client(self.stack, region)
        return self._clients[region]

    def _call(
        self,
        method: str,
        needed: dict[str, int] | None = None,
        *,
        retry: bool = True,
        region: str | None = None,
        **kwargs: Any,
    ) -> Any:
        import requests
        from google.api_core import exceptions

        try:
            return getattr(self.client_for(region or self.stack.region), method)(
                **kwargs, retry=_retry(self.backoff) if retry else None
            )
        except exceptions.GoogleAPICallError as exc:
            raise explain(exc, self.stack, needed) from exc
        except exceptions.RetryError as exc:
            raise explain(exc, self.stack, needed) from exc
        except requests.RequestException as exc:
            # The REST transport (the local platform) lets connection failures through as is.
            raise unreachable(self.stack, exc) from exc

    def create(
        self,
        job: aiplatform_v1.CustomJob,
        needed: dict[str, int] | None = None,
        existing: Collection[str] | None = None,
        region: str | None = None,
    ) -> aiplatform_v1.CustomJob:
        """Submit ``job``, retrying 503s without ever starting it twice.

        CreateCustomJob is not idempotent and a 503 can arrive after Vertex accepted the job; a
        blind retry would start a second attempt writing the same checkpoint prefix. So before
        each retry, look for a job of this run (its ``vtx-run-id`` label) that was not there
        before the first try (``existing``: the run's job names, listed here if not given), and
        return it if one landed. ``region``: one of the stack's job regions (default its own)."""
        run_id = job.labels.get(LABEL_RUN_ID)
        if existing is None:
            existing = {j.name for j in self.list(run_id)} if run_id else set()
        before = set(existing)

        def send() -> aiplatform_v1.CustomJob:
            return self._call(
                "create_custom_job",
                needed,
                retry=False,
                region=region,
                parent=parent(self.stack, region),
                custom_job=job,
            )

        def landed() -> aiplatform_v1.CustomJob | None:
            new = [j for j in self.list(run_id) if j.name not in before] if run_id else []
            return new[0] if new else None

        return create_once(send, landed, self.backoff, "create")

    def submit(
        self, job: aiplatform_v1.CustomJob, needed: dict[str, int], region: str
    ) -> Submitted:
        """The submit stage: create a planned job (its proto, the quota it needs, its region) as
        the next attempt of its run (its ``vtx-run-id`` label). Refused while an earlier attempt
        is still live in any of the stack's regions: two attempts would write one checkpoint
        prefix."""
        run_id = job.labels[LABEL_RUN_ID]
        attempts = self.list(run_id)
        live = [j for j in attempts if not is_terminal(j)]
        if live:
            raise still_active(run_id, live[0].name, state_name(live[0]))
        created = self.create(
            job,
            needed=needed,
            existing={j.name for j in attempts},  # listed just above: no second request
            region=region,
        )
        return Submitted(created, attempt=len(attempts) + 1)

    def get(self, name: str) -> aiplatform_v1.CustomJob:
        return self._call("get_custom_job", region=region_of(name), name=name)

    def list(self, run_id: str | None = None) -> list[aiplatform_v1.CustomJob]:
        """Jobs vtx launched in this stack, in all its regions (newest first), optionally one
        run's attempts.

        The filter also runs client-side: a server that ignores ``filter`` still gives the right
        answer."""
        from google.cloud import aiplatform_v1

        wanted = f'labels.{LABEL_RUN_ID}="{run_id}"' if run_id else f"labels.{LABEL_RUN_ID}:*"
        jobs = []
        for region in self.stack.job_regions:
            request = aiplatform_v1.ListCustomJobsRequest(
                parent=parent(self.stack, region), filter=wanted
            )
            pager = self._call("list_custom_jobs", region=region, request=request)
            jobs += [
                j
                for j in pager  # the pager fetches further pages itself
                if LABEL_RUN_ID in j.labels and (run_id is None or j.labels[LABEL_RUN_ID] == run_id)
            ]
        return sorted(jobs, key=lambda j: j.create_time, reverse=True)

    def list_studies(self, run_id: str) -> list[aiplatform_v1.HyperparameterTuningJob]:
        """One run's HyperparameterTuningJobs in every region of the stack (filtered
        client-side too, as ``list``)."""
        from google.cloud import aiplatform_v1

        studies = []
        for region in self.stack.job_regions:
            request = aiplatform_v1.ListHyperparameterTuningJobsRequest(
                parent=parent(self.stack, region), filter=f'labels.{LABEL_RUN_ID}="{run_id}"'
            )
            pager = self._call("list_hyperparameter_tuning_jobs", region=region, request=request)
            studies += [j for j in pager if j.labels.get(LABEL_RUN_ID) == run_id]
        return studies

    def submit_study(
        self,
        study: aiplatform_v1.HyperparameterTuningJob,
        needed: dict[str, int],
        region: str,
        existing: Collection[str] | None = None,
    ) -> aiplatform_v1.HyperparameterTuningJob:
        """Create a planned study as its run, retrying 503s without starting it twice.

        As ``create``: CreateHyperparameterTuningJob is not idempotent, so before a retry the
        run's studies are listed and one that landed is returned. A run is one study: a run id
        that already has one (live or ended) is refused, since its trials' outputs are there.
        ``existing``: the run's studies and jobs by name, listed here if not given (the
        controller's pass gives its own listing)."""
        run_id = study.labels[LABEL_RUN_ID]
        if existing is None:
            listed = [s.name for s in self.list_studies(run_id)]
            existing = listed + [j.name for j in self.list(run_id)]
        if existing:
            raise VertexError(
                f"run {run_id} already exists: a study is launched once; "
                "launch again without --run-id for a new study"
            )

        def send() -> aiplatform_v1.HyperparameterTuningJob:
            return self._call(
                "create_hyperparameter_tuning_job",
                needed,
                retry=False,
                region=region,
                parent=parent(self.stack, region),
                hyperparameter_tuning_job=study,
            )

        def landed() -> aiplatform_v1.HyperparameterTuningJob | None:
            found = self.list_studies(run_id)
            return found[0] if found else None

        return create_once(send, landed, self.backoff, "create")


def state_name(job: aiplatform_v1.CustomJob) -> str:
    """The job's state by its REST name (``JOB_STATE_RUNNING``)."""
    return rest_name(job.state)


def is_terminal(job: aiplatform_v1.CustomJob) -> bool:
    """Whether the job has ended (`jobs.core.states.FINAL`)."""
    return is_final(job.state)
