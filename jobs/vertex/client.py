"""Submitting and tracking CustomJobs with the real `google-cloud-aiplatform` JobServiceClient.

- GCP stacks: the regional endpoint ``{region}-aiplatform.googleapis.com`` with default
  credentials (google-auth refreshes expired tokens itself).
- The local platform (``stack.vertex_endpoint`` set): the REST transport against
  ``http://127.0.0.1:PORT`` with anonymous credentials; the transport keeps an explicit
  ``http://`` scheme (see ``_BaseJobServiceRestTransport.__init__`` in the installed sources).

Failures are kept apart the way SkyPilot does: transient ones (503, 429 while polling, a lapsed
token) are retried with exponential backoff by ``google.api_core.retry.Retry``; everything else
becomes a ``VertexError`` whose message says what to do. Creating a job is the exception: it is
not idempotent, so ``Vertex.create`` checks whether a failed request landed before sending it
again. aiplatform is imported lazily, and only by the calls that need it.

Watching (``VertexRest``: get, list, resolve, cancel) goes over plain REST with requests and
google-auth and returns ``JobRecord`` views of the REST JSON: importing aiplatform_v1 takes
3-5 s on a loaded machine, most of what `vtx status`, `vtx list`, `vtx logs` and
`vtx local preempt` used to spend."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeVar

from jobs.core.catalog import load_catalog
from jobs.core.contract import LABEL_RUN_ID, region_of
from jobs.core.stack import StackOutputs
from jobs.core.states import FINAL, JobState, is_final, rest_name
from jobs.vertex.google_session import NotAuthenticated, follow_pages, rest_session
from jobs.vertex.retry import Backoff, create_once

if TYPE_CHECKING:
    from google.api_core.retry import Retry
    from google.cloud import aiplatform_v1

log = logging.getLogger(__name__)
T = TypeVar("T")

QUOTA_METRIC = re.compile(r"aiplatform\.googleapis\.com/[a-z0-9_]+")
TRANSIENT_HTTP = frozenset({401, 429, 503, 504})
"""Worth repeating for calls that are safe to repeat: a lapsed token, rate limits, an unavailable
backend, a gateway timeout (the REST twin of ``_retry``'s exception types)."""
LIST_PAGE_SIZE = 100
PERSISTENT_RESOURCES = "persistentResources"
NEVER = datetime.min.replace(tzinfo=UTC)
"""Sorts a job without a createTime (never seen from Vertex) before every other."""


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


def parent(stack: StackOutputs, region: str | None = None) -> str:
    """Where a job of the stack lives: its own region, or one of its further ones."""
    return f"projects/{stack.project}/locations/{region or stack.region}"


def region_endpoint(region: str) -> str:
    """Vertex's regional endpoint: a job is created and read in its own region only."""
    return f"{region}-aiplatform.googleapis.com"


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
        self, study: aiplatform_v1.HyperparameterTuningJob, needed: dict[str, int], region: str
    ) -> aiplatform_v1.HyperparameterTuningJob:
        """Create a planned study as its run, retrying 503s without starting it twice.

        As ``create``: CreateHyperparameterTuningJob is not idempotent, so before a retry the
        run's studies are listed and one that landed is returned. A run is one study: a run id
        that already has one (live or ended) is refused, since its trials' outputs are there."""
        run_id = study.labels[LABEL_RUN_ID]
        if self.list_studies(run_id) or self.list(run_id):
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


# ---- watching over plain REST ----------------------------------------------------------------


def rfc3339(value: object) -> datetime | None:
    """An RFC 3339 timestamp of the REST JSON (``...Z``, up to nanoseconds); None when absent."""
    if not isinstance(value, str) or not value:
        return None
    # fromisoformat (3.11) reads "Z" and truncates digits past microseconds itself.
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def _int(value: object, default: int) -> int:
    """REST JSON writes int64 fields as strings and leaves zero values out."""
    try:
        return int(str(value))
    except ValueError:
        return default


@dataclass(frozen=True)
class PoolRecord:
    """One worker pool as submitted: ``index`` is its position (workerpool0 is the primary).
    A TPU VM pool is submitted with its machine and topology only: its accelerator and count
    are the slice's chips, from the catalog, so it reads as a GPU pool does."""

    index: int
    machine: str
    accelerator: str | None
    accelerator_count: int
    replicas: int

    @property
    def name(self) -> str:
        return f"workerpool{self.index}"

    @property
    def replica_names(self) -> list[str]:
        """Vertex's task names (``workerpool1-0``), as the logs label each replica."""
        return [f"{self.name}-{i}" for i in range(self.replicas)]

    @classmethod
    def from_rest(cls, index: int, spec: dict) -> PoolRecord:
        machine = spec.get("machineSpec") or {}
        accelerator = machine.get("acceleratorType")
        if accelerator in (None, "", "ACCELERATOR_TYPE_UNSPECIFIED"):
            accelerator = None
        count = _int(machine.get("acceleratorCount"), 0) if accelerator else 0
        machine_type = str(machine.get("machineType", ""))
        known = load_catalog().machines.get(machine_type)
        if accelerator is None and known is not None and known.tpu_topologies:
            accelerator, count = load_catalog().replica_accelerators(
                machine_type, None, None, machine.get("tpuTopology")
            )
        return cls(
            index=index,
            machine=machine_type,
            accelerator=accelerator,
            accelerator_count=count,
            # The API defaults an absent replicaCount to 1 for pool 0 only.
            replicas=_int(spec.get("replicaCount"), 1 if index == 0 else 0),
        )


@dataclass(frozen=True)
class JobRecord:
    """A CustomJob as the REST API returns it (camelCase JSON), read once into what watching
    needs; ``rest`` keeps the whole document (for cost:
    `jobs.custom_jobs.facts.facts_from_rest_job`)."""

    name: str
    display_name: str
    state: str
    labels: dict[str, str]
    create_time: datetime | None
    start_time: datetime | None
    end_time: datetime | None
    error: str | None
    output_prefix: str | None
    pools: list[PoolRecord]
    rest: dict = field(repr=False)

    @property
    def job_id(self) -> str:
        return self.name.rsplit("/", 1)[-1]

    @property
    def region(self) -> str:
        """Where it runs: the region in its resource name."""
        return region_of(self.name)

    @property
    def run_id(self) -> str | None:
        return self.labels.get(LABEL_RUN_ID)

    @property
    def terminal(self) -> bool:
        """Whether the job has ended (`jobs.core.states.FINAL`)."""
        return is_final(self.state)

    @classmethod
    def from_rest(cls, job: dict) -> JobRecord:
        spec = job.get("jobSpec") or {}
        pools = [
            PoolRecord.from_rest(i, pool)
            for i, pool in enumerate(spec.get("workerPoolSpecs") or [])
            if pool  # `{}` skips a position (no pool 2, say) but keeps the numbering
        ]
        labels = job.get("labels") or {}
        return cls(
            name=str(job.get("name", "")),
            display_name=str(job.get("displayName", "")),
            state=str(job.get("state", JobState.UNSPECIFIED)),
            labels={str(k): str(v) for k, v in labels.items()},
            create_time=rfc3339(job.get("createTime")),
            start_time=rfc3339(job.get("startTime")),
            end_time=rfc3339(job.get("endTime")),
            error=(job.get("error") or {}).get("message") or None,
            output_prefix=(spec.get("baseOutputDirectory") or {}).get("outputUriPrefix") or None,
            pools=pools,
            rest=job,
        )


def _session(stack: StackOutputs) -> Any:
    try:
        return rest_session(stack)
    except NotAuthenticated as exc:
        raise VertexError(str(exc)) from exc


class VertexRest:
    """The calls that watch and stop jobs (get, list, resolve, cancel) over plain REST: the same
    answers as ``Vertex``'s, as ``JobRecord``s, without importing aiplatform."""

    def __init__(
        self,
        stack: StackOutputs,
        session: Any = None,
        backoff: Backoff = Backoff(),
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.stack = stack
        if session is not None:
            self.session = session
        self.backoff = backoff
        self.sleep = sleep

    def url(self, path: str) -> str:
        """The local platform's one endpoint, or the regional endpoint of the resource's region
        (a job in a further region is read there, not in the stack's own)."""
        endpoint = self.stack.vertex_endpoint or f"https://{region_endpoint(region_of(path))}"
        return f"{endpoint.rstrip('/')}/v1/{path}"

    @cached_property
    def session(self) -> Any:
        """The stack's REST session, made on first use."""
        return _session(self.stack)

    def _request(self, method: str, path: str, **kwargs: Any) -> dict:
        """One call, repeated with backoff while the answer is transient (every call here is
        safe to repeat: reads, and a cancel of a job already cancelling)."""
        import requests

        delay_s, deadline = self.backoff.initial_s, time.monotonic() + self.backoff.deadline_s
        while True:
            try:
                response = self.session.request(method, self.url(path), timeout=30, **kwargs)
            except requests.RequestException as exc:
                raise unreachable(self.stack, exc) from exc
            if response.ok:
                return response.json() if response.content else {}
            said = _error_message(response)
            if response.status_code not in TRANSIENT_HTTP or time.monotonic() + delay_s > deadline:
                raise explain_status(response.status_code, said, self.stack)
            log.warning("transient Vertex error, retrying: HTTP %d %s", response.status_code, said)
            self.sleep(delay_s)
            delay_s = min(delay_s * self.backoff.multiplier, self.backoff.maximum_s)

    def get(self, name: str) -> JobRecord:
        return JobRecord.from_rest(self._request("GET", name))

    def cancel(self, name: str) -> None:
        self._request("POST", f"{name}:cancel", json={})

    def list(self, run_id: str | None = None) -> list[JobRecord]:
        """Jobs vtx launched in this stack (newest first), optionally one run's attempts; the
        filter also runs client-side, as in ``Vertex.list``."""
        jobs = [JobRecord.from_rest(j) for j in self.listed("customJobs", run_id)]
        mine = [j for j in jobs if j.run_id is not None and run_id in (None, j.run_id)]
        return sorted(mine, key=_created, reverse=True)

    def listed(self, collection: str, run_id: str | None = None) -> list[dict]:
        """Every page of a collection (``customJobs``, ``hyperparameterTuningJobs``) in every
        region of the stack, as REST JSON, filtered by vtx's run label (or its presence)."""
        wanted = f'labels.{LABEL_RUN_ID}="{run_id}"' if run_id else f"labels.{LABEL_RUN_ID}:*"
        found: list[dict] = []
        for region in self.stack.job_regions:
            found += self.pages(region, collection, {"filter": wanted})
        return found

    def pages(self, region: str, collection: str, params: dict[str, Any]) -> list[dict]:
        """Every page of one region's collection (REST JSON)."""
        return self.listed_at(f"{parent(self.stack, region)}/{collection}", collection, params)

    def listed_at(self, path: str, key: str, params: dict[str, Any]) -> list[dict]:
        """Every item under ``key`` of every page a List call at ``path`` answers (REST JSON)."""
        first = {**params, "pageSize": LIST_PAGE_SIZE}
        pages = follow_pages(lambda query: self._request("GET", path, params=query), first)
        return [item for page in pages for item in page.get(key, [])]

    def get_study(self, name: str) -> dict:
        """A HyperparameterTuningJob as REST JSON (`jobs.tuning.study_records.StudyRecord` reads
        it)."""
        return self._request("GET", name)

    def cancel_study(self, name: str) -> None:
        self._request("POST", f"{name}:cancel", json={})

    def list_studies(self, run_id: str | None = None) -> list[dict]:
        """HyperparameterTuningJobs vtx launched in this stack, in all its regions, optionally
        one run's (REST JSON, newest first); the filter also runs client-side, as in ``list``."""
        studies = self.listed("hyperparameterTuningJobs", run_id)
        mine = [
            s
            for s in studies
            if (label := (s.get("labels") or {}).get(LABEL_RUN_ID)) is not None
            and run_id in (None, label)
        ]
        return sorted(mine, key=lambda s: rfc3339(s.get("createTime")) or NEVER, reverse=True)

    def persistent_resources(self) -> list[dict]:
        """Every persistent resource in the stack's regions (REST JSON, as listed)."""
        found: list[dict] = []
        for region in self.stack.job_regions:
            found += self.pages(region, PERSISTENT_RESOURCES, {})
        return found

    def persistent_resource(self, ref: str) -> dict:
        """A persistent resource by full name, or by id in the first of the stack's regions
        that has it (REST JSON)."""
        if ref.startswith("projects/"):
            return self._request("GET", ref)
        regions = self.stack.job_regions
        for region in regions[:-1]:
            try:
                return self._request(
                    "GET", f"{parent(self.stack, region)}/{PERSISTENT_RESOURCES}/{ref}"
                )
            except VertexError as err:
                if err.http_code != NOT_FOUND:
                    raise
        return self._request(
            "GET", f"{parent(self.stack, regions[-1])}/{PERSISTENT_RESOURCES}/{ref}"
        )

    def unfinished_jobs(self, region: str) -> list[JobRecord]:
        """Every CustomJob of the region that has not ended, vtx's or not (a job on a
        persistent resource holds its replicas whoever launched it)."""
        states = " OR ".join(f'state="{s.value}"' for s in JobState if s not in FINAL)
        jobs = self.pages(region, "customJobs", {"filter": states})
        return sorted((JobRecord.from_rest(j) for j in jobs), key=_created, reverse=True)

    def jobs_since(self, region: str, since: datetime) -> list[JobRecord]:
        """Every CustomJob of the region that has not ended or was created at or after
        ``since`` (one listing: ListCustomJobs' filter takes ``create_time>=`` and ``state=``
        joined by OR), vtx's or not, newest first."""
        states = " OR ".join(f'state="{s.value}"' for s in JobState if s not in FINAL)
        created = f'create_time>="{since.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}"'
        jobs = self.pages(region, "customJobs", {"filter": f"{created} OR {states}"})
        return sorted((JobRecord.from_rest(j) for j in jobs), key=_created, reverse=True)

    def resolve(self, ref: str) -> JobRecord:
        """A job by full resource name, numeric id, or run id (its newest attempt)."""
        if ref.startswith("projects/"):
            return self.get(ref)
        if ref.isdigit():
            return self._by_id(ref)
        attempts = self.list(run_id=ref)
        if not attempts:
            raise VertexError(f"no job with run id {ref!r} in {parent(self.stack)}: see `vtx list`")
        return attempts[0]

    def _by_id(self, job_id: str) -> JobRecord:
        """A job by numeric id, looked for in each of the stack's regions in turn."""
        regions = self.stack.job_regions
        for region in regions[:-1]:
            try:
                return self.get(f"{parent(self.stack, region)}/customJobs/{job_id}")
            except VertexError as err:
                if err.http_code != NOT_FOUND:
                    raise
        return self.get(f"{parent(self.stack, regions[-1])}/customJobs/{job_id}")


def _created(job: JobRecord) -> datetime:
    return job.create_time or NEVER


def _error_message(response: Any) -> str:
    """Google's error shape ``{"error": {"message"}}``, else the status line."""
    try:
        return str(response.json()["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return f"HTTP {response.status_code} {response.reason}"
