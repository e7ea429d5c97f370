"""What `vtx status` and `vtx list` print: a table for people, or JSON/YAML for programs.

The JSON and YAML documents are stable: keys are only ever added. Unknown values are ``null``
(never 0 or ""): a price the catalog lacks, a pace not yet measured, a replica count of
restarts Vertex does not report. Times are RFC 3339 in UTC, durations are seconds (``_s``),
money is US dollars (``usd``) at the catalog's price.

``vtx status --format json``::

    run_id        the run (every attempt carries it as the vtx-run-id label); null for a job
                  launched without vtx
    job           the newest attempt's resource name
    state         its state (JOB_STATE_...); error: its error message or null
    outputs       the run's output prefix (baseOutputDirectory)
    attempts      [{attempt (1 = the first CustomJob of the run), job, state, resources (what
                  it ran on, as `vtx list` says it: a ladder's moves), created, started, ended,
                  running_s, usd_per_h, usd, price (what it pays: on-demand, Spot or
                  FLEX_START), price_region, price_table, price_table_as_of, price_skus:
                  [{name, sku, description, fetched_at}] (the billing catalog SKUs behind its
                  price; [] from a shipped table), usd_unknown_because, usd_excludes_disks
                  (usd is known but leaves the boot disks out: their price is unknown),
                  error}], oldest first:
                  each attempt (a ladder's rungs too) at its own strategy's price in its own
                  region
    pools         [{pool (workerpool0...), role, machine, accelerator, accelerator_count,
                  replica_count, replicas: [{replica (workerpool1-0...), last_log, restarts
                  (starts after the first, whatever the cause; local only)}]}] of the newest
                  attempt
    progress      {step, total_steps, tokens_per_s, loss, updated, steps_per_s, eta_s, done}
                  as the trainer logs them (rank 0)
    checkpoints   {committed (by every attempt, as the trainer logged them), last_step,
                  last_path, root, stored_steps (the committed steps storage holds now: what
                  a resume chooses from), stored_error (why they are unknown)}
    elapsed_s     from the first attempt's creation to the newest one's end, or now
    running_s     time Vertex ran (and billed) the attempts, summed
    cost          {usd (so far, every attempt), usd_per_h (the newest attempt), strategy,
                  price (on-demand, Spot or FLEX_START), unpriced (what the catalog has no
                  price for), price_table, usd_unknown_because (why usd is null),
                  usd_excludes_disks (usd undercounts by boot disks of unknown price),
                  projected_usd (the total if the newest attempt runs to its last step at the
                  current pace; null without a pace or price), budget_usd (the run's
                  budget.max_cost_usd, or null), stopped_by_budget (a cancelled run whose meter
                  had crossed its budget: why; else null)}
    goodput       where the run's time and money went: phases per attempt, goodput, badput per
                  category in seconds and dollars, tokens per dollar
                  (keys: vtx/views/goodput/run.py)

``vtx list --format json``: a list, newest first, of {run_id, attempt, job, name, state,
resources, pools: [{pool, role, machine, accelerator, accelerator_count, replica_count}],
created, duration_s, usd_per_h, usd, usd_unknown_because, budget_usd}."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

import yaml
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from jobs.core.contract import budget_of
from jobs.core.formats import duration, fine_money, money
from jobs.core.states import bare_name
from jobs.pricing.estimates import disks_note
from jobs.runs.watch import AttemptStatus, PoolStatus, RunStatus
from jobs.spec.template import ROLES
from jobs.vertex.job_records import JobRecord, PoolRecord
from vtx.views.fit_table import FitTable


class OutputFormat(StrEnum):
    table = "table"
    json = "json"
    yaml = "yaml"


# ---- plain values ---------------------------------------------------------------------------


def when(moment: datetime | None) -> str | None:
    return None if moment is None else moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def rounded(value: float | None, digits: int = 6) -> float | None:
    return None if value is None else round(value, digits)


def role(pool: PoolRecord) -> str:
    return ROLES[pool.index] if pool.index < len(ROLES) else pool.name


def pool_json(pool: PoolRecord) -> dict[str, Any]:
    return {
        "pool": pool.name,
        "role": role(pool),
        "machine": pool.machine,
        "accelerator": pool.accelerator,
        "accelerator_count": pool.accelerator_count,
        "replica_count": pool.replicas,
    }


def attempt_json(attempt: AttemptStatus) -> dict[str, Any]:
    job = attempt.job
    return {
        "attempt": attempt.number,
        "job": job.name,
        "state": job.state,
        "resources": resources(job),
        "created": when(job.create_time),
        "started": when(job.start_time),
        "ended": when(job.end_time),
        "running_s": rounded(attempt.running_s, 3),
        "usd_per_h": rounded(attempt.price.usd_per_h),
        "usd": rounded(attempt.usd),
        "price": attempt.price.kind,
        "price_region": attempt.price.region,
        "price_table": attempt.price.table,
        "price_table_as_of": attempt.price.table_as_of,
        "price_skus": [
            {"name": s.name, "sku": s.sku, "description": s.description, "fetched_at": s.fetched_at}
            for s in attempt.price.skus
        ],
        "usd_unknown_because": attempt.price.unknown_because if attempt.usd is None else None,
        "usd_excludes_disks": attempt.excludes_disks,
        "warm_pool_share": attempt.price.share,
        "error": job.error,
    }


def status_json(status: RunStatus) -> dict[str, Any]:
    newest, progress = status.newest, status.progress
    return {
        "run_id": status.run_id,
        "job": newest.job.name,
        "state": newest.job.state,
        "error": newest.job.error,
        "outputs": newest.job.output_prefix,
        "attempts": [attempt_json(a) for a in status.attempts],
        "pools": [_pool_status_json(p) for p in status.pools],
        "progress": {
            "step": progress.step,
            "total_steps": progress.total_steps,
            "tokens_per_s": rounded(progress.tokens_per_s, 3),
            "loss": progress.loss,
            "updated": when(progress.updated),
            "steps_per_s": rounded(progress.steps_per_s),
            "eta_s": rounded(progress.eta_s(status.running), 3),
            "done": progress.done,
        },
        "checkpoints": {
            "committed": progress.checkpoints,
            "last_step": progress.checkpoint_step,
            "last_path": progress.checkpoint_path,
            **_stored_json(status),
        },
        "elapsed_s": rounded(status.elapsed_s, 3),
        "running_s": rounded(status.running_s, 3),
        "cost": {
            "usd": rounded(status.usd),
            "usd_per_h": rounded(newest.price.usd_per_h),
            "strategy": newest.price.strategy,
            "price": newest.price.kind,
            "unpriced": list(newest.price.unpriced),
            "price_table": newest.price.table,
            "usd_unknown_because": status.unknown_because,
            "usd_excludes_disks": status.excludes_disks,
            "projected_usd": rounded(status.projected_usd),
            "budget_usd": status.budget_usd,
            "stopped_by_budget": status.stopped_by_budget,
        },
    }


def _stored_json(status: RunStatus) -> dict[str, Any]:
    stored = status.stored
    if stored is None:
        return {"root": None, "stored_steps": None, "stored_error": None}
    return {"root": stored.root, "stored_steps": stored.steps, "stored_error": stored.error}


def _pool_status_json(pool: PoolStatus) -> dict[str, Any]:
    replicas = [
        {"replica": r.name, "last_log": when(r.last_log), "restarts": r.restarts}
        for r in pool.replicas
    ]
    return {**pool_json(pool.pool), "replicas": replicas}


def list_json(attempts: Sequence[AttemptStatus]) -> list[dict[str, Any]]:
    return [
        {
            "run_id": a.job.run_id,
            "attempt": a.number,
            "job": a.job.name,
            "name": a.job.display_name,
            "state": a.job.state,
            "resources": resources(a.job),
            "pools": [pool_json(p) for p in a.job.pools],
            "created": when(a.job.create_time),
            "duration_s": rounded(a.running_s, 3),
            "usd_per_h": rounded(a.price.usd_per_h),
            "usd": rounded(a.usd),
            "usd_unknown_because": a.price.unknown_because if a.usd is None else None,
            "budget_usd": budget_of(a.job.labels),
        }
        for a in attempts
    ]


def print_document(out: Console, document: object, fmt: OutputFormat) -> None:
    """JSON or YAML on stdout as is: no markup, no highlighting, no wrapping."""
    if fmt is OutputFormat.json:
        text = json.dumps(document, indent=2)
    else:
        text = yaml.safe_dump(document, sort_keys=False, allow_unicode=True).rstrip("\n")
    out.print(text, markup=False, highlight=False, soft_wrap=True)


# ---- tables ---------------------------------------------------------------------------------


def pool_line(pool: PoolRecord) -> str:
    accelerators = f" + {pool.accelerator_count} x {pool.accelerator}" if pool.accelerator else ""
    return f"{pool.replicas} x {pool.machine}{accelerators}"


def resources(job: JobRecord, between: str = "; ") -> str:
    """What `sky queue` calls resources: machines and accelerators, pools of the same kind
    added up (a chief and a worker on n1-standard-4 are ``2 x n1-standard-4``)."""
    replicas: dict[tuple[str, str | None, int], int] = {}
    for pool in job.pools:
        kind = (pool.machine, pool.accelerator, pool.accelerator_count)
        replicas[kind] = replicas.get(kind, 0) + pool.replicas
    lines = [
        pool_line(PoolRecord(0, machine, accelerator, count, n))
        for (machine, accelerator, count), n in replicas.items()
    ]
    return between.join(lines) or "-"


def _ago(moment: datetime | None, now: datetime) -> str:
    if moment is None:
        return "no log yet"
    return f"last log {when(moment)} ({duration((now - moment).total_seconds())} ago)"


def _replica_line(name: str, last_log: datetime | None, restarts: int | None, now: datetime) -> str:
    counted = "" if restarts is None else f", {restarts} restart{'s' * (restarts != 1)}"
    return f"{name}: {_ago(last_log, now)}{counted}"


def _progress_rows(status: RunStatus) -> list[tuple[str, str]]:
    progress = status.progress
    if progress.step is None:
        return [("step", "- (no trainer progress in the logs yet)")]
    total = progress.total_steps
    of = f" of {total} ({100 * progress.step / total:.0f}%)" if total else ""
    rows = [("step", f"{progress.step}{of}" + (", done" if progress.done else ""))]
    if progress.tokens_per_s is not None:
        rows.append(("tokens/s", f"{progress.tokens_per_s:,.0f}"))
    if progress.loss is not None:
        rows.append(("loss", f"{progress.loss:.4f}"))
    eta = progress.eta_s(status.running)
    if eta is not None:
        rows.append(("ETA", f"{duration(eta)} (at {progress.steps_per_s:.3g} steps/s)"))
    return rows


def _checkpoint_row(status: RunStatus) -> str:
    """What the trainer logged committing, then what storage holds now (pruned to
    save_total_limit): the steps a restart would resume from."""
    progress, stored = status.progress, status.stored
    if progress.checkpoints:
        logged = f"{progress.checkpoints} committed, latest step {progress.checkpoint_step}"
    else:
        logged = "none committed in the logs"
    if stored is None or stored.root is None:
        return logged
    if stored.steps is None:
        return f"{logged}; in storage: unknown ({stored.error})"
    steps = f"step(s) {', '.join(map(str, stored.steps))}" if stored.steps else "none"
    return f"{logged}; in storage: {steps}\nunder {stored.root}/"


def _cost_row(status: RunStatus) -> str:
    price = status.newest.price
    if price.usd_per_h is not None:
        rate = f"{money(price.usd_per_h)}/h {price.kind}{disks_note(price.excludes_disks)}"
    elif price.unpriced:
        rate = f"no {price.kind} price for {', '.join(price.unpriced)}"
    else:
        rate = f"no {price.kind} price in the catalog"
    table = f", table {price.table}" if price.table else ""
    note = disks_note(status.excludes_disks)
    lines = [f"{money(status.usd)}{note} so far at the catalog's price ({rate}{table})"]
    if price.share is not None:  # the bill is the resource's; the meter charges the share
        lines.append(f"metered as its {price.share}; the bill is the resource's, busy or idle")
    if status.usd is None:
        lines.append(f"unknown: {status.unknown_because}")
    if status.projected_usd is not None:
        lines.append(f"{money(status.projected_usd)}{note} projected at the current pace")
    if status.budget_usd is not None:
        lines.append(f"budget {fine_money(status.budget_usd)} (budget.max_cost_usd)")
    return "\n".join(lines)


def status_table(status: RunStatus) -> Table:
    table = FitTable(show_header=False)
    # Long values wrap: on an 80-column terminal a no_wrap value squeezed the field names out
    # and cut the error message short.
    table.add_column("field", no_wrap=True)
    table.add_column("value", overflow="fold")
    newest, now = status.newest.job, status.now
    rows: list[tuple[str, str]] = [
        ("job", newest.name),
        ("run id", status.run_id or "-"),
        ("attempt", f"{status.newest.number} of {len(status.attempts)}"),
        ("state", newest.state),
    ]
    rows += [(f"pool {p.pool.index}", f"{role(p.pool)}: {pool_line(p.pool)}") for p in status.pools]
    replicas = [r for p in status.pools for r in p.replicas]
    if replicas:
        lines = (_replica_line(r.name, r.last_log, r.restarts, now) for r in replicas)
        rows.append(("replicas", "\n".join(lines)))
    rows += _progress_rows(status)
    running = f"{duration(status.running_s)} running"
    rows += [
        ("elapsed", f"{duration(status.elapsed_s)} ({running}, {len(status.attempts)} attempt(s))"),
        ("checkpoints", _checkpoint_row(status)),
        ("cost", _cost_row(status)),
        ("created", when(newest.create_time) or "-"),
        ("outputs", newest.output_prefix or "-"),
    ]
    if newest.error:
        rows.append(("error", newest.error))
    if status.stopped_by_budget:
        rows.append(("stopped", f"by its budget: {status.stopped_by_budget}"))
    for name, value in rows:
        table.add_row(name, escape(value))
    return table


def attempts_table(status: RunStatus) -> Table:
    table = FitTable(title="attempts (one CustomJob each)", title_justify="left")
    columns = ("attempt", "job", "region", "resources", "state", "created", "running", "cost")
    for column in columns:
        table.add_column(column, overflow="fold")
    for a in status.attempts:
        table.add_row(
            str(a.number),
            a.job.job_id,
            a.job.region,
            escape(resources(a.job, "\n")),
            bare_name(a.job.state),
            (when(a.job.create_time) or "-")[:19],
            duration(a.running_s),
            money(a.usd) + disks_note(a.excludes_disks),
        )
    return table


def print_status(out: Console, status: RunStatus) -> None:
    out.print(status_table(status))
    if len(status.attempts) > 1:
        out.print(attempts_table(status))


def list_table(attempts: Sequence[AttemptStatus]) -> Table:
    """One row per attempt, as `sky queue` has one per job (the job ids are in the JSON);
    borderless like it, so that more fits in 80 columns: there only the run id and the
    resources wrap (folded whole, never cut), every other column keeps its width."""
    table = FitTable(title="vtx jobs", title_justify="left", box=box.SIMPLE_HEAD, show_edge=False)
    table.add_column("run id", overflow="fold", ratio=3)
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("state", no_wrap=True)
    table.add_column("resources", overflow="fold", ratio=2)
    for column in ("created UTC", "duration", "cost"):
        table.add_column(column, no_wrap=True, justify="right" if column == "cost" else "left")
    for a in attempts:
        table.add_row(
            escape(a.job.run_id or a.job.job_id),
            str(a.number),
            bare_name(a.job.state),
            escape(resources(a.job, "\n")),
            (when(a.job.create_time) or "-")[5:16].replace("T", " "),
            duration(a.running_s),
            money(a.usd) + disks_note(a.excludes_disks),
        )
    return table
