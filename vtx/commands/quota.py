"""`vtx quota`: the project's Vertex AI custom-training quota in the stack's region(s): each
training metric's limit (Cloud Quotas API), what the region's running CustomJobs hold, and what
is free. The launch plan's preflight (`vtx launch`, `vtx cost --stack`) reads the same figures
through the same `jobs.quota.cloud_quotas.QuotaReader`."""

from __future__ import annotations

from typing import Annotated

import typer

from jobs.core.catalog import load_catalog
from jobs.quota.cloud_quotas import QuotaReader, QuotaUnavailable, read_regions
from vtx.options import StackFileOpt, StackOpt, console, fail, required_stack
from vtx.views.quota import quota_usage_rows, quota_usage_table
from vtx.views.runs import OutputFormat, print_document

app = typer.Typer()

RegionsOpt = Annotated[
    list[str] | None,
    typer.Option("--region", help="A region to list (default: the stack's). Repeatable."),
]
AcceleratorOpt = Annotated[
    str | None,
    typer.Option("--accelerator", help="Only this accelerator's metrics (on-demand and Spot)."),
]
FormatOpt = Annotated[
    OutputFormat,
    typer.Option(
        "--format",
        help="table for people; json or yaml for programs (stable keys).",
        metavar="table|json|yaml",
    ),
]


def _metrics(accelerator: str | None) -> list[str] | None:
    """The accelerator's two metrics (on-demand, then preemptible); None: every metric."""
    if accelerator is None:
        return None
    cat = load_catalog()
    acc = cat.accelerators.get(accelerator.upper())
    if acc is None:
        raise fail(f"unknown accelerator {accelerator!r}: one of {', '.join(cat.accelerators)}")
    return [acc.metric(preemptible=False), acc.metric(preemptible=True)]


@app.command()
def quota(
    stack: StackOpt = None,
    stack_file: StackFileOpt = None,
    region: RegionsOpt = None,
    accelerator: AcceleratorOpt = None,
    format_: FormatOpt = OutputFormat.table,
) -> None:
    """Vertex AI training quota: limits, in use (running CustomJobs) and free, per region."""
    metrics = _metrics(accelerator)
    outputs = required_stack(stack, stack_file)
    regions = list(dict.fromkeys(region or [outputs.region]))
    try:
        quotas = read_regions(QuotaReader(outputs), regions, load_catalog())
    except QuotaUnavailable as exc:
        raise fail(f"cannot read the quota of {outputs.project}: {exc}", code=1) from exc
    rows = quota_usage_rows(quotas, metrics)
    out = console()
    if format_ is OutputFormat.table:
        out.print(quota_usage_table(rows))
    else:
        print_document(out, rows, format_)
