"""`vtx pool list|status`: the stack's persistent resources (warm pools) as Vertex reports them:
state, each pool's replicas used and idle, the $/h they cost busy or idle, and the runs on them;
`status --window` adds each pool's busy and idle replica-hours over the window and the idle cost.

Over plain REST (`jobs.vertex.rest.VertexRest`), as `vtx status` is; what the answers mean is
`jobs.runs.warm_pools`'s."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated

import typer
from rich.console import Console

from jobs.core.catalog import load_catalog
from jobs.core.durations import parse_duration_s
from jobs.runs.warm_pools import ResourceStatus, WindowUsage, resource_status, window_usage
from jobs.vertex.rest import VertexRest
from vtx.options import StackFileOpt, StackOpt, api_errors, console, required_stack
from vtx.views.problems import print_error
from vtx.views.runs import OutputFormat, print_document
from vtx.views.warm_pools import (
    pool_document,
    pool_documents,
    pool_list_table,
    print_pool_status,
    print_window_usage,
)

pool_app = typer.Typer(
    name="pool",
    help="The stack's persistent resources (warm pools): state, replicas used and idle, $/h "
    "busy or idle, the runs on them.",
    no_args_is_help=True,
)
FormatOpt = Annotated[
    OutputFormat,
    typer.Option(
        "--format",
        help="table for people; json or yaml for programs (stable keys).",
        metavar="table|json|yaml",
    ),
]
NameArg = Annotated[str, typer.Argument(help="The resource's id (warm-l4) or full resource name.")]


def _statuses(vertex: VertexRest, resources: list[dict]) -> list[ResourceStatus]:
    """Each resource with the unfinished jobs of its region (read once per region)."""
    catalog = load_catalog().for_stack(vertex.stack)
    jobs = {}
    found = []
    for resource in resources:
        region = str(resource.get("name", "")).split("/locations/")[-1].split("/")[0]
        if region not in jobs:
            jobs[region] = vertex.unfinished_jobs(region)
        found.append(resource_status(resource, jobs[region], catalog))
    return found


@pool_app.command("list")
def list_pools(
    stack: StackOpt = None, stack_file: StackFileOpt = None, fmt: FormatOpt = OutputFormat.table
) -> None:
    """Every persistent resource in the stack's regions, with its replicas and $/h."""
    outputs = required_stack(stack, stack_file)
    out = console()
    vertex = VertexRest(outputs)
    with api_errors(out):
        statuses = _statuses(vertex, vertex.persistent_resources())
    if fmt is not OutputFormat.table:
        print_document(out, pool_documents(statuses), fmt)
        return
    if not statuses:
        out.print(
            f"no persistent resource in {outputs.project} ({', '.join(outputs.job_regions)})",
            markup=False,
        )
        return
    out.print(pool_list_table(statuses, outputs.project))


WindowOpt = Annotated[
    str,
    typer.Option(
        "--window",
        help="How far back to count each pool's busy and idle replica-hours (24h, 90m, 7d).",
        metavar="DURATION",
    ),
]


def _window_s(window: str, out: Console) -> float:
    seconds = parse_duration_s(window)
    if seconds is None or seconds <= 0:
        print_error(out, f"--window {window!r} is not a duration: write 24h, 90m, 7d or 3600s")
        raise typer.Exit(2)
    return seconds


def _usage(vertex: VertexRest, resource: dict, window_s: float) -> WindowUsage:
    """The window's usage from one listing of the resource's region: the jobs not ended, and
    those created since the window's start less Vertex's longest timeout (a job that ended in
    the window started at most that long before it, unless it queued longer)."""
    catalog = load_catalog().for_stack(vertex.stack)
    now = datetime.now(UTC)
    start = now - timedelta(seconds=window_s)
    since = start - timedelta(seconds=catalog.limits.timeout_s.max)
    region = str(resource.get("name", "")).split("/locations/")[-1].split("/")[0]
    return window_usage(resource, vertex.jobs_since(region, since), start, now, catalog)


@pool_app.command("status")
def pool_status(
    name: NameArg,
    stack: StackOpt = None,
    stack_file: StackFileOpt = None,
    fmt: FormatOpt = OutputFormat.table,
    window: WindowOpt = "24h",
) -> None:
    """One persistent resource: its state, pools (replicas used and idle), what it costs per
    hour busy or idle, the runs on it, and over --window each pool's busy and idle
    replica-hours and what the idle ones cost."""
    outputs = required_stack(stack, stack_file)
    out = console()
    window_s = _window_s(window, out)
    vertex = VertexRest(outputs)
    with api_errors(out):
        resource = vertex.persistent_resource(name)
        (status,) = _statuses(vertex, [resource])
        usage = _usage(vertex, resource, window_s)
    if fmt is OutputFormat.table:
        print_pool_status(out, status)
        print_window_usage(out, usage)
    else:
        print_document(out, pool_document(status, usage), fmt)
