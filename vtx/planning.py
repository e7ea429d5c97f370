"""What `vtx cost`, `render`, `validate` and `launch` share: a template read and checked (or
the command ends with its problems), compiled and checked against a stack, and the plan a
reviewer reads before anything is submitted."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import typer
from rich.console import Console

from jobs.core.problems import Problem
from jobs.core.stack import StackOutputs
from jobs.launch.checks import checked_template
from jobs.spec.document import load_document
from jobs.spec.template import JobTemplate
from jobs.training.compile import CompiledJob, CompileError, compile_job
from jobs.training.plan import Plan
from jobs.training.quotas import QuotaCheck
from jobs.training.validate import check_compiled
from vtx.options import console
from vtx.output import print_cost, print_error, print_problems


def stack_region(stack: StackOutputs | None) -> str | None:
    """The region rules check availability in: the stack's, except on the local platform."""
    return stack.region if stack is not None and not stack.is_local else None


def load_template(path: Path, overrides: list[str], region: str | None) -> JobTemplate:
    template, problems = checked_template(load_document(path, overrides), region)
    if template is None:
        print_problems(console(), problems)
        raise typer.Exit(1)
    return template


def compile_checked(
    template: JobTemplate, stack: StackOutputs, run_id: str, source: str, policy: bool
) -> tuple[CompiledJob | None, list[Problem]]:
    """Compile, then check: what the stack cannot give, or every reason not to submit."""
    try:
        job = compile_job(template, stack, run_id)
    except CompileError as exc:
        return None, [Problem(p.path, p.message, p.hint, source) for p in exc.problems]
    return job, check_compiled(job, source, policy)


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


def go_ahead(
    out: Console,
    check: QuotaCheck,
    *,
    ignore_quota: bool,
    dry_run: bool,
    yes: bool,
    confirm: Callable[[str], bool],
    question: str,
) -> int | None:
    """After the plan: None to submit, else the exit code (a quota refusal, a dry run, a no)."""
    refusal = quota_refusal(check)
    if refusal and not ignore_quota:
        print_error(out, refusal, "not submitted")
        return 1
    if dry_run:
        out.print("dry run: nothing submitted")
        return 0
    if not yes and not confirm(question):
        out.print("not submitted")
        return 1
    return None


def quota_refusal(check: QuotaCheck) -> str | None:
    """Why a job must not be submitted: a metric whose limit is below its need (Vertex would
    refuse it whatever else runs). Short of what is free now only warns: running jobs end."""
    over = ", ".join(f"{m.metric} (needs {m.needed}, limit {m.limit})" for m in check.over_limit)
    if not over:
        return None
    return f"over the quota limit in {check.region}: {over}; --ignore-quota submits it anyway"
