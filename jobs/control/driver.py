"""The driver: one pass over a stack's live runs. It lists the live records (one listing of the
bucket), the stack's vtx jobs (one list per region, not per run) and, when a study is live, its
studies; decides each run (`jobs.control.reconcile.decide`); writes the record back on the
generation it read (``if_generation_match``), reading and deciding again when another writer
got there first; and only then does what the write claimed: a submit carries the attempt's
marker label, so a pass that dies between the create and the record's next write leaves a job
the next pass adopts. Two drivers at once submit each attempt once: only one of them wins the
claim's write. The same code runs as the local platform's controller process
(`jobs.control.__main__`) and, later, the stack's."""

from __future__ import annotations

import copy
import logging
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from jobs.control.guards import cancel_job, cancel_study
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
from jobs.control.record import RunRecord, vertex_of
from jobs.control.records import Conflict, Records, Stored
from jobs.core.catalog import load_catalog
from jobs.core.contract import LABEL_ATTEMPT
from jobs.core.heartbeat import Heartbeat
from jobs.core.stack import StackOutputs
from jobs.training.compile import to_custom_job
from jobs.tuning.study_job import to_tuning_job
from jobs.tuning.study_records import StudyRecord
from jobs.vertex.client import JobRecord, Vertex, VertexError, VertexRest

log = logging.getLogger(__name__)

WRITE_TRIES = 5
"""How often one run is read and decided again after losing its record's write: each loss
means another writer moved on, so a few tries settle it; after that, the next pass does."""


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass
class PassReport:
    """What one pass did: runs seen, actions taken (by run), conflicts met, errors."""

    runs: int = 0
    actions: dict[str, list[str]] = field(default_factory=dict)
    conflicts: int = 0
    errors: list[str] = field(default_factory=list)


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
    ) -> None:
        self.stack = stack
        self.records = records or Records(stack)
        self.rest = rest or VertexRest(stack)
        self._vertex = vertex
        self.clock = clock
        self.lease_s = lease_s

    @property
    def vertex(self) -> Vertex:
        if self._vertex is None:
            self._vertex = Vertex(self.stack)
        return self._vertex

    def run_pass(self) -> PassReport:
        """One pass over every live run."""
        report = PassReport()
        mine = vertex_of(self.stack)
        live = [s for s in self.records.live() if s.record.vertex in ("", mine)]
        report.runs = len(live)
        if not live:
            return report
        seen = self.observe(any(s.record.kind == "study" for s in live))
        for stored in live:
            try:
                self.reconcile(stored, seen, report)
            except VertexError as exc:  # one run's trouble never stops the pass
                report.errors.append(f"{stored.record.run_id}: {exc}")
                log.warning("run %s: %s", stored.record.run_id, exc)
        return report

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
        self.reconcile(stored, self.observe_run(stored.record), report)
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

    def reconcile(self, stored: Stored, seen: Seen, report: PassReport) -> None:
        """Decide one run and write the record on its generation; on a conflict read it (and
        its jobs) again and decide again. What the write claimed is done after it."""
        run_id = stored.record.run_id
        for _ in range(WRITE_TRIES):
            now = self.clock()
            actions = decide(stored.record, self.observed(stored.record, seen), now,
                             load_catalog().for_stack(self.stack), self.lease_s)  # fmt: skip
            new = apply(stored.record, actions, now)
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
            self.act(Stored(new, generation), actions)
            return

    def act(self, stored: Stored, actions: list[Action]) -> None:
        for action in actions:
            if isinstance(action, Cancel | Breach):
                cancel_job(self.rest, action.job)
            elif isinstance(action, CancelStudy):
                cancel_study(self.rest, action.study)
            elif isinstance(action, Submit):
                name = self.submit(stored.record, action)
                stored = self.record_job(stored, action.marker, name)

    def submit(self, record: RunRecord, action: Submit) -> str:
        """Create the attempt with its marker; its resource name."""
        if record.kind == "study":
            assert record.study is not None
            study = _marked(record.study.job, action.marker)
            created = self.vertex.submit_study(
                to_tuning_job(study), record.study.quota, record.study.region
            )
            return str(created.name)
        rung = record.rungs[action.rung]
        job = self.vertex.create(
            to_custom_job(_marked(rung.job, action.marker)),
            needed=rung.quota,
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


def _marked(job: dict, mark: str) -> dict:
    marked = copy.deepcopy(job)
    marked["labels"] = {**(marked.get("labels") or {}), LABEL_ATTEMPT: mark}
    return marked
