"""What a run is doing, for `vtx status` and `vtx list`: its attempts, pools and replicas, the
trainer's progress, the checkpoints it committed and what it has cost so far. Pure: it reads
the ``JobRecord``s and log entries it is given and the clock it is told.

One word for one thing:

- **attempt**: one CustomJob of the run (`vtx launch`, or a resubmission with the same run id),
  numbered from 1 in the order they were created; every attempt resumes from the same prefix.
- **restart**: Vertex starting one replica again inside one attempt (up to 5 times; after a
  preemption or an infrastructure error); with ``restartJobOnWorkerRestart`` every replica
  restarts with it.
- **retry**: Vertex running every replica of one attempt again after a crash (SIGSEGV/SIGABRT)
  or a replica that ran out of restarts (up to 3 times); its replicas restart.

What is known where: the CustomJob API says nothing per replica, so on Vertex a replica shows
the time of its last log line only. The local platform tags each log line with the restart of
its replica that wrote it (``LogEntry.restart``: 0 its first start), so there a replica's
restarts are counted: every start after its first, whatever caused it (its own loss, another
replica's with restartJobOnWorkerRestart, or a retry); a restart shows once the replica has
logged a line.

The trainer's progress is read from its JSON log lines (rank 0's), whose messages and keys are
this module's copy of what `trainer/training/loop.py` and `trainer/checkpoint/store.py` log (the
platform never imports the trainer); tests/vtx/local/test_status_cli.py runs the real trainer to pin
them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from jobs.core.catalog import Catalog, load_catalog
from jobs.core.contract import budget_of
from jobs.core.formats import fine_money
from jobs.core.states import JobState
from jobs.core.trainer_events import TrainerEvent
from jobs.custom_jobs.facts import facts_from_rest_job
from jobs.pricing.estimates import PERSISTENT_RESOURCE, PricedSku, estimate
from jobs.pricing.warm_pools import warm_share
from jobs.runs.checkpoints import Stored
from jobs.runs.logs import LogEntry, payload
from jobs.vertex.job_records import JobRecord, PoolRecord, rfc3339


def same_job(entry: LogEntry, job: str) -> bool:
    """Entries name their job in full; compared by id, the part every source agrees on."""
    return entry.job.rsplit("/", 1)[-1] == job.rsplit("/", 1)[-1]


def seconds_between(start: datetime | None, end: datetime | None) -> float | None:
    return None if start is None or end is None else max((end - start).total_seconds(), 0.0)


@dataclass(frozen=True)
class Progress:
    """The trainer's own account of the newest attempt, from rank 0's log lines."""

    step: int | None = None
    total_steps: int | None = None
    tokens_per_s: float | None = None
    loss: float | None = None
    updated: datetime | None = None
    """When the trainer last reported a step."""
    steps_per_s: float | None = None
    """Since the latest start (resume) of the trainer: what the ETA assumes."""
    checkpoints: int = 0
    """Checkpoints committed by every attempt of the run (older ones may be pruned since)."""
    checkpoint_step: int | None = None
    checkpoint_path: str | None = None
    done: bool = False

    def eta_s(self, running: bool) -> float | None:
        """Seconds to the last step at the current pace; None unless the job is running and
        the pace is known."""
        if not running or self.done or not self.steps_per_s:
            return None
        if self.step is None or self.total_steps is None:
            return None
        return max(self.total_steps - self.step, 0) / self.steps_per_s


def trainer_line(entry: LogEntry) -> dict | None:
    """Rank 0's JSON log line as a dict; None for anything else (library output, rank 1...)."""
    line = payload(entry.message)
    return line if line is not None and line.get("rank", 0) == 0 else None


def _number(line: dict, key: str) -> float | None:
    value = line.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _whole(line: dict, key: str) -> int | None:
    value = _number(line, key)
    return None if value is None else int(value)


def trainer_progress(run_entries: Iterable[LogEntry], newest_job: str) -> Progress:
    """Progress of ``newest_job`` (its step, pace and loss); checkpoints of every attempt."""
    fields: dict = {"checkpoints": 0}
    anchor: tuple[int, datetime] | None = None  # (step, time) of the trainer's latest start
    for entry in run_entries:
        line = trainer_line(entry)
        if line is None:
            continue
        message = line.get("message")
        if message == TrainerEvent.CHECKPOINT_COMMITTED:
            fields["checkpoints"] += 1
            fields["checkpoint_step"] = _whole(line, "step")
            fields["checkpoint_path"] = line.get("path")
        if not same_job(entry, newest_job):
            continue
        at, step = rfc3339(entry.timestamp), _whole(line, "step")
        if message == TrainerEvent.TRAINING:
            fields.update(total_steps=_whole(line, "total_steps"), step=step, steps_per_s=None)
            anchor = (step, at) if step is not None and at is not None else None
        elif message == TrainerEvent.TRAIN:
            fields.update(
                step=step,
                loss=_number(line, "loss"),
                tokens_per_s=_number(line, "tokens_per_s"),
                updated=at,
            )
            fields["steps_per_s"] = _pace(anchor, step, at)
        elif message == TrainerEvent.DONE:
            fields.update(step=step, done=True)
    return Progress(**fields)


def _pace(
    anchor: tuple[int, datetime] | None, step: int | None, at: datetime | None
) -> float | None:
    if anchor is None or step is None or at is None:
        return None
    elapsed_s = seconds_between(anchor[1], at)
    return (step - anchor[0]) / elapsed_s if elapsed_s and step > anchor[0] else None


# ---- pools and replicas ---------------------------------------------------------------------


@dataclass(frozen=True)
class ReplicaStatus:
    name: str
    last_log: datetime | None
    restarts: int | None
    """None where the platform does not say (Vertex)."""


@dataclass(frozen=True)
class PoolStatus:
    pool: PoolRecord
    replicas: list[ReplicaStatus]


def pool_statuses(job: JobRecord, entries: Sequence[LogEntry], local: bool) -> list[PoolStatus]:
    """Each pool of ``job`` and its replicas, from ``job``'s own log entries."""
    pools = []
    for pool in job.pools:
        replicas = []
        for name in pool.replica_names:
            own = [e for e in entries if e.replica == name]
            last = max((t for e in own if (t := rfc3339(e.timestamp))), default=None)
            restarts = max((e.restart for e in own if e.restart is not None), default=0)
            replicas.append(ReplicaStatus(name, last, restarts if local else None))
        pools.append(PoolStatus(pool, replicas))
    return pools


# ---- cost -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Price:
    """What one attempt pays per hour at the catalog's price in its region."""

    usd_per_h: float | None
    """None when the catalog lacks a figure it needs (``unpriced``), or for FLEX_START."""
    kind: str
    """Which price it pays: "on-demand", "Spot", "FLEX_START" or "persistent resource"
    (`jobs.pricing.estimates`; on a resource ``usd_per_h`` is the job's share of it)."""
    strategy: str
    table: str | None
    unpriced: tuple[str, ...]
    region: str = ""
    unknown_because: str | None = None
    """Why ``usd_per_h`` is unknown (`jobs.pricing.estimates.CostEstimate.unknown_because`)."""
    table_as_of: str | None = None
    skus: tuple[PricedSku, ...] = ()
    """The billing catalog SKUs behind its figures (refreshed tables only)."""
    excludes_disks: bool = False
    """``usd_per_h`` leaves the boot disks out: their figure is unknown
    (`jobs.pricing.estimates.CostEstimate.excludes_disks`)."""
    share: str | None = None
    """On a persistent resource, what the meter charges in words (`WarmShare.text`): the bill is
    the resource's, the meter the job's share of it."""


def price_of(job: JobRecord, region: str, catalog: Catalog | None = None) -> Price:
    """The catalog's price for ``job`` as submitted (its machines, accelerators, strategy) in
    ``region``; ``catalog`` is the stack's (`Catalog.for_stack`: a local run is priced from the
    local stand-in's tables), the shipped one when None. A job on a persistent resource is
    metered at its share of the resource's pools (`jobs.pricing.warm_pools.share_of`), which
    ``catalog`` knows for the stack's resources; unknown otherwise."""
    cat = catalog or load_catalog()
    facts = facts_from_rest_job(job.rest)
    cost = estimate(facts, region, cat)
    table = cost.table.name if cost.table is not None else None
    share = warm_share(facts, cat) if cost.price_kind == PERSISTENT_RESOURCE else None
    if share is not None:
        return Price(
            share.usd_per_h,
            cost.price_kind,
            cost.strategy,
            table,
            (),
            cost.region,
            share.unknown_because,
            cost.table.as_of if cost.table is not None else None,
            excludes_disks=share.disks_unknown_because is not None,
            share=share.text,
        )
    return Price(
        cost.usd_per_h,
        cost.price_kind,
        cost.strategy,
        table,
        tuple(cost.unpriced),
        cost.region,
        cost.unknown_because,
        cost.table.as_of if cost.table is not None else None,
        tuple(cost.skus),
        cost.excludes_disks,
    )


def running_s(job: JobRecord, now: datetime) -> float:
    """How long Vertex has been running (and billing) the attempt: from its start to its end,
    or to now while it runs; 0 before it started."""
    end = job.end_time or (job.start_time if job.terminal else now)
    return seconds_between(job.start_time, end) or 0.0


def usd_so_far(job: JobRecord, price: Price, now: datetime) -> float | None:
    seconds = running_s(job, now)
    if not seconds:
        return 0.0
    return None if price.usd_per_h is None else price.usd_per_h * seconds / 3600


# ---- the run --------------------------------------------------------------------------------


@dataclass(frozen=True)
class AttemptStatus:
    number: int
    job: JobRecord
    running_s: float
    price: Price
    usd: float | None

    @property
    def excludes_disks(self) -> bool:
        """``usd`` is known, billed, and leaves the boot disks out (their price is unknown)."""
        return self.usd is not None and self.running_s > 0 and self.price.excludes_disks


@dataclass(frozen=True)
class RunStatus:
    run_id: str | None
    attempts: list[AttemptStatus]
    """Oldest first: ``attempts[-1]`` is the newest."""
    pools: list[PoolStatus]
    progress: Progress
    now: datetime
    stored: Stored | None = None
    """The checkpoints storage holds (`jobs.runs.checkpoints`); None when not looked at."""

    @property
    def newest(self) -> AttemptStatus:
        return self.attempts[-1]

    @property
    def running(self) -> bool:
        return self.newest.job.state == JobState.RUNNING

    @property
    def elapsed_s(self) -> float | None:
        """From the first attempt's creation to the newest one's end (or now)."""
        first, last = self.attempts[0].job, self.newest.job
        end = last.end_time or (last.create_time if last.terminal else self.now)
        return seconds_between(first.create_time, end)

    @property
    def running_s(self) -> float:
        return sum(a.running_s for a in self.attempts)

    @property
    def usd(self) -> float | None:
        """Cost so far over every attempt; unknown as soon as one billed attempt's price is."""
        return usd_of(self.attempts)

    @property
    def unknown_because(self) -> str | None:
        """Why ``usd`` is unknown: the first billed attempt whose price is."""
        return unknown_because(self.attempts)

    @property
    def excludes_disks(self) -> bool:
        """``usd`` leaves the boot disks out (`excludes_disks`)."""
        return excludes_disks(self.attempts)

    @property
    def projected_usd(self) -> float | None:
        """The run's total if the newest attempt runs to its last step at the current pace
        (the ETA); None unless it is running with a known pace and price."""
        eta_s, so_far = self.progress.eta_s(self.running), self.usd
        per_h = self.newest.price.usd_per_h
        if eta_s is None or so_far is None or per_h is None:
            return None
        return so_far + per_h * eta_s / 3600

    @property
    def budget_usd(self) -> float | None:
        """The run's budget (``budget.max_cost_usd``), from its newest attempt's label."""
        return budget_of(self.newest.job.labels)

    @property
    def stopped_by_budget(self) -> str | None:
        """Why a cancelled run was stopped when its meter had crossed its budget (the local
        platform's error says so itself; on Vertex the follower's cancel leaves only
        CANCELED); None otherwise."""
        if self.newest.job.state != JobState.CANCELLED:
            return None
        return budget_crossed(self.attempts)


def usd_of(attempts: Sequence[AttemptStatus]) -> float | None:
    """The cost of ``attempts`` (a run's, or every trial's of a study); None when one billed
    attempt's price is unknown: a partial sum would read as the whole cost."""
    costs = [a.usd for a in attempts]
    return None if any(c is None for c in costs) else sum(c or 0.0 for c in costs)


def budget_crossed(attempts: Sequence[AttemptStatus]) -> str | None:
    """Why a run must stop: its meter (every attempt, `usd_of`) reached the budget its newest
    attempt carries; None under it, without a budget, or while the meter is unknown (no run
    is stopped on a made-up figure)."""
    return _crossed("run", budget_of(attempts[-1].job.labels), usd_of(attempts))


def study_budget_crossed(labels: dict[str, str], trials: Sequence[AttemptStatus]) -> str | None:
    """Why a study must stop: its meter (every trial's job at its price, `trials_metered`)
    reached the budget the study carries (its ``labels``, the trial template's
    ``budget.max_cost_usd``); None under it, without a budget, or while the meter is unknown."""
    return _crossed("study", budget_of(labels), usd_of(trials) if trials else None)


def _crossed(what: str, budget: float | None, usd: float | None) -> str | None:
    if budget is None or usd is None or usd < budget:
        return None
    return (
        f"the {what}'s cost so far {fine_money(usd)} crossed budget.max_cost_usd "
        f"{fine_money(budget)}"
    )


def excludes_disks(attempts: Sequence[AttemptStatus]) -> bool:
    """`usd_of` is known but leaves out the boot disks of a billed attempt (their price is
    unknown): it undercounts by them."""
    return usd_of(attempts) is not None and any(a.excludes_disks for a in attempts)


def unknown_because(attempts: Sequence[AttemptStatus]) -> str | None:
    """Why `usd_of` is unknown: the first attempt without a price, and why it has none."""
    for a in attempts:
        if a.usd is None:
            return f"attempt {a.number}: {a.price.unknown_because}"
    return None


def attempts_of(
    jobs: Sequence[JobRecord], region: str, now: datetime, catalog: Catalog | None = None
) -> list[AttemptStatus]:
    """A run's jobs (any order) as numbered attempts, oldest first, each with its cost at the
    price it pays (its strategy's) in its own region (a capacity ladder's attempts may run in
    several; ``region`` for a job whose name has none)."""
    ordered = sorted(jobs, key=lambda j: j.create_time or now)
    statuses = []
    for number, job in enumerate(ordered, start=1):
        price = price_of(job, job.region or region, catalog)
        statuses.append(
            AttemptStatus(number, job, running_s(job, now), price, usd_so_far(job, price, now))
        )
    return statuses


def run_status(
    jobs: Sequence[JobRecord],
    entries: Sequence[LogEntry],
    region: str,
    now: datetime,
    local: bool,
    catalog: Catalog | None = None,
) -> RunStatus:
    """The status of a run from its attempts (``jobs``, at least one) and its log entries,
    priced from ``catalog`` (the stack's)."""
    attempts = attempts_of(jobs, region, now, catalog)
    newest = attempts[-1].job
    own = [e for e in entries if same_job(e, newest.name)]
    return RunStatus(
        run_id=newest.run_id,
        attempts=attempts,
        pools=pool_statuses(newest, own, local),
        progress=trainer_progress(entries, newest.name),
        now=now,
    )


def trials_metered(
    trial_jobs: Sequence[JobRecord], region: str, now: datetime, catalog: Catalog | None = None
) -> list[AttemptStatus]:
    """A study's trials' CustomJobs, each metered as the one attempt it is (at its price, in
    its region), for `usd_of` to sum: the study's cost so far."""
    return [attempts_of([job], region, now, catalog)[0] for job in trial_jobs]
