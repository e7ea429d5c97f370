"""What `vtx launch`, `vtx cost`, `vtx status` and `vtx list` print for a hyperparameter tuning
study: the study table of a plan (parameters, algorithm, trials, parallel, cost), the trials
table and the best trial of a submitted study, and their JSON/YAML documents.

``vtx status RUN --format json`` for a study (keys only ever added; unknown values are null)::

    run_id, study (the HyperparameterTuningJob's resource name), state, error, outputs
    metric        {id, goal}
    algorithm, max_trials, parallel_trials, max_failed_trials
    trials        [{id, state, parameters: {id: value}, metric, step, started, ended,
                  duration_s, custom_job, outputs (the trial's own prefix)}]
    best          the trial above with the best final metric by the goal, or null
    cost          {usd (every trial's CustomJob at its price, summed; null when one's price is
                  unknown), usd_unknown_because, trials: {custom_job: usd}, budget_usd (the
                  study's budget.max_cost_usd, or null), stopped_by_budget (a cancelled study
                  whose meter had crossed its budget: why; else null)}
    goodput       the trials' goodput, each and summed (its keys: `vtx.views.goodput.study`)

``vtx list --format json`` adds one entry per study beside the jobs: {run_id, kind: "study",
job (its resource name), name, state, trials, succeeded, best_metric, created, usd (every
trial's job, summed; null when unknown), usd_unknown_because, budget_usd}."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from jobs.core.contract import budget_of
from jobs.core.formats import duration, fine_money, money, usd_per_h
from jobs.pricing.estimates import StudyCost, disks_note
from jobs.runs.watch import AttemptStatus, excludes_disks, study_budget_crossed, usd_of
from jobs.spec.study import Parameter, Study
from jobs.tuning.study_records import StudyRecord, TrialRecord
from vtx.views.fit_table import FitTable
from vtx.views.runs import rounded, when

GOALS = {"MINIMIZE": "lower is better", "MAXIMIZE": "higher is better"}


def _range(param: Parameter) -> str:
    if param.values is not None:
        return (
            "{" + ", ".join(f"{v:g}" if not isinstance(v, str) else v for v in param.values) + "}"
        )
    return f"{param.min:g} .. {param.max:g}"


def parameters_table(study: Study) -> Table:
    """The study's parameters as Vertex will search them; a conditional one names its parent
    and the parent's values it is tuned for."""
    table = FitTable(title="study parameters", title_justify="left")
    for column in ("parameter", "type", "values", "scale", "when"):
        table.add_column(column, overflow="fold")

    def add(param: Parameter, when: str) -> None:
        table.add_row(param.id, param.type, _range(param), param.scale or "default", when)
        for child in param.conditional:
            values = ", ".join(map(str, child.parent_values))
            add(child.parameter, f"{param.id} in {{{values}}}")

    for param in study.parameters:
        add(param, "-")
    return table


def print_study_plan(
    out: Console, study: Study, cost: StudyCost, trial_hours: float | None = None
) -> None:
    """Algorithm, trial counts and the study's price: trials x the trial's cost, and its wall
    time when a trial's run time is known (``--run-time``)."""
    out.print(parameters_table(study))
    algorithm = study.algorithm
    if algorithm == "ALGORITHM_UNSPECIFIED":
        algorithm += " (Vertex's default: Bayesian optimisation)"
    goal = GOALS[study.metric.goal.upper()]
    note = disks_note(cost.trial.excludes_disks)
    lines = {
        "metric": f"{study.metric.id} ({study.metric.goal}: {goal})",
        "algorithm": algorithm,
        "trials": f"{study.max_trials}, {study.parallel_trials} at a time "
        f"({cost.waves} rounds); the study fails after "
        + (
            f"{study.max_failed_trials} failed"
            if study.max_failed_trials
            else "as many failed trials as Vertex decides"
        ),
        "per trial": f"{usd_per_h(cost.trial.usd_per_h)}{note}; at its timeout cap "
        f"{money(cost.trial.usd_at_timeout)}",
        "study": f"{usd_per_h(cost.usd_per_h)}{note} while {study.parallel_trials} run; "
        f"every trial at its cap: {money(cost.usd_at_timeout)}",
    }
    if study.early_stopping is not None:
        lines["stopping"] = f"{study.early_stopping.rule} rule (Vertex stops unpromising trials)"
    if trial_hours is not None:
        wall = duration(cost.wall_hours(trial_hours) * 3600)
        lines["run time"] = (
            f"{duration(trial_hours * 3600)} a trial -> about {wall} wall time, "
            f"{money(cost.usd_for(trial_hours))} for the study"
        )
    for key, value in lines.items():
        out.print(f"{key:>10}: {value}", highlight=False)


# ---- a submitted study ----------------------------------------------------------------------


def _value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _parameters(trial: TrialRecord) -> str:
    return ", ".join(f"{k}={_value(v)}" for k, v in trial.parameters.items()) or "-"


def trials_table(study: StudyRecord, now: datetime) -> Table:
    best = study.best
    table = FitTable(title=f"trials ({study.metric_id}, {GOALS.get(study.goal or '', '')})",
                  title_justify="left")  # fmt: skip
    for column in ("trial", "state", "parameters", study.metric_id or "metric", "duration"):
        table.add_column(column, overflow="fold")
    for trial in sorted(study.trials, key=lambda t: int(t.id) if t.id.isdigit() else 0):
        mark = " *" if best is not None and trial.id == best.id else ""
        metric = "-" if trial.metric is None else f"{trial.metric:.5g}{mark}"
        table.add_row(
            trial.id,
            trial.state,
            escape(_parameters(trial)),
            metric,
            duration(trial.duration_s(now)),
        )
    return table


def _unknown_trial(trials: Sequence[AttemptStatus]) -> str | None:
    """Why the trials' sum is unknown: the first trial job without a price."""
    for a in trials:
        if a.usd is None:
            return f"trial job {a.job.job_id}: {a.price.unknown_because}"
    return None


def study_cost(trials: Sequence[AttemptStatus]) -> str:
    """Every trial's job at its price, summed; unknown (and why) once one's price is."""
    usd = usd_of(trials)
    if usd is None:
        return f"unknown ({_unknown_trial(trials)})"
    note = disks_note(excludes_disks(trials))
    return f"{money(usd)}{note} so far over {len(trials)} trial job(s), at the catalog's prices"


def print_study_status(
    out: Console, study: StudyRecord, now: datetime, trials: Sequence[AttemptStatus] = ()
) -> None:
    out.print(
        f"[bold]study[/bold] {escape(study.run_id or study.display_name)}: {study.state}",
        highlight=False,
    )
    lines = {
        "job": study.name,
        "outputs": study.output_prefix or "-",
        "algorithm": study.algorithm,
        "trials": f"{len(study.trials)} of {study.max_trials}, {study.parallel_trials} at a time",
    }
    if trials:
        lines["cost"] = study_cost(trials)
    budget = budget_of(study.labels)
    if budget is not None:
        lines["budget"] = f"budget.max_cost_usd {fine_money(budget)} (every trial's job)"
    stopped = stopped_by_budget(study, trials)
    if stopped is not None:
        lines["stopped"] = f"by its budget: {stopped}"
    for key, value in lines.items():
        out.print(f"{key:>10}: {escape(value)}", highlight=False)
    if study.error:
        out.print(f"{'error':>10}: {escape(study.error)}", style="red", highlight=False)
    out.print(trials_table(study, now))
    best = study.best
    if best is None:
        out.print("best trial: none yet (no trial has succeeded with a final metric)")
        return
    out.print(
        f"[bold]best trial[/bold]: {best.id} with {study.metric_id} = {best.metric:.5g} "
        f"({escape(_parameters(best))}); outputs {escape(study.trial_output(best) or '-')}",
        highlight=False,
    )


def stopped_by_budget(study: StudyRecord, trials: Sequence[AttemptStatus]) -> str | None:
    """Why a cancelled study was stopped when its meter had crossed its budget (what `vtx
    launch --follow` cancels it for); None otherwise."""
    if study.state != "JOB_STATE_CANCELLED":
        return None
    return study_budget_crossed(study.labels, trials)


def trial_json(study: StudyRecord, trial: TrialRecord, now: datetime) -> dict[str, Any]:
    return {
        "id": trial.id,
        "state": trial.state,
        "parameters": trial.parameters,
        "metric": trial.metric,
        "step": trial.step,
        "started": when(trial.start_time),
        "ended": when(trial.end_time),
        "duration_s": rounded(trial.duration_s(now), 3),
        "custom_job": trial.custom_job,
        "outputs": study.trial_output(trial),
    }


def study_json(
    study: StudyRecord, now: datetime, trials: Sequence[AttemptStatus] = ()
) -> dict[str, Any]:
    best = study.best
    return {
        "run_id": study.run_id,
        "study": study.name,
        "state": study.state,
        "error": study.error,
        "outputs": study.output_prefix,
        "metric": {"id": study.metric_id, "goal": study.goal},
        "algorithm": study.algorithm,
        "max_trials": study.max_trials,
        "parallel_trials": study.parallel_trials,
        "max_failed_trials": study.max_failed_trials,
        "trials": [trial_json(study, t, now) for t in study.trials],
        "best": None if best is None else trial_json(study, best, now),
        "cost": {
            "usd": rounded(usd_of(trials)) if trials else None,
            "usd_unknown_because": _unknown_trial(trials),
            "trials": {a.job.name: rounded(a.usd) for a in trials},
            "budget_usd": budget_of(study.labels),
            "stopped_by_budget": stopped_by_budget(study, trials),
        },
    }


def list_cost(trials: Sequence[AttemptStatus]) -> str:
    """`vtx list`'s cost cell of a study: every trial's job summed, or unknown and why."""
    if not trials:
        return money(0.0)
    usd = usd_of(trials)
    return money(usd) if usd is not None else f"unknown ({_unknown_trial(trials)})"


def studies_table(
    studies: list[StudyRecord], metered: dict[str, list[AttemptStatus]] | None = None
) -> Table:
    """`vtx list`'s studies, beside its jobs table; ``metered``: each study's trials' jobs at
    their prices (by study name), for the cost column."""
    metered = metered or {}
    table = FitTable(title="studies (hyperparameter tuning)", title_justify="left")
    for column in ("run id", "state", "trials", "best", "cost", "created"):
        table.add_column(column, overflow="fold")
    for study in studies:
        best = study.best
        succeeded = sum(t.state == "SUCCEEDED" for t in study.trials)
        table.add_row(
            study.run_id or study.name,
            study.state,
            f"{succeeded} ok / {len(study.trials)} of {study.max_trials}",
            "-" if best is None else f"{study.metric_id}={best.metric:.5g} (trial {best.id})",
            list_cost(metered.get(study.name, [])),
            when(study.create_time) or "-",
        )
    return table


def studies_json(
    studies: list[StudyRecord], metered: dict[str, list[AttemptStatus]] | None = None
) -> list[dict[str, Any]]:
    metered = metered or {}
    return [
        {
            "run_id": s.run_id,
            "kind": "study",
            "job": s.name,
            "name": s.display_name,
            "state": s.state,
            "trials": len(s.trials),
            "succeeded": sum(t.state == "SUCCEEDED" for t in s.trials),
            "best_metric": None if s.best is None else s.best.metric,
            "created": when(s.create_time),
            "usd": rounded(usd_of(metered.get(s.name, []))),
            "usd_unknown_because": _unknown_trial(metered.get(s.name, [])),
            "budget_usd": budget_of(s.labels),
        }
        for s in studies
    ]
