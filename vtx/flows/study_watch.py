"""`vtx status|list|cancel|logs` for a run that is a hyperparameter tuning study: the commands in
`vtx.commands.runs` and `vtx.commands.logs` hand a run over here when it is one. Plain REST
(`jobs.vertex.rest.VertexRest`), never aiplatform, as for jobs.

A study's logs are its trials': each trial runs as a CustomJob named in ``Trial.customJob``.
Their lines are numbered like a run's attempts, so ``a3`` in `vtx logs` is the line's trial 3."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from rich.console import Console
from rich.text import Text

from jobs.control.guards import StudyBudgetGuard, metered_trials, trial_jobs, utc_now
from jobs.core.states import succeeded
from jobs.runs.logs import CloudLoggingSource, LocalLogSource, LogEntry, LogSource, stream
from jobs.runs.watch import AttemptStatus
from jobs.tuning.study_goodput import StudyGoodput, study_goodput_of
from jobs.tuning.study_records import StudyRecord
from jobs.vertex.job_records import JobRecord
from jobs.vertex.rest import VertexRest
from vtx.views.goodput.study import study_goodput_json, study_goodput_line, study_timeline_rows
from vtx.views.runs import OutputFormat, print_document
from vtx.views.studies import print_study_status, studies_json, studies_table, study_json

STUDY_PATH = "/hyperparameterTuningJobs/"


def find_study(vertex: VertexRest, ref: str) -> StudyRecord | None:
    """The study ``ref`` names (its resource name, or its run id); None when it is no study."""
    if ref.startswith("projects/"):
        return StudyRecord.from_rest(vertex.get_study(ref)) if STUDY_PATH in ref else None
    if ref.isdigit():
        return None  # a numeric id is a CustomJob's, as `vtx status` always read it
    found = vertex.list_studies(ref)
    return StudyRecord.from_rest(found[0]) if found else None


def show_status(
    out: Console,
    study: StudyRecord,
    fmt: OutputFormat,
    vertex: VertexRest | None = None,
    timeline: bool = False,
) -> None:
    """The study, its trials and the best; with ``vertex``, what its trials' jobs cost so far
    and its goodput (summed; a bar per trial with ``timeline``)."""
    now = datetime.now(UTC)
    metered: list[AttemptStatus] = []
    goodput = None
    if vertex is not None:
        metered, goodput = watched_study(vertex, study, now)
    if fmt is OutputFormat.table:
        print_study_status(out, study, now, metered)
        if goodput is not None:
            out.print(Text("goodput: ") + Text(study_goodput_line(goodput)))
            for row in study_timeline_rows(goodput) if timeline else []:
                out.print(row, soft_wrap=False, overflow="ignore", crop=False)
    else:
        doc = study_json(study, now, metered)
        if goodput is not None:
            doc["goodput"] = study_goodput_json(goodput)
        print_document(out, doc, fmt)


def watched_study(
    vertex: VertexRest, study: StudyRecord, now: datetime
) -> tuple[list[AttemptStatus], StudyGoodput]:
    """The study's trial jobs metered (each at its price) and its goodput, read once (every
    trial job, every log entry of them)."""
    metered = metered_trials(vertex, study, now)
    return metered, study_goodput_of(study, metered, trial_entries(vertex, study), now)


def trial_entries(vertex: VertexRest, study: StudyRecord) -> list[LogEntry]:
    """Every log entry of the study's trials' jobs as they stand in ``study``."""
    trials = trial_jobs(study)
    entries, _ = _trials_source(vertex, lambda: trials, "DEFAULT").fetch(None)
    return entries


def list_studies(vertex: VertexRest, run_id: str | None) -> list[StudyRecord]:
    return [StudyRecord.from_rest(s) for s in vertex.list_studies(run_id)]


def trial_job_names(studies: list[StudyRecord]) -> set[str]:
    """The CustomJobs that ran the studies' trials: listed under their study, not as runs."""
    return {job for study in studies for job, _ in trial_jobs(study)}


def show_list(
    out: Console,
    studies: list[StudyRecord],
    fmt: OutputFormat,
    vertex: VertexRest | None = None,
    jobs: Sequence[JobRecord] = (),
) -> list[dict]:
    """The studies table (printed), or their JSON entries for the caller to add to its list;
    with ``vertex``, each study's cost so far (its trials' jobs at their prices; ``jobs``: those
    the list already read)."""
    now, known = datetime.now(UTC), {j.name: j for j in jobs}
    metered = {s.name: metered_trials(vertex, s, now, known) for s in studies} if vertex else {}
    if fmt is OutputFormat.table:
        if studies:
            out.print(studies_table(studies, metered))
        return []
    return studies_json(studies, metered)


def cancel(out: Console, vertex: VertexRest, study: StudyRecord) -> None:
    """Cancel the study: Vertex cancels its running trials with it."""
    if study.terminal:
        out.print(f"{study.name} already ended: {study.state}", highlight=False)
        return
    vertex.cancel_study(study.name)
    out.print(f"cancel requested for study {study.name}", highlight=False)


class TrialsLogSource:
    """The local platform's logs of a study's trials as one source: the trials' CustomJobs are
    asked for on every fetch (a running study starts more), each read with its own cursor, the
    entries merged by time."""

    def __init__(self, jobs: Callable[[], list[str]], source: Callable[[str], LogSource]) -> None:
        self.jobs = jobs
        self.source = source
        self.sources: dict[str, LogSource] = {}

    def fetch(self, cursor: Any) -> tuple[list[LogEntry], Any]:
        cursors = dict(cursor or {})
        entries: list[LogEntry] = []
        for job in self.jobs():
            source = self.sources.setdefault(job, self.source(job))
            found, cursors[job] = source.fetch(cursors.get(job))
            entries += found
        return sorted(entries, key=lambda e: e.timestamp), cursors


def log_source(vertex: VertexRest, study: StudyRecord, min_severity: str) -> LogSource:
    """Every trial's logs, the study read again on each fetch: Cloud Logging by the trials'
    job ids, or the local platform's."""

    def trials() -> list[tuple[str, int]]:
        return trial_jobs(StudyRecord.from_rest(vertex.get_study(study.name)))

    return _trials_source(vertex, trials, min_severity)


def _trials_source(
    vertex: VertexRest, trials: Callable[[], list[tuple[str, int]]], min_severity: str
) -> LogSource:
    """The local platform's logs of each trial job, or Cloud Logging's by the jobs' ids."""
    stack = vertex.stack
    if stack.vertex_endpoint:
        endpoint, token = stack.vertex_endpoint, stack.local_token or ""
        return TrialsLogSource(
            lambda: [job for job, _ in trials()],
            lambda job: LocalLogSource(endpoint, None, job=job, token=token),
        )
    return CloudLoggingSource(stack.project, trials, min_severity=min_severity)


def done(vertex: VertexRest, study: StudyRecord) -> Callable[[], bool]:
    """Whether the study has ended (what `vtx logs --follow` stops on)."""
    return lambda: StudyRecord.from_rest(vertex.get_study(study.name)).terminal


def follow(
    out: Console,
    vertex: VertexRest,
    name: str,
    show: Callable[[LogEntry], None],
    poll_s: float = 5.0,
    enforce_budget: bool = True,
) -> int:
    """Stream the study's trials' logs (``show`` prints each) until it ends, then its trials
    table and best trial; 0 only when it succeeded. With ``enforce_budget`` (a stack without a
    controller, where only a follower can) the study is cancelled once its meter crosses its
    budget (`jobs.control.guards.StudyBudgetGuard`). Ctrl-C leaves the study running."""
    study = StudyRecord.from_rest(vertex.get_study(name))
    source = log_source(vertex, study, "DEFAULT")
    guard = StudyBudgetGuard(vertex)

    def ended() -> bool:
        current = StudyRecord.from_rest(vertex.get_study(name))
        why = guard.check(current) if enforce_budget else None
        if why is not None:
            out.print(f"{why}: cancelling study {study.name}", highlight=False, markup=False)
        return current.terminal

    try:
        for entry in stream(source, ended, follow=True, poll_s=poll_s):
            show(entry)
    except KeyboardInterrupt:
        out.print(f"stopped following; the study goes on (`vtx cancel {study.run_id}` stops it)")
        return 130
    final = StudyRecord.from_rest(vertex.get_study(name))
    print_study_status(out, final, utc_now(), metered_trials(vertex, final, utc_now()))
    if guard.cancelled:
        out.print(f"stopped by its budget: {guard.cancelled}", highlight=False, markup=False)
    return 0 if succeeded(final.state) else 1
