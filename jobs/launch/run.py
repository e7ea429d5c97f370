"""Walking a launch plan: a job or a study submitted once; a capacity ladder's rungs submitted in
order under one run id, each attempt watched until it has its machines, ends, or fails for
capacity (then the next rung). The decisions are ``jobs.spec.ladder``'s; the runner calls the
API, keeps time and says each move as an event, which its caller shows.

The runner is a generator: it yields events and returns the exit code. A ``Follow`` event asks
the caller to follow the run to its end and send back that following's exit code: with it a
ladder moves on when a running attempt loses its machines for capacity (a Spot stockout), the
next rung resuming from the run's checkpoints."""

from __future__ import annotations

import time
from collections.abc import Callable, Generator
from dataclasses import dataclass

from jobs.launch.plan import LaunchPlan, Rung
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
)
from jobs.vertex.client import Vertex
from jobs.vertex.errors import VertexError
from jobs.vertex.job_records import JobRecord
from jobs.vertex.rest import VertexRest


@dataclass(frozen=True)
class Submitting:
    """A ladder's rung is about to be submitted."""

    rung: Rung


@dataclass(frozen=True)
class Submitted:
    """The job (or the study: ``name`` is the study's) was created."""

    rung: Rung
    name: str
    attempt: int


@dataclass(frozen=True)
class MovedOn:
    """A rung gave up (``reason``), its attempt cancelled when it was still live; ``then``: the
    rung tried next, None when none is left."""

    rung: Rung
    reason: str | None
    cancelled: bool
    then: Rung | None


@dataclass(frozen=True)
class Placed:
    """A ladder's attempt has its machines (or has already succeeded)."""

    rung: Rung
    succeeded: bool


@dataclass(frozen=True)
class Follow:
    """Follow the run to its end; the runner is sent back the following's exit code."""

    name: str
    """The run id; a study's name."""


@dataclass(frozen=True)
class Failed:
    """The walk failed: no rung got capacity, or a rung failed for a reason no rung mends."""

    message: str


@dataclass(frozen=True)
class Interrupted:
    """Ctrl-C during the walk: ``current`` (the live attempt) is left running."""

    current: str | None


Event = Submitting | Submitted | MovedOn | Placed | Follow | Failed | Interrupted
Walk = Generator[Event, int | None, int]
"""Yields events, is sent the exit code of a ``Follow``, returns the launch's exit code."""


def _error_code(record: JobRecord) -> int | None:
    code = (record.rest.get("error") or {}).get("code")
    return code if isinstance(code, int) else None


class Runner:
    """Walks one launch plan (``events``). Submitting a job or a study raises ``VertexError``;
    a ladder's attempts turn create errors into decisions."""

    def __init__(
        self,
        plan: LaunchPlan,
        vertex: Vertex,
        *,
        follow: bool = False,
        poll_s: float = 5.0,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        rest: VertexRest | None = None,
    ) -> None:
        self.plan, self.vertex, self.rungs = plan, vertex, plan.rungs
        self._rest = rest
        self.follow, self.poll_s, self.sleep, self.clock = follow, poll_s, sleep, clock
        self.hopeless = [r.hopeless for r in self.rungs]
        self.reasons = {r.number: f"skipped: {r.hopeless}" for r in self.rungs if r.hopeless}
        self.current: str | None = None
        """The live attempt's job name: what Ctrl-C leaves running."""

    @property
    def rest(self) -> VertexRest:
        """The client that watches: REST, because the aiplatform client's calls would import it
        (seconds) for answers REST gives as well."""
        if self._rest is None:
            vertex = self.vertex
            self._rest = vertex if isinstance(vertex, VertexRest) else VertexRest(vertex.stack)
        return self._rest

    def events(self) -> Walk:
        if self.plan.study is not None:
            return self._study()
        if self.plan.ladder:
            return self._ladder()
        return self._job()

    def _job(self) -> Walk:
        rung = self.plan.job
        submitted = self.vertex.submit(
            rung.plan.job.to_proto(), rung.plan.quota, rung.plan.job.stack.region
        )
        yield Submitted(rung, submitted.job.name, submitted.attempt)
        if not self.follow:
            return 0
        return (yield Follow(self.plan.run_id)) or 0

    def _study(self) -> Walk:
        study = self.plan.study
        assert study is not None
        submitted = self.vertex.submit_study(study.study.to_proto(), study.quota,
                                             study.study.stack.region)  # fmt: skip
        yield Submitted(self.plan.job, submitted.name, 1)
        if not self.follow:
            return 0
        return (yield Follow(submitted.name)) or 0

    def _ladder(self) -> Walk:
        start = 0
        while True:
            try:
                decision, rung = yield from self.walk(start)
            except KeyboardInterrupt:
                yield Interrupted(self.current)
                return 130
            if decision.action == NEXT or rung is None:
                reasons = "; ".join(f"rung {n}: {why}" for n, why in sorted(self.reasons.items()))
                yield Failed(f"no rung got capacity: {reasons}")
                return 1
            if decision.action == STOP:
                yield Failed(f"{rung.label}: {decision.reason}")
                return 1
            yield Placed(rung, succeeded=decision.action == DONE)
            if not self.follow:
                return 0
            code = (yield Follow(self.plan.run_id)) or 0
            ended = self.rest.get(self.current) if self.current else None
            if code != 1 or ended is None:
                return code
            decision = after_running(ended.state, ended.error, _error_code(ended))
            following = self.after(rung)
            if decision.action != NEXT or following is None:
                return code
            yield self.moved_on(rung, decision)
            start = following

    def walk(self, start: int = 0) -> Generator[Event, int | None, tuple[Decision, Rung | None]]:
        """From the rung at index ``start`` on: the decision that ended the walk (PLACED, DONE or
        STOP; NEXT when no rung is left) and the rung it was taken on."""
        index = next_rung(self.hopeless, start)
        decision, rung = Decision(NEXT, None), None
        while index is not None:
            rung = self.rungs[index]
            following = self.after(rung)
            decision, cancelled = yield from self.attempt(rung, last=following is None)
            if decision.action != NEXT:
                return decision, rung
            yield self.moved_on(rung, decision, cancelled)
            index = following
        return decision, rung

    def after(self, rung: Rung) -> int | None:
        """The index of the rung to try after ``rung``; None when none is left."""
        return next_rung(self.hopeless, self.rungs.index(rung) + 1)

    def moved_on(self, rung: Rung, decision: Decision, cancelled: bool = False) -> MovedOn:
        self.reasons[rung.number] = decision.reason or "no capacity"
        following = self.after(rung)
        then = self.rungs[following] if following is not None else None
        return MovedOn(rung, decision.reason, cancelled, then)

    def attempt(
        self, rung: Rung, *, last: bool
    ) -> Generator[Event, int | None, tuple[Decision, bool]]:
        """Submit one rung and watch it; whether it had to be cancelled to move on."""
        yield Submitting(rung)
        try:
            submitted = self.vertex.submit(
                rung.plan.job.to_proto(), rung.plan.quota, rung.plan.job.stack.region
            )
        except VertexError as err:
            decision = on_create_error(getattr(err.__cause__, "code", None))
            return (decision if decision.action == NEXT else Decision(STOP, str(err))), False
        name = submitted.job.name
        self.current = name
        yield Submitted(rung, name, submitted.attempt)
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


def drive(walk: Walk, show: Callable[[Event], int | None]) -> int:
    """Run a walk to its end, ``show`` taking each event (and answering a ``Follow`` with the
    following's exit code); the exit code."""
    reply: int | None = None
    try:
        while True:
            reply = show(walk.send(reply))
    except StopIteration as stop:
        return stop.value
