"""`vtx pool list|status`: the stack's persistent resources (warm pools) as Vertex reports them:
state, each pool's replicas used and idle, the $/h they cost busy or idle, and the runs on them.

Over plain REST (`jobs.vertex.rest.VertexRest`), as `vtx status` is; what the answers mean is
`jobs.runs.warm_pools`'s."""

from __future__ import annotations

from typing import Annotated

import typer

from jobs.core.catalog import load_catalog
from jobs.runs.warm_pools import ResourceStatus, resource_status
from jobs.vertex.rest import VertexRest
from vtx.options import StackFileOpt, StackOpt, api_errors, console, required_stack
from vtx.views.runs import OutputFormat, print_document
from vtx.views.warm_pools import (
    pool_document,
    pool_documents,
    pool_list_table,
    print_pool_status,
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


@pool_app.command("status")
def pool_status(
    name: NameArg,
    stack: StackOpt = None,
    stack_file: StackFileOpt = None,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """One persistent resource: its state, pools (replicas used and idle), what it costs per
    hour busy or idle, and the runs on it."""
    outputs = required_stack(stack, stack_file)
    out = console()
    vertex = VertexRest(outputs)
    with api_errors(out):
        (status,) = _statuses(vertex, [vertex.persistent_resource(name)])
    if fmt is OutputFormat.table:
        print_pool_status(out, status)
    else:
        print_document(out, pool_document(status), fmt)
