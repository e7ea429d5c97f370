"""`vtx launch|render|cost` for a template with a ``study:``: the trial job compiled and checked
as any job (`vtx.planning`), wrapped in its HyperparameterTuningJob (`jobs.tuning.study_job`),
planned
(the trial's plan, the study's table and price), checked against the live quota of the trials
that run at once, confirmed and submitted through `jobs.vertex.client.Vertex.submit_study`. One
study is
one run id; `vtx status RUN` then shows its trials and the best one."""

from __future__ import annotations

from collections.abc import Callable

import typer
from rich.console import Console

from jobs.core.catalog import load_catalog
from jobs.core.stack import StackOutputs
from jobs.launch.render import render_study_json, render_study_yaml
from jobs.spec.template import JobTemplate
from jobs.training.compile import CompiledJob
from jobs.training.cost import CostEstimate, StudyCost
from jobs.training.quotas import QuotaReader, preflight
from jobs.tuning.study_job import plan_study, reporting_metric, study_of
from jobs.vertex.client import Vertex, VertexRest
from vtx import study_watch
from vtx.log_commands import LogView
from vtx.options import api_errors, fail
from vtx.output import print_problems
from vtx.planning import compile_checked, go_ahead, print_plan
from vtx.study_views import print_study_plan


def print_study_cost(
    out: Console, template: JobTemplate, trial: CostEstimate, trial_hours: float | None
) -> None:
    """`vtx cost` of a study: the trial's tables (printed before), then the study's figures."""
    study = template.study
    if study is None:
        return
    out.print("[bold]Study[/bold]: every trial is the job above", highlight=False)
    print_study_plan(
        out, study, StudyCost(trial, study.max_trials, study.parallel_trials), trial_hours
    )


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


def launch_study(
    out: Console,
    template: JobTemplate,
    stack: StackOutputs,
    source: str,
    run_id: str,
    *,
    yes: bool = False,
    dry_run: bool = False,
    vertex: Vertex | None = None,
    confirm: Callable[[str], bool] = lambda q: typer.confirm(q, default=False),
    quotas: QuotaReader | None = None,
    ignore_quota: bool = False,
    follow: bool = False,
    poll_s: float = 5.0,
) -> int:
    """Compile, check, plan, check the live quota, confirm, submit (and follow the trials'
    logs, then show the trials and the best one); the exit code."""
    trial, problems = compile_checked(
        reporting_metric(template), stack, run_id, source, policy=True
    )
    if trial is None or problems:
        print_problems(out, problems)
        return 1
    plan = plan_study(study_of(trial))
    region = plan.trial.cost.region
    check = preflight(plan.quota, region, quotas or QuotaReader(stack), load_catalog())
    print_plan(out, plan.trial, check)
    out.print(
        f"[bold]Study[/bold]: {plan.study.study.max_trials} trials of the job above, each "
        f"under {plan.study.output_prefix}<trial id>/ (quota above: the "
        f"{plan.study.study.parallel_trials} trials that run at once)",
        highlight=False,
    )
    print_study_plan(out, plan.study.study, plan.cost)
    stop = go_ahead(
        out, check, ignore_quota=ignore_quota, dry_run=dry_run, yes=yes, confirm=confirm,
        question="Submit this study?",
    )  # fmt: skip
    if stop is not None:
        return stop
    vertex = vertex or Vertex(stack)
    with api_errors(out, "not submitted"):
        submitted = vertex.submit_study(plan.study.to_proto(), plan.quota, plan.study.stack.region)
    out.print(f"submitted [bold]{submitted.name}[/bold]", highlight=False)
    out.print(f"run id: [bold]{run_id}[/bold]", highlight=False)
    if follow:
        with api_errors(out):
            rest = VertexRest(stack)
            return study_watch.follow(out, rest, submitted.name, LogView(out).print, poll_s)
    out.print(
        f"watch: vtx status {run_id} (trials and the best one); vtx logs {run_id} "
        "(with this launch's --stack or --stack-file)",
        style="dim",
        highlight=False,
    )
    return 0
