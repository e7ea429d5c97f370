"""Rules on what names a job: its display name and labels, in Vertex's grammar
(jobs/core/catalog/limits.yaml)."""

from __future__ import annotations

import re
from collections.abc import Iterator

from jobs.core.catalog import Catalog, vertex_limits
from jobs.core.credentials import looks_like_key
from jobs.core.problems import Problem
from jobs.training.facts import JobFacts

LABEL_KEY = re.compile(vertex_limits().label_key_pattern)


LABEL_VALUE = re.compile(vertex_limits().label_value_pattern)


def display_name_valid(job: JobFacts, cat: Catalog) -> Iterator[Problem]:
    limit = cat.limits.display_name_max_chars
    if not job.display_name:
        yield Problem(job.path("display_name"), "a name is required", "e.g. llama-lora")
    elif len(job.display_name) > limit:
        yield Problem(
            job.path("display_name"),
            f"name is {len(job.display_name)} characters; the limit is {limit}",
            "shorten it",
        )


def labels_valid(job: JobFacts, cat: Catalog) -> Iterator[Problem]:
    limits = cat.limits
    if len(job.labels) > limits.labels_max:
        yield Problem(job.path("labels"), f"more than {limits.labels_max} labels", "drop some")
    for key, value in job.labels.items():
        if looks_like_key(key) or looks_like_key(value, key):
            continue  # never quoted, nor its lower-cased "fix": no_secret_shaped_values says why
        path = f"{job.path('labels')}.{key}"
        if not LABEL_KEY.match(key) or len(key) > limits.label_max_chars:
            fixed = re.sub(r"[^a-z0-9_-]", "-", key.lower())[: limits.label_max_chars]
            yield Problem(
                path,
                f"invalid label key {key!r}: lower case letters, digits, '_' and '-', starting "
                f"with a letter, at most {limits.label_max_chars} characters",
                f"e.g. {fixed or 'team'}",
            )
        if not LABEL_VALUE.match(value) or len(value) > limits.label_max_chars:
            fixed = re.sub(r"[^a-z0-9_-]", "-", value.lower())[: limits.label_max_chars]
            yield Problem(
                path,
                f"invalid label value {value!r}: lower case letters, digits, '_' and '-', at most "
                f"{limits.label_max_chars} characters",
                f"e.g. {fixed}",
            )
