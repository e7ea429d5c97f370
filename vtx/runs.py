"""What `vtx launch|status|list|logs|cancel` do, apart from argument parsing.

A launch is: validate the template, compile it for the stack, check the compiled job again (API
rules and organisation policies), print the plan (pools, machines, $/h, quota), confirm, submit
with the real JobServiceClient, print the job name and run id, and optionally follow the run's
logs to a terminal state. Functions return the exit code."""

from __future__ import annotations

from collections.abc import Callable

import typer
from rich.console import Console
from rich.table import Table

from jobs.client import Backoff, Vertex, VertexError, is_terminal, state_name
from jobs.compile import LABEL_RUN_ID, new_run_id, output_prefix, to_custom_job
from jobs.cost import estimate
from jobs.logs import CloudLoggingSource, LocalLogSource, LogsError, LogSource, stream
from jobs.spec import JobTemplate
from jobs.stack import StackOutputs
from jobs.validate import validate_compiled
from vtx.output import print_cost, print_error, print_problems

SUCCEEDED = "JOB_STATE_SUCCEEDED"


def print_plan(
    console: Console, template: JobTemplate, stack: StackOutputs, run_id: str, job: dict
) -> None:
    """What will run, where, as whom, and at what cost: everything a reviewer needs."""
    spec = job["jobSpec"]
    where = "local platform" if stack.is_local else f"{stack.project} ({stack.region})"
    images = sorted({p["containerSpec"]["imageUri"] for p in spec["workerPoolSpecs"] if p})
    network = spec.get("pscInterfaceConfig", {}).get("networkAttachment") or spec.get("network")
    console.print(
        f"[bold]Plan[/bold]: {template.name} on stack {stack.environment}: {where}", highlight=False
    )
    lines = {
        "run id": run_id,
        "outputs": output_prefix(stack, run_id),
        "images": ", ".join(images),
        "runs as": spec["serviceAccount"],
        "network": network or "Google-managed (no VPC)",
        "scheduling": ", ".join(f"{k}={v}" for k, v in spec["scheduling"].items()),
    }
    for key, value in lines.items():
        console.print(f"{key:>10}: {value}", highlight=False)
    print_cost(console, estimate(template, stack.region), "pools")


def launch_job(
    console: Console,
    template: JobTemplate,
    stack: StackOutputs,
    source: str,
    *,
    run_id: str | None = None,
    yes: bool = False,
    dry_run: bool = False,
    follow: bool = False,
    vertex: Vertex | None = None,
    confirm: Callable[[str], bool] = lambda q: typer.confirm(q, default=False),
    poll_s: float = 5.0,
) -> int:
    run_id = run_id or new_run_id(template.name)
    job, problems = validate_compiled(template, stack, source=source, run_id=run_id)
    if problems or job is None:
        print_problems(console, problems)
        return 1
    print_plan(console, template, stack, run_id, job)
    if dry_run:
        console.print("dry run: nothing submitted")
        return 0
    if not yes and not confirm("Submit this job?"):
        console.print("not submitted")
        return 1
    vertex = vertex or Vertex(stack)
    try:
        attempts = vertex.list(run_id)
        live = [j for j in attempts if not is_terminal(j)]
        if live:
            # Two attempts of one run would write the same checkpoint prefix at once.
            console.print(
                f"[red]not submitted:[/red] run {run_id} is still active as {live[0].name} "
                f"({state_name(live[0])}): `vtx cancel {run_id}` first, or wait for it to end",
                highlight=False,
            )
            return 1
        created = vertex.create(
            to_custom_job(job),
            needed=estimate(template, stack.region).quota,
            existing={j.name for j in attempts},  # listed just above: no second request
        )
    except VertexError as exc:
        print_error(console, exc, "not submitted")
        return 1
    console.print(f"submitted [bold]{created.name}[/bold]", highlight=False)
    resumed = f" (attempt {len(attempts) + 1}: resumes from its checkpoints)" if attempts else ""
    console.print(f"run id: [bold]{run_id}[/bold]{resumed}", highlight=False)
    if follow:
        return follow_run(console, vertex, run_id, poll_s)
    console.print(
        f"follow: vtx logs {run_id} --follow (with this launch's --stack or --stack-file)",
        style="dim",
        highlight=False,
    )
    return 0


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


def _job_logs(console: Console, vertex: Vertex, job: str, follow: bool, poll_s: float) -> int:
    """Logs of a job that carries no vtx run id (created by gcloud or the SDK): that job only."""
    done = (lambda: is_terminal(vertex.get(job))) if follow else (lambda: True)
    for entry in stream(log_source(vertex, job, job=job), done, follow=follow, poll_s=poll_s):
        console.print(entry.line(), markup=False, highlight=False)
    if not follow:
        return 0
    state = state_name(vertex.get(job))
    console.print(f"{job}: {state}", highlight=False)
    return 0 if state == SUCCEEDED else 1


def _run_done(vertex: Vertex, run_id: str) -> bool:
    attempts = vertex.list(run_id)
    return bool(attempts) and is_terminal(attempts[0])


def follow_run(console: Console, vertex: Vertex, run_id: str, poll_s: float = 5.0) -> int:
    """Stream every attempt's logs until the newest attempt ends; exit 0 only on success.
    Following is only watching: Ctrl-C or a lost connection leaves the job running."""
    source = log_source(vertex, run_id)
    try:
        for entry in stream(source, lambda: _run_done(vertex, run_id), follow=True, poll_s=poll_s):
            console.print(entry.line(), markup=False, highlight=False)
    except KeyboardInterrupt:
        console.print(f"stopped following; the run goes on (`vtx cancel {run_id}` stops it)")
        return 130
    except (VertexError, LogsError) as exc:
        print_error(console, exc)
        console.print(f"the run goes on: `vtx logs {run_id} --follow` to resume watching")
        return 1
    final = vertex.list(run_id)[0]
    state = state_name(final)
    console.print(f"{final.name}: {state}", highlight=False)
    if state == SUCCEEDED:
        prefix = final.job_spec.base_output_directory.output_uri_prefix
        console.print(f"outputs: {prefix}\nmodel: {prefix}model/", highlight=False)
    elif final.error.message:
        console.print(f"error: {final.error.message}", markup=False)
    return 0 if state == SUCCEEDED else 1


def _vertex(stack: StackOutputs | None, backoff: Backoff | None = None) -> Vertex:
    assert stack is not None
    return Vertex(stack, backoff=backoff or Backoff())


def show_status(
    console: Console, stack: StackOutputs | None, ref: str, vertex: Vertex | None = None
) -> int:
    vertex = vertex or _vertex(stack)
    try:
        job = vertex.resolve(ref)
    except VertexError as exc:
        print_error(console, exc)
        return 1
    table = Table(show_header=False)
    # Long values wrap: on an 80-column terminal a no_wrap value squeezed the field names out
    # and cut the error message short.
    table.add_column("field", no_wrap=True)
    table.add_column("value", overflow="fold")
    run_id = job.labels.get(LABEL_RUN_ID)
    table.add_row("job", job.name)
    table.add_row("run id", run_id or "-")
    if run_id:
        table.add_row("attempts", str(len(vertex.list(run_id))))
    table.add_row("state", state_name(job))
    table.add_row("created", str(job.create_time))
    table.add_row("outputs", job.job_spec.base_output_directory.output_uri_prefix or "-")
    if job.error.message:
        table.add_row("error", job.error.message)
    console.print(table)
    return 0


def show_list(
    console: Console, stack: StackOutputs | None, run_id: str | None, vertex: Vertex | None = None
) -> int:
    vertex = vertex or _vertex(stack)
    try:
        jobs = vertex.list(run_id)
    except VertexError as exc:
        print_error(console, exc)
        return 1
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
    console.print(table)
    return 0


def show_logs(
    console: Console,
    stack: StackOutputs | None,
    ref: str,
    follow: bool,
    vertex: Vertex | None = None,
    poll_s: float = 5.0,
) -> int:
    vertex = vertex or _vertex(stack)
    try:
        job = vertex.resolve(ref)
        run_id = job.labels.get(LABEL_RUN_ID)
        if run_id is None:
            return _job_logs(console, vertex, job.name, follow, poll_s)
        if follow:
            return follow_run(console, vertex, run_id, poll_s)
        for entry in stream(log_source(vertex, run_id), lambda: True, follow=False):
            console.print(entry.line(), markup=False, highlight=False)
    except (VertexError, LogsError) as exc:
        print_error(console, exc)
        return 1
    return 0


def cancel_run(
    console: Console, stack: StackOutputs | None, ref: str, vertex: Vertex | None = None
) -> int:
    vertex = vertex or _vertex(stack)
    try:
        job = vertex.resolve(ref)
        if is_terminal(job):
            console.print(f"{job.name} already ended: {state_name(job)}", highlight=False)
            return 0
        vertex.cancel(job.name)
    except VertexError as exc:
        print_error(console, exc)
        return 1
    console.print(f"cancel requested for {job.name}", highlight=False)
    return 0
