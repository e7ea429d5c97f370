"""Vertex over plain REST (requests and google-auth, no aiplatform import): the calls that watch
and stop jobs, studies and persistent resources, and the layer the other REST clients
(`jobs.serving.endpoint_rest`, `jobs.serving.model_rest`) stand on: the stack's session, the
regional URL, retries of transient answers, paging, and errors worded by `jobs.vertex.errors`.
Importing aiplatform_v1 takes 3-5 s on a loaded machine, most of what `vtx status`, `vtx list`,
`vtx logs` and `vtx local preempt` used to spend."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from functools import cached_property
from typing import Any

from jobs.core.contract import LABEL_RUN_ID, region_of
from jobs.core.stack import StackOutputs
from jobs.core.states import FINAL, JobState
from jobs.vertex.errors import NOT_FOUND, VertexError, explain_status, unreachable
from jobs.vertex.google_session import NotAuthenticated, error_said, follow_pages, rest_session
from jobs.vertex.job_records import NEVER, JobRecord, rfc3339
from jobs.vertex.locations import parent, region_endpoint
from jobs.vertex.retry import Backoff

log = logging.getLogger(__name__)

TRANSIENT_HTTP = frozenset({401, 429, 503, 504})
"""Worth repeating for calls that are safe to repeat: a lapsed token, rate limits, an unavailable
backend, a gateway timeout (the REST twin of ``_retry``'s exception types)."""
LIST_PAGE_SIZE = 100
PERSISTENT_RESOURCES = "persistentResources"


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
        response = self.call(method, path, timeout=30, **kwargs)
        return response.json() if response.content else {}

    def call(
        self,
        method: str,
        path: str,
        *,
        timeout: float,
        explained: Callable[[int, str], VertexError] | None = None,
        what: str = "Vertex error",
        **kwargs: Any,
    ) -> Any:
        """The answer to a call that is safe to repeat, repeated with backoff while it is
        transient; a final failure is worded by ``explained(code, said)`` (default
        ``explain_status``). ``what`` names the failure in the retry warning."""
        response = self.answer(method, path, timeout=timeout, what=what, **kwargs)
        if response.ok:
            return response
        code, said = response.status_code, error_message(response)
        raise (explained or self._explained)(code, said)

    def answer(
        self, method: str, path: str, *, timeout: float, what: str = "Vertex error", **kwargs: Any
    ) -> Any:
        """The final answer to a call that is safe to repeat, an error too, after retrying with
        backoff while it is transient (``call`` raises the error; a cancel reads it)."""
        import requests

        delay_s, deadline = self.backoff.initial_s, time.monotonic() + self.backoff.deadline_s
        while True:
            try:
                response = self.session.request(method, self.url(path), timeout=timeout, **kwargs)
            except requests.RequestException as exc:
                raise unreachable(self.stack, exc) from exc
            code = response.status_code
            final = code not in TRANSIENT_HTTP or time.monotonic() + delay_s > deadline
            if response.ok or final:
                return response
            log.warning("transient %s, retrying: HTTP %d %s", what, code, error_message(response))
            self.sleep(delay_s)
            delay_s = min(delay_s * self.backoff.multiplier, self.backoff.maximum_s)

    def _explained(self, code: int, said: str) -> VertexError:
        return explain_status(code, said, self.stack)

    def get(self, name: str) -> JobRecord:
        return JobRecord.from_rest(self._request("GET", name))

    def cancel(self, name: str) -> None:
        self._request("POST", f"{name}:cancel", json={})

    def cancel_answer(self, name: str) -> tuple[int, str]:
        """Vertex's answer to a cancel of the job or study ``name``, its HTTP status and body
        (transient ones retried), as `jobs.control.cancels` reads it."""
        response = self.answer("POST", f"{name}:cancel", timeout=30, json={})
        return response.status_code, response.text

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


def error_message(response: Any) -> str:
    """Google's error shape ``{"error": {"message"}}``, else the status line."""
    said = error_said(response)
    return f"HTTP {response.status_code} {response.reason}" if said is None else said
