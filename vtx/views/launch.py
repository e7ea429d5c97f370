"""How `vtx launch`, `cost` and `render` show a launch plan (`jobs.launch.plan`): what will run,
where, as whom and at what cost; a ladder's rungs; a study's trials and price."""

from __future__ import annotations

from rich.console import Console

from jobs.launch.plan import LaunchPlan
from jobs.launch.run import Event, Failed, Interrupted, MovedOn, Placed, Submitted, Submitting
from jobs.pricing.estimates import CostEstimate, StudyCost
from jobs.pricing.plan import Plan
from jobs.quota.cloud_quotas import QuotaCheck
from jobs.spec.template import JobTemplate
from vtx.views.costs import print_cost
from vtx.views.ladder import RungRow, ladder_table, rung_price_lines
from vtx.views.problems import print_error, print_warnings
from vtx.views.studies import print_study_plan
from vtx.views.warm_pools import share_lines


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
    live = (quota, stack) if quota is not None else None
    on_warm = plan.share is not None  # its price is $0/h: the budget is said of its share
    print_cost(out, plan.cost, "pools", live, None if on_warm else _budget(job.template))
    if plan.share is not None:
        for line in share_lines(plan.share, plan.cost.timeout_s, _budget(job.template)):
            style = "yellow" if line.startswith("warning:") else None
            out.print(line, style=style, highlight=False, markup=False)


def _budget(template: JobTemplate) -> float | None:
    return template.budget.max_cost_usd if template.budget else None


def print_launch_plan(out: Console, launch: LaunchPlan) -> None:
    """The plan of the first rung (the job, the ladder's first rung, the study's trial), then
    the ladder's rungs or the study's trials, then what a closed stack's job cannot reach."""
    first = launch.job
    print_plan(out, first.plan, first.check)
    if launch.ladder:
        rows = [RungRow(r.number, r.plan.cost, r.check, r.max_wait_s, r.hopeless)
                for r in launch.rungs]  # fmt: skip
        out.print(ladder_table(rows))
        for line in rung_price_lines(rows):
            out.print(line, style="dim", highlight=False, markup=False)
        for rung in launch.rungs:
            if rung.hopeless:
                out.print(f"{rung.label}: skipped: {rung.hopeless}", highlight=False, markup=False)
        for rung in launch.rungs[1:]:  # the first rung's budget was said with its plan
            warning = rung.plan.budget_warning(_budget(rung.plan.job.template))
            if warning is not None:
                out.print(f"{rung.label}: warning: {warning}", style="yellow", highlight=False,
                          markup=False)  # fmt: skip
    if launch.study is not None:
        study = launch.study
        out.print(
            f"[bold]Study[/bold]: {study.study.study.max_trials} trials of the job above, each "
            f"under {study.study.output_prefix}<trial id>/ (quota above: the "
            f"{study.study.study.parallel_trials} trials that run at once)",
            highlight=False,
        )
        print_study_plan(out, study.study.study, study.cost)
    stack = first.plan.job.stack
    if launch.guard is not None:
        out.print(f"{'guard':>10}: {launch.guard.say()}", highlight=False, markup=False)
        if not stack.controller:
            out.print(
                "this stack has no controller: the guard is not enforced (the trainer's "
                "heartbeat is still written)",
                style="yellow",
                highlight=False,
            )
    if not stack.controller and (launch.ladder or _budget(first.plan.job.template) is not None):
        out.print(
            "this stack has no controller: `vtx launch` walks the ladder and holds the budget "
            "only while it runs (--follow)",
            style="dim",
            highlight=False,
        )
    print_warnings(out, launch.warnings)


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


def print_event(out: Console, plan: LaunchPlan, follow: bool, event: Event) -> None:
    """One move of the runner (`jobs.launch.run`), as `vtx launch` says it; ``follow``: the
    launch follows the run (no hint how to)."""
    run_id = plan.run_id
    match event:
        case Submitting(rung):
            out.print(f"{rung.label}: submitting", highlight=False, markup=False)
        case Submitted(rung, name, attempt) if plan.ladder:
            out.print(f"{rung.label}: submitted {name} (attempt {attempt})", highlight=False,
                      markup=False)  # fmt: skip
        case Submitted(_, name, attempt):
            _print_submitted(out, plan, follow, name, attempt)
        case MovedOn(rung, reason, cancelled, then):
            following = then.label if then is not None else "no rung left"
            line = f"{rung.label}: {reason}{'; cancelling' if cancelled else ''}; {following}"
            out.print(line, highlight=False, markup=False)
        case Placed(rung, succeeded):
            state = "succeeded" if succeeded else "running"
            out.print(f"{rung.label}: {state}; run id: [bold]{run_id}[/bold]")
            if not follow:
                out.print(f"follow: vtx logs {run_id} --follow", style="dim", highlight=False)
                out.print(
                    "the ladder moves on only while `vtx launch` watches: with --follow it "
                    "also moves on when a running attempt stocks out",
                    style="dim",
                    highlight=False,
                )
        case Failed(message):
            print_error(out, message, "run failed")
        case Interrupted(current):
            left = f"{current} is left running" if current else "nothing is running"
            out.print(f"interrupted: {left}; `vtx cancel {run_id}` cancels the run",
                      highlight=False)  # fmt: skip


def _print_submitted(out: Console, plan: LaunchPlan, follow: bool, name: str, attempt: int) -> None:
    run_id = plan.run_id
    out.print(f"submitted [bold]{name}[/bold]", highlight=False)
    if plan.study is not None:
        out.print(f"run id: [bold]{run_id}[/bold]", highlight=False)
        if not follow:
            out.print(
                f"watch: vtx status {run_id} (trials and the best one); vtx logs {run_id} "
                "(with this launch's --stack or --stack-file)",
                style="dim",
                highlight=False,
            )
        return
    resumed = f" (attempt {attempt}: resumes from its checkpoints)" if attempt > 1 else ""
    out.print(f"run id: [bold]{run_id}[/bold]{resumed}", highlight=False)
    if not follow:
        out.print(
            f"follow: vtx logs {run_id} --follow (with this launch's --stack or --stack-file)",
            style="dim",
            highlight=False,
        )
