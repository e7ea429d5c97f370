"""Launching on a stack with a controller (`jobs.control`): the run's record written, its
first attempt submitted through the same driver the controller runs (one pass over this run),
and the launch returns with the run id; the controller walks the ladder and holds the budget
with no terminal open. ``--follow`` only watches: the logs of each attempt, and the
controller's moves as the record gains them."""

from __future__ import annotations

import time
from datetime import datetime

from rich.console import Console

from jobs.control.driver import Driver
from jobs.control.record import ControllerPass, RunRecord, record_of
from jobs.control.records import Conflict, Records
from jobs.core.stack import StackOutputs
from jobs.launch.plan import LaunchPlan
from jobs.launch.run import Submitted
from jobs.tuning.study_records import StudyRecord
from jobs.vertex.client import Vertex
from jobs.vertex.errors import VertexError, still_active
from jobs.vertex.job_records import JobRecord
from jobs.vertex.rest import VertexRest
from vtx.flows import study_watch
from vtx.flows.follow import LogView, follow_run, log_source
from vtx.views.launch import print_event

WRITE_TRIES = 3
"""Writes of a relaunched run's record: each conflict with an ended record's write (the
controller recording its end) is read again and retried."""
SUBMIT_WAIT_S = 300.0
"""How long `vtx launch` waits for the first attempt's job name when another pass (the
controller's) claimed it first: that pass is creating it."""


def controller_line(record: RunRecord, looked: ControllerPass | None) -> str:
    """When the controller last looked (its pass, ``looked``) and what it last decided for the
    run (the record's, written only when it changed), as `vtx status` says them."""
    last = record.last_pass
    if last is None:
        return "controller: no pass yet"
    said = "; ".join(last.decided) or "nothing"
    when = max(last.at, looked.at) if looked is not None else last.at
    since = f" (decided {last.at:%Y-%m-%d %H:%M:%S})" if when != last.at else ""
    return f"controller: last pass {when:%Y-%m-%d %H:%M:%S} UTC: {said}{since}; next: {last.next}"


def controller_status(stack: StackOutputs, run_id: str | None) -> dict | None:
    """What `vtx status` adds for a run the stack's controller walks: its last pass (when the
    controller last looked, what it last decided for the run), its outcome and why (a budget or
    a progress guard names itself there), the guard's breaches; None without a controller or a
    record."""
    if not stack.controller or run_id is None:
        return None
    records = Records(stack)
    stored = records.read(run_id)
    if stored is None:
        return None
    record = stored.record
    last, looked = record.last_pass, records.last_pass()
    return {
        "line": controller_line(record, looked),
        "last_pass": last.model_dump(mode="json") if last else None,
        "controller_pass": looked.model_dump(mode="json") if looked else None,
        "outcome": record.outcome.model_dump(mode="json") if record.outcome else None,
        "stopped_by_budget": None if _by_guard(record) else record.stopping,
        "guard": record.guard.say() if record.guard else None,
        "guard_breaches": record.breaches,
    }


def stalls_of(stack: StackOutputs, run_id: str | None) -> dict[str, datetime]:
    """The run's attempts a progress guard found hung: job name -> when it stopped stepping
    (the goodput timeline's stall); empty without a controller or a record."""
    if not stack.controller or run_id is None:
        return {}
    stored = Records(stack).read(run_id)
    if stored is None:
        return {}
    attempts = stored.record.attempts
    return {a.job: a.stalled_since for a in attempts if a.job and a.stalled_since is not None}


def _by_guard(record: RunRecord) -> bool:
    return any(b.endswith(f": {record.stopping}") for b in record.breaches)


def launch_controlled(
    out: Console,
    plan: LaunchPlan,
    stack: StackOutputs,
    follow: bool,
    poll_s: float,
    vertex: Vertex | None = None,
) -> int:
    """Write the record, submit the first attempt, say so; follow when asked."""
    records = Records(stack)
    _write_new(records, VertexRest(stack), plan)
    Driver(stack, records=records, vertex=vertex).reconcile_run(plan.run_id)
    record = _submitted(records, plan.run_id, poll_s)
    if record.outcome is not None and not record.attempts:
        out.print(f"run {plan.run_id} ended {record.outcome.state}: {record.outcome.reason}",
                  highlight=False, markup=False)  # fmt: skip
        return 1
    attempt, number = record.attempts[0], record.earlier_attempts + 1
    print_event(out, plan, follow, Submitted(plan.rungs[attempt.rung], attempt.job or "", number))
    out.print(
        f"the stack's controller walks the run and holds its budget: `vtx status {plan.run_id}` "
        "shows its last pass",
        style="dim",
        highlight=False,
    )
    if not follow:
        return 0
    return follow_controlled(out, stack, plan, records, poll_s)


def _write_new(records: Records, rest: VertexRest, plan: LaunchPlan) -> None:
    """A new run's record. A resubmitted run's (``--run-id``) replaces the ended one, its
    attempts numbered on from the run's earlier jobs; refused while one of them lives (two
    attempts would write one checkpoint prefix) or the controller is submitting the next.
    A record whose jobs have all ended is replaced though the controller has not yet recorded
    its end; when it records it between our read and our write, the write is tried again on
    the ended record's new generation."""
    run_id = plan.run_id
    earlier: list[JobRecord] | list[StudyRecord] = (
        [StudyRecord.from_rest(s) for s in rest.list_studies(run_id)]
        if plan.study is not None
        else rest.list(run_id)
    )
    live = [e for e in earlier if not e.terminal]
    if live:
        raise still_active(run_id, live[0].name, live[0].state)
    stored = records.read(run_id)
    current = stored.record.current if stored is not None and stored.record.live else None
    if current is not None and current.job is None:
        raise VertexError(
            f"run {run_id}'s attempt {current.marker} is being submitted by the stack's "
            f"controller ({records.uri(run_id)}): `vtx cancel {run_id}` first, or wait"
        )
    record = record_of(plan, len(earlier))
    for _ in range(WRITE_TRIES):
        try:
            records.write(record, stored.generation if stored else 0)
            return
        except Conflict as exc:
            conflict = exc
        # The controller may have recorded the ended run's outcome since the read: that
        # record is still ours to replace. A live one is another launch's.
        stored = records.read(run_id)
        if stored is not None and stored.record.live:
            break
    raise VertexError(f"run {run_id} was launched at the same time: {conflict}")


def _submitted(records: Records, run_id: str, poll_s: float) -> RunRecord:
    deadline = time.monotonic() + SUBMIT_WAIT_S
    while True:
        stored = records.read(run_id)
        assert stored is not None  # written above
        record = stored.record
        current = record.current
        if record.outcome is not None or (current is not None and current.job is not None):
            return record
        if time.monotonic() > deadline:
            raise VertexError(f"run {run_id}'s first attempt was claimed but not submitted")
        time.sleep(min(poll_s, 1.0))


def follow_controlled(
    out: Console, stack: StackOutputs, plan: LaunchPlan, records: Records, poll_s: float
) -> int:
    """Each attempt's logs until it ends, and the controller's moves, until the run's outcome."""
    rest = VertexRest(stack)
    if plan.study is not None:
        name = _study_name(records, plan.run_id, poll_s)  # the controller holds its budget
        return study_watch.follow(out, rest, name, LogView(out).print, poll_s, enforce_budget=False)
    view = LogView(out)
    source = log_source(rest, plan.run_id)
    shown = 0
    followed: str | None = None
    while True:
        stored = records.read(plan.run_id)
        assert stored is not None
        record = stored.record
        for move in record.moves[shown:]:
            out.print(f"controller: {move.what}", highlight=False, markup=False)
        shown = len(record.moves)
        current = record.current
        # An attempt is followed before the outcome is said, even one the controller saw end
        # first: a fast job can end between two reads, and its logs and state are still owed.
        if current is not None and current.job and current.job != followed:
            followed = current.job
            follow_run(out, rest, plan.run_id, poll_s, view, source)
            continue
        if record.outcome is not None:
            reason = f": {record.outcome.reason}" if record.outcome.reason else ""
            out.print(f"run {plan.run_id}: {record.outcome.state}{reason}", highlight=False,
                      markup=False)  # fmt: skip
            return 0 if record.outcome.succeeded else 1
        time.sleep(poll_s)


def _study_name(records: Records, run_id: str, poll_s: float) -> str:
    record = _submitted(records, run_id, poll_s)
    return record.attempts[0].job or ""
