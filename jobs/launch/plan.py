"""A template turned into a launch plan: a job is one rung, a capacity ladder its rungs in order,
a study its trial job wrapped in the study. Every rung is compiled under the one run id, checked
(rules and policies), priced and checked against the live quota before anything is submitted,
and says why it would be skipped. `jobs.launch.run` walks the plan."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from jobs.core.catalog import load_catalog
from jobs.core.contract import new_run_id
from jobs.core.guard import RunGuard, template_guard
from jobs.core.problems import Problem
from jobs.core.stack import StackOutputs
from jobs.custom_jobs.compile import CompiledJob, CompileError, compile_job
from jobs.custom_jobs.egress_advice import egress_warnings
from jobs.custom_jobs.validate import check_compiled, with_source
from jobs.launch.names import rung_label
from jobs.pricing.plan import Plan, plan_job
from jobs.quota.cloud_quotas import QuotaCheck, QuotaReader, preflight
from jobs.serving.model_upload import UploadOptions
from jobs.spec.ladder import RungDocument, next_rung, rung_documents
from jobs.spec.template import JobTemplate, TemplateError
from jobs.tuning.study_job import StudyPlan, plan_study, reporting_metric, study_of


@dataclass(frozen=True)
class LaunchOptions:
    """How a template is launched, beyond the template and the stack it goes to."""

    run_id: str | None = None
    """Resubmit this run (same output prefix); None: a new run id."""
    ignore_quota: bool = False
    """Submit even over the quota limit: the quota is read once, and limits change."""
    follow: bool = False
    """Watch the run to its end (and a ladder moves on when a running attempt stocks out)."""
    poll_s: float = 5.0
    upload: UploadOptions | None = None
    """Register the model of a followed run that SUCCEEDED."""


def stack_region(stack: StackOutputs | None) -> str | None:
    """The region rules check availability in: the stack's, except on the local platform."""
    return stack.region if stack is not None and not stack.is_local else None


def compile_checked(
    template: JobTemplate, stack: StackOutputs, run_id: str, source: str, policy: bool
) -> tuple[CompiledJob | None, list[Problem]]:
    """Compile, then check: what the stack cannot give, or every reason not to submit."""
    try:
        job = compile_job(template, stack, run_id)
    except CompileError as exc:
        return None, [Problem(p.path, p.message, p.hint, source) for p in exc.problems]
    return job, check_compiled(job, source, policy)


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
    skipped (None: it will be tried). A job without a ladder is one rung."""

    number: int
    plan: Plan
    check: QuotaCheck
    max_wait_s: float | None
    hopeless: str | None

    @property
    def label(self) -> str:
        warm = self.plan.job.rest["jobSpec"].get("persistentResourceId")
        return rung_label(self.number, self.plan.cost, warm)


@dataclass(frozen=True)
class LaunchPlan:
    """What a launch will submit, and whether it may: every problem found, else the rungs (the
    job; the ladder's, in order; the study's trial job) and why the quota refuses it."""

    run_id: str
    rungs: list[Rung] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    ladder: bool = False
    study: StudyPlan | None = None
    refusal: str | None = None
    """Why nothing may be submitted (a quota limit below the need); None: it may."""
    warnings: list[Problem] = field(default_factory=list)
    """What the rungs' jobs would reach for and cannot on a closed stack (the warnings of
    `vtx validate --stack`): shown with the plan, never a refusal."""
    guard: RunGuard | None = None
    """The run's progress guard (the template's over the stack's defaults); None: unguarded."""

    @property
    def job(self) -> Rung:
        """The first rung: the job, the ladder's first rung or the study's trial."""
        return self.rungs[0]


def _at(where: str, problems: list[Problem]) -> list[Problem]:
    """A rung's problems placed at the rung (the base's stay where they are)."""
    if where == "(base)":
        return problems
    return [Problem(f"{where}: {p.path}", p.message, p.hint, p.source) for p in problems]


def compile_rungs(
    template: JobTemplate, stack: StackOutputs, run_id: str, source: str, policy: bool = True
) -> tuple[list[tuple[RungDocument, CompiledJob]], list[Problem]]:
    """Every rung compiled under the one run id and checked against the stack (a rung on a
    persistent resource: that its job fits the resource's pools, `jobs.custom_jobs.pool_fit`),
    its problems placed at the rung; no quota is read. `vtx validate --stack` stops here."""
    documents, problems = rung_documents(template.to_document())
    compiled: list[tuple[RungDocument, CompiledJob]] = []
    for document in documents:
        try:
            rung_template = JobTemplate.from_document(document.doc, source)
        except TemplateError as exc:
            problems += _at(document.where, exc.problems)
            continue
        job, found = compile_checked(rung_template, stack, run_id, source, policy)
        if job is None or found:
            problems += _at(document.where, found)
            continue
        compiled.append((document, job))
    return compiled, [Problem(p.path, p.message, p.hint, p.source or source) for p in problems]


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
    compiled, problems = compile_rungs(template, stack, run_id, source)
    rungs: list[Rung] = []
    for document, job in compiled:
        plan = plan_job(job)
        check = preflight(plan.quota, plan.cost.region, reader, load_catalog())
        hopeless = None if ignore_quota else _hopeless(check)
        rungs.append(Rung(document.number, plan, check, document.max_wait_s, hopeless))
    return rungs, problems


def _ladder(
    template: JobTemplate, stack: StackOutputs, source: str, run_id: str, options: LaunchOptions,
    reader: QuotaReader,
) -> LaunchPlan:  # fmt: skip
    rungs, problems = plan_rungs(template, stack, run_id, source, reader, options.ignore_quota)
    if problems:
        return LaunchPlan(run_id, problems=problems, ladder=True)
    refusal = None
    if next_rung([r.hopeless for r in rungs], 0) is None:
        reasons = "; ".join(f"rung {r.number}: {r.hopeless}" for r in rungs)
        refusal = f"every rung is over a quota limit: {reasons}; --ignore-quota tries them"
    return LaunchPlan(run_id, rungs, ladder=True, refusal=refusal)


def _study(
    template: JobTemplate, stack: StackOutputs, source: str, run_id: str, options: LaunchOptions,
    reader: QuotaReader,
) -> LaunchPlan:  # fmt: skip
    trial, problems = compile_checked(
        reporting_metric(template), stack, run_id, source, policy=True
    )
    if trial is None or problems:
        return LaunchPlan(run_id, problems=problems)
    study = plan_study(study_of(trial))
    check = preflight(study.quota, study.trial.cost.region, reader, load_catalog())
    refusal = None if options.ignore_quota else quota_refusal(check)
    return LaunchPlan(run_id, [Rung(1, study.trial, check, None, None)], study=study,
                      refusal=refusal)  # fmt: skip


def _job(
    template: JobTemplate, stack: StackOutputs, source: str, run_id: str, options: LaunchOptions,
    reader: QuotaReader,
) -> LaunchPlan:  # fmt: skip
    job, problems = compile_checked(template, stack, run_id, source, policy=True)
    if job is None or problems:
        return LaunchPlan(run_id, problems=problems)
    plan = plan_job(job)
    check = preflight(plan.quota, plan.cost.region, reader, load_catalog())
    refusal = None if options.ignore_quota else quota_refusal(check)
    return LaunchPlan(run_id, [Rung(1, plan, check, None, None)], refusal=refusal)


def plan_launch(
    template: JobTemplate,
    stack: StackOutputs,
    source: str,
    options: LaunchOptions = LaunchOptions(),
    reader: QuotaReader | None = None,
) -> LaunchPlan:
    """The launch plan of a template: a study, a capacity ladder or one job, each rung compiled,
    checked, priced and checked against the live quota (``reader``: the stack's by default)."""
    run_id = options.run_id or new_run_id(template.name)
    reader = reader or QuotaReader(stack)
    if template.study is not None:
        plan = _study(template, stack, source, run_id, options, reader)
    elif template.capacity is not None and template.capacity.ladder:
        plan = _ladder(template, stack, source, run_id, options, reader)
    else:
        plan = _job(template, stack, source, run_id, options, reader)
    guard = template_guard(template.guard, stack.guard, study=template.study is not None)
    return replace(plan, warnings=_egress_warnings(plan, stack, source), guard=guard)


def _egress_warnings(plan: LaunchPlan, stack: StackOutputs, source: str) -> list[Problem]:
    """Every rung's closed-egress warnings, once each: a ladder's rungs mostly share their
    pools' commands and images, and one warning per rung would say the same thing again."""
    found: list[Problem] = []
    for rung in plan.rungs:
        found += with_source(egress_warnings(rung.plan.job.rest, stack), source)
    return list(dict.fromkeys(found))
