"""Where a run's time went: a timeline of phases per attempt that tiles the wall time from the
run's submission (its first attempt's creation) to its end, and the goodput and badput figures
read off it. Pure: it reads the meter's attempts (`jobs.runs.watch`: times, states, prices) and
the run's log entries, and the clock it is told.

Two sources, each for what it knows (docs/goodput.md says which category comes from which):

- Vertex's own record of each attempt (CustomJob createTime, startTime, endTime, state, error):
  the wait for capacity (created -> running; an attempt that never ran, as a capacity ladder's
  stocked-out rung), the time between attempts, and what was paid (running time at the price).
- The trainer's JSON lines (rank 0's, on the primary replica): the first line of each start of
  the program, ``resumed`` (with ``restore_s``), ``training``, ``train`` (every logging_steps),
  ``checkpoint started`` / ``checkpoint saved`` (with ``blocked_s``), ``eval`` (with ``eval_s``),
  ``stop requested (SIGTERM)...`` and ``done``. The time between two such lines goes to the
  duration the later one measured (its save stall, eval, restore), the rest to the steps it
  advanced, or to what the program was doing before it (start-up, export).

A third, where the stack's controller guards the run: when an attempt stopped stepping, as
its progress guard judged it from the trainer's heartbeat (the run's record). From then until
the attempt's stop line (the cancel's SIGTERM) or its end, the time is a stall, not steps or
idle time.

Steps trained more than once (after a crash lost work since the last checkpoint) are counted
productive once, at their last execution; their earlier executions are work lost. The category
keys, and the names of Google's ml-goodput-measurement library (`BadputType`) they correspond
to, are in ``CATEGORIES``."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from jobs.core.trainer_events import EARLY_STOP_PREFIX, MEASURED, STOP_PREFIX, TrainerEvent
from jobs.runs.logs import SERVICE, LogEntry
from jobs.runs.watch import (
    AttemptStatus,
    excludes_disks,
    same_job,
    seconds_between,
    trainer_line,
    unknown_because,
    usd_of,
)
from jobs.spec.ladder import is_capacity_failure
from jobs.vertex.job_records import JobRecord, rfc3339

PRIMARY_REPLICA = "workerpool0-0"
"""Rank 0's replica: the chief pool's first. Cloud Logging may not name it (""): read as it."""
STARTING, TRAINING, RESUMED, TRAIN = (
    TrainerEvent.STARTING,
    TrainerEvent.TRAINING,
    TrainerEvent.RESUMED,
    TrainerEvent.TRAIN,
)
SAVE_STARTED, SAVED = TrainerEvent.CHECKPOINT_STARTED, TrainerEvent.CHECKPOINT_SAVED
EVAL, DONE = TrainerEvent.EVAL, TrainerEvent.DONE
STOP, EARLY_STOP = STOP_PREFIX, EARLY_STOP_PREFIX
"""Short names for the protocol's events (`jobs.core.trainer_events`), read on every line."""


@dataclass(frozen=True)
class Category:
    key: str
    label: str
    letter: str
    """Its mark in the terminal's timeline bar."""
    colour: str
    """Its colour, in the terminal and the HTML report."""
    library: str | None
    """Google's ml-goodput-measurement BadputType it corresponds to; None: not one of them."""
    source: str
    """Where it is read from: "vertex" (the job's record), "trainer" (its log lines), "both"
    (between a record's time and a line's), or "controller" (a progress guard's judgement in
    the run's record)."""


CATEGORIES = (
    Category("productive", "productive steps", "#", "#2e7d32", None, "trainer"),
    Category("waiting", "waiting for capacity", "W", "#9e9e9e", None, "vertex"),
    Category("provisioning", "provisioning, container start", "P", "#8d6e63",
             "TPU_INITIALIZATION", "both"),
    Category("startup", "program start (imports, data, model)", "S", "#f9a825",
             "PROGRAM_STARTUP", "trainer"),
    Category("restore", "checkpoint restore", "R", "#1e88e5",
             "UNPRODUCTIVE_CHECKPOINT_RESTORE_TIME", "trainer"),
    Category("save", "checkpoint save stalls", "C", "#5e35b1",
             "UNPRODUCTIVE_CHECKPOINT_SAVE_TIME", "trainer"),
    Category("lost", "work lost (steps computed again)", "L", "#c62828",
             "WASTED_PROGRESS_FROM_DISRUPTION", "trainer"),
    Category("recovery", "preemption to the next start", "X", "#ef6c00",
             "INFRASTRUCTURE_RECOVERY_FROM_DISRUPTION", "trainer"),
    Category("eval", "evaluation", "E", "#00897b", "CUSTOM_BADPUT_EVENTS", "trainer"),
    Category("finish", "final save and model export", "F", "#6d4c41", "OTHER", "trainer"),
    Category("stall", "hung: no step until the guard acted", "H", "#ad1457", "OTHER",
             "controller"),
    Category("idle", "idle, between attempts, unaccounted", ".", "#cfd8dc", "OTHER", "both"),
)  # fmt: skip
CATEGORY = {c.key: c for c in CATEGORIES}


@dataclass(frozen=True)
class Phase:
    category: str
    """A key of ``CATEGORY``."""
    start: datetime
    end: datetime
    billed: bool
    """Inside the attempt's running time (start -> end), which the meter prices."""
    steps: tuple[int, int] | None = None
    """For step time: the steps it ran, first and last."""

    @property
    def seconds(self) -> float:
        return seconds_between(self.start, self.end) or 0.0


@dataclass(frozen=True)
class AttemptTimeline:
    number: int
    job: str
    region: str
    strategy: str
    state: str
    usd_per_h: float | None
    usd_unknown_because: str | None
    phases: list[Phase]
    """Oldest first; the first attempt's lane starts at the run's submission, a later one's at
    the previous one's end."""
    preemptions: list[datetime]
    """When rank 0 logged a stop request (SIGTERM)."""
    moved_on: bool
    """It ended without ever running (a rung that got no capacity): the run moved on."""

    @property
    def start(self) -> datetime:
        return self.phases[0].start

    @property
    def end(self) -> datetime:
        return self.phases[-1].end


@dataclass(frozen=True)
class CategoryFigure:
    key: str
    seconds: float
    usd: float | None
    """At each attempt's price for its billed time; 0 for time nobody pays (waiting)."""
    usd_unknown_because: str | None = None


@dataclass(frozen=True)
class TrainPoint:
    """One ``train`` line: for the loss and throughput curves."""

    at: datetime
    step: int
    loss: float | None
    tokens_per_s: float | None


class Figures:
    """What a run's and a study's goodput derive alike from their sums (a frozen dataclass
    supplies the attributes)."""

    productive_s: float
    paid_s: float
    steps_trained: int
    unique_steps: int
    categories: list[CategoryFigure]
    tokens: int | None
    tokens_unknown_because: str | None
    usd: float | None
    usd_unknown_because: str | None
    usd_excludes_disks: bool
    """``usd`` (and each category's) leaves boot disks out: their price is unknown."""

    @property
    def paid_goodput(self) -> float | None:
        """Productive step time over the time paid for (the attempts' running time)."""
        return self.productive_s / self.paid_s if self.paid_s else None

    @property
    def steps_lost(self) -> int:
        return self.steps_trained - self.unique_steps

    @property
    def tokens_per_usd(self) -> float | None:
        if self.tokens is None or not self.usd:
            return None
        return self.tokens / self.usd

    @property
    def tokens_per_usd_unknown_because(self) -> str | None:
        if self.tokens is None:
            return self.tokens_unknown_because
        if self.usd is None:
            return f"the cost is unknown ({self.usd_unknown_because})"
        if not self.usd:
            return "nothing was paid yet"
        return None

    def figure(self, key: str) -> CategoryFigure:
        return next(f for f in self.categories if f.key == key)

    @property
    def badput(self) -> list[CategoryFigure]:
        """Every category but productive steps, largest first; those with no time left out."""
        found = [f for f in self.categories if f.key != "productive" and f.seconds > 0]
        return sorted(found, key=lambda f: f.seconds, reverse=True)


@dataclass(frozen=True)
class Goodput(Figures):
    submitted: datetime
    ended: datetime
    wall_s: float
    paid_s: float
    productive_s: float
    categories: list[CategoryFigure]
    """Every category (productive first), in ``CATEGORIES`` order."""
    attempts: list[AttemptTimeline]
    steps_trained: int
    """Step executions, every repeat counted."""
    unique_steps: int
    tokens: int | None
    tokens_unknown_because: str | None
    usd: float | None
    usd_unknown_because: str | None
    to_first_step_s: list[float]
    """From each stop request to the next start's first reported step."""
    points: list[TrainPoint]
    usd_excludes_disks: bool = False

    @property
    def goodput(self) -> float | None:
        """Productive step time over the wall time since submission."""
        return self.productive_s / self.wall_s if self.wall_s else None


# ---- reading the lines ------------------------------------------------------------------------


@dataclass(frozen=True)
class _Line:
    at: datetime
    fields: dict | None
    """Rank 0's JSON line; None for any other line of the primary replica."""

    @property
    def message(self) -> str:
        return str((self.fields or {}).get("message", ""))

    def number(self, key: str) -> float | None:
        value = (self.fields or {}).get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        return None

    @property
    def step(self) -> int | None:
        value = self.number("step")
        return None if value is None else int(value)

    @property
    def starts_program(self) -> bool:
        return self.message in (RESUMED, TRAINING)


def _primary(entry: LogEntry) -> bool:
    return entry.replica in (PRIMARY_REPLICA, "") and entry.replica != SERVICE


def _lines(entries: Sequence[LogEntry], job: str) -> list[tuple[int | None, _Line]]:
    out = []
    for entry in entries:
        at = rfc3339(entry.timestamp)
        if at is None or not same_job(entry, job) or not _primary(entry):
            continue
        out.append((entry.restart, _Line(at, trainer_line(entry))))
    return sorted(out, key=lambda pair: pair[1].at)


def lives(entries: Sequence[LogEntry], job: str) -> list[list[_Line]]:
    """The primary replica's lines of one attempt, split by start of the program: by the
    restart the local platform tags each line with; where nothing says (Vertex), at each
    ``starting`` line (the trainer's first), or, from a trainer that does not log one, at a
    ``resumed``/``training`` line after a ``training`` line; library lines since rank 0's
    last JSON line go with the new start (its imports)."""
    tagged = _lines(entries, job)
    if any(restart is not None for restart, _ in tagged):
        by_restart: dict[int, list[_Line]] = {}
        for restart, line in tagged:
            by_restart.setdefault(restart or 0, []).append(line)
        return [by_restart[r] for r in sorted(by_restart)]
    found: list[list[_Line]] = [[]]
    for _, line in tagged:
        current = found[-1]
        again = line.starts_program and any(x.message == TRAINING for x in current)
        if line.message == STARTING or again:
            # Library lines after rank 0's last line are the new start's (its imports).
            cut = max((i + 1 for i, x in enumerate(current) if x.fields is not None), default=0)
            found[-1], current = current[:cut], current[cut:]
            found.append(current)
        current.append(line)
    return [life for life in found if life]


# ---- tiling -----------------------------------------------------------------------------------


class _Lane:
    """Phases laid end to end from ``start``, every boundary clamped into [start, end]: a log
    line stamped a little outside the job's record (two clocks) moves to its edge."""

    def __init__(self, start: datetime, end: datetime, billed_from: datetime | None) -> None:
        self.cursor, self.end, self.billed_from = start, end, billed_from
        self.phases: list[Phase] = []

    def to(self, at: datetime, category: str, steps: tuple[int, int] | None = None) -> None:
        at = min(max(at, self.cursor), self.end)
        billed = self.billed_from is not None and self.cursor >= self.billed_from
        if at > self.cursor:
            self.phases.append(Phase(category, self.cursor, at, billed, steps))
        self.cursor = at

    def closed(self, category: str) -> list[Phase]:
        """The phases, the rest up to the end as ``category``; never none (an attempt that
        ended as it was created has one phase of no time)."""
        self.to(self.end, category)
        if not self.phases:
            self.phases.append(Phase(category, self.cursor, self.cursor, False))
        return self.phases


def _walk_life(lane: _Lane, life: list[_Line], first: bool, preemptions: list[datetime]) -> None:
    lane.to(life[0].at, "provisioning" if first else "recovery")
    started, step = False, 0
    for line in life:
        if not _delimits(line):
            continue
        if line.message.startswith(STOP):
            preemptions.append(line.at)
        gap = seconds_between(lane.cursor, line.at) or 0.0
        measured = min(line.number(MEASURED.get(line.message, "")) or 0.0, gap)
        body_end = line.at - timedelta(seconds=measured)
        advanced = started and line.step is not None and line.step > step
        if advanced:
            lane.to(body_end, "productive", (step + 1, line.step))  # type: ignore[arg-type]
        else:
            lane.to(body_end, _before(line, started))
        lane.to(line.at, _measured_category(line.message))
        if line.message == TRAINING:
            started, step = True, line.step or 0
        elif advanced:
            step = line.step  # type: ignore[assignment]


_DELIMITERS = frozenset({RESUMED, TRAINING, TRAIN, SAVE_STARTED, SAVED, EVAL, DONE, EARLY_STOP})


def _delimits(line: _Line) -> bool:
    """Rank 0's lines written by the step loop between two pieces of work; not the ones
    written beside it (a background save's commit, warnings)."""
    if line.fields is None:
        return False
    return line.message in _DELIMITERS or line.message.startswith(STOP)


def _before(line: _Line, started: bool) -> str:
    """What the program did up to ``line`` when it advanced no step."""
    if not started:
        return "startup"
    return {EVAL: "eval", SAVE_STARTED: "save", SAVED: "save", DONE: "finish"}.get(
        line.message, "idle"
    )


def _measured_category(message: str) -> str:
    return {RESUMED: "restore", EVAL: "eval"}.get(message, "save")


def _moved_on(job: JobRecord) -> bool:
    """An attempt that ended without its machines, or lost them for capacity: what a capacity
    ladder moves on from (`jobs.spec.ladder`)."""
    if not job.terminal:
        return False
    code = (job.rest.get("error") or {}).get("code")
    return job.start_time is None or is_capacity_failure(job.error, code)


def _attempt_timeline(
    attempt: AttemptStatus,
    lane_start: datetime,
    previous_moved_on: bool,
    entries: Sequence[LogEntry],
    now: datetime,
) -> AttemptTimeline:
    job = attempt.job
    created = job.create_time or lane_start
    end = job.end_time or (now if not job.terminal else (job.start_time or created))
    end = max(end, lane_start)
    lane = _Lane(lane_start, end, job.start_time)
    if created > lane_start:
        lane.to(created, "waiting" if previous_moved_on else "idle")
    lane.to(job.start_time or end, "waiting")
    preemptions: list[datetime] = []
    tail = "waiting"
    if job.start_time is not None:
        found = lives(entries, job.name)
        for number, life in enumerate(found):
            _walk_life(lane, life, number == 0, preemptions)
        tail = "idle" if found else "provisioning"  # no line yet: still starting
    price = attempt.price
    return AttemptTimeline(
        number=attempt.number,
        job=job.name,
        region=job.region,
        strategy=price.strategy,
        state=job.state,
        usd_per_h=price.usd_per_h,
        usd_unknown_because=price.unknown_because if price.usd_per_h is None else None,
        phases=lane.closed(tail),
        preemptions=preemptions,
        moved_on=_moved_on(job),
    )


STALLED = frozenset({"productive", "idle"})
"""What a hung attempt's lane says of the hang without the guard's judgement: the steps up to
the stop line (which carries the last step), or idle time up to the attempt's end."""


def _stalled(timeline: AttemptTimeline, since: datetime) -> AttemptTimeline:
    """The attempt's time from ``since`` (its last step, as the guard judged) to its first stop
    line after it (or its end), as a stall: the phases the lines alone put there, steps or
    idle, are cut at ``since``; a steps phase keeps its steps on the part before it."""
    until = min((at for at in timeline.preemptions if at >= since), default=timeline.end)
    phases: list[Phase] = []
    for p in timeline.phases:
        if p.category not in STALLED or p.end <= since or p.start >= until:
            phases.append(p)
            continue
        if p.start < since:
            phases.append(replace(p, end=since))
        phases.append(replace(p, category="stall", start=max(p.start, since),
                              end=min(p.end, until), steps=None))  # fmt: skip
        if p.end > until:
            phases.append(replace(p, start=until, steps=None))
    return replace(timeline, phases=phases)


def _executions(timelines: list[AttemptTimeline]) -> Counter[int]:
    """How many times each step was trained."""
    runs: Counter[int] = Counter()
    for t in timelines:
        for p in t.phases:
            if p.steps:
                runs.update(range(p.steps[0], p.steps[1] + 1))
    return runs


def _split_lost(timelines: list[AttemptTimeline], runs: Counter[int]) -> list[AttemptTimeline]:
    """Each step's last execution stays productive; earlier ones become work lost."""
    seen: Counter[int] = Counter()
    out = []
    for t in timelines:
        phases: list[Phase] = []
        for p in t.phases:
            if not p.steps:
                phases.append(p)
                continue
            steps = range(p.steps[0], p.steps[1] + 1)
            seen.update(steps)
            lost = sum(1 for s in steps if seen[s] < runs[s])
            if not lost:
                phases.append(p)
                continue
            cut = p.start + (p.end - p.start) * (lost / len(steps))
            phases.append(replace(p, category="lost", end=cut))
            if cut < p.end:
                phases.append(replace(p, start=cut))
        out.append(replace(t, phases=phases))
    return out


# ---- figures ----------------------------------------------------------------------------------


def _category_figures(timelines: list[AttemptTimeline]) -> list[CategoryFigure]:
    figures = []
    for category in CATEGORIES:
        seconds, usd, why = 0.0, 0.0, None
        for t in timelines:
            for p in t.phases:
                if p.category != category.key:
                    continue
                seconds += p.seconds
                if not p.billed or not p.seconds:
                    continue
                if t.usd_per_h is None:
                    why = why or f"attempt {t.number}: {t.usd_unknown_because}"
                else:
                    usd += t.usd_per_h * p.seconds / 3600
        figures.append(CategoryFigure(category.key, seconds, None if why else usd, why))
    return figures


def _points(entries: Sequence[LogEntry]) -> list[TrainPoint]:
    points = []
    for entry in entries:
        line = trainer_line(entry)
        at = rfc3339(entry.timestamp)
        if line is None or at is None or line.get("message") != TRAIN:
            continue
        parsed = _Line(at, line)
        if parsed.step is None:
            continue
        points.append(TrainPoint(at, parsed.step, parsed.number("loss"),
                                 parsed.number("tokens_per_s")))  # fmt: skip
    return sorted(points, key=lambda p: p.at)


def _tokens(entries: Sequence[LogEntry]) -> int | None:
    """Tokens trained, counted once: the trainer's running count (kept in its checkpoints) at
    its furthest step; None when no ``train`` line carries one."""
    best: tuple[int, int] | None = None
    for entry in entries:
        line = trainer_line(entry)
        if line is None or line.get("message") != TRAIN:
            continue
        parsed = _Line(rfc3339(entry.timestamp) or datetime.min, line)
        tokens = parsed.number("tokens")
        if tokens is not None and parsed.step is not None:
            best = max(best or (parsed.step, int(tokens)), (parsed.step, int(tokens)))
    return None if best is None else best[1]


def _to_first_step(timelines: list[AttemptTimeline], points: list[TrainPoint]) -> list[float]:
    stops = sorted(at for t in timelines for at in t.preemptions)
    found = []
    for stop in stops:
        after = next((p.at for p in points if p.at > stop), None)
        if after is not None:
            found.append((after - stop).total_seconds())
    return found


def goodput_of(
    attempts: Sequence[AttemptStatus],
    entries: Sequence[LogEntry],
    now: datetime,
    stalls: Mapping[str, datetime] | None = None,
) -> Goodput:
    """The run's timeline and figures from its metered attempts (oldest first, at least one:
    `jobs.runs.watch.attempts_of`) and every log entry of the run; ``stalls``: job name -> when
    it stopped stepping, as the run's progress guard judged it (its record)."""
    timelines: list[AttemptTimeline] = []
    cursor = attempts[0].job.create_time or now
    submitted = cursor
    moved_on = False
    for attempt in attempts:
        timeline = _attempt_timeline(attempt, cursor, moved_on, entries, now)
        since = (stalls or {}).get(attempt.job.name)
        if since is not None:
            timeline = _stalled(timeline, since)
        timelines.append(timeline)
        cursor, moved_on = timeline.end, timeline.moved_on
    executions = _executions(timelines)
    timelines = _split_lost(timelines, executions)
    figures = _category_figures(timelines)
    points = _points(entries)
    tokens = _tokens(entries)
    return Goodput(
        submitted=submitted,
        ended=cursor,
        wall_s=seconds_between(submitted, cursor) or 0.0,
        paid_s=sum(a.running_s for a in attempts),
        productive_s=next(f.seconds for f in figures if f.key == "productive"),
        categories=figures,
        attempts=timelines,
        steps_trained=sum(executions.values()),
        unique_steps=len(executions),
        tokens=tokens,
        tokens_unknown_because=None
        if tokens is not None
        else "no train line carries a token count (a trainer older than this one)",
        usd=usd_of(attempts),
        usd_unknown_because=unknown_because(attempts),
        to_first_step_s=_to_first_step(timelines, points),
        points=points,
        usd_excludes_disks=excludes_disks(attempts),
    )
