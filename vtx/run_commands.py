"""`vtx status|list|cancel`: watching and stopping runs after the submit stage. A run is
every attempt (CustomJob) that carries its run-id label; a job without one is shown alone."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from jobs.client import is_terminal, state_name
from jobs.contract import LABEL_RUN_ID
from vtx.options import (
    RefArg,
    StackFileOpt,
    StackOpt,
    api_errors,
    console,
    vertex_client,
)

app = typer.Typer()


@app.command()
def status(ref: RefArg, stack: StackOpt = None, stack_file: StackFileOpt = None) -> None:
    """State of a run's newest attempt (or of one job)."""
    out, vertex = console(), vertex_client(stack, stack_file)
    with api_errors(out):
        job = vertex.resolve(ref)
        run_id = job.labels.get(LABEL_RUN_ID)
        attempts = len(vertex.list(run_id)) if run_id else None
    table = Table(show_header=False)
    # Long values wrap: on an 80-column terminal a no_wrap value squeezed the field names out
    # and cut the error message short.
    table.add_column("field", no_wrap=True)
    table.add_column("value", overflow="fold")
    table.add_row("job", job.name)
    table.add_row("run id", run_id or "-")
    if attempts is not None:
        table.add_row("attempts", str(attempts))
    table.add_row("state", state_name(job))
    table.add_row("created", str(job.create_time))
    table.add_row("outputs", job.job_spec.base_output_directory.output_uri_prefix or "-")
    if job.error.message:
        table.add_row("error", job.error.message)
    out.print(table)


@app.command("list")
def list_(
    stack: StackOpt = None,
    stack_file: StackFileOpt = None,
    run_id: Annotated[
        str | None, typer.Option("--run-id", help="Only this run's attempts.")
    ] = None,
) -> None:
    """Jobs launched with vtx in this stack, newest first."""
    out, vertex = console(), vertex_client(stack, stack_file)
    with api_errors(out):
        jobs = vertex.list(run_id)
    table = Table(title="vtx jobs", title_justify="left")
    for column in ("run id", "job", "state", "created"):
        table.add_column(column, no_wrap=column in ("run id", "job"))
    for job in jobs:
        table.add_row(
            job.labels.get(LABEL_RUN_ID, "-"),
            job.name.rsplit("/", 1)[-1],
            state_name(job).removeprefix("JOB_STATE_"),
            str(job.create_time)[:19],
        )
    out.print(table)


@app.command()
def cancel(ref: RefArg, stack: StackOpt = None, stack_file: StackFileOpt = None) -> None:
    """Cancel a run's newest attempt (or one job)."""
    out, vertex = console(), vertex_client(stack, stack_file)
    with api_errors(out):
        job = vertex.resolve(ref)
        if is_terminal(job):
            out.print(f"{job.name} already ended: {state_name(job)}", highlight=False)
            return
        vertex.cancel(job.name)
    out.print(f"cancel requested for {job.name}", highlight=False)
