"""The driver: one pass over a stack's live runs. It lists the live records (one listing of the
bucket, then the live ones read, several at once), the stack's vtx jobs (one listing per region,
not per run, matched to the records by their run-id label) and, when a study is live, its
studies; decides each run (`jobs.control.reconcile.decide`); writes the record back on the
generation it read (``if_generation_match``) when something in it changed, reading and deciding
again when another writer got there first; and only then does what the write claimed. A submit
takes the pass's listing as the run's jobs before it (`Vertex.create`'s ``existing``), so a pass
asks Vertex nothing per run but the creates and cancels it decides (and, per run, what only some
runs need: a run whose record another writer changed is listed again, a trial job the listing
lacks is read alone); a study's submit takes the pass's listing of the run's studies and jobs
alike. A submit carries the attempt's marker label, so a pass that dies between the create and
the record's next write leaves a job the next pass adopts. Two drivers at once submit each
attempt once: only one of them wins the claim's write. The same code runs as the local
platform's controller process (`jobs.control.__main__`) and as the stack's function
(`jobs.control.cloud_function`). A pass ends with one write more, whatever it changed: the
controller's liveness (`Records.passed`), which `vtx status` reads for when the controller last
looked."""

from __future__ import annotations

import copy
import logging
import threading
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime

from jobs.control.guards import cancel
from jobs.control.reconcile import (
    SUBMIT_LEASE_S,
    Action,
    Breach,
    Cancel,
    CancelStudy,
    Observed,
    Submit,
    apply,
    decide,
)
from jobs.control.record import ControllerPass, RunRecord, vertex_of
from jobs.control.records import Conflict, RecordError, Records, Stored
from jobs.core.catalog import Catalog
from jobs.core.contract import LABEL_ATTEMPT
from jobs.core.heartbeat import Heartbeat
from jobs.core.stack import LABEL_TEAM, StackOutputs
from jobs.custom_jobs.compile import to_custom_job
from jobs.runs.warm_pools import metering_catalog
from jobs.tuning.study_job import to_tuning_job
from jobs.tuning.study_records import StudyRecord
from jobs.vertex.client import Vertex
from jobs.vertex.errors import VertexError
from jobs.vertex.job_records import JobRecord
from jobs.vertex.rest import VertexRest

log = logging.getLogger(__name__)

WRITE_TRIES = 5
"""How often one run is read and decided again after losing its record's write: each loss
means another writer moved on, so a few tries settle it; after that, the next pass does."""
PASS_WORKERS = 10
"""Runs read and reconciled at once in a pass. A run's time is waiting on GCS (its record read,
then written on its generation), so a pass over a thousand runs one after the other would
outlast the minute between Scheduler's calls (bench/RESULTS.md, "Controller"); runs are
independent (a record each), and google-cloud-storage's client is safe to share across threads
(its documentation says so of its requests session), as are the REST session and the SDK's
client. Ten: what requests keeps open per host (``requests.adapters.DEFAULT_POOLSIZE``); more
workers would open and discard a connection per request."""


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class GuardBreach:
    """A progress guard's breach a pass acted on, as the stack's alerts read it: the run, what
    the guard does (``cancel``, ``restart``, ``next_rung``), the job cancelled, why, and the
    run's team (its jobs' ``vtx-team`` label; empty when it names none)."""

    run_id: str
    action: str
    job: str
    reason: str
    team: str


@dataclass
class PassReport:
    """What one pass did: runs seen, actions taken (by run), guard breaches acted on,
    conflicts met, errors."""

    runs: int = 0
    actions: dict[str, list[str]] = field(default_factory=dict)
    breaches: list[GuardBreach] = field(default_factory=list)
    conflicts: int = 0
    errors: list[str] = field(default_factory=list)

    def add(self, other: PassReport) -> None:
        """One run's part of the pass (each worker fills its own: no shared counter)."""
        self.runs += other.runs
        self.actions.update(other.actions)
        self.breaches += other.breaches
        self.conflicts += other.conflicts
        self.errors += other.errors


@dataclass
class Seen:
    """One pass's observations of the whole stack."""

    jobs: dict[str, list[JobRecord]]
    studies: dict[str, StudyRecord]


class Driver:
    def __init__(
        self,
        stack: StackOutputs,
        records: Records | None = None,
        rest: VertexRest | None = None,
        vertex: Vertex | None = None,
        clock: Callable[[], datetime] = utc_now,
        lease_s: float = SUBMIT_LEASE_S,
        workers: int = PASS_WORKERS,
    ) -> None:
        self.stack = stack
        self.records = records or Records(stack)
        self.rest = rest or VertexRest(stack)
        self._vertex = vertex
        self._vertex_made = threading.Lock()
        self.clock = clock
        self.lease_s = lease_s
        self.workers = workers

    @property
    def vertex(self) -> Vertex:
        with self._vertex_made:  # workers submit at once: one client, made once
            if self._vertex is None:
                self._vertex = Vertex(self.stack)
            return self._vertex

    def run_pass(self) -> PassReport:
        """One pass over every live run: the records read at once, the jobs listed once, then
        the runs reconciled at once (``workers`` at a time)."""
        report = PassReport()
        mine = vertex_of(self.stack)
        with ThreadPoolExecutor(self.workers) as pool:
            read = list(pool.map(self._read, self.records.live_ids()))
        live = [s for s in read if isinstance(s, Stored) and s.record.vertex in ("", mine)]
        report.errors += [s for s in read if isinstance(s, str)]
        if live:
            seen = self.observe(any(s.record.kind == "study" for s in live))
            # Once a pass: it globs the prices folder, and reads the warm pools the live runs
            # are on that the stack does not declare (their share is what the meter charges).
            running = (j for s in live for j in seen.jobs.get(s.record.run_id, []))
            catalog = metering_catalog(self.rest, running)
            with ThreadPoolExecutor(self.workers) as pool:
                for part in pool.map(lambda stored: self._one(stored, seen, catalog), live):
                    report.add(part)
        self._passed(report, mine)
        return report

    def _passed(self, report: PassReport, mine: str) -> None:
        """The pass's one liveness write (`vtx status` says when the controller last looked);
        one that fails is an error of the pass, not its end."""
        done = ControllerPass(at=self.clock(), vertex=mine, runs=report.runs,
                              errors=len(report.errors))  # fmt: skip
        try:
            self.records.passed(done)
        except RecordError as exc:
            report.errors.append(str(exc))
            log.warning("%s", exc)

    def _read(self, run_id: str) -> Stored | str | None:
        """A live run's record; why it cannot be read (said, and the pass goes on)."""
        try:
            stored = self.records.read(run_id)
        except RecordError as exc:
            log.warning("run %s: %s", run_id, exc)
            return f"{run_id}: {exc}"
        return stored if stored is not None and stored.record.live else None

    def _one(self, stored: Stored, seen: Seen, catalog: Catalog) -> PassReport:
        part = PassReport(runs=1)
        try:
            self.reconcile(stored, seen, part, catalog)
        except (VertexError, RecordError) as exc:  # one run's trouble never stops the pass
            part.errors.append(f"{stored.record.run_id}: {exc}")
            log.warning("run %s: %s", stored.record.run_id, exc)
        return part

    def observe(self, studies: bool) -> Seen:
        jobs: dict[str, list[JobRecord]] = defaultdict(list)
        for job in self.rest.list():
            if job.run_id is not None:
                jobs[job.run_id].append(job)
        found: dict[str, StudyRecord] = {}
        for rest in self.rest.list_studies() if studies else []:
            study = StudyRecord.from_rest(rest)
            if study.run_id is not None:
                found.setdefault(study.run_id, study)  # newest first: a run is one study
        return Seen(jobs, found)

    def reconcile_run(self, run_id: str) -> PassReport:
        """A pass over one run only (`vtx launch` submits a run's first attempt this way)."""
        report = PassReport()
        stored = self.records.read(run_id)
        if stored is None or not stored.record.live:
            return report
        report.runs = 1
        seen = self.observe_run(stored.record)
        catalog = metering_catalog(self.rest, seen.jobs.get(run_id, []))
        self.reconcile(stored, seen, report, catalog)
        return report

    def observe_run(self, record: RunRecord) -> Seen:
        jobs = {record.run_id: self.rest.list(record.run_id)}
        studies = {}
        if record.kind == "study":
            found = self.rest.list_studies(record.run_id)
            if found:
                studies[record.run_id] = StudyRecord.from_rest(found[0])
        return Seen(jobs, studies)

    def observed(self, record: RunRecord, seen: Seen) -> Observed:
        jobs = seen.jobs.get(record.run_id, [])
        study = seen.studies.get(record.run_id)
        if study is None:
            return Observed(jobs=jobs, heartbeat=self.heartbeat(record))
        by_name = {j.name: j for j in jobs}
        trials = [by_name.get(t.custom_job) or self.rest.get(t.custom_job)
                  for t in study.trials if t.custom_job]  # fmt: skip
        return Observed(jobs=jobs, study=study, trial_jobs=trials)

    def heartbeat(self, record: RunRecord) -> Heartbeat | None:
        """A guarded run's heartbeat while an attempt of it has a job: one object read."""
        current = record.current
        if record.guard is None or current is None or current.job is None or not current.placed:
            return None
        return self.records.heartbeat(record.run_id)

    def reconcile(self, stored: Stored, seen: Seen, report: PassReport, catalog: Catalog) -> None:
        """Decide one run and write the record on its generation; on a conflict read it (and
        its jobs) again and decide again. What the write claimed is done after it."""
        run_id = stored.record.run_id
        for _ in range(WRITE_TRIES):
            now = self.clock()
            observed = self.observed(stored.record, seen)
            actions = decide(stored.record, observed, now, catalog, self.lease_s)
            new = apply(stored.record, actions, now)
            if new == stored.record:  # decided as the last pass did: nothing to claim or write
                report.actions[run_id] = [a.say(stored.record) for a in actions]
                self.act(stored, actions, _names(observed))
                return
            try:
                generation = self.records.write(new, stored.generation)
            except Conflict:
                report.conflicts += 1
                again = self.records.read(run_id)
                if again is None or not again.record.live:
                    return
                stored, seen = again, self.observe_run(again.record)
                continue
            report.actions[run_id] = [a.say(stored.record) for a in actions]
            report.breaches += guard_breaches(stored.record, actions)
            self.act(Stored(new, generation), actions, _names(observed))
            return

    def act(self, stored: Stored, actions: list[Action], known: set[str]) -> None:
        """Do what the record's write claimed; ``known``: the run's jobs this pass listed."""
        for action in actions:
            if isinstance(action, Cancel | Breach):
                cancel(self.rest, action.job)
            elif isinstance(action, CancelStudy):
                cancel(self.rest, action.study)
            elif isinstance(action, Submit):
                name = self.submit(stored.record, action, known)
                stored = self.record_job(stored, action.marker, name)

    def submit(self, record: RunRecord, action: Submit, known: set[str]) -> str:
        """Create the attempt with its marker; its resource name. ``known``, the run's jobs (and
        study) as this pass listed them, is what a 503's retry compares against to see whether
        the create landed, and a study's refusal of a run that has one: no listing of the run
        before each create. It may be a pass old, and that is enough: only the claim's winner
        creates this run's attempt, and the claim came after the listing."""
        if record.kind == "study":
            assert record.study is not None
            study = _marked(record.study.job, action.marker)
            created = self.vertex.submit_study(
                to_tuning_job(study), record.study.quota, record.study.region, existing=known
            )
            return str(created.name)
        rung = record.rungs[action.rung]
        job = self.vertex.create(
            to_custom_job(_marked(rung.job, action.marker)),
            needed=rung.quota,
            existing=known,
            region=rung.region,
        )
        return str(job.name)

    def record_job(self, stored: Stored, mark: str, name: str) -> Stored:
        """The created job's name into the record; a lost write is left to the next pass,
        which finds the job by its marker."""
        new = stored.record.model_copy(deep=True)
        for attempt in new.attempts:
            if attempt.marker == mark:
                attempt.job = name
        new.moved(self.clock(), f"submitted {name} (attempt {mark})")
        try:
            return Stored(new, self.records.write(new, stored.generation))
        except Conflict:
            return stored


def _names(observed: Observed) -> set[str]:
    """The run's jobs and study as this pass listed them, by name."""
    study = {observed.study.name} if observed.study is not None else set()
    return {j.name for j in observed.jobs} | study


def guard_breaches(record: RunRecord, actions: list[Action]) -> list[GuardBreach]:
    """The breaches among a run's actions, with the run's team."""
    job = record.study.job if record.study is not None else record.rungs[0].job
    team = str((job.get("labels") or {}).get(LABEL_TEAM, ""))
    return [
        GuardBreach(record.run_id, a.action, a.job, a.reason, team)
        for a in actions
        if isinstance(a, Breach)
    ]


def _marked(job: dict, mark: str) -> dict:
    marked = copy.deepcopy(job)
    marked["labels"] = {**(marked.get("labels") or {}), LABEL_ATTEMPT: mark}
    return marked
