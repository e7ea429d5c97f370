"""`vtx validate|catalog|cost|render|import|launch`: one job through the pipeline

    document -> template -> compiled job -> checks -> plan -> live quota -> submit

Each command runs the stages it needs, in that order, each on the previous stage's value
(jobs.document, jobs.validate, jobs.compile, jobs.plan, jobs.quotas, jobs.client)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from rich.console import Console
from rich.table import Table
from rich.text import Text

from jobs.catalog import load_catalog
from jobs.client import JobRecord, Vertex, VertexError, VertexRest
from jobs.compile import CompiledJob, CompileError, compile_job
from jobs.contract import new_run_id
from jobs.cost import estimate
from jobs.document import TEMPLATE, load_document
from jobs.facts import JobFacts, template_facts
from jobs.gcloud import import_document, template_from_document
from jobs.ladder import (
    DONE,
    NEXT,
    PLACED,
    STOP,
    WAIT,
    Decision,
    judge,
    next_rung,
    on_create_error,
    rung_documents,
)
from jobs.plan import Plan, plan_job
from jobs.problems import Problem
from jobs.quotas import QuotaCheck, QuotaReader, preflight
from jobs.render import render_json, render_yaml
from jobs.spec import JobTemplate, TemplateError
from jobs.stack import StackOutputs
from jobs.training_time import TrainingTimeError, run_estimate, trainer_call
from jobs.validate import check_compiled, checked_template, validate_document
from vtx.log_commands import follow_run, watcher
from vtx.options import (
    FileArg,
    PollOpt,
    RegionOpt,
    SetOpt,
    StackFileOpt,
    StackOpt,
    api_errors,
    console,
    fail,
    optional_stack,
    required_stack,
)
from vtx.output import (
    RungRow,
    catalog_table,
    ladder_table,
    machines_table,
    print_cost,
    print_error,
    print_problems,
    rung_label,
)

app = typer.Typer()


def _region(stack: StackOutputs | None) -> str | None:
    """The region rules check availability in: the stack's, except on the local platform."""
    return stack.region if stack is not None and not stack.is_local else None


def _template(path: Path, overrides: list[str], region: str | None) -> JobTemplate:
    template, problems = checked_template(load_document(path, overrides), region)
    if template is None:
        print_problems(console(), problems)
        raise typer.Exit(1)
    return template


def _compiled(
    template: JobTemplate, stack: StackOutputs, run_id: str, source: str, policy: bool
) -> tuple[CompiledJob | None, list[Problem]]:
    """Compile, then check: what the stack cannot give, or every reason not to submit."""
    try:
        job = compile_job(template, stack, run_id)
    except CompileError as exc:
        return None, [Problem(p.path, p.message, p.hint, source) for p in exc.problems]
    return job, check_compiled(job, source, policy)


@app.command()
def validate(
    files: Annotated[list[Path], typer.Argument(help="Templates or gcloud YAML files.")],
    set_: SetOpt = None,
    region: RegionOpt = None,
    stack: StackOpt = None,
    stack_file: StackFileOpt = None,
    policy: Annotated[
        bool, typer.Option("--policy", help="Also check organisation policies (needs a stack).")
    ] = False,
) -> None:
    """Check jobs locally and report every problem at once; exit 1 if there is any."""
    out = console()
    outputs = required_stack(stack, stack_file) if policy else optional_stack(stack, stack_file)
    region = region or _region(outputs)
    failed = False
    for path in files:
        document = load_document(path, set_ or [])
        problems = document.problems or validate_document(
            document.doc, document.kind, region, document.source
        )
        if not problems and outputs is not None:  # and what this stack would make of it
            try:
                template = template_from_document(document)
            except TemplateError as exc:
                problems = exc.problems
            else:
                _, problems = _compiled(template, outputs, "validate-run", str(path), policy)
        if problems:
            failed = True
            print_problems(out, problems)
        else:
            out.print(Text("✓ ", style="green") + Text(f"{path}: valid ({document.kind})"))
    if failed:
        raise typer.Exit(1)


@app.command()
def catalog(
    accelerator: Annotated[
        str | None, typer.Option("--accelerator", help="Show one accelerator's machines.")
    ] = None,
    region: RegionOpt = None,
    machines: Annotated[bool, typer.Option("--machines", help="List machine types.")] = False,
) -> None:
    """Machines, accelerators, allowed counts, regions and prices (like `sky show-gpus`)."""
    cat = load_catalog()
    out = console()
    if region and region not in cat.regions:
        raise fail(f"region {region!r} is not in the catalog: one of {', '.join(cat.regions)}")
    if accelerator and accelerator.upper() not in cat.accelerators:
        raise fail(f"unknown accelerator {accelerator!r}: one of {', '.join(cat.accelerators)}")
    out.print(machines_table(cat, region) if machines else catalog_table(cat, accelerator, region))
    for name, source in cat.sources.items():
        out.print(f"{name}: {source}", style="dim", highlight=False)


@app.command()
def cost(
    file: FileArg,
    set_: SetOpt = None,
    region: RegionOpt = None,
    stack: StackOpt = None,
    stack_file: StackFileOpt = None,
    run_time: Annotated[
        bool,
        typer.Option(
            "--run-time",
            help="Also run the trainer's --estimate on the template's config: step time, "
            "total steps, hours and the whole run's cost at this price.",
        ),
    ] = False,
) -> None:
    """$/h per pool and in total, cost at the timeout cap, on-demand vs Spot, quota needed/free."""
    outputs = optional_stack(stack, stack_file)
    region = region or (outputs.region if outputs else None)
    template = _template(file, set_ or [], region)
    facts = template_facts(template)
    priced = estimate(facts, region)
    out = console()
    live = None
    if outputs is not None:  # the same live table as the launch plan's
        check = preflight(priced.quota, priced.region, QuotaReader(outputs), load_catalog())
        live = (check, outputs)
    print_cost(out, priced, f"{template.name}: cost per hour", live)
    if run_time:
        _print_run_time(out, facts, priced.usd_per_h)


def _print_run_time(out: Console, facts: JobFacts, usd_per_h: float | None) -> None:
    """The trainer's own estimate of this job: step time, steps, hours, the run's cost."""
    out.print("running the trainer's estimate (python -m trainer ... --estimate) ...")
    try:
        result = run_estimate(trainer_call(facts, load_catalog()), usd_per_h)
    except TrainingTimeError as exc:
        raise fail(f"no run-time estimate: {exc}", code=1) from None
    out.print(_run_time_table(result))
    notes = [n for n in result.get("notes") or [] if "--usd-per-hour" not in n]
    if usd_per_h is None:
        notes.append("this job's price per hour is unknown (above), so the run's cost is too")
    for note in notes:
        out.print(f"note: {note}", markup=False, highlight=False)


def _hours(hours: float) -> str:
    minutes = hours * 60
    return f"{minutes:.1f} min" if minutes < 90 else f"{hours:.1f} h"


def _run_time_table(result: dict[str, Any]) -> Table:
    def known(key: str, shown: Callable[[Any], str]) -> str:
        value = result.get(key)
        return "unknown" if value is None else shown(value)

    table = Table(title="run time (the trainer's estimate)", title_justify="left")
    table.add_column("figure", no_wrap=True)
    table.add_column("value", overflow="fold")
    devices = f"{result['accelerator_count']} x {result['accelerator']} x {result['nodes']} node(s)"
    table.add_row("accelerators", devices)
    table.add_row("memory per device", known("memory_per_device_gib", lambda v: f"{v:.2f} GiB"))
    table.add_row("step time", known("step_time_s", lambda v: f"{v:.3g} s"))
    table.add_row("  assuming MFU", known("mfu", lambda v: f"{v:.0%} of the bf16 peak"))
    table.add_row("total steps", known("total_steps", lambda v: f"{v:,}"))
    table.add_row("  counted from", str(result.get("total_steps_basis") or "-"))
    table.add_row("training time", known("hours", _hours))
    table.add_row("cost of the run", known("cost_usd", lambda v: f"${v:,.2f}"))
    return table


@app.command()
def render(
    file: FileArg,
    set_: SetOpt = None,
    stack: StackOpt = None,
    stack_file: StackFileOpt = None,
    format_: Annotated[
        str,
        typer.Option("--format", help="yaml: CustomJobSpec for gcloud --config; json: CustomJob."),
    ] = "yaml",
    run_id: Annotated[str | None, typer.Option("--run-id", help="Run id (default: new).")] = None,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write to a file.")] = None,
) -> None:
    """Print the job exactly as it would be submitted."""
    from google.protobuf.json_format import ParseError

    if format_ not in ("yaml", "json"):
        raise fail("--format is yaml or json")
    outputs = required_stack(stack, stack_file)
    template = _template(file, set_ or [], _region(outputs))
    job, problems = _compiled(
        template, outputs, run_id or new_run_id(template.name), str(file), policy=False
    )
    if job is None or problems:
        print_problems(console(), problems)
        raise typer.Exit(1)
    try:
        proto = job.to_proto()
    except ParseError as exc:  # validation should have refused it first: a vtx bug
        raise fail(
            f"{file}: the compiled job does not convert to the API's types ({exc}); "
            "validation missed this: please report it",
            code=1,
        ) from exc
    text = render_yaml(proto, outputs) if format_ == "yaml" else render_json(proto)
    if output:
        output.write_text(text)
        console(stderr=True).print(f"wrote {output}", highlight=False)
    else:
        sys.stdout.write(text)


@app.command("import")
def import_(
    file: Annotated[Path, typer.Argument(help="gcloud CustomJobSpec or CustomJob YAML/JSON.")],
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write to a file.")] = None,
) -> None:
    """Turn a gcloud --config YAML (or a whole CustomJob) into a vtx template."""
    document = load_document(file)
    if document.problems:
        print_problems(console(), document.problems)
        raise typer.Exit(1)
    if document.kind == TEMPLATE:
        raise fail(f"{file} is already a vtx template (no workerPoolSpecs/jobSpec)", code=1)
    try:
        imported = import_document(document.doc, document.kind, document.source)
    except TemplateError as exc:
        print_problems(console(), exc.problems)
        raise typer.Exit(1) from exc
    text = yaml.safe_dump(imported.template, sort_keys=False)
    if output:
        output.write_text(text)
    else:
        sys.stdout.write(text)
    for note in imported.notes:
        console(stderr=True).print(f"note: {note}", style="dim", highlight=False)


def print_plan(out: Console, plan: Plan, quota: QuotaCheck | None = None) -> None:
    """What will run, where, as whom, and at what cost: everything a reviewer needs."""
    job, stack = plan.job, plan.job.stack
    spec = job.rest["jobSpec"]
    where = "local platform" if stack.is_local else f"{stack.project} ({stack.region})"
    images = sorted({p["containerSpec"]["imageUri"] for p in spec["workerPoolSpecs"] if p})
    network = spec.get("pscInterfaceConfig", {}).get("networkAttachment") or spec.get("network")
    out.print(
        f"[bold]Plan[/bold]: {job.template.name} on stack {stack.environment}: {where}",
        highlight=False,
    )
    lines = {
        "run id": job.run_id,
        "outputs": job.output_prefix,
        "images": ", ".join(images),
        "runs as": spec["serviceAccount"],
        "network": network or "Google-managed (no VPC)",
        "scheduling": ", ".join(f"{k}={v}" for k, v in spec["scheduling"].items()),
    }
    for key, value in lines.items():
        out.print(f"{key:>10}: {value}", highlight=False)
    print_cost(out, plan.cost, "pools", (quota, stack) if quota is not None else None)


def quota_refusal(check: QuotaCheck) -> str | None:
    """Why a job must not be submitted: a metric whose limit is below its need (Vertex would
    refuse it whatever else runs). Short of what is free now only warns: running jobs end."""
    over = ", ".join(f"{m.metric} (needs {m.needed}, limit {m.limit})" for m in check.over_limit)
    if not over:
        return None
    return f"over the quota limit in {check.region}: {over}; --ignore-quota submits it anyway"


def _hopeless(check: QuotaCheck) -> str | None:
    """Why a rung cannot run whatever else ends: a metric whose limit (zero, often, in a region
    the project never asked for) is below its need. Short of what is free now is no reason to
    skip it: running jobs end."""
    over = [
        f"{'zero quota' if m.limit == 0 else f'quota limit {m.limit}'} for "
        f"{m.metric.rsplit('/', 1)[-1]} in {check.region} (needs {m.needed})"
        for m in check.over_limit
    ]
    return "; ".join(over) or None


@dataclass(frozen=True)
class Rung:
    """One rung of a launch: its plan, its live quota, how long it may wait, and why it will be
    skipped (None: it will be tried)."""

    number: int
    plan: Plan
    check: QuotaCheck
    max_wait_s: float | None
    hopeless: str | None

    @property
    def label(self) -> str:
        return rung_label(self.number, self.plan.cost)

    def row(self) -> RungRow:
        return RungRow(self.number, self.plan.cost, self.check, self.max_wait_s, self.hopeless)


def _at(where: str, problems: list[Problem]) -> list[Problem]:
    """A rung's problems placed at the rung (the base's stay where they are)."""
    if where == "(base)":
        return problems
    return [Problem(f"{where}: {p.path}", p.message, p.hint, p.source) for p in problems]


def plan_rungs(
    template: JobTemplate,
    stack: StackOutputs,
    run_id: str,
    source: str,
    reader: QuotaReader,
    ignore_quota: bool = False,
) -> tuple[list[Rung], list[Problem]]:
    """Every rung compiled under the one run id, checked, priced and preflighted like a job of
    its own; every problem of every rung."""
    documents, problems = rung_documents(template.to_document())
    rungs: list[Rung] = []
    for document in documents:
        try:
            rung_template = JobTemplate.from_document(document.doc, source)
        except TemplateError as exc:
            problems += _at(document.where, exc.problems)
            continue
        job, found = _compiled(rung_template, stack, run_id, source, policy=True)
        if job is None or found:
            problems += _at(document.where, found)
            continue
        plan = plan_job(job)
        check = preflight(plan.quota, plan.cost.region, reader, load_catalog())
        hopeless = None if ignore_quota else _hopeless(check)
        rungs.append(Rung(document.number, plan, check, document.max_wait_s, hopeless))
    return rungs, [Problem(p.path, p.message, p.hint, p.source or source) for p in problems]


class LadderWalk:
    """Submits the rungs in order under one run id and watches each attempt until it has its
    machines, ends, or fails for capacity (then the next rung). The decisions are
    ``jobs.ladder``'s; this only calls the API, keeps time and says each move."""

    def __init__(
        self,
        out: Console,
        vertex: Vertex,
        rungs: list[Rung],
        *,
        poll_s: float,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        rest: VertexRest | None = None,
    ) -> None:
        self.out, self.vertex, self.rungs = out, vertex, rungs
        self.rest = rest or watcher(vertex)
        self.poll_s, self.sleep, self.clock = poll_s, sleep, clock
        self.hopeless = [r.hopeless for r in rungs]
        self.reasons = {r.number: f"skipped: {r.hopeless}" for r in rungs if r.hopeless}
        self.current: str | None = None
        """The live attempt's job name: what Ctrl-C leaves running."""

    def say(self, line: str) -> None:
        self.out.print(line, highlight=False, markup=False)

    def run(self) -> tuple[Decision, Rung | None]:
        """The decision that ended the walk (PLACED, DONE or STOP; NEXT when no rung is left)
        and the rung it was taken on."""
        index = next_rung(self.hopeless, 0)
        decision, rung = Decision(NEXT, None), None
        while index is not None:
            rung = self.rungs[index]
            following = next_rung(self.hopeless, index + 1)
            decision, cancelled = self.attempt(rung, last=following is None)
            if decision.action != NEXT:
                return decision, rung
            self.reasons[rung.number] = decision.reason or "no capacity"
            then = self.rungs[following].label if following is not None else "no rung left"
            self.say(
                f"{rung.label}: {decision.reason}{'; cancelling' if cancelled else ''}; {then}"
            )
            index = following
        return decision, rung

    def attempt(self, rung: Rung, *, last: bool) -> tuple[Decision, bool]:
        """Submit one rung and watch it; whether it had to be cancelled to move on."""
        self.say(f"{rung.label}: submitting")
        try:
            submitted = self.vertex.submit(rung.plan)
        except VertexError as err:
            decision = on_create_error(getattr(err.__cause__, "code", None))
            return (decision if decision.action == NEXT else Decision(STOP, str(err))), False
        name = submitted.job.name
        self.current = name
        self.say(f"{rung.label}: submitted {name} (attempt {submitted.attempt})")
        decision = self.watch(name, rung, last)
        cancelled = decision.action == NEXT and self.cancel(name)
        if decision.action != PLACED:
            self.current = None
        return decision, cancelled

    def watch(self, name: str, rung: Rung, last: bool) -> Decision:
        started = self.clock()  # the rung's wait counts from its creation
        while True:
            record = self.rest.get(name)
            decision = judge(
                record.state,
                record.error,
                self.clock() - started,
                rung.max_wait_s,
                last=last,
                code=_error_code(record),
            )
            if decision.action != WAIT:
                return decision
            self.sleep(self.poll_s)

    def cancel(self, name: str) -> bool:
        """Cancel a live attempt and wait for it to end: the next attempt of the run is refused
        while one is live (two attempts would write one checkpoint prefix)."""
        if self.rest.get(name).terminal:
            return False
        self.rest.cancel(name)
        while not self.rest.get(name).terminal:
            self.sleep(self.poll_s)
        return True


def _error_code(record: JobRecord) -> int | None:
    code = (record.rest.get("error") or {}).get("code")
    return code if isinstance(code, int) else None


def walk_ladder(out: Console, walk: LadderWalk, run_id: str, follow: bool, poll_s: float) -> int:
    """Walk the ladder; the exit code. Ctrl-C leaves the live attempt running."""
    try:
        decision, rung = walk.run()
    except KeyboardInterrupt:
        left = f"{walk.current} is left running" if walk.current else "nothing is running"
        out.print(f"interrupted: {left}; `vtx cancel {run_id}` cancels the run", highlight=False)
        return 130
    if decision.action == NEXT:
        reasons = "; ".join(f"rung {n}: {why}" for n, why in sorted(walk.reasons.items()))
        print_error(out, f"no rung got capacity: {reasons}", "run failed")
        return 1
    if decision.action == STOP:
        print_error(out, f"{rung.label if rung else 'run'}: {decision.reason}", "run failed")
        return 1
    state = "succeeded" if decision.action == DONE else "running"
    out.print(f"{rung.label if rung else ''}: {state}; run id: [bold]{run_id}[/bold]")
    if follow:
        return follow_run(out, walk.vertex, run_id, poll_s)
    out.print(f"follow: vtx logs {run_id} --follow", style="dim", highlight=False)
    return 0


def _launch_ladder(
    out: Console,
    template: JobTemplate,
    stack: StackOutputs,
    source: str,
    run_id: str,
    *,
    reader: QuotaReader,
    ignore_quota: bool,
    dry_run: bool,
    yes: bool,
    confirm: Callable[[str], bool],
    make_walk: Callable[[list[Rung]], LadderWalk],
    follow: bool,
) -> int:
    """A template with a capacity ladder: every rung planned and shown, then walked."""
    rungs, problems = plan_rungs(template, stack, run_id, source, reader, ignore_quota)
    if problems:
        print_problems(out, problems)
        return 1
    print_plan(out, rungs[0].plan, rungs[0].check)
    out.print(ladder_table([r.row() for r in rungs]))
    for rung in rungs:
        if rung.hopeless:
            out.print(f"{rung.label}: skipped: {rung.hopeless}", highlight=False, markup=False)
    if next_rung([r.hopeless for r in rungs], 0) is None:
        reasons = "; ".join(f"rung {r.number}: {r.hopeless}" for r in rungs)
        print_error(out, f"every rung is over a quota limit: {reasons}; --ignore-quota tries them")
        return 1
    if dry_run:
        out.print("dry run: nothing submitted")
        return 0
    if not yes and not confirm("Submit this run, walking its ladder?"):
        out.print("not submitted")
        return 1
    walk = make_walk(rungs)
    return walk_ladder(out, walk, run_id, follow, walk.poll_s)


def launch_job(
    out: Console,
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
    quotas: QuotaReader | None = None,
    ignore_quota: bool = False,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> int:
    """Compile, check, plan, check the live quota, confirm, submit (and follow); the exit
    code. A dry run stops where the launch would: after the plan, or at a quota refusal.
    A template with a capacity ladder is walked rung by rung (``sleep``/``clock``: its watch)."""
    run_id = run_id or new_run_id(template.name)
    if template.capacity is not None and template.capacity.ladder:
        return _launch_ladder(
            out,
            template,
            stack,
            source,
            run_id,
            reader=quotas or QuotaReader(stack),
            ignore_quota=ignore_quota,
            dry_run=dry_run,
            yes=yes,
            confirm=confirm,
            make_walk=lambda rungs: LadderWalk(
                out, vertex or Vertex(stack), rungs, poll_s=poll_s, sleep=sleep, clock=clock
            ),
            follow=follow,
        )
    job, problems = _compiled(template, stack, run_id, source, policy=True)
    if job is None or problems:
        print_problems(out, problems)
        return 1
    plan = plan_job(job)
    check = preflight(plan.quota, plan.cost.region, quotas or QuotaReader(stack), load_catalog())
    print_plan(out, plan, check)
    refusal = quota_refusal(check)
    if refusal and not ignore_quota:
        print_error(out, refusal, "not submitted")
        return 1
    if dry_run:
        out.print("dry run: nothing submitted")
        return 0
    if not yes and not confirm("Submit this job?"):
        out.print("not submitted")
        return 1
    vertex = vertex or Vertex(stack)
    with api_errors(out, "not submitted"):
        submitted = vertex.submit(plan)
    out.print(f"submitted [bold]{submitted.job.name}[/bold]", highlight=False)
    resumed = (
        f" (attempt {submitted.attempt}: resumes from its checkpoints)"
        if submitted.attempt > 1
        else ""
    )
    out.print(f"run id: [bold]{run_id}[/bold]{resumed}", highlight=False)
    if follow:
        return follow_run(out, vertex, run_id, poll_s)
    out.print(
        f"follow: vtx logs {run_id} --follow (with this launch's --stack or --stack-file)",
        style="dim",
        highlight=False,
    )
    return 0


@app.command()
def launch(
    file: FileArg,
    set_: SetOpt = None,
    stack: StackOpt = None,
    stack_file: StackFileOpt = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Stop after the plan.")] = False,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Stream logs to the end.")] = False,
    run_id: Annotated[
        str | None, typer.Option("--run-id", help="Resubmit an existing run (same output prefix).")
    ] = None,
    poll_s: PollOpt = 5.0,
    ignore_quota: Annotated[
        bool,
        typer.Option(
            "--ignore-quota",
            help="Submit even when the job needs more than the project's quota limit.",
        ),
    ] = False,
) -> None:
    """Plan, check the live quota, confirm and submit a job; print its name and run id."""
    outputs = required_stack(stack, stack_file)
    template = _template(file, set_ or [], _region(outputs))
    code = launch_job(
        console(),
        template,
        outputs,
        str(file),
        run_id=run_id,
        yes=yes,
        dry_run=dry_run,
        follow=follow,
        poll_s=poll_s,
        ignore_quota=ignore_quota,
    )
    raise typer.Exit(code)
