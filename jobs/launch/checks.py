"""The whole document's checks: a file as the user wrote it (a template after ``extends`` and
``--set``, with its capacity ladder and its study, gcloud's CustomJobSpec or a whole CustomJob),
every problem at once with paths in the user's own file. `vtx validate` without a stack stops
here; `checked_template` is the first stage of every launch.

It sits above training and tuning because a template may hold a study: its job is checked by
the training rules (`jobs.custom_jobs.validate`), its ``study:`` by the tuning rules."""

from __future__ import annotations

from typing import Any

from jobs.core.catalog import load_catalog
from jobs.core.problems import Problem
from jobs.custom_jobs.facts import facts_from_template
from jobs.custom_jobs.validate import (
    finish,
    validate_custom_job,
    validate_custom_job_spec,
    with_source,
)
from jobs.spec.document import CUSTOM_JOB, CUSTOM_JOB_SPEC, Document
from jobs.spec.gcloud import template_from_document
from jobs.spec.ladder import rung_documents
from jobs.spec.template import JobTemplate, TemplateError, template_structure_problems
from jobs.tuning.study_rules import study_problems


def validate_template_doc(
    doc: Any, region: str | None = None, source: str | None = None
) -> list[Problem]:
    """Every problem in a vtx template document (after ``extends`` and ``--set``)."""
    structural = template_structure_problems(doc)
    if not isinstance(doc, dict):
        return with_source(structural, source)
    facts = facts_from_template(doc, load_catalog())
    if region is not None and facts.region is None:
        facts.region = region
    ladder = [] if structural or not doc.get("capacity") else _ladder_problems(doc, region)
    study = (
        []
        if structural or not doc.get("study")
        else study_problems(JobTemplate.model_validate(doc))
    )
    guard = [] if structural or not doc.get("guard") else guard_problems(doc)
    return finish(structural, facts, source) + with_source(ladder + study + guard, source)


def guard_problems(doc: dict) -> list[Problem]:
    """A guard's action against what the run is: a study is not guarded (its trials are the
    study's jobs, not the run's attempts), and ``next_rung`` needs a ladder to move on."""
    if doc.get("study"):
        return [
            Problem(
                "guard",
                "a study's trials are not guarded: the controller guards a job or a capacity "
                "ladder's attempts",
                "remove guard: here, or launch the trial job alone with its guard",
            )
        ]
    action = (doc.get("guard") or {}).get("action")
    if action == "next_rung" and not (doc.get("capacity") or {}).get("ladder"):
        return [
            Problem(
                "guard.action",
                "next_rung moves to the capacity ladder's next rung, and this template has no "
                "ladder",
                "action: restart (the same job again, from its checkpoints) or cancel; or add "
                "capacity: {ladder: [{region: us-east4}]}",
            )
        ]
    return []


def _ladder_problems(doc: dict, region: str | None) -> list[Problem]:
    """Every rung of a capacity ladder is a whole job: checked like the base, its problems
    placed at the rung (``capacity.ladder[0]: pools.chief.machine``)."""
    rungs, problems = rung_documents(doc)
    for rung in rungs[1:]:
        # The guard is the run's, checked on the base (a rung cannot change it).
        doc = {k: v for k, v in rung.doc.items() if k != "guard"}
        problems += [
            Problem(f"{rung.where}: {p.path}", p.message, p.hint)
            for p in validate_template_doc(doc, region)
        ]
    return problems


def validate_document(
    doc: Any, kind: str, region: str | None = None, source: str | None = None
) -> list[Problem]:
    """Dispatch on a detected format (see ``jobs.spec.document.detect_format``)."""
    if kind == CUSTOM_JOB:
        return validate_custom_job(doc, region, source)
    if kind == CUSTOM_JOB_SPEC:
        return validate_custom_job_spec(doc, region, source)
    return validate_template_doc(doc, region, source)


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
