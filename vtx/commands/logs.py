"""`vtx logs`: a run's logs across all its attempts, and the following that `vtx launch` ends
with. A run is every attempt (CustomJob) that carries its run-id label; a job without one is
shown alone. Like `vtx status`, it talks to Vertex over plain REST
(`jobs.vertex.rest.VertexRest`):
importing aiplatform alone took seconds.

Each line names the replica that wrote it, ``a2`` when the run has several attempts and the line
is its second's, ``r1`` when the replica's first restart wrote it (the local platform says;
Vertex does not): ``workerpool1-0 a2 r1``. The words are jobs/runs/watch.py's.

Output: readable lines on a terminal (`--format text`), one JSON object per entry when piped
(`--format json`: for jq and scripts, in Cloud Logging's field names); the lines around the
entries (the final state, what to do after Ctrl-C) go to stderr in JSON mode, so stdout stays
JSON lines only. `--replica` and `--severity` filter either."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer
from rich.console import Console

from jobs.core.stack import StackOutputs
from jobs.runs.logs import (
    LogFilter,
    severity_named,
)
from jobs.vertex.rest import VertexRest
from vtx.flows import study_watch
from vtx.flows.controlled import controller_status
from vtx.flows.follow import (
    LogView,
    follow_run,
    job_logs,
    log_source,
    print_entries,
)
from vtx.options import (
    FollowOpt,
    PollOpt,
    RefArg,
    StackFileOpt,
    StackOpt,
    api_errors,
    console,
    fail,
    required_stack,
)

app = typer.Typer()


class LogFormat(StrEnum):
    auto = "auto"
    text = "text"
    json = "json"


FormatOpt = Annotated[
    LogFormat,
    typer.Option(
        "--format",
        help="text: readable lines; json: one JSON object per entry. auto: text on a "
        "terminal, json when piped.",
    ),
]
ReplicaOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--replica",
        metavar="NAME",
        help="Only this replica (workerpool1-0), pool (workerpool1) or the platform's own "
        "events (service). Repeatable.",
    ),
]
SeverityOpt = Annotated[
    str | None,
    typer.Option(
        "--severity",
        metavar="LEVEL",
        help="This severity and above, as gcloud logging reads it: DEBUG, INFO, WARNING, "
        "ERROR... Lines without one (DEFAULT) are left out by any level.",
    ),
]


def log_view(
    out: Console, fmt: LogFormat, replicas: list[str] | None, severity: str | None
) -> LogView:
    """The view the options ask for; a usage error (exit 2) for an unknown severity."""
    try:
        minimum = severity_named(severity) if severity else "DEFAULT"
    except ValueError as exc:
        raise fail(f"--severity: {exc}") from None
    as_json = fmt is LogFormat.json or (fmt is LogFormat.auto and not out.is_terminal)
    return LogView(out, as_json, LogFilter(tuple(replicas or ()), minimum))


@app.command()
def logs(
    ref: RefArg,
    stack: StackOpt = None,
    stack_file: StackFileOpt = None,
    follow: FollowOpt = False,
    fmt: FormatOpt = LogFormat.auto,
    replica: ReplicaOpt = None,
    severity: SeverityOpt = None,
    poll_s: PollOpt = 5.0,
) -> None:
    """Logs of a run across all its attempts: time, replica, severity, message.

    The replica is followed by a2 when the run has several attempts (CustomJobs) and the line
    is its second's, and by r1 when the replica's first restart wrote it (local platform
    only): workerpool1-0 a2 r1. --follow ends when the run ends, with its exit code: 0 when it
    succeeded."""
    out = console()
    view = log_view(out, fmt, replica, severity)
    outputs = required_stack(stack, stack_file)
    vertex = VertexRest(outputs)
    with api_errors(view.notes):
        if study := study_watch.find_study(vertex, ref):  # a study: every trial's CustomJob
            source = study_watch.log_source(vertex, study, view.filter.min_severity)
            done = study_watch.done(vertex, study) if follow else (lambda: True)
            print_entries(view, source, done, follow, poll_s)
            return say_controller_stops(view, outputs, study.run_id)
        job = vertex.resolve(ref)
        run_id = job.run_id
        if run_id is None:
            raise typer.Exit(job_logs(view, vertex, job.name, follow, poll_s))
        if follow:
            code = follow_run(out, vertex, run_id, poll_s, view)
            say_controller_stops(view, outputs, run_id)
            raise typer.Exit(code)
        view.human.attempts = len(vertex.list(run_id))
        source = log_source(vertex, run_id, min_severity=view.filter.min_severity)
        print_entries(view, source, lambda: True, False, poll_s)
        say_controller_stops(view, outputs, run_id)


def say_controller_stops(view: LogView, stack: StackOutputs, run_id: str | None) -> None:
    """After a run's logs, why the stack's controller stopped or moved it (its budget, a
    progress guard's breach): a cancel carries no reason on Vertex (CancelCustomJob takes the
    job's name alone), so its logs would show a cancel and nothing of why; the record says it."""
    controller = controller_status(stack, run_id)
    if controller is None:
        return
    for breach in controller["guard_breaches"]:
        view.notes.print(f"guard breached: {breach}", markup=False, highlight=False)
    if controller["stopped_by_budget"]:
        said = f"stopped by its budget: {controller['stopped_by_budget']}"
        view.notes.print(said, markup=False, highlight=False)
