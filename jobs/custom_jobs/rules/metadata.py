"""Rules on what names a job: its display name and labels, in Vertex's grammar (the checks are
jobs/core/naming.py's)."""

from __future__ import annotations

from collections.abc import Iterator

from jobs.core.catalog import Catalog
from jobs.core.credentials import looks_like_key
from jobs.core.naming import (
    display_name_problem,
    label_key_problem,
    label_value,
    label_value_problem,
    labels_count_problem,
)
from jobs.core.problems import Problem
from jobs.custom_jobs.facts import JobFacts


def display_name_valid(job: JobFacts, cat: Catalog) -> Iterator[Problem]:
    name = job.display_name or ""
    problem = display_name_problem(name)
    if problem is not None:
        fix = "shorten it" if name else "e.g. llama-lora"
        yield Problem(job.path("display_name"), problem, fix)


def labels_valid(job: JobFacts, cat: Catalog) -> Iterator[Problem]:
    too_many = labels_count_problem(job.labels)
    if too_many is not None:
        yield Problem(job.path("labels"), too_many, "drop some")
    for key, value in job.labels.items():
        if looks_like_key(key) or looks_like_key(value, key):
            continue  # never quoted, nor its lower-cased "fix": no_secret_shaped_values says why
        path = f"{job.path('labels')}.{key}"
        key_problem = label_key_problem(key)
        if key_problem is not None:
            yield Problem(path, key_problem, f"e.g. {label_value(key) or 'team'}")
        value_problem = label_value_problem(value)
        if value_problem is not None:
            yield Problem(path, value_problem, f"e.g. {label_value(value)}")
