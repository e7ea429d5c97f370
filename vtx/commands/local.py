"""`vtx local up|down|status|env|preempt|stall|slow|upload|capacity`, `vtx demo`: local platform.

Loaded by `vtx --help`, so it imports only cheap modules: the platform's client side (state,
settings, process control over psutil and urllib); the server's FastAPI stays in its process.
`up`'s options take their defaults, bounds and help from ``LocalSettings``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
import yaml
from rich.console import Console
from rich.markup import escape
from rich.progress import Progress

from jobs.core.stack import StackError, StackOutputs
from jobs.core.states import short, succeeded
from jobs.local.platform.capacity import Capacity, CapacityFileError, load_capacity
from jobs.local.platform.settings import LocalSettings, default_data_dir, option_spec
from jobs.local.platform.state import (
    PlatformState,
    controller_alive,
    gcs_alive,
    local_stack_outputs,
    read_state,
    running_state,
    server_alive,
)
from jobs.local.plumbing.client import (
    LocalApiError,
    health,
    hinder_replica,
    preempt_replica,
    read_capacity,
    set_capacity,
)
from jobs.local.plumbing.ports import free_port, port_free
from jobs.local.plumbing.processes import NotRunning, PlatformError, bring_up, stop_platform
from jobs.local.plumbing.shell_env import export_lines, shell_environment
from jobs.local.storage.upload import Upload, UploadError, plan, upload_all
from jobs.vertex.errors import VertexError
from jobs.vertex.rest import VertexRest
from vtx.demo.training import DemoError, run_demo
from vtx.views.problems import print_error

local_app = typer.Typer(
    help="Run the Vertex-compatible local platform on this machine.", no_args_is_help=True
)
capacity_app = typer.Typer(
    help="Show or change the local platform's capacity: accelerators and quota limits.",
    no_args_is_help=True,
)
local_app.add_typer(capacity_app, name="capacity")
# Merged into the top-level app: holds `vtx demo`.
demo_app = typer.Typer()

console = Console()
err_console = Console(stderr=True)

DataDirOption = typer.Option(
    None,
    "--data-dir",
    help="Where jobs, logs and objects live.",
    show_default="$VTX_LOCAL_DIR or .vtx/local",  # help's own [...] would be read as markup
)


def _fail(message: str) -> typer.Exit:
    print_error(err_console, message)
    return typer.Exit(1)


def _data_dir(data_dir: Path | None) -> Path:
    return data_dir or default_data_dir()


def _setting(field: str, flag: str, envvar: str | None = None) -> Any:
    """The option for a LocalSettings field: its default, bounds and help are the field's."""
    spec = option_spec(field)
    return typer.Option(spec.pop("default"), flag, envvar=envvar, **spec)


def _default_or_free(ctx: typer.Context, option: str, port: int) -> int:
    """A default port another program holds gives way to a free one; a port the user chose
    (option or environment variable) is kept, and start-up names it if it is taken."""
    source = ctx.get_parameter_source(option)  # typer's own click: compared by name
    if source is not None and source.name == "DEFAULT" and not port_free(port):
        chosen = free_port()
        err_console.print(
            f"[yellow]note:[/yellow] the default port {port} is in use: using {chosen} instead"
        )
        return chosen
    return port


@local_app.command("up")
def up(
    ctx: typer.Context,
    data_dir: Path | None = DataDirOption,
    port: int = _setting("port", "--port", envvar="VTX_LOCAL_PORT"),
    gcs_port: int = _setting("gcs_port", "--gcs-port", envvar="VTX_LOCAL_GCS_PORT"),
    grpc_port: int = _setting("grpc_port", "--grpc-port", envvar="VTX_LOCAL_GRPC_PORT"),
    max_replicas: int = _setting("max_replicas", "--max-replicas"),
    grace_s: float = _setting("grace_s", "--grace-s"),
    chaos: float = _setting("chaos_per_hour", "--chaos"),
    chaos_seed: int = _setting("chaos_seed", "--chaos-seed"),
    capacity_file: Path | None = typer.Option(
        None,
        "--capacity",
        metavar="FILE.yaml",
        help="Accelerators and quota limits per region (format: jobs/local/README.md).",
        show_default="unlimited",
    ),
) -> None:
    """Start the GCS emulator and the control plane in the background; after a crash, start
    again only what stopped (running jobs go on)."""
    try:
        capacity = load_capacity(capacity_file) if capacity_file else Capacity()
        settings = LocalSettings(
            capacity=capacity,
            data_dir=_data_dir(data_dir),
            port=_default_or_free(ctx, "port", port),
            gcs_port=_default_or_free(ctx, "gcs_port", gcs_port),
            grpc_port=grpc_port,
            max_replicas=max_replicas,
            grace_s=grace_s,
            chaos_per_hour=chaos,
            chaos_seed=chaos_seed,
        )
        started = bring_up(settings)
    except (PlatformError, StackError, CapacityFileError, OSError) as exc:
        raise _fail(str(exc)) from None
    if started.note:
        err_console.print(f"[yellow]note:[/yellow] {escape(started.note)}")
    state = started.state
    console.print(f"[green]local platform up[/green] (data in {escape(state.data_dir)})")
    console.print(f"  Vertex AI endpoint  {state.vertex_endpoint}")
    console.print(f"  Vertex AI gRPC      {state.grpc_endpoint}")
    console.print(f"  GCS endpoint        {state.gcs_endpoint}")
    console.print("  use it with         --stack local   (stop with `vtx local down`)")
    console.print('  SDK code            eval "$(vtx local env)"')


@local_app.command("down")
def down(data_dir: Path | None = DataDirOption) -> None:
    """Stop the local platform (running replicas are stopped and their jobs fail). Nothing to
    stop is not an error: the platform is down either way."""
    try:
        state = stop_platform(_data_dir(data_dir))
    except NotRunning as exc:
        console.print(escape(str(exc)))
        return
    except (PlatformError, StackError, OSError) as exc:
        raise _fail(str(exc)) from None
    console.print(f"local platform stopped (data kept in {escape(state.data_dir)})")


@local_app.command("status")
def status(
    data_dir: Path | None = DataDirOption,
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Show whether the local platform runs and where."""
    directory = _data_dir(data_dir)
    try:
        state = running_state(directory)
        recorded = read_state(directory) if state is None else None
    except StackError as exc:
        raise _fail(str(exc)) from None
    info: dict[str, object] = {"running": state is not None, "data_dir": str(directory.resolve())}
    if state is not None:
        try:
            active = health(state.vertex_endpoint)["active_jobs"]
        except LocalApiError as exc:
            raise _fail(f"the control plane runs but does not answer: {exc}") from None
        info |= {
            "vertex_endpoint": state.vertex_endpoint,
            "grpc_endpoint": state.grpc_endpoint,
            "gcs_endpoint": state.gcs_endpoint,
            "cwd": state.cwd,
            "server_pid": state.server_pid,
            "gcs_pid": state.gcs_pid,
            "controller_pid": state.controller_pid,
            "controller_running": controller_alive(state),
            "active_jobs": active,
        }
    if as_json:
        console.print_json(json.dumps(info))
    elif state is None:
        where = escape(str(info["data_dir"]))
        console.print(f"local platform not running in {where}{_why_down(recorded)}")
    else:
        console.print(f"local platform running (data in {escape(str(info['data_dir']))})")
        console.print(f"  Vertex AI endpoint  {state.vertex_endpoint}")
        console.print(f"  Vertex AI gRPC      {state.grpc_endpoint}")
        console.print(f"  GCS endpoint        {state.gcs_endpoint}")
        running = "running" if info["controller_running"] else "stopped: `vtx local up` starts it"
        console.print(f"  controller          {running}")
        jobs = ", ".join(f"{n} {short(name)}" for name, n in active.items())
        console.print(f"  active jobs         {jobs or 'none'}")
    if state is None:
        raise typer.Exit(1)


@local_app.command("env")
def env(data_dir: Path | None = DataDirOption) -> None:
    """Print `export` lines for `eval "$(vtx local env)"`: the SDK's endpoint
    (VERTEX_API_ENDPOINT, for aiplatform.init(api_endpoint=...) with its default gRPC
    transport), the CA gRPC checks it with, the GCS emulator, the project and the region."""
    try:
        state = running_state(_data_dir(data_dir))
    except StackError as exc:
        raise _fail(str(exc)) from None
    if state is None:
        raise _fail(
            f"the local platform is not running from {_data_dir(data_dir)}: run `vtx local up`"
        )
    typer.echo(export_lines(shell_environment(state)))  # plain: rich would wrap long lines


def _why_down(recorded: PlatformState | None) -> str:
    if recorded is None:
        return ""
    if server_alive(recorded) or gcs_alive(recorded):
        return (
            " (part of it stopped, the control plane or the GCS emulator: `vtx local up` starts "
            "it again; running jobs go on)"
        )
    return " (a stale state file is left; `vtx local up` cleans it)"


@local_app.command("preempt")
def preempt(
    ref: str = typer.Argument(
        ..., metavar="RUN_ID|JOB_ID", help="Run id (its newest attempt), job id or resource name."
    ),
    replica: str | None = typer.Option(
        None,
        metavar="NAME",
        help="Replica to preempt, e.g. workerpool0-0.",
        show_default="the job's last replica, of its highest pool: workerpool1-0 for a chief "
        "and one worker",
    ),
    wait_s: float = typer.Option(
        60.0, min=0, max=300, help="Wait this long for a job that is queued or starting."
    ),
    data_dir: Path | None = DataDirOption,
) -> None:
    """Deliver a Spot preemption to one replica: SIGTERM, grace, SIGKILL, then restart.

    A job still going through the last preemption is not preempted again (a warning, exit 1)."""
    try:
        stack = local_stack_outputs(_data_dir(data_dir) if data_dir else None)
        endpoint, token = stack.vertex_endpoint or "", stack.local_token or ""
        job = _job_of(stack, ref)
        target = preempt_replica(endpoint, token, job, replica, wait_s)
    except LocalApiError as exc:
        if exc.status == "ABORTED":
            err_console.print(f"[yellow]warning:[/yellow] not preempted: {escape(str(exc))}")
            raise typer.Exit(1) from None
        raise _fail(str(exc)) from None
    except (StackError, VertexError) as exc:
        raise _fail(str(exc)) from None
    console.print(
        f"preempting {target} of job {job.rsplit('/', 1)[-1]} (SIGTERM; SIGKILL after grace)"
    )


RefArgument = typer.Argument(
    ..., metavar="RUN_ID|JOB_ID", help="Run id (its newest attempt), job id or resource name."
)
ReplicaOption = typer.Option(
    None,
    metavar="NAME",
    help="The replica, e.g. workerpool0-0.",
    show_default="the job's last replica, as `vtx local preempt`",
)
WaitOption = typer.Option(
    60.0, min=0, max=300, help="Wait this long for a job that is queued or starting."
)


@local_app.command("stall")
def stall(
    ref: str = RefArgument,
    replica: str | None = ReplicaOption,
    wait_s: float = WaitOption,
    data_dir: Path | None = DataDirOption,
) -> None:
    """Make one replica hang: SIGSTOP to its processes, which stay alive and make no more steps.

    For drills of a run's progress guard (`guard: {no_progress: ...}`): the controller sees the
    heartbeat stop and acts. Cancelling the job lets the replica go first, then stops it."""
    _hinder(ref, replica, None, wait_s, data_dir)


@local_app.command("slow")
def slow(
    ref: str = RefArgument,
    factor: float = typer.Option(
        ..., min=1.0, max=1000.0, help="How many times slower (above 1), e.g. 10."
    ),
    replica: str | None = ReplicaOption,
    wait_s: float = WaitOption,
    data_dir: Path | None = DataDirOption,
) -> None:
    """Slow one replica down FACTOR times: SIGSTOP and SIGCONT in a one-second duty cycle.

    For drills of `guard: {min_tokens_per_s: ..., window: ...}`."""
    if factor <= 1.0:
        raise _fail(f"--factor {factor:g} would not slow anything: write e.g. --factor 10")
    _hinder(ref, replica, factor, wait_s, data_dir)


def _hinder(
    ref: str, replica: str | None, factor: float | None, wait_s: float, data_dir: Path | None
) -> None:
    try:
        stack = local_stack_outputs(_data_dir(data_dir) if data_dir else None)
        endpoint, token = stack.vertex_endpoint or "", stack.local_token or ""
        job = _job_of(stack, ref)
        target = hinder_replica(endpoint, token, job, replica, factor, wait_s)
    except LocalApiError as exc:
        raise _fail(str(exc)) from None
    except (StackError, VertexError) as exc:
        raise _fail(str(exc)) from None
    how = "stalled (SIGSTOP: alive, no more steps)" if factor is None else f"{factor:g}x slower"
    console.print(f"{target} of job {job.rsplit('/', 1)[-1]}: {how}")


def _job_of(stack: StackOutputs, ref: str) -> str:
    """A job id or resource name as given; a run id as its newest attempt (as `vtx status`, over
    REST: no aiplatform import)."""
    if ref.isdigit() or ref.startswith("projects/"):
        return ref
    return VertexRest(stack).resolve(ref).name


@capacity_app.command("show")
def capacity_show(
    data_dir: Path | None = DataDirOption,
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """The capacity model (as `set` takes it; empty: unlimited) and what active jobs hold."""
    try:
        stack = local_stack_outputs(_data_dir(data_dir) if data_dir else None)
        answer = read_capacity(stack.vertex_endpoint or "", stack.local_token or "")
    except (StackError, LocalApiError) as exc:
        raise _fail(str(exc)) from None
    _print_capacity(answer, as_json)


@capacity_app.command("set")
def capacity_set(
    path: Path = typer.Argument(..., metavar="FILE.yaml", help="The new capacity model, whole."),
    data_dir: Path | None = DataDirOption,
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Replace the running platform's capacity model.

    Jobs waiting for accelerators see it at once; jobs already created or started keep what
    they hold."""
    try:
        capacity = load_capacity(path)
        stack = local_stack_outputs(_data_dir(data_dir) if data_dir else None)
        body = capacity.model_dump(mode="json", exclude_defaults=True)
        answer = set_capacity(stack.vertex_endpoint or "", stack.local_token or "", body)
    except (StackError, CapacityFileError, LocalApiError) as exc:
        raise _fail(str(exc)) from None
    _print_capacity(answer, as_json)


def _print_capacity(answer: dict, as_json: bool) -> None:
    """YAML that `set` takes back (soft-wrapped: a long metric name stays on its line)."""
    if as_json:
        console.print_json(json.dumps(answer))
        return
    model = answer["capacity"] or {"regions": {}}
    unlimited = "" if model.get("regions") else "  (nothing set: unlimited)"
    held = answer["in_use"] or {}
    for line in (
        f"# capacity{unlimited}",
        yaml.safe_dump(model, sort_keys=False).rstrip(),
        "# in use by active jobs (quotas from creation, accelerators from start)",
        yaml.safe_dump(held, sort_keys=False).rstrip() if held else "{}",
    ):
        console.print(escape(line), highlight=False, soft_wrap=True)


LISTED_UPLOADS = 10
"""Uploads named one by one in the summary; past that, the count and the first ones."""


@local_app.command("upload")
def upload(
    path: Path = typer.Argument(..., metavar="PATH", help="A file or a directory tree."),
    destination: str = typer.Argument(..., metavar="gs://BUCKET[/PREFIX]"),
    create_bucket: bool = typer.Option(
        False, "--create-bucket", help="Create the bucket if the local GCS lacks it."
    ),
    data_dir: Path | None = DataDirOption,
) -> None:
    """Put a file or a directory tree into the local platform's GCS, where jobs read it.

    A file to gs://B/PREFIX/ (or gs://B) lands at PREFIX/NAME; to gs://B/OBJECT, at OBJECT.
    A directory's files land at gs://B/PREFIX/RELATIVE/PATH. Existing objects are overwritten."""
    try:
        stack = local_stack_outputs(_data_dir(data_dir) if data_dir else None)
        uploads = plan(path, destination)
        created = _upload_with_progress(stack.gcs_endpoint or "", uploads, create_bucket)
    except (StackError, UploadError, OSError) as exc:
        raise _fail(str(exc)) from None
    if created:
        console.print(f"created bucket gs://{uploads[0].target.bucket}")
    _print_uploaded(uploads)


def _upload_with_progress(endpoint: str, uploads: list[Upload], create: bool) -> bool:
    """A progress bar (on stderr, gone when done) by bytes, for trees of many files."""
    total = sum(item.size for item in uploads)
    with Progress(console=err_console, transient=True) as progress:
        task = progress.add_task("uploading", total=total or None)
        return upload_all(
            endpoint,
            uploads,
            create=create,
            on_done=lambda item: progress.advance(task, item.size),
        )


def _print_uploaded(uploads: list[Upload]) -> None:
    size = sum(item.size for item in uploads)
    console.print(f"uploaded {len(uploads)} file(s), {_bytes(size)}:", highlight=False)
    for item in uploads[:LISTED_UPLOADS]:
        console.print(
            f"  {escape(str(item.source))} -> {escape(str(item.target))}", highlight=False
        )
    if len(uploads) > LISTED_UPLOADS:
        console.print(f"  ... and {len(uploads) - LISTED_UPLOADS} more", highlight=False)


def _bytes(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    scaled = float(size)
    for unit in ("KiB", "MiB", "GiB"):
        scaled /= 1024
        if scaled < 1024 or unit == "GiB":
            break
    return f"{scaled:.1f} {unit}"


@demo_app.command("demo")
def demo(
    data_dir: Path | None = DataDirOption,
    keep_up: bool = typer.Option(False, help="Leave a platform this command started running."),
    serve: bool = typer.Option(
        True, help="Then register, deploy and query the run's model (--no-serve: stop at the run)."
    ),
) -> None:
    """The whole path offline: platform, stack preview, a 2-replica LoRA job, a preemption,
    then the run's model registered, deployed and asked one question."""
    try:
        result = run_demo(_data_dir(data_dir), console=console, keep_up=keep_up, serve=serve)
    except DemoError as exc:
        raise _fail(str(exc)) from None
    if not succeeded(result.state):
        raise _fail(f"the demo job ended {result.state}: see the logs above")
    if result.serve_error is not None:
        raise _fail(f"the run succeeded, but serving its model failed: {result.serve_error}")
