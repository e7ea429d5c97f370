"""Logs of a run: every attempt (each CustomJob carrying the run id, numbered from 1 in creation
order), its replicas' restarts and retries included, merged in time order.

- Locally: the local control plane's ``GET {vertex_endpoint}/vtx/logs?run_id=RUN&cursor=N``
  -> ``{"entries": [...], "cursor": N2}`` (contract agreed with jobs/local).
- On GCP: Cloud Logging's REST API (``entries:list``) with ``resource.type="ml_job"`` and the
  run's job ids, through google-auth's AuthorizedSession: no extra dependency, and the same
  credentials the launcher already uses. The ``task_name`` label naming the replica is
  UNCONFIRMED beyond Google's samples; entries without it show the job id only.

Then, for `vtx logs`: each entry's severity (Cloud Logging's, the trainer's JSON ``severity``,
or read off the text of library lines), filters by replica and severity, and two renderings:
readable lines (``HumanFormat``: the trainer's JSON as ``step 40/120 loss 2.31 ...``) and one
JSON object per entry (``json_line``, in Cloud Logging's LogEntry field names).

The words are jobs/runs/watch.py's: an attempt is one CustomJob of the run; a restart starts one
replica again inside it (a preemption, a lost VM, or every replica at once with
``restartJobOnWorkerRestart``); a retry runs every replica of it again after a crash, and so
restarts each of them."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Protocol

from jobs.core.trainer_events import TrainerEvent
from jobs.vertex.google_session import NotAuthenticated, authorized_session, follow_pages

LOGGING_API = "https://logging.googleapis.com/v2/entries:list"
LOGGING_READ_SCOPE = "https://www.googleapis.com/auth/logging.read"
SERVICE = "service"
"""The replica name of the platform's own events (the local platform's; jobs.local says it)."""
SEVERITIES = (
    "DEFAULT",
    "DEBUG",
    "INFO",
    "NOTICE",
    "WARNING",
    "ERROR",
    "CRITICAL",
    "ALERT",
    "EMERGENCY",
)
"""Cloud Logging's LogSeverity names, lowest first: `--severity X` keeps X and above, as
`gcloud logging read 'severity>=X'` does (DEFAULT, a line with no severity, is the lowest)."""


class LogsError(Exception):
    """Logs could not be read (the message says from where and why)."""


@dataclass(frozen=True)
class LogEntry:
    timestamp: str
    job: str
    replica: str
    attempt: int
    """The job's attempt of its run: 1 for its first CustomJob, 2 for a resubmission..."""
    message: str
    severity: str = ""
    """As the source gave it (Cloud Logging does); "" when it gave none (the local platform)."""
    restart: int | None = None
    """Which restart of the replica wrote the line: 0 its first start, 1 its first restart...
    None where that is not known: on Vertex (Cloud Logging does not say) and for the
    platform's own lines."""


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
        entries = [local_entry(e) for e in body.get("entries", [])]
        return entries, body.get("cursor", cursor)


def local_entry(e: dict[str, Any]) -> LogEntry:
    """One entry of the local control plane's ``/vtx/logs`` page."""
    return LogEntry(
        timestamp=str(e.get("timestamp", "")),
        job=str(e.get("job", "")),
        replica=str(e.get("replica", "")),
        attempt=int(e.get("attempt", 1)),
        message=str(e.get("message", "")).rstrip("\n"),
        restart=_restart(e.get("restart")),
    )


def _restart(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def cloud_logging_filter(
    job_ids: list[str], after: str | None = None, min_severity: str = "DEFAULT"
) -> str:
    ids = " OR ".join(f'resource.labels.job_id="{j}"' for j in job_ids)
    query = f'resource.type="ml_job" AND ({ids})'
    if min_severity != "DEFAULT":  # filtered by the API: the entries left out never travel
        query += f" AND severity>={min_severity}"
    return f'{query} AND timestamp>="{after}"' if after else query


def _message(entry: dict) -> str:
    """The line as the replica printed it: a structured entry's payload back as its JSON line
    (Cloud Logging moved its ``severity`` to the entry), so both sources render alike."""
    if "textPayload" in entry:
        return str(entry["textPayload"]).rstrip("\n")
    return json.dumps(entry.get("jsonPayload") or {})


class CloudLoggingSource:
    """Cloud Logging entries of a run's jobs; ``jobs()`` returns (job name, attempt) pairs, the
    attempt numbered from 1 in creation order, and is called on every fetch so a
    resubmission's logs join the stream."""

    def __init__(
        self,
        project: str,
        jobs: Callable[[], list[tuple[str, int]]],
        session: Any = None,
        api_url: str = LOGGING_API,
        min_severity: str = "DEFAULT",
    ) -> None:
        self.project = project
        self.jobs = jobs
        if session is not None:
            self.session = session
        self.api_url = api_url
        self.min_severity = min_severity

    @cached_property
    def session(self) -> Any:
        """Cloud Logging's authorized session, made on first use."""
        return authorized_session(LOGGING_READ_SCOPE)

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
            "filter": cloud_logging_filter(sorted(attempts), after, self.min_severity),
            "orderBy": "timestamp asc",
            "pageSize": 1000,
        }
        raw_entries = [
            entry
            for page in follow_pages(self._post, body)
            for entry in page.get("entries", [])
            if entry.get("insertId") not in seen
        ]
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
        except (requests.RequestException, NotAuthenticated) as exc:
            raise LogsError(f"Cloud Logging query failed: {exc}") from exc

    @staticmethod
    def _entry(raw: dict, attempts: dict[str, tuple[str, int]]) -> LogEntry:
        resource_labels = raw.get("resource", {}).get("labels", {})
        name, attempt = attempts.get(resource_labels.get("job_id", ""), ("", 1))
        replica = raw.get("labels", {}).get("ml.googleapis.com/task_name") or resource_labels.get(
            "task_name", ""
        )
        return LogEntry(
            str(raw.get("timestamp", "")),
            name,
            replica,
            attempt,
            _message(raw),
            str(raw.get("severity", "")),
        )


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


# -- severity, filters and rendering --------------------------------------------------------------

# Library lines are plain text with no severity; these are how the ones met in our jobs say it.
_TEXT_SEVERITY = (
    # glog, as torch's C++ side and torch elastic print: "W1123 15:12:58.837000 9286 api.py:753]"
    (re.compile(r"^([DIWEF])\d{4} \d\d:\d\d:\d\d"), None),
    # Python's logging.basicConfig format: "WARNING:torch.distributed:..."
    (re.compile(r"^(DEBUG|INFO|WARNING|ERROR|CRITICAL):\S*:"), None),
    # warnings.warn: "/path/modeling_utils.py:3303: FutureWarning: ..."
    (re.compile(r"^\S+:\d+: \w*Warning: "), "WARNING"),
    (re.compile(r"^Traceback \(most recent call last\):"), "ERROR"),
)
_GLOG = {"D": "DEBUG", "I": "INFO", "W": "WARNING", "E": "ERROR", "F": "CRITICAL"}


def severity_named(name: str) -> str:
    """A severity as a user writes it (any case; WARN for WARNING), or ValueError naming the
    ones there are."""
    upper = name.strip().upper()
    upper = {"WARN": "WARNING", "FATAL": "CRITICAL"}.get(upper, upper)
    if upper not in SEVERITIES:
        raise ValueError(f"unknown severity {name!r}; one of {', '.join(SEVERITIES)}")
    return upper


def payload(message: str) -> dict[str, Any] | None:
    """The JSON object a structured line holds (the trainer's log lines), or None."""
    if not message.startswith("{"):
        return None
    try:
        data = json.loads(message)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _text_severity(message: str) -> str:
    for pattern, severity in _TEXT_SEVERITY:
        match = pattern.match(message)
        if match:
            return severity or _GLOG.get(match.group(1), match.group(1))
    return "DEFAULT"


def severity_of(entry: LogEntry) -> str:
    """The source's severity, else a structured line's ``severity``, else INFO for the
    platform's own events, else what the text itself says (DEFAULT when nothing does)."""
    if entry.severity in SEVERITIES:
        return entry.severity
    data = payload(entry.message)
    if data is not None and str(data.get("severity", "")).upper() in SEVERITIES:
        return str(data["severity"]).upper()
    if entry.replica == SERVICE:
        return "INFO"
    return _text_severity(entry.message)


@dataclass(frozen=True)
class LogFilter:
    """Which entries `vtx logs` shows: ``replicas`` names replicas (``workerpool1-0``), whole
    pools (``workerpool1``) or ``service``; none means all. ``min_severity`` and above."""

    replicas: tuple[str, ...] = ()
    min_severity: str = "DEFAULT"

    def keeps(self, entry: LogEntry) -> bool:
        if self.replicas and not any(
            entry.replica == r or entry.replica.startswith(f"{r}-") for r in self.replicas
        ):
            return False
        return SEVERITIES.index(severity_of(entry)) >= SEVERITIES.index(self.min_severity)

    def apply(self, entries: Iterable[LogEntry]) -> Iterator[LogEntry]:
        return (entry for entry in entries if self.keeps(entry))


def json_line(entry: LogEntry) -> str:
    """One entry as one JSON object, in Cloud Logging's LogEntry names: a structured line's
    fields under ``jsonPayload``, any other line as ``textPayload``."""
    data = payload(entry.message)
    body: dict[str, Any] = {
        "timestamp": entry.timestamp,
        "severity": severity_of(entry),
        "job": entry.job,
        "attempt": entry.attempt,
        "replica": entry.replica,
        "restart": entry.restart,
    }
    if data is None:
        body["textPayload"] = entry.message
    else:
        body["jsonPayload"] = data
    return json.dumps(body)


# The trainer's own keys that the line's layout already says (or that say nothing to a reader).
_SHOWN_ELSEWHERE = frozenset({"severity", "message", "logger", "rank"})
_TRAIN_KEYS = ("step", "loss", "lr", "tokens_per_s")


def _number(value: Any) -> str:
    """Floats to 4 significant digits (``2.312``, ``0.0092``); others as they are."""
    if isinstance(value, float):
        return f"{value:.4g}"
    return value if isinstance(value, str) else json.dumps(value)


def _rate(tokens_per_s: float) -> str:
    """``1.2k tok/s``: throughput to 2 significant figures, a reader compares magnitudes."""
    for scale, suffix in ((1e6, "M"), (1e3, "k")):
        if tokens_per_s >= scale:
            return f"{tokens_per_s / scale:.2g}{suffix} tok/s"
    return f"{tokens_per_s:.3g} tok/s"


def origin(entry: LogEntry, attempts: int = 1) -> str:
    """Who wrote a line, as short as says it: ``workerpool1-0``; `` a2`` added for the run's
    second attempt when it has several (``attempts``); `` r1`` for the replica's first restart
    (the local platform says; Vertex does not)."""
    who = entry.replica
    if attempts > 1:
        who += f" a{entry.attempt}"
    if entry.restart:
        who += f" r{entry.restart}"
    return who


@dataclass
class HumanFormat:
    """Entries as readable lines: ``15:12:58.838 workerpool1-0 r1 WARNING message`` (``origin``
    says who), with a date line whenever the (UTC) date changes, and the trainer's JSON as
    ``step 40/120 loss 2.31 lr 9e-03 1.2k tok/s grad_norm=1.09``.

    Stateful across one stream: the run's total steps come from the trainer's ``training``
    line (kept per job), the date from the previous line, and ``attempts`` (how many the run
    has, as listed when the stream starts) grows with any later attempt's line."""

    attempts: int = 1
    totals: dict[str, int] = field(default_factory=dict)
    day: str = ""

    def lines(self, entry: LogEntry) -> list[str]:
        day, _, clock = entry.timestamp.partition("T")
        header = [f"-- {day} (UTC) --"] if day and day != self.day else []
        self.day = day
        clock = clock.rstrip("Z")[:12]  # HH:MM:SS.mmm
        severity = severity_of(entry)
        self.attempts = max(self.attempts, entry.attempt)
        who = origin(entry, self.attempts)
        width = 19 if self.attempts > 1 else 16  # "workerpool1-0 a2 r1", "workerpool1-0 r1"
        return [*header, f"{clock:<12} {who:<{width}} {severity:<7} {self.text(entry)}"]

    def text(self, entry: LogEntry) -> str:
        data = payload(entry.message)
        if data is None:
            return entry.message
        rank = data.get("rank")
        prefix = f"[rank {rank}] " if rank not in (None, 0) else ""
        event = str(data.get("message", ""))
        fields = {k: v for k, v in data.items() if k not in _SHOWN_ELSEWHERE}
        if event == TrainerEvent.TRAINING and isinstance(fields.get("total_steps"), int):
            self.totals[entry.job] = fields["total_steps"]
        if event == TrainerEvent.TRAIN and "step" in fields:
            return prefix + self._train(entry.job, fields)
        rest = " ".join(f"{k}={_number(v)}" for k, v in fields.items())
        return prefix + " ".join(filter(None, [event, rest]))

    def _train(self, job: str, fields: dict[str, Any]) -> str:
        total = self.totals.get(job)
        parts = [f"step {fields['step']}" + (f"/{total}" if total else "")]
        if "loss" in fields:
            parts.append(f"loss {_number(fields['loss'])}")
        if "lr" in fields:
            parts.append(f"lr {_number(fields['lr'])}")
        if isinstance(fields.get("tokens_per_s"), int | float):
            parts.append(_rate(fields["tokens_per_s"]))
        parts += [f"{k}={_number(v)}" for k, v in fields.items() if k not in _TRAIN_KEYS]
        return " ".join(parts)
