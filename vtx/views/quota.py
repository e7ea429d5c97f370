"""How quota prints: a job's live preflight (each metric against its limit and what is free,
with the stanza that would raise it) and the project's limits and usage per region (`vtx quota`)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from jobs.core.catalog import QUOTA_PREFIX
from jobs.core.stack import StackOutputs
from jobs.quota.cloud_quotas import (
    NOT_LISTED,
    OK,
    OVER_LIMIT,
    SHORT_NOW,
    MetricCheck,
    QuotaCheck,
    RegionQuota,
)
from vtx.views.fit_table import FitTable


def units(value: int | None, unlimited: str = "unlimited") -> str:
    return unlimited if value is None else f"{value:,}"


VERDICT_STYLE = {OK: "green", SHORT_NOW: "yellow", OVER_LIMIT: "red", NOT_LISTED: "dim"}


def quota_check_table(check: QuotaCheck) -> Table:
    """The job's needs beside the live limit, what running jobs hold and what is free."""
    table = FitTable(
        title=f"Quota in {check.region} (limits: Cloud Quotas, now)",
        title_justify="left",
        caption="in use: the region's CustomJobs that have not ended, "
        "accelerators or vCPUs x replicas",
        caption_justify="left",
    )
    table.add_column("metric", overflow="fold")
    for column in ("needed", "limit", "in use", "free"):
        table.add_column(column, justify="right", no_wrap=True)
    table.add_column("verdict", no_wrap=True)
    for m in check.metrics:
        limit = units(m.limit) if m.listed else "-"
        free = units(m.free) if m.listed else "-"
        verdict = Text(m.verdict, style=VERDICT_STYLE[m.verdict])
        table.add_row(m.metric, str(m.needed), limit, str(m.in_use), free, verdict)
    return table


def _fix(m: MetricCheck, region: str, stack: StackOutputs) -> str:
    """What to request: the preference infra would create (GPUs), the quota by id (vCPUs, TPUs:
    infra does not request them), or on the local platform its capacity model's limit."""
    p = m.preference
    config = (
        "a stack's vtx:platform.quotas"
        if stack.is_local
        else f"Pulumi.{stack.environment}.yaml under vtx:platform.quotas, then `pulumi up`"
    )
    gcp = (
        f"request quota preference {p.preference_id}: add {p.stanza} to {config}"
        if p is not None
        else f"raise quota {m.quota_id or m.metric} in the console (Cloud Quotas): "
        "vtx:platform.quotas requests GPU quotas only"
    )
    if not stack.is_local:
        return gcp
    # `capacity set` replaces the whole model: edit what `capacity show` prints.
    return (
        f"raise regions.{region}.quotas.{m.metric} to {m.needed + m.in_use} in the local "
        "capacity model (`vtx local capacity show` into a file, edit it, `vtx local capacity "
        f"set FILE.yaml`); on Google Cloud: {gcp}"
    )


def quota_check_lines(check: QuotaCheck, stack: StackOutputs) -> list[tuple[str, str]]:
    """(style, line) for each metric that does not simply fit, and for a check not done."""
    if check.skipped is not None:
        return [("yellow", f"quota: not checked ({check.skipped})")]
    lines = []
    for m in check.over_limit:
        lines.append(
            (
                "red",
                f"quota: {m.metric} needs {m.needed}, over the limit of {m.limit} in "
                f"{check.region}: Vertex would refuse this job. "
                f"To fix: {_fix(m, check.region, stack)}",
            )
        )
    for m in check.short_now:
        lines.append(
            (
                "yellow",
                f"quota: {m.metric} needs {m.needed}, within the limit of {m.limit} but only "
                f"{m.free} free now ({m.in_use} held by running jobs): the job will wait until "
                f"they end. To run beside them: {_fix(m, check.region, stack)}",
            )
        )
    unlisted = [m.metric for m in check.metrics if m.verdict == NOT_LISTED]
    if unlisted:
        lines.append(
            (
                "dim",
                f"quota: Cloud Quotas lists no quota for {', '.join(unlisted)} in "
                f"{check.region}: not checked",
            )
        )
    return lines


def print_quota_check(console: Console, check: QuotaCheck, stack: StackOutputs) -> None:
    if check.skipped is None:
        console.print(quota_check_table(check))
    for style, line in quota_check_lines(check, stack):
        console.print(line, style=style, markup=False, highlight=False)


def quota_usage_rows(regions: list[RegionQuota], metrics: list[str] | None) -> list[dict]:
    """One row per region and training metric (``metrics`` keeps some, in that order)."""
    rows = []
    for quota in regions:
        names = metrics or sorted(set(quota.limits) | set(quota.in_use))
        for metric in names:
            limit = quota.limits.get(metric)
            used = quota.in_use.get(metric, 0)
            value = limit.limit if limit else None
            rows.append(
                {
                    "region": quota.region,
                    "metric": metric,
                    "quota_id": limit.quota_id if limit else None,
                    "listed": limit is not None,
                    "limit": value,
                    "unlimited": limit is not None and value is None,
                    "in_use": used,
                    "free": None if value is None else max(value - used, 0),
                }
            )
    return rows


def quota_usage_table(rows: list[dict]) -> Table:
    table = FitTable(
        title="Vertex AI custom training quota (limits: Cloud Quotas; in use: running CustomJobs); "
        f"metrics under {QUOTA_PREFIX}",
        title_justify="left",
        caption="'not listed': Cloud Quotas has no such quota in the region; in use counts "
        "CustomJobs only (tuning jobs, pipelines and persistent resources hold quota too)",
        caption_justify="left",
    )
    for column in ("region", "metric", "quota id", "limit", "in use", "free"):
        numeric = column in ("limit", "in use", "free")
        # The metric is what users grep for and paste: never folded; the id may fold.
        table.add_column(
            column,
            justify="right" if numeric else "left",
            overflow="fold",
            no_wrap=column in ("region", "metric"),
        )
    for row in rows:
        listed = row["listed"]
        table.add_row(
            row["region"],
            row["metric"].removeprefix(QUOTA_PREFIX),
            row["quota_id"] or "-",
            units(row["limit"]) if listed else "not listed",
            str(row["in_use"]),
            units(row["free"]) if listed else "-",
        )
    return table
