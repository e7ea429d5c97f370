"""The checks stage: every problem in a job, reported at once, before anything reaches the API.
Cheap to import (no aiplatform, pulumi or torch).

- ``finish``: the rules over a job's facts after its structural check (`jobs.launch.checks`
  runs it over a template's facts).
- ``check_compiled``: a compiled job (`jobs.custom_jobs.compile`): the API rules on what will be
  submitted, then the organisation's job policies for its stack.
- ``validate_custom_job``: a REST CustomJob as the API receives it (the local control plane's
  400 answers).
"""

from __future__ import annotations

from typing import Any

from jobs.core.catalog import load_catalog
from jobs.core.problems import Problem
from jobs.custom_jobs.compile import CompiledJob
from jobs.custom_jobs.facts import JobFacts, facts_from_rest_job, facts_from_rest_spec
from jobs.custom_jobs.policies import check_job_policies
from jobs.custom_jobs.rules.registry import run_rules
from jobs.spec.document import normalise_gcloud_spec
from jobs.spec.rest_check import SPEC_MESSAGE, check_rest_fields


def with_source(problems: list[Problem], source: str | None) -> list[Problem]:
    return [Problem(p.path, p.message, p.hint, source) for p in problems] if source else problems


def finish(structural: list[Problem], facts: JobFacts, source: str | None) -> list[Problem]:
    # A field the structural check rejected is not judged again by the rules; a template's env
    # is seen once per pool, so repeats are dropped.
    rejected = {p.path for p in structural}
    ruled = [p for p in run_rules(facts, load_catalog()) if p.path not in rejected]
    return with_source(list(dict.fromkeys(structural + ruled)), source)


def validate_custom_job(
    job: Any, region: str | None = None, source: str | None = None
) -> list[Problem]:
    """Every problem in a REST-form CustomJob (camelCase: ``displayName``, ``jobSpec``, ...).

    ``region`` (the endpoint's location, when known) enables the regional availability checks."""
    structural = check_rest_fields(job)
    if not isinstance(job, dict):
        return with_source(structural, source)
    if not isinstance(job.get("jobSpec"), dict):
        structural.append(
            Problem("jobSpec", "jobSpec is required", "jobSpec: {workerPoolSpecs: [...]}")
        )
    elif not job["jobSpec"].get("workerPoolSpecs"):
        structural.append(
            Problem("jobSpec.workerPoolSpecs", "at least one worker pool is required", None)
        )
    facts = facts_from_rest_job(job)
    facts.region = region
    return finish(structural, facts, source)


def validate_custom_job_spec(
    spec: Any, region: str | None = None, source: str | None = None
) -> list[Problem]:
    """Every problem in a gcloud ``--config`` CustomJobSpec (``workerPoolSpecs`` at the top).
    Its display name comes from the gcloud command line, so none is required here."""
    spec = normalise_gcloud_spec(spec)
    structural = check_rest_fields(spec, SPEC_MESSAGE)
    if not isinstance(spec, dict):
        return with_source(structural, source)
    if not spec.get("workerPoolSpecs"):
        structural.append(Problem("workerPoolSpecs", "at least one worker pool is required"))
    facts = facts_from_rest_spec(spec, display_name="(from the command line)")
    facts.region = region
    return finish(structural, facts, source)


def check_compiled(job: CompiledJob, source: str, policy: bool = True) -> list[Problem]:
    """Every reason not to submit a compiled job: the API rules on the job as it will be sent,
    then (``policy``) the organisation's job policies for its stack."""
    structural = check_rest_fields(job.rest)
    problems = finish(structural, job.facts, f"{source} (compiled)")
    if policy:
        problems += with_source(check_job_policies(job.rest, job.stack), f"{source} (policy)")
    return problems
