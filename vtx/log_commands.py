"""`vtx logs`: a run's logs across all its attempts, and the following that `vtx launch` ends
with. A run is every attempt (CustomJob) that carries its run-id label; a job without one is
shown alone."""

from __future__ import annotations

from collections.abc import Callable

import typer
from rich.console import Console

from jobs.client import Vertex, VertexError, is_terminal, state_name
from jobs.contract import LABEL_RUN_ID
from jobs.logs import CloudLoggingSource, LocalLogSource, LogsError, LogSource, stream
from vtx.options import (
    FollowOpt,
    PollOpt,
    RefArg,
    StackFileOpt,
    StackOpt,
    api_errors,
    console,
    vertex_client,
)
from vtx.output import print_error

SUCCEEDED = "JOB_STATE_SUCCEEDED"

app = typer.Typer()


def log_source(vertex: Vertex, run_id: str, job: str | None = None) -> LogSource:
    """The logs of every attempt of ``run_id``, or of the one ``job`` (no vtx run id)."""
    stack = vertex.stack
    if stack.vertex_endpoint:
        return LocalLogSource(stack.vertex_endpoint, run_id, job=job, token=stack.local_token or "")

    def attempts() -> list[tuple[str, int]]:
        if job is not None:
            return [(job, 0)]
        jobs = sorted(vertex.list(run_id), key=lambda j: j.create_time)
        return [(j.name, n) for n, j in enumerate(jobs)]

    return CloudLoggingSource(stack.project, attempts)


def _print_entries(
    out: Console, source: LogSource, done: Callable[[], bool], follow: bool, poll_s: float
) -> None:
    for entry in stream(source, done, follow=follow, poll_s=poll_s):
        out.print(entry.line(), markup=False, highlight=False)


def _job_logs(out: Console, vertex: Vertex, job: str, follow: bool, poll_s: float) -> int:
    """Logs of a job that carries no vtx run id (created by gcloud or the SDK): that job only."""
    done = (lambda: is_terminal(vertex.get(job))) if follow else (lambda: True)
    _print_entries(out, log_source(vertex, job, job=job), done, follow, poll_s)
    if not follow:
        return 0
    state = state_name(vertex.get(job))
    out.print(f"{job}: {state}", highlight=False)
    return 0 if state == SUCCEEDED else 1


def _run_done(vertex: Vertex, run_id: str) -> bool:
    attempts = vertex.list(run_id)
    return bool(attempts) and is_terminal(attempts[0])


def follow_run(out: Console, vertex: Vertex, run_id: str, poll_s: float = 5.0) -> int:
    """Stream every attempt's logs until the newest attempt ends; exit 0 only on success.
    Following is only watching: Ctrl-C or a lost connection leaves the job running."""
    try:
        _print_entries(
            out, log_source(vertex, run_id), lambda: _run_done(vertex, run_id), True, poll_s
        )
    except KeyboardInterrupt:
        out.print(f"stopped following; the run goes on (`vtx cancel {run_id}` stops it)")
        return 130
    except (VertexError, LogsError) as exc:
        print_error(out, exc)
        out.print(f"the run goes on: `vtx logs {run_id} --follow` to resume watching")
        return 1
    final = vertex.list(run_id)[0]
    state = state_name(final)
    out.print(f"{final.name}: {state}", highlight=False)
    if state == SUCCEEDED:
        prefix = final.job_spec.base_output_directory.output_uri_prefix
        out.print(f"outputs: {prefix}\nmodel: {prefix}model/", highlight=False)
    elif final.error.message:
        out.print(f"error: {final.error.message}", markup=False)
    return 0 if state == SUCCEEDED else 1


@app.command()
def logs(
    ref: RefArg,
    stack: StackOpt = None,
    stack_file: StackFileOpt = None,
    follow: FollowOpt = False,
    poll_s: PollOpt = 5.0,
) -> None:
    """Logs of a run across all its attempts."""
    out, vertex = console(), vertex_client(stack, stack_file)
    with api_errors(out):
        job = vertex.resolve(ref)
        run_id = job.labels.get(LABEL_RUN_ID)
        if run_id is None:
            raise typer.Exit(_job_logs(out, vertex, job.name, follow, poll_s))
        if follow:
            raise typer.Exit(follow_run(out, vertex, run_id, poll_s))
        _print_entries(out, log_source(vertex, run_id), lambda: True, False, poll_s)
