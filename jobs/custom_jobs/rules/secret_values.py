"""The rule on credential-shaped strings anywhere in a job: args and command, labels (keys and
values), the image, a study's values, any field a template or a gcloud document holds. Env
entries and ``secrets:`` have their own rules (environment.py), which say what to write there."""

from __future__ import annotations

from collections.abc import Iterator

from jobs.core.catalog import Catalog
from jobs.core.document_strings import shaped_string_problems
from jobs.core.problems import Problem
from jobs.custom_jobs.facts import JobFacts


def no_secret_shaped_values(job: JobFacts, cat: Catalog) -> Iterator[Problem]:
    env = {path for pool in job.pools for _, _, path in pool.env}
    secrets = job.path("secrets")

    def judged_elsewhere(path: str) -> bool:
        return path in env or path == secrets or path.startswith((f"{secrets}.", f"{secrets}["))

    yield from shaped_string_problems(job.strings, judged_elsewhere)
