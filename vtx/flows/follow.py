"""Following a run's logs: every attempt's entries as they come, until the run ends; run by `vtx
logs` and by `vtx launch --follow`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from rich.console import Console

from jobs.control.guards import RunBudgetGuard
from jobs.core.states import succeeded
from jobs.runs.logs import (
    SERVICE,
    CloudLoggingSource,
    HumanFormat,
    LocalLogSource,
    LogEntry,
    LogFilter,
    LogsError,
    LogSource,
    json_line,
    severity_of,
    stream,
)
from jobs.vertex.client import Vertex
from jobs.vertex.errors import VertexError
from jobs.vertex.job_records import NEVER, JobRecord
from jobs.vertex.rest import VertexRest
from vtx.options import (
    console,
)
from vtx.views.problems import print_error

SEVERITY_STYLES = {"WARNING": "yellow", "ERROR": "red", "CRITICAL": "bold red"}


@dataclass
class LogView:
    """How `vtx logs` prints entries: the format, the filter, and where the lines about the
    run (not entries) go."""

    out: Console
    json: bool = False
    filter: LogFilter = field(default_factory=LogFilter)
    human: HumanFormat = field(default_factory=HumanFormat)

    @property
    def notes(self) -> Console:
        """stdout for text; stderr for JSON, which keeps stdout one JSON object per line."""
        return console(stderr=True) if self.json else self.out

    def print(self, entry: LogEntry) -> None:
        if not self.filter.keeps(entry):
            return
        if self.json:
            self.out.print(json_line(entry), markup=False, highlight=False, soft_wrap=True)
            return
        style = "cyan" if entry.replica == SERVICE else SEVERITY_STYLES.get(severity_of(entry))
        for line in self.human.lines(entry):
            self.out.print(line, markup=False, highlight=False, style=style)


def watcher(vertex: Vertex | VertexRest) -> VertexRest:
    """The REST client for watching: `vtx launch --follow` hands over the ``Vertex`` it submitted
    with, whose calls would import aiplatform (seconds) for answers REST gives as well."""
    return vertex if isinstance(vertex, VertexRest) else VertexRest(vertex.stack)


def numbered(jobs: list[JobRecord]) -> list[tuple[str, int]]:
    """(job name, attempt) for a run's jobs: numbered from 1 in creation order, as `vtx status`
    numbers them."""
    oldest_first = sorted(jobs, key=lambda j: j.create_time or NEVER)
    return [(j.name, n) for n, j in enumerate(oldest_first, start=1)]


def log_source(
    vertex: VertexRest, run_id: str, job: str | None = None, min_severity: str = "DEFAULT"
) -> LogSource:
    """The logs of every attempt of ``run_id``, or of the one ``job`` (no vtx run id)."""
    stack = vertex.stack
    if stack.vertex_endpoint:
        return LocalLogSource(stack.vertex_endpoint, run_id, job=job, token=stack.local_token or "")

    def attempts() -> list[tuple[str, int]]:
        return [(job, 1)] if job is not None else numbered(vertex.list(run_id))

    return CloudLoggingSource(stack.project, attempts, min_severity=min_severity)


def print_entries(
    view: LogView, source: LogSource, done: Callable[[], bool], follow: bool, poll_s: float
) -> None:
    for entry in stream(source, done, follow=follow, poll_s=poll_s):
        view.print(entry)


def job_logs(view: LogView, vertex: VertexRest, job: str, follow: bool, poll_s: float) -> int:
    """Logs of a job that carries no vtx run id (created by gcloud or the SDK): that job only."""
    done = (lambda: vertex.get(job).terminal) if follow else (lambda: True)
    source = log_source(vertex, job, job=job, min_severity=view.filter.min_severity)
    print_entries(view, source, done, follow, poll_s)
    if not follow:
        return 0
    state = vertex.get(job).state
    view.notes.print(f"{job}: {state}", highlight=False)
    return 0 if succeeded(state) else 1


def run_done(
    vertex: VertexRest,
    run_id: str,
    guard: RunBudgetGuard | None = None,
    notes: Console | None = None,
) -> bool:
    attempts = vertex.list(run_id)
    if attempts and guard is not None:
        why = guard.check(attempts)
        if why is not None and notes is not None:
            notes.print(f"{why}: cancelling {attempts[0].name}", highlight=False, markup=False)
    return bool(attempts) and attempts[0].terminal


def follow_run(
    out: Console,
    vertex: Vertex | VertexRest,
    run_id: str,
    poll_s: float = 5.0,
    view: LogView | None = None,
    source: LogSource | None = None,
    enforce_budget: bool = False,
) -> int:
    """Stream every attempt's logs until the newest attempt ends; exit 0 only on success.
    Following is only watching: Ctrl-C or a lost connection leaves the job running. Without a
    ``view`` (`vtx launch --follow`), every entry as readable lines. A ``source`` given goes on
    where it stopped (a ladder's walk follows one run through several attempts). With
    ``enforce_budget`` (`vtx launch --follow`), the run is cancelled once its meter crosses its
    budget (`jobs.control.guards.RunBudgetGuard`; a stack with a controller leaves it
    to the controller)."""
    rest = watcher(vertex)
    view = view or LogView(out)
    notes = view.notes
    source = source or log_source(rest, run_id, min_severity=view.filter.min_severity)
    guard = RunBudgetGuard(rest) if enforce_budget else None
    try:
        view.human.attempts = max(view.human.attempts, len(rest.list(run_id)))
        print_entries(view, source, lambda: run_done(rest, run_id, guard, notes), True, poll_s)
        final = rest.list(run_id)[0]
    except KeyboardInterrupt:
        notes.print(f"stopped following; the run goes on (`vtx cancel {run_id}` stops it)")
        return 130
    except (VertexError, LogsError) as exc:
        print_error(notes, exc)
        notes.print(f"the run goes on: `vtx logs {run_id} --follow` to resume watching")
        return 1
    notes.print(f"{final.name}: {final.state}", highlight=False)
    if succeeded(final.state):
        prefix = final.output_prefix
        notes.print(f"outputs: {prefix}\nmodel: {prefix}model/", highlight=False)
    elif final.error:
        notes.print(f"error: {final.error}", markup=False)
    if guard is not None and guard.cancelled:
        notes.print(f"stopped by its budget: {guard.cancelled}", markup=False, highlight=False)
    return 0 if succeeded(final.state) else 1
