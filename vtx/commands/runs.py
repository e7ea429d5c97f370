"""`vtx status|list|cancel`: watching and stopping runs after the submit stage. A run is
every attempt (CustomJob) that carries its run-id label; a job without one is shown alone.

These talk to Vertex over plain REST (`jobs.vertex.rest.VertexRest`), never through aiplatform,
whose
import alone took most of their 14-17 s on a loaded machine. The vocabulary (attempt, retry,
restart) is `jobs.runs.watch`'s; the JSON/YAML keys are documented in `vtx.views.runs`."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.text import Text

from jobs.core.catalog import Catalog
from jobs.core.user_io import UserFileError, require_regular_target, shown_path
from jobs.runs.checkpoints import Storage, stored_checkpoints
from jobs.runs.goodput import Goodput, goodput_of
from jobs.runs.logs import CloudLoggingSource, LocalLogSource, LogEntry, LogSource
from jobs.runs.warm_pools import metering_catalog
from jobs.runs.watch import AttemptStatus, RunStatus, attempts_of, run_status
from jobs.vertex.job_records import NEVER, JobRecord
from jobs.vertex.rest import VertexRest
from vtx.flows import study_watch
from vtx.flows.controlled import controller_status, stalls_of
from vtx.options import (
    RefArg,
    StackFileOpt,
    StackOpt,
    api_errors,
    console,
    fail,
    required_stack,
    write_output,
)
from vtx.views.goodput.run import goodput_json, goodput_line, timeline_rows
from vtx.views.goodput.run_page import goodput_page
from vtx.views.goodput.study_page import study_goodput_page
from vtx.views.runs import (
    OutputFormat,
    list_json,
    list_table,
    print_document,
    print_status,
    status_json,
)

app = typer.Typer()

FormatOpt = Annotated[
    OutputFormat,
    typer.Option(
        "--format",
        help="table for people; json or yaml for programs (stable keys).",
        metavar="table|json|yaml",
    ),
]


def rest_client(stack: str | None, stack_file: Path | None) -> VertexRest:
    """The REST client for the stack the user named (``--stack local`` included)."""
    return VertexRest(required_stack(stack, stack_file))


def log_entries(vertex: VertexRest, jobs: list[JobRecord]) -> list[LogEntry]:
    """Every log entry of ``jobs`` (a run's attempts, or one job without a run id)."""
    stack, newest = vertex.stack, jobs[0]
    source: LogSource
    if stack.vertex_endpoint:
        job = None if newest.run_id else newest.name
        source = LocalLogSource(
            stack.vertex_endpoint, newest.run_id, job=job, token=stack.local_token or ""
        )
    else:
        oldest_first = sorted(jobs, key=lambda j: j.create_time or NEVER)
        pairs = [(j.name, n) for n, j in enumerate(oldest_first, start=1)]
        source = CloudLoggingSource(stack.project, lambda: pairs)
    entries, _ = source.fetch(None)
    return entries


TimelineOpt = Annotated[
    bool,
    typer.Option(
        "--timeline",
        help="Add a bar per attempt (per trial, for a study): where the time went (phases as "
        "letters, a legend).",
    ),
]


def watched_run(out: Console, vertex: VertexRest, ref: str) -> tuple[RunStatus, Goodput]:
    """A run's status and goodput timeline, read once (its attempts, every log entry)."""
    with api_errors(out):
        job = vertex.resolve(ref)
        jobs = vertex.list(job.run_id) if job.run_id else [job]
        entries = log_entries(vertex, jobs)
        found = run_status(
            jobs,
            entries,
            vertex.stack.region,
            datetime.now(UTC),
            local=vertex.stack.is_local,
            catalog=metering_catalog(vertex, jobs),
        )
    stalls = stalls_of(vertex.stack, job.run_id)
    return found, goodput_of(found.attempts, entries, found.now, stalls)


@app.command()
def status(
    ref: RefArg,
    stack: StackOpt = None,
    stack_file: StackFileOpt = None,
    fmt: FormatOpt = OutputFormat.table,
    timeline: TimelineOpt = False,
) -> None:
    """A run: its attempts, pools and replicas, the trainer's step, pace, ETA, checkpoints,
    cost so far at the catalog's price, and its goodput (or one job launched without vtx)."""
    out, vertex = console(), rest_client(stack, stack_file)
    with api_errors(out):
        if study := study_watch.find_study(vertex, ref):  # a study: its trials, the best one
            study_watch.show_status(out, study, fmt, vertex, timeline)
            if fmt is OutputFormat.table:
                _print_controller(out, controller_status(vertex.stack, study.run_id), True)
            return
    found, goodput = watched_run(out, vertex, ref)
    newest, progress = found.newest.job, found.progress
    storage = Storage(vertex.stack)
    found = replace(
        found,
        stored=stored_checkpoints(storage, newest.output_prefix, progress.checkpoint_path),
    )
    controller = controller_status(vertex.stack, newest.run_id)
    if fmt is OutputFormat.table:
        print_status(out, found)
        out.print(Text("goodput: ") + Text(goodput_line(goodput)))
        if timeline:
            for row in timeline_rows(goodput):
                out.print(row, soft_wrap=False, overflow="ignore", crop=False)
        _print_controller(out, controller)
    else:
        document = {**status_json(found), "goodput": goodput_json(goodput)}
        if controller is not None:
            document["controller"] = controller
        print_document(out, document, fmt)


def _print_controller(out: Console, controller: dict | None, budget: bool = False) -> None:
    """The controller's last pass; with ``budget`` (a study, whose table has no meter line of
    its own) why it stopped the run."""
    if controller is None:
        return
    out.print(controller["line"], highlight=False, markup=False)
    for breach in controller.get("guard_breaches") or []:
        out.print(f"guard breached: {breach}", style="yellow", highlight=False, markup=False)
    if budget and controller["stopped_by_budget"]:
        out.print(f"stopped by its budget: {controller['stopped_by_budget']}", highlight=False,
                  markup=False)  # fmt: skip


OutputArg = Annotated[
    Path, typer.Option("--output", "-o", help="The HTML file to write (a regular file path).")
]


@app.command()
def report(
    ref: RefArg, output: OutputArg, stack: StackOpt = None, stack_file: StackFileOpt = None
) -> None:
    """One self-contained HTML page of a run: its timeline per attempt, loss and tokens/s over
    wall time, and the goodput and badput figures (no network, no script); of a study: a lane
    per trial and the figures summed over its trials."""
    try:  # before anything is read: a wrong path costs no API call
        require_regular_target(output)
    except UserFileError as exc:
        raise fail(f"--output {exc}") from None
    out, vertex = console(), rest_client(stack, stack_file)
    with api_errors(out):
        study = study_watch.find_study(vertex, ref)
        if study is not None:  # a study: a lane per trial
            _, summed = study_watch.watched_study(vertex, study, datetime.now(UTC))
            html = study_goodput_page(study.run_id or study.job_id, summed)
    if study is None:
        found, goodput = watched_run(out, vertex, ref)
        html = goodput_page(found.run_id or found.newest.job.job_id, goodput)
    write_output(output, html)
    out.print(f"wrote {shown_path(output)}", highlight=False)


def numbered(
    jobs: list[JobRecord], region: str, now: datetime, catalog: Catalog | None = None
) -> list[AttemptStatus]:
    """Every job as the attempt of its run it is, newest first."""
    runs: dict[str, list[JobRecord]] = defaultdict(list)
    for job in jobs:
        runs[job.run_id or job.name].append(job)
    attempts = [a for run in runs.values() for a in attempts_of(run, region, now, catalog)]
    return sorted(attempts, key=lambda a: (a.job.create_time or now, a.number), reverse=True)


@app.command("list")
def list_(
    stack: StackOpt = None,
    stack_file: StackFileOpt = None,
    run_id: Annotated[
        str | None, typer.Option("--run-id", help="Only this run's attempts.")
    ] = None,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Jobs launched with vtx in this stack, newest first: state, resources, duration, cost."""
    out, vertex = console(), rest_client(stack, stack_file)
    with api_errors(out):
        listed = vertex.list(run_id)
        studies = study_watch.list_studies(vertex, run_id)
        jobs = [j for j in listed if j.name not in study_watch.trial_job_names(studies)]
        catalog = metering_catalog(vertex, jobs)
    attempts = numbered(jobs, vertex.stack.region, datetime.now(UTC), catalog)
    if fmt is OutputFormat.table:
        out.print(list_table(attempts))
    with api_errors(out):  # a study's cost reads its trials' jobs
        studies_json = study_watch.show_list(out, studies, fmt, vertex, listed)  # beside jobs
    if fmt is not OutputFormat.table:
        print_document(out, list_json(attempts) + studies_json, fmt)


@app.command()
def cancel(ref: RefArg, stack: StackOpt = None, stack_file: StackFileOpt = None) -> None:
    """Cancel a run's newest attempt (or one job, or a study with its trials)."""
    out, vertex = console(), rest_client(stack, stack_file)
    with api_errors(out):
        if study := study_watch.find_study(vertex, ref):
            return study_watch.cancel(out, vertex, study)
        job = vertex.resolve(ref)
        if job.terminal:
            out.print(f"{job.name} already ended: {job.state}", highlight=False)
            return
        vertex.cancel(job.name)
    out.print(f"cancel requested for {job.name}", highlight=False)
