"""`vtx validate|catalog|cost|render|import|launch`: one job through the pipeline

    document -> template -> compiled job -> checks -> plan -> live quota -> submit

Each command runs the stages it needs, in that order, each on the previous stage's value
(jobs.spec.document, jobs.custom_jobs.validate, jobs.custom_jobs.compile, jobs.pricing.plan,
jobs.quota.cloud_quotas, jobs.vertex.client). `launch` hands the checked template to jobs.launch
(the plan of every rung, then the runner's events) and only shows, confirms and prints."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from rich.console import Console
from rich.table import Table
from rich.text import Text

from jobs.core.catalog import load_catalog
from jobs.core.contract import new_run_id
from jobs.core.formats import duration, money
from jobs.core.problems import Problem
from jobs.core.stack import StackOutputs
from jobs.custom_jobs.compile import CompiledJob
from jobs.custom_jobs.egress_advice import egress_warnings
from jobs.custom_jobs.facts import JobFacts, template_facts
from jobs.custom_jobs.training_time import TrainingTimeError, run_estimate, trainer_call
from jobs.custom_jobs.validate import with_source
from jobs.custom_jobs.wandb_launch import render_launch_queue_config
from jobs.launch.checks import validate_document
from jobs.launch.plan import LaunchOptions, compile_checked, compile_rungs, stack_region
from jobs.launch.render import render_json, render_study_json, render_study_yaml, render_yaml
from jobs.pricing.estimates import estimate
from jobs.pricing.warm_pools import warm_cost, warm_share
from jobs.quota.cloud_quotas import QuotaReader, preflight
from jobs.serving.model_upload import UploadOptions
from jobs.spec.document import TEMPLATE, load_document
from jobs.spec.gcloud import import_document, template_from_document
from jobs.spec.template import JobTemplate, TemplateError
from jobs.tuning.study_job import reporting_metric, study_of
from vtx.confirm import Ask
from vtx.flows.launch import launch_job
from vtx.options import (
    FileArg,
    PollOpt,
    RegionOpt,
    SetOpt,
    StackFileOpt,
    StackOpt,
    console,
    fail,
    load_template,
    optional_stack,
    required_stack,
    write_output,
)
from vtx.views.catalog import catalog_table, machines_table
from vtx.views.costs import print_cost
from vtx.views.fit_table import FitTable
from vtx.views.launch import print_study_cost
from vtx.views.problems import print_problems, print_warnings
from vtx.views.warm_pools import print_warm_cost

app = typer.Typer()


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
    region = region or stack_region(outputs)
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
                jobs, problems = _compiled_on_stack(template, outputs, str(path), policy)
                for job in jobs:  # what a closed stack's job could not reach: warnings
                    print_warnings(out, with_source(egress_warnings(job.rest, outputs), str(path)))
        if problems:
            failed = True
            print_problems(out, problems)
        else:
            out.print(Text("✓ ", style="green") + Text(f"{path}: valid ({document.kind})"))
    if failed:
        raise typer.Exit(1)


def _compiled_on_stack(
    template: JobTemplate, outputs: StackOutputs, source: str, policy: bool
) -> tuple[list[CompiledJob], list[Problem]]:
    """The template compiled against the stack: a ladder's every rung (a rung on a warm pool
    placed on its pools), else the one job."""
    if template.capacity is not None and template.capacity.ladder and template.study is None:
        compiled, problems = compile_rungs(template, outputs, "validate-run", source, policy)
        return [job for _, job in compiled], problems
    job, problems = compile_checked(template, outputs, "validate-run", source, policy)
    return ([job] if job is not None else []), problems


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
    template = load_template(file, set_ or [], region)
    facts = template_facts(template)
    priced = estimate(facts, region, load_catalog().for_stack(outputs))
    out = console()
    live = None
    if outputs is not None:  # the same live table as the launch plan's
        check = preflight(priced.quota, priced.region, QuotaReader(outputs), load_catalog())
        live = (check, outputs)
    budget = template.budget.max_cost_usd if template.budget else None
    print_cost(out, priced, f"{template.name}: cost per hour", live, budget)
    warm = outputs.persistent_resources.get(template.persistent_resource or "") if outputs else None
    catalog = load_catalog().for_stack(outputs)
    share = warm_share(facts, catalog) if outputs is not None else None
    bill = warm_cost(warm, catalog) if warm else None
    print_warm_cost(out, bill, share, priced.timeout_s, budget)
    hours = _print_run_time(out, facts, priced.usd_per_h) if run_time else None
    print_study_cost(out, template, priced, hours)  # a study: trials x this job


def _print_run_time(out: Console, facts: JobFacts, usd_per_h: float | None) -> float | None:
    """The trainer's own estimate of this job: step time, steps, hours, the run's cost; the
    hours (None when unknown)."""
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
    return result.get("hours")


def _run_time_table(result: dict[str, Any]) -> Table:
    def known(key: str, shown: Callable[[Any], str]) -> str:
        value = result.get(key)
        return "unknown" if value is None else shown(value)

    table = FitTable(title="run time (the trainer's estimate)", title_justify="left")
    table.add_column("figure", no_wrap=True)
    table.add_column("value", overflow="fold")
    devices = f"{result['accelerator_count']} x {result['accelerator']} x {result['nodes']} node(s)"
    table.add_row("accelerators", devices)
    table.add_row("memory per device", known("memory_per_device_gib", lambda v: f"{v:.2f} GiB"))
    table.add_row("step time", known("step_time_s", lambda v: f"{v:.3g} s"))
    table.add_row("  assuming MFU", known("mfu", lambda v: f"{v:.0%} of the bf16 peak"))
    table.add_row("total steps", known("total_steps", lambda v: f"{v:,}"))
    table.add_row("  counted from", str(result.get("total_steps_basis") or "-"))
    table.add_row("training time", known("hours", lambda hours: duration(hours * 3600)))
    table.add_row("cost of the run", known("cost_usd", money))
    return table


@app.command()
def render(
    file: FileArg,
    set_: SetOpt = None,
    stack: StackOpt = None,
    stack_file: StackFileOpt = None,
    format_: Annotated[
        str,
        typer.Option(
            "--format",
            help="yaml: CustomJobSpec for gcloud --config; json: CustomJob (a study: its "
            "HyperparameterTuningJob); wandb-launch: a W&B Launch Vertex queue config.",
        ),
    ] = "yaml",
    run_id: Annotated[str | None, typer.Option("--run-id", help="Run id (default: new).")] = None,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write to a file.")] = None,
) -> None:
    """Print the job exactly as it would be submitted."""
    from google.protobuf.json_format import ParseError

    if format_ not in ("yaml", "json", "wandb-launch"):
        raise fail("--format is yaml, json or wandb-launch")
    outputs = required_stack(stack, stack_file)
    template = reporting_metric(load_template(file, set_ or [], stack_region(outputs)))
    job, problems = compile_checked(
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
    if format_ == "wandb-launch":
        if template.study is not None:
            raise fail("a study has no W&B Launch form: W&B Launch queues run CustomJobs")
        text = render_launch_queue_config(job.rest, outputs)
    elif template.study is not None:  # the study's HyperparameterTuningJob around the job
        text = render_study(job, format_, str(file))
    if output:
        write_output(output, text)
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
        write_output(output, text)
    else:
        sys.stdout.write(text)
    for note in imported.notes:
        console(stderr=True).print(f"note: {note}", style="dim", highlight=False)


def render_study(job: CompiledJob, format_: str, source: str) -> str:
    """The study's HyperparameterTuningJob as REST JSON, or gcloud's hp-tuning-jobs YAML."""
    from google.protobuf.json_format import ParseError

    try:
        proto = study_of(job).to_proto()
    except ParseError as exc:  # validation should have refused it first: a vtx bug
        raise fail(
            f"{source}: the compiled study does not convert to the API's types ({exc}); "
            "validation missed this: please report it",
            code=1,
        ) from exc
    return render_study_yaml(proto, job.stack) if format_ == "yaml" else render_study_json(proto)


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
    upload_model: Annotated[
        bool,
        typer.Option(
            "--upload-model", help="With --follow: register the model when the run succeeds."
        ),
    ] = False,
) -> None:
    """Plan, check the live quota, confirm and submit a job; print its name and run id."""
    outputs = required_stack(stack, stack_file)
    template = load_template(file, set_ or [], stack_region(outputs))
    ladder = template.capacity is not None and template.capacity.ladder
    if upload_model and (not follow or template.study is not None or ladder):
        raise fail("--upload-model needs --follow, on a template without a study or a ladder")
    options = LaunchOptions(run_id, ignore_quota, follow, poll_s,
                            UploadOptions() if upload_model else None)  # fmt: skip
    code = launch_job(console(), template, outputs, str(file), options, Ask(yes, dry_run))
    raise typer.Exit(code)
