"""The checks stage: every problem in a job, reported at once, before anything reaches the API.
Cheap to import (no aiplatform, pulumi or torch).

- ``validate_document``: a document as the user wrote it (a template after ``extends`` and
  ``--set``, gcloud's CustomJobSpec or a whole CustomJob): the structure, then the rules over its
  facts, with paths in the user's own file. `vtx validate` without a stack stops here.
- ``check_compiled``: a compiled job (`jobs.compile`): the API rules on what will be submitted,
  then the organisation's job policies for its stack.
- ``validate_custom_job``: a REST CustomJob as the API receives it (the local control plane's
  400 answers).
"""

from __future__ import annotations

from typing import Any

from jobs.catalog import load_catalog
from jobs.compile import CompiledJob
from jobs.document import CUSTOM_JOB, CUSTOM_JOB_SPEC, Document, normalise_gcloud_spec
from jobs.facts import JobFacts, facts_from_rest_job, facts_from_rest_spec, facts_from_template
from jobs.gcloud import template_from_document
from jobs.ladder import rung_documents
from jobs.policies import check_job_policies
from jobs.problems import Problem
from jobs.rest_check import SPEC_MESSAGE, check_rest_fields
from jobs.rules import run_rules
from jobs.spec import JobTemplate, TemplateError, template_structure_problems
from jobs.study_rules import study_problems


def _with_source(problems: list[Problem], source: str | None) -> list[Problem]:
    return [Problem(p.path, p.message, p.hint, source) for p in problems] if source else problems


def _finish(structural: list[Problem], facts: JobFacts, source: str | None) -> list[Problem]:
    # A field the structural check rejected is not judged again by the rules; a template's env
    # is seen once per pool, so repeats are dropped.
    rejected = {p.path for p in structural}
    ruled = [p for p in run_rules(facts, load_catalog()) if p.path not in rejected]
    return _with_source(list(dict.fromkeys(structural + ruled)), source)


def validate_custom_job(
    job: Any, region: str | None = None, source: str | None = None
) -> list[Problem]:
    """Every problem in a REST-form CustomJob (camelCase: ``displayName``, ``jobSpec``, ...).

    ``region`` (the endpoint's location, when known) enables the regional availability checks."""
    structural = check_rest_fields(job)
    if not isinstance(job, dict):
        return _with_source(structural, source)
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
    return _finish(structural, facts, source)


def validate_custom_job_spec(
    spec: Any, region: str | None = None, source: str | None = None
) -> list[Problem]:
    """Every problem in a gcloud ``--config`` CustomJobSpec (``workerPoolSpecs`` at the top).
    Its display name comes from the gcloud command line, so none is required here."""
    spec = normalise_gcloud_spec(spec)
    structural = check_rest_fields(spec, SPEC_MESSAGE)
    if not isinstance(spec, dict):
        return _with_source(structural, source)
    if not spec.get("workerPoolSpecs"):
        structural.append(Problem("workerPoolSpecs", "at least one worker pool is required"))
    facts = facts_from_rest_spec(spec, display_name="(from the command line)")
    facts.region = region
    return _finish(structural, facts, source)


def validate_template_doc(
    doc: Any, region: str | None = None, source: str | None = None
) -> list[Problem]:
    """Every problem in a vtx template document (after ``extends`` and ``--set``)."""
    structural = template_structure_problems(doc)
    if not isinstance(doc, dict):
        return _with_source(structural, source)
    facts = facts_from_template(doc, load_catalog())
    if region is not None and facts.region is None:
        facts.region = region
    ladder = [] if structural or not doc.get("capacity") else _ladder_problems(doc, region)
    study = (
        []
        if structural or not doc.get("study")
        else study_problems(JobTemplate.model_validate(doc))
    )
    return _finish(structural, facts, source) + _with_source(ladder + study, source)


def _ladder_problems(doc: dict, region: str | None) -> list[Problem]:
    """Every rung of a capacity ladder is a whole job: checked like the base, its problems
    placed at the rung (``capacity.ladder[0]: pools.chief.machine``)."""
    rungs, problems = rung_documents(doc)
    for rung in rungs[1:]:
        problems += [
            Problem(f"{rung.where}: {p.path}", p.message, p.hint)
            for p in validate_template_doc(rung.doc, region)
        ]
    return problems


def validate_document(
    doc: Any, kind: str, region: str | None = None, source: str | None = None
) -> list[Problem]:
    """Dispatch on a detected format (see ``jobs.document.detect_format``)."""
    if kind == CUSTOM_JOB:
        return validate_custom_job(doc, region, source)
    if kind == CUSTOM_JOB_SPEC:
        return validate_custom_job_spec(doc, region, source)
    return validate_template_doc(doc, region, source)


def check_compiled(job: CompiledJob, source: str, policy: bool = True) -> list[Problem]:
    """Every reason not to submit a compiled job: the API rules on the job as it will be sent,
    then (``policy``) the organisation's job policies for its stack."""
    structural = check_rest_fields(job.rest)
    problems = _finish(structural, job.facts, f"{source} (compiled)")
    if policy:
        problems += _with_source(check_job_policies(job.rest, job.stack), f"{source} (policy)")
    return problems


def checked_template(
    document: Document, region: str | None = None
) -> tuple[JobTemplate | None, list[Problem]]:
    """The template a document describes, once it has no problem; else None and every problem.
    The first stage of `vtx cost|render|launch`: a template that passes goes on to compile."""
    problems = document.problems or validate_document(
        document.doc, document.kind, region, document.source
    )
    if problems:
        return None, problems
    try:
        return template_from_document(document), []
    except TemplateError as exc:
        return None, exc.problems
