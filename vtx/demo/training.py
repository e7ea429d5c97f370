"""`vtx demo` (`make demo`): the whole vtx path on one machine, with a preemption in the middle.

1. start the local platform unless one runs in the data dir (and stop it at the end);
2. print the offline preview of the dev stack (infra under Pulumi mocks);
3. the tiny example dataset is in gs://vtx-local-data/examples/tiny.jsonl (`vtx local up` put
   it there);
4. launch jobs/templates/smoke-cpu.yaml with --stack local --follow (chief + one worker,
   DDP over gloo, LoRA on the tiny model) through the same code as `vtx launch`, asking for a
   Spot T4 per replica with a capacity ladder: the platform the demo starts has no Spot T4s left
   in us-central1, so the first attempt fails with STOCKOUT and the ladder moves the run to
   us-east4 (the local platform checks the accelerators against the catalog and runs on CPU);
5. once the first checkpoint is committed, preempt workerpool1-0 as a Spot VM is preempted;
   every replica restarts (restartJobOnWorkerRestart) and resumes from its last committed
   checkpoint;
6. print a summary read back from the run's logs: steps, final loss, checkpoints, model URI,
   work lost to the preemption;
7. register, deploy and ask the run's model once;
8. end with the run's goodput: a bar per attempt (`vtx status --timeline`), its report
   (`vtx report`, written under the data dir, path printed) and its goodput line.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text

from infra.offline.program import render_preview, run_offline
from jobs.core.catalog import load_catalog, refreshed_prices_dir
from jobs.core.contract import new_run_id, region_of
from jobs.core.problems import Refused
from jobs.core.stack import StackOutputs
from jobs.core.states import bare_name, succeeded
from jobs.core.trainer_events import TrainerEvent
from jobs.core.user_io import shown_path, write_user_file
from jobs.launch.checks import checked_template
from jobs.launch.plan import LaunchOptions
from jobs.local.platform.capacity import Capacity
from jobs.local.platform.settings import LocalSettings
from jobs.local.platform.state import EXAMPLE_DATA, running_state, stack_outputs_for
from jobs.local.plumbing.client import LocalApiError, preempt_replica, read_logs
from jobs.local.plumbing.ports import free_port
from jobs.local.plumbing.processes import PlatformError, bring_up, stop_platform
from jobs.pricing.refresh import BillingCatalogReader, PricesUnavailable, refresh
from jobs.runs.goodput import goodput_of
from jobs.runs.logs import LocalLogSource
from jobs.runs.watch import attempts_of
from jobs.spec.document import load_document
from jobs.spec.template import JobTemplate
from jobs.vertex.client import Vertex, state_name
from jobs.vertex.errors import VertexError
from jobs.vertex.rest import VertexRest
from vtx.confirm import Ask
from vtx.demo.serving import Served, print_served, serve_run_model
from vtx.flows.launch import launch_job
from vtx.views.fit_table import FitTable
from vtx.views.goodput.run import goodput_line, timeline_rows
from vtx.views.goodput.run_page import goodput_page

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = REPO / "jobs" / "templates" / "smoke-cpu.yaml"
PREEMPTED_REPLICA = "workerpool1-0"
SECOND_RUNG = "us-east4"
LADDER = [
    "pools.chief.accelerator=NVIDIA_TESLA_T4",
    "pools.workers.accelerator=NVIDIA_TESLA_T4",
    f"capacity={{ladder: [{{region: {SECOND_RUNG}}}]}}",
]
"""The demo's run asks for Spot T4s, with SECOND_RUNG as the ladder's second rung."""
STOCKED_OUT = {"NVIDIA_TESLA_T4": {"spot_stockout": True}}
CAPACITY = {"regions": {"us-central1": {"accelerators": STOCKED_OUT}}}
"""The platform the demo starts: Spot T4s are stocked out where the run first goes."""


class DemoError(Exception):
    """The demo could not run; the message says which step and why."""


@dataclass
class RunSummary:
    """What the run's logs say happened (rank 0's view, plus the platform's events)."""

    steps: int | None = None
    total_steps: int | None = None
    final_loss: float | None = None
    checkpoints: list[int] = field(default_factory=list)
    model_dir: str | None = None
    preempted_at: str | None = None
    step_before_preemption: int | None = None
    resumed_from: int | None = None
    restart_s: float | None = None
    job_restarts: int = 0

    @property
    def steps_lost(self) -> int | None:
        if self.step_before_preemption is None or self.resumed_from is None:
            return None
        return max(self.step_before_preemption - self.resumed_from, 0)


def _payload(message: str) -> dict[str, Any] | None:
    try:
        data = json.loads(message)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _seconds_between(start: str, end: str) -> float:
    def parse(ts: str) -> datetime:
        return datetime.fromisoformat(ts.replace("Z", "+00:00"))

    return (parse(end) - parse(start)).total_seconds()


def summarize(entries: list[dict[str, Any]]) -> RunSummary:
    """Fold the run's log entries (the /vtx/logs shape) into a RunSummary."""
    summary = RunSummary()
    committed: set[int] = set()
    furthest = 0  # the highest step rank 0 reported so far (train, checkpoint, stop...)
    for entry in entries:
        message = entry["message"]
        if entry["replica"] == "service":
            if message.startswith("preempting ") and summary.preempted_at is None:
                summary.preempted_at = entry["timestamp"]
            if message.startswith(("restarting every replica (", "retrying the job (")):
                summary.job_restarts += 1
            continue
        data = _payload(message)
        if data is None or data.get("rank", 0) != 0:
            continue
        event, step = data.get("message"), data.get("step")
        if event == TrainerEvent.RESUMED and summary.preempted_at and summary.resumed_from is None:
            summary.step_before_preemption = furthest
            summary.resumed_from = step
            summary.restart_s = _seconds_between(summary.preempted_at, entry["timestamp"])
        if isinstance(step, int):
            furthest = max(furthest, step)
        if event == TrainerEvent.TRAIN and step is not None:
            summary.steps, summary.final_loss = step, data.get("loss", summary.final_loss)
        elif event == TrainerEvent.TRAINING:
            summary.total_steps = data.get("total_steps")
        elif event == TrainerEvent.CHECKPOINT_COMMITTED and step is not None:
            committed.add(step)
        elif event == TrainerEvent.DONE:
            summary.steps, summary.model_dir = step, data.get("model_dir")
    summary.checkpoints = sorted(committed)
    return summary


def read_run_logs(stack: StackOutputs, run_id: str) -> list[dict[str, Any]]:
    source = LocalLogSource(stack.vertex_endpoint or "", run_id, token=stack.local_token or "")
    entries, _ = source.fetch(None)
    return [dataclasses.asdict(e) for e in entries]


class PreemptAfterFirstCheckpoint(threading.Thread):
    """Watches the run's logs; after the first committed checkpoint, preempts one replica."""

    def __init__(self, stack: StackOutputs, run_id: str, console: Console) -> None:
        super().__init__(name="vtx-demo-preempter", daemon=True)
        self.endpoint, self.token = stack.vertex_endpoint or "", stack.local_token or ""
        self.run_id, self.console = run_id, console
        self.done = threading.Event()
        self.preempted: str | None = None
        self.error: str | None = None

    def run(self) -> None:
        cursor = 0
        while not self.done.wait(0.5):
            try:
                page = read_logs(self.endpoint, self.token, run_id=self.run_id, cursor=cursor)
            except LocalApiError as exc:
                self.error = str(exc)
                return
            cursor = page["cursor"]
            for entry in page["entries"]:
                data = _payload(entry["message"]) or {}
                if data.get("message") != TrainerEvent.CHECKPOINT_COMMITTED:
                    continue
                try:
                    preempt_replica(self.endpoint, self.token, entry["job"], PREEMPTED_REPLICA)
                except LocalApiError as exc:
                    self.error = str(exc)
                    return
                self.preempted = entry["job"]
                self.console.print(
                    f"[bold magenta]>>> demo: checkpoint of step {data.get('step')} committed; "
                    f"preempting {PREEMPTED_REPLICA} (SIGTERM, then SIGKILL after the grace "
                    f"period), as a Spot VM is preempted[/bold magenta]"
                )
                return


def _ensure_platform(data_dir: Path, console: Console):
    """The running platform in data_dir (recovered if part of it had stopped), or a new one;
    returns (state, started_here)."""
    state = running_state(data_dir)
    if state is not None:
        console.print(f"using the local platform already running from {state.data_dir}")
        if Path(state.cwd) != REPO:
            console.print(
                f"[yellow]its replicas run in {state.cwd}, not in {REPO}: the template's "
                f"relative paths may not resolve (restart it from the checkout)[/yellow]"
            )
        return state, False
    console.print("starting the local platform (GCS emulator + control plane)...")
    try:
        settings = LocalSettings(
            data_dir=data_dir,
            cwd=REPO,
            port=free_port(),
            gcs_port=free_port(),
            capacity=Capacity.model_validate(CAPACITY),
        )
        started = bring_up(settings)
    except PlatformError as exc:
        raise DemoError(f"could not start the local platform: {exc}") from exc
    if started.note:
        console.print(f"[yellow]note: {started.note}[/yellow]")
    state = started.state
    console.print(f"  Vertex AI endpoint {state.vertex_endpoint}, GCS {state.gcs_endpoint}")
    return state, True


def _preview(console: Console) -> None:
    console.rule("[bold]1. The dev stack, previewed offline (Pulumi program under mocks)")
    try:
        console.print(render_preview(run_offline("dev")))
    except Exception as exc:  # the preview informs; the run below does not depend on it
        console.print(f"[yellow]stack preview unavailable: {exc}[/yellow]")


def _template(trainer_overrides: list[str]) -> JobTemplate:
    template, problems = checked_template(load_document(TEMPLATE, LADDER))
    if template is None:
        raise DemoError(f"{TEMPLATE}: " + "; ".join(str(p) for p in problems))
    extra = [arg for item in trainer_overrides for arg in ("--set", item)]
    return template.model_copy(update={"args": [*template.args, *extra]})


def print_summary(
    console: Console, summary: RunSummary, state: str, outputs: str, attempts: str
) -> None:
    table = FitTable(title="demo summary", show_header=False, title_justify="left")
    table.add_column(no_wrap=True)
    table.add_column(overflow="fold")
    table.add_row("job state", bare_name(state))
    table.add_row("attempts (ladder)", attempts)
    table.add_row("steps", f"{summary.steps} of {summary.total_steps}")
    loss = "-" if summary.final_loss is None else f"{summary.final_loss:.4f}"
    table.add_row("final training loss", loss)
    table.add_row(
        "checkpoints committed",
        f"{len(summary.checkpoints)} (steps {', '.join(map(str, summary.checkpoints))})",
    )
    table.add_row("model", summary.model_dir or "-")
    table.add_row("run outputs", outputs)
    if summary.preempted_at:
        lost = summary.steps_lost
        table.add_row(
            "preemption",
            f"{PREEMPTED_REPLICA}, with rank 0 at step {summary.step_before_preemption}; "
            f"every replica restarted {summary.job_restarts}x, resumed from step "
            f"{summary.resumed_from}",
        )
        restart = "-" if summary.restart_s is None else f"{summary.restart_s:.1f} s"
        table.add_row("work lost to it", f"{lost} steps; {restart} from preemption to resume")
    else:
        table.add_row("preemption", "none delivered (the run ended before a checkpoint)")
    console.print(table)


@dataclass
class DemoResult:
    state: str
    run_id: str
    summary: RunSummary
    job_name: str
    attempts: str
    """Where each attempt ran and how it ended, oldest first."""
    served: Served | None = None
    """The run's model registered, deployed and asked once (None: not asked for, or failed)."""
    serve_error: str | None = None
    report: Path | None = None
    """The run's goodput report (`vtx report`), written at the end."""


def run_demo(
    data_dir: Path,
    console: Console,
    keep_up: bool = False,
    preview: bool = True,
    trainer_overrides: list[str] | None = None,
    serve: bool = True,
) -> DemoResult:
    """Run the demo; DemoError if it could not, a DemoResult (any final state) otherwise."""
    state, started = _ensure_platform(data_dir, console)
    goodput: str | None = None
    try:
        if preview:
            _preview(console)
        stack = stack_outputs_for(state)
        console.rule("[bold]2. Data in the emulated GCS")
        for local, (bucket, name) in EXAMPLE_DATA.items():
            console.print(f"{local.relative_to(REPO)} -> gs://{bucket}/{name} (by vtx local up)")
        _refresh_prices(console, stack)
        console.rule(
            "[bold]3. vtx launch jobs/templates/smoke-cpu.yaml --stack local --follow, on Spot "
            "T4s with a capacity ladder (us-central1, then us-east4)"
        )
        result = _launch_and_follow(console, stack, trainer_overrides or [])
        if serve and succeeded(result.state):
            result = _serve(console, stack, result)
        report, goodput = _goodput(console, stack, result.run_id, data_dir)
        return dataclasses.replace(result, report=report)
    finally:
        if started and not keep_up:
            stop_platform(Path(state.data_dir))
            console.print("local platform stopped; nothing left running")
        if goodput is not None:  # the demo's last word
            console.print(Text("goodput: ") + Text(goodput), soft_wrap=True)


def _refresh_prices(console: Console, stack: StackOutputs) -> None:
    """`vtx prices refresh --stack local` for the ladder's regions, so that the plan prices
    every rung (with the stand-in's made-up figures, which price the local stack only)."""
    regions = [stack.region, SECOND_RUNG]
    try:
        done = refresh(BillingCatalogReader(stack), load_catalog(), regions)
    except PricesUnavailable as exc:
        console.print(f"[yellow]prices not refreshed, the plan says unknown: {exc}[/yellow]")
        return
    console.print(
        f"vtx prices refresh --stack local: {len(done.matched.figures)} figures for "
        f"{', '.join(regions)} from the local billing catalog stand-in (made-up figures, each "
        f"with its SKU; they price the local stack only), {len(done.written)} tables in "
        f"{refreshed_prices_dir()}",
        highlight=False,
    )


def _launch_and_follow(console: Console, stack, trainer_overrides: list[str]) -> DemoResult:
    template = _template(trainer_overrides)
    run_id = new_run_id(template.name)
    watcher = PreemptAfterFirstCheckpoint(stack, run_id, console)
    watcher.start()
    try:
        options = LaunchOptions(run_id=run_id, follow=True, poll_s=1.0)
        launch_job(console, template, stack, str(TEMPLATE), options, Ask(yes=True))
    finally:
        watcher.done.set()
        watcher.join(timeout=5)
    if watcher.error:
        console.print(f"[yellow]the demo's preemption was not delivered: {watcher.error}[/yellow]")
    attempts = Vertex(stack).list(run_id)
    if not attempts:
        raise DemoError(f"the job of run {run_id} was not submitted (see the messages above)")
    final = attempts[0]
    summary = summarize(read_run_logs(stack, run_id))
    console.rule("[bold]4. Summary")
    outputs = final.job_spec.base_output_directory.output_uri_prefix
    print_summary(console, summary, state_name(final), outputs, ladder_path(attempts))
    return DemoResult(state_name(final), run_id, summary, final.name, ladder_path(attempts))


def _serve(console: Console, stack: StackOutputs, result: DemoResult) -> DemoResult:
    console.rule(
        f"[bold]5. vtx model upload {result.run_id}, vtx deploy, vtx predict, vtx undeploy: "
        "the run's model, served"
    )
    try:
        served = serve_run_model(console, stack, result.run_id)
    except (VertexError, Refused) as exc:
        console.print(f"[red]serving the run's model failed: {exc}[/red]")
        return dataclasses.replace(result, serve_error=str(exc))
    print_served(console, served)
    return dataclasses.replace(result, served=served)


def _goodput(
    console: Console, stack: StackOutputs, run_id: str, data_dir: Path
) -> tuple[Path, str]:
    """The run's bars (`vtx status --timeline`) and its report (`vtx report`) in the
    platform's data dir, printed; its goodput line, returned (the demo ends with it): where
    the time went, from the ladder's stocked-out rung to the preemption's restart."""
    console.rule(f"[bold]6. vtx status {run_id} --timeline; vtx report {run_id}: its goodput")
    jobs = VertexRest(stack).list(run_id)
    now = datetime.now(UTC)
    catalog = load_catalog().for_stack(stack)
    attempts = attempts_of(jobs, stack.region, now, catalog)
    source = LocalLogSource(stack.vertex_endpoint or "", run_id, token=stack.local_token or "")
    entries, _ = source.fetch(None)
    found = goodput_of(attempts, entries, now)
    for row in timeline_rows(found):
        console.print(row, soft_wrap=False, overflow="ignore", crop=False)
    report = data_dir / "reports" / f"{run_id}.html"
    report.parent.mkdir(parents=True, exist_ok=True)
    write_user_file(report, goodput_page(run_id, found))
    console.print(f"report: {shown_path(report)}", highlight=False)
    return report, goodput_line(found)


def ladder_path(newest_first: list[Any]) -> str:
    """The run's attempts, oldest first: where each ran and how it ended."""
    return " -> ".join(
        f"{region_of(job.name)} {bare_name(job.state)}"
        + (" (STOCKOUT)" if "STOCKOUT" in job.error.message else "")
        for job in reversed(newest_first)
    )
