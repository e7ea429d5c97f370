"""`vtx launch` of a template with a capacity ladder: every rung planned, priced and
quota-checked, shown, then walked under one run id (the decisions are `jobs.spec.ladder`'s; this
module calls the API, keeps time and says each move)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from rich.console import Console

from jobs.core.catalog import load_catalog
from jobs.core.problems import Problem
from jobs.core.stack import StackOutputs
from jobs.spec.ladder import (
    DONE,
    NEXT,
    PLACED,
    STOP,
    WAIT,
    Decision,
    after_running,
    judge,
    next_rung,
    on_create_error,
    rung_documents,
)
from jobs.spec.template import JobTemplate, TemplateError
from jobs.training.plan import Plan, plan_job
from jobs.training.quotas import QuotaCheck, QuotaReader, preflight
from jobs.vertex.client import JobRecord, Vertex, VertexError, VertexRest
from vtx.log_commands import LogView, follow_run, log_source, watcher
from vtx.output import RungRow, ladder_table, print_error, print_problems, rung_label
from vtx.planning import compile_checked, print_plan


def _hopeless(check: QuotaCheck) -> str | None:
    """Why a rung cannot run whatever else ends: a metric whose limit (zero, often, in a region
    the project never asked for) is below its need. Short of what is free now is no reason to
    skip it: running jobs end."""
    over = [
        f"{'zero quota' if m.limit == 0 else f'quota limit {m.limit}'} for "
        f"{m.metric.rsplit('/', 1)[-1]} in {check.region} (needs {m.needed})"
        for m in check.over_limit
    ]
    return "; ".join(over) or None


@dataclass(frozen=True)
class Rung:
    """One rung of a launch: its plan, its live quota, how long it may wait, and why it will be
    skipped (None: it will be tried)."""

    number: int
    plan: Plan
    check: QuotaCheck
    max_wait_s: float | None
    hopeless: str | None

    @property
    def label(self) -> str:
        return rung_label(self.number, self.plan.cost)

    def row(self) -> RungRow:
        return RungRow(self.number, self.plan.cost, self.check, self.max_wait_s, self.hopeless)


def _at(where: str, problems: list[Problem]) -> list[Problem]:
    """A rung's problems placed at the rung (the base's stay where they are)."""
    if where == "(base)":
        return problems
    return [Problem(f"{where}: {p.path}", p.message, p.hint, p.source) for p in problems]


def plan_rungs(
    template: JobTemplate,
    stack: StackOutputs,
    run_id: str,
    source: str,
    reader: QuotaReader,
    ignore_quota: bool = False,
) -> tuple[list[Rung], list[Problem]]:
    """Every rung compiled under the one run id, checked, priced and preflighted like a job of
    its own; every problem of every rung."""
    documents, problems = rung_documents(template.to_document())
    rungs: list[Rung] = []
    for document in documents:
        try:
            rung_template = JobTemplate.from_document(document.doc, source)
        except TemplateError as exc:
            problems += _at(document.where, exc.problems)
            continue
        job, found = compile_checked(rung_template, stack, run_id, source, policy=True)
        if job is None or found:
            problems += _at(document.where, found)
            continue
        plan = plan_job(job)
        check = preflight(plan.quota, plan.cost.region, reader, load_catalog())
        hopeless = None if ignore_quota else _hopeless(check)
        rungs.append(Rung(document.number, plan, check, document.max_wait_s, hopeless))
    return rungs, [Problem(p.path, p.message, p.hint, p.source or source) for p in problems]


class LadderWalk:
    """Submits the rungs in order under one run id and watches each attempt until it has its
    machines, ends, or fails for capacity (then the next rung). The decisions are
    ``jobs.spec.ladder``'s; this only calls the API, keeps time and says each move."""

    def __init__(
        self,
        out: Console,
        vertex: Vertex,
        rungs: list[Rung],
        *,
        poll_s: float,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        rest: VertexRest | None = None,
    ) -> None:
        self.out, self.vertex, self.rungs = out, vertex, rungs
        self.rest = rest or watcher(vertex)
        self.poll_s, self.sleep, self.clock = poll_s, sleep, clock
        self.hopeless = [r.hopeless for r in rungs]
        self.reasons = {r.number: f"skipped: {r.hopeless}" for r in rungs if r.hopeless}
        self.current: str | None = None
        """The live attempt's job name: what Ctrl-C leaves running."""

    def say(self, line: str) -> None:
        self.out.print(line, highlight=False, markup=False)

    def run(self, start: int = 0) -> tuple[Decision, Rung | None]:
        """The decision that ended the walk (PLACED, DONE or STOP; NEXT when no rung is left)
        and the rung it was taken on; from the rung at index ``start`` on."""
        index = next_rung(self.hopeless, start)
        decision, rung = Decision(NEXT, None), None
        while index is not None:
            rung = self.rungs[index]
            following = self.after(rung)
            decision, cancelled = self.attempt(rung, last=following is None)
            if decision.action != NEXT:
                return decision, rung
            self.moved_on(rung, decision, cancelled)
            index = following
        return decision, rung

    def after(self, rung: Rung) -> int | None:
        """The index of the rung to try after ``rung``; None when none is left."""
        return next_rung(self.hopeless, self.rungs.index(rung) + 1)

    def moved_on(self, rung: Rung, decision: Decision, cancelled: bool = False) -> None:
        self.reasons[rung.number] = decision.reason or "no capacity"
        following = self.after(rung)
        then = self.rungs[following].label if following is not None else "no rung left"
        self.say(f"{rung.label}: {decision.reason}{'; cancelling' if cancelled else ''}; {then}")

    def attempt(self, rung: Rung, *, last: bool) -> tuple[Decision, bool]:
        """Submit one rung and watch it; whether it had to be cancelled to move on."""
        self.say(f"{rung.label}: submitting")
        try:
            submitted = self.vertex.submit(
                rung.plan.job.to_proto(), rung.plan.quota, rung.plan.job.stack.region
            )
        except VertexError as err:
            decision = on_create_error(getattr(err.__cause__, "code", None))
            return (decision if decision.action == NEXT else Decision(STOP, str(err))), False
        name = submitted.job.name
        self.current = name
        self.say(f"{rung.label}: submitted {name} (attempt {submitted.attempt})")
        decision = self.watch(name, rung, last)
        cancelled = decision.action == NEXT and self.cancel(name)
        if decision.action != PLACED:
            self.current = None
        return decision, cancelled

    def watch(self, name: str, rung: Rung, last: bool) -> Decision:
        started = self.clock()  # the rung's wait counts from its creation
        while True:
            record = self.rest.get(name)
            decision = judge(
                record.state,
                record.error,
                self.clock() - started,
                rung.max_wait_s,
                last=last,
                code=_error_code(record),
            )
            if decision.action != WAIT:
                return decision
            self.sleep(self.poll_s)

    def cancel(self, name: str) -> bool:
        """Cancel a live attempt and wait for it to end: the next attempt of the run is refused
        while one is live (two attempts would write one checkpoint prefix)."""
        if self.rest.get(name).terminal:
            return False
        self.rest.cancel(name)
        while not self.rest.get(name).terminal:
            self.sleep(self.poll_s)
        return True


def _error_code(record: JobRecord) -> int | None:
    code = (record.rest.get("error") or {}).get("code")
    return code if isinstance(code, int) else None


def _walked(out: Console, walk: LadderWalk, run_id: str, start: int) -> Rung | int:
    """Walk from rung index ``start`` until an attempt has its machines or the run has
    succeeded: that rung, or the exit code when the walk ended otherwise."""
    try:
        decision, rung = walk.run(start)
    except KeyboardInterrupt:
        left = f"{walk.current} is left running" if walk.current else "nothing is running"
        out.print(f"interrupted: {left}; `vtx cancel {run_id}` cancels the run", highlight=False)
        return 130
    if decision.action == NEXT or rung is None:
        reasons = "; ".join(f"rung {n}: {why}" for n, why in sorted(walk.reasons.items()))
        print_error(out, f"no rung got capacity: {reasons}", "run failed")
        return 1
    if decision.action == STOP:
        print_error(out, f"{rung.label}: {decision.reason}", "run failed")
        return 1
    state = "succeeded" if decision.action == DONE else "running"
    out.print(f"{rung.label}: {state}; run id: [bold]{run_id}[/bold]")
    return rung


def walk_ladder(out: Console, walk: LadderWalk, run_id: str, follow: bool, poll_s: float) -> int:
    """Walk the ladder; the exit code. Ctrl-C leaves the live attempt running.

    With ``follow``, the walk goes on while the logs stream: an attempt that loses its machines
    for capacity after it started (a Spot stockout) is followed by the next rung, which resumes
    from the run's checkpoints. Without it, the walk ends once an attempt runs."""
    view = LogView(out)
    source = log_source(walk.rest, run_id) if follow else None
    start = 0
    while True:
        placed = _walked(out, walk, run_id, start)
        if isinstance(placed, int):
            return placed
        if source is None:
            out.print(f"follow: vtx logs {run_id} --follow", style="dim", highlight=False)
            out.print(
                "the ladder moves on only while `vtx launch` watches: with --follow it also "
                "moves on when a running attempt stocks out",
                style="dim",
                highlight=False,
            )
            return 0
        code = follow_run(out, walk.rest, run_id, poll_s, view=view, source=source)
        ended = walk.rest.get(walk.current) if walk.current else None
        if code != 1 or ended is None:
            return code
        decision = after_running(ended.state, ended.error, _error_code(ended))
        following = walk.after(placed)
        if decision.action != NEXT or following is None:
            return code
        walk.moved_on(placed, decision)
        start = following


def launch_ladder(
    out: Console,
    template: JobTemplate,
    stack: StackOutputs,
    source: str,
    run_id: str,
    *,
    reader: QuotaReader,
    ignore_quota: bool,
    dry_run: bool,
    yes: bool,
    confirm: Callable[[str], bool],
    make_walk: Callable[[list[Rung]], LadderWalk],
    follow: bool,
) -> int:
    """A template with a capacity ladder: every rung planned and shown, then walked."""
    rungs, problems = plan_rungs(template, stack, run_id, source, reader, ignore_quota)
    if problems:
        print_problems(out, problems)
        return 1
    print_plan(out, rungs[0].plan, rungs[0].check)
    out.print(ladder_table([r.row() for r in rungs]))
    for rung in rungs:
        if rung.hopeless:
            out.print(f"{rung.label}: skipped: {rung.hopeless}", highlight=False, markup=False)
    if next_rung([r.hopeless for r in rungs], 0) is None:
        reasons = "; ".join(f"rung {r.number}: {r.hopeless}" for r in rungs)
        print_error(out, f"every rung is over a quota limit: {reasons}; --ignore-quota tries them")
        return 1
    if dry_run:
        out.print("dry run: nothing submitted")
        return 0
    if not yes and not confirm("Submit this run, walking its ladder?"):
        out.print("not submitted")
        return 1
    walk = make_walk(rungs)
    return walk_ladder(out, walk, run_id, follow, walk.poll_s)
