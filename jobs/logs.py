"""Logs of a logical run: every attempt (Vertex's own restarts and resubmissions with the same
run id), merged in time order.

- Locally: the local control plane's ``GET {vertex_endpoint}/vtx/logs?run_id=RUN&cursor=N``
  -> ``{"entries": [...], "cursor": N2}`` (contract agreed with jobs/local).
- On GCP: Cloud Logging's REST API (``entries:list``) with ``resource.type="ml_job"`` and the
  run's job ids, through google-auth's AuthorizedSession: no extra dependency, and the same
  credentials the launcher already uses. The ``task_name`` label naming the replica is
  UNCONFIRMED beyond Google's samples; entries without it show the job id only."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

LOGGING_API = "https://logging.googleapis.com/v2/entries:list"


class LogsError(Exception):
    """Logs could not be read (the message says from where and why)."""


@dataclass(frozen=True)
class LogEntry:
    timestamp: str
    job: str
    replica: str
    attempt: int
    message: str

    def line(self) -> str:
        return f"{self.timestamp} [{self.attempt}:{self.replica}] {self.message}"


class LogSource(Protocol):
    def fetch(self, cursor: Any) -> tuple[list[LogEntry], Any]:
        """Entries after ``cursor`` (None: from the start) and the cursor to continue from."""
        ...


class LocalLogSource:
    """The local platform's per-replica logs, served by its control plane."""

    def __init__(
        self,
        endpoint: str,
        run_id: str | None,
        timeout_s: float = 10.0,
        job: str | None = None,
        token: str = "",
    ) -> None:
        """Logs of run ``run_id``, or of the one ``job`` (a job not launched by vtx); ``token``
        is the platform's (StackOutputs.local_token)."""
        self.url = f"{endpoint.rstrip('/')}/vtx/logs"
        self.run_id = run_id
        self.job = job
        self.timeout_s = timeout_s
        self.token = token

    def fetch(self, cursor: Any) -> tuple[list[LogEntry], Any]:
        """Every entry after ``cursor``: the control plane serves pages of at most 1000, so
        this reads pages until one comes back empty."""
        entries: list[LogEntry] = []
        while True:
            page, cursor = self._page(cursor)
            if not page:
                return entries, cursor
            entries += page

    def _page(self, cursor: Any) -> tuple[list[LogEntry], Any]:
        import requests

        which = {"job": self.job} if self.job else {"run_id": self.run_id}
        try:
            response = requests.get(
                self.url,
                params={**which, "cursor": cursor or 0},
                headers={"Authorization": f"Bearer {self.token}"},
                timeout=self.timeout_s,
            )
            response.raise_for_status()
            body = response.json()
        except requests.RequestException as exc:
            raise LogsError(
                f"cannot read logs from the local platform at {self.url}: {exc} "
                "(is it up? `vtx local status`)"
            ) from exc
        entries = [
            LogEntry(
                timestamp=str(e.get("timestamp", "")),
                job=str(e.get("job", "")),
                replica=str(e.get("replica", "")),
                attempt=int(e.get("attempt", 0)),
                message=str(e.get("message", "")).rstrip("\n"),
            )
            for e in body.get("entries", [])
        ]
        return entries, body.get("cursor", cursor)


def cloud_logging_filter(job_ids: list[str], after: str | None = None) -> str:
    ids = " OR ".join(f'resource.labels.job_id="{j}"' for j in job_ids)
    query = f'resource.type="ml_job" AND ({ids})'
    return f'{query} AND timestamp>="{after}"' if after else query


def _message(entry: dict) -> str:
    if "textPayload" in entry:
        return str(entry["textPayload"]).rstrip("\n")
    payload = entry.get("jsonPayload") or {}
    return str(payload.get("message", payload)).rstrip("\n")


class CloudLoggingSource:
    """Cloud Logging entries of a run's jobs; ``jobs()`` returns (job name, attempt) pairs and is
    called on every fetch so a resubmission's logs join the stream."""

    def __init__(
        self,
        project: str,
        jobs: Callable[[], list[tuple[str, int]]],
        session: Any = None,
        api_url: str = LOGGING_API,
    ) -> None:
        self.project = project
        self.jobs = jobs
        self._session = session
        self.api_url = api_url

    @property
    def session(self) -> Any:
        if self._session is None:
            import google.auth
            from google.auth.transport.requests import AuthorizedSession

            credentials, _ = google.auth.default(
                scopes=["https://www.googleapis.com/auth/logging.read"]
            )
            self._session = AuthorizedSession(credentials)
        return self._session

    def fetch(self, cursor: Any) -> tuple[list[LogEntry], Any]:
        """``cursor`` is (last timestamp, insertIds seen at it): the next query asks for
        ``timestamp>=`` that time and drops the ids already shown, so entries sharing a
        timestamp across two fetches are neither lost nor repeated."""
        attempts = {name.rsplit("/", 1)[-1]: (name, n) for name, n in self.jobs()}
        if not attempts:
            return [], cursor
        after, seen = cursor if cursor else (None, frozenset())
        body: dict[str, Any] = {
            "resourceNames": [f"projects/{self.project}"],
            "filter": cloud_logging_filter(sorted(attempts), after),
            "orderBy": "timestamp asc",
            "pageSize": 1000,
        }
        raw_entries: list[dict] = []
        while True:
            page = self._post(body)
            raw_entries += [e for e in page.get("entries", []) if e.get("insertId") not in seen]
            if not page.get("nextPageToken"):
                break
            body["pageToken"] = page["nextPageToken"]
        entries = [self._entry(raw, attempts) for raw in raw_entries]
        if not entries:
            return [], cursor
        last = entries[-1].timestamp
        ids = {e.get("insertId") for e in raw_entries if str(e.get("timestamp", "")) == last}
        if last == after:
            ids |= seen
        return entries, (last, frozenset(ids))

    def _post(self, body: dict[str, Any]) -> dict:
        import requests

        try:
            response = self.session.post(self.api_url, json=body, timeout=30)
            response.raise_for_status()
            return response.json()
        except requests.RequestException as exc:
            raise LogsError(f"Cloud Logging query failed: {exc}") from exc

    @staticmethod
    def _entry(raw: dict, attempts: dict[str, tuple[str, int]]) -> LogEntry:
        resource_labels = raw.get("resource", {}).get("labels", {})
        name, attempt = attempts.get(resource_labels.get("job_id", ""), ("", 0))
        replica = raw.get("labels", {}).get("ml.googleapis.com/task_name") or resource_labels.get(
            "task_name", ""
        )
        return LogEntry(str(raw.get("timestamp", "")), name, replica, attempt, _message(raw))


def stream(
    source: LogSource,
    done: Callable[[], bool],
    follow: bool,
    poll_s: float = 2.0,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[LogEntry]:
    """Entries until the source is drained (``follow``: until ``done()`` and then drained)."""
    cursor: Any = None
    while True:
        finished = follow and done()  # read before fetching so the last lines are not lost
        entries, cursor = source.fetch(cursor)
        yield from entries
        if not follow or (finished and not entries):
            return
        if not entries:
            sleep(poll_s)
