"""The JSON snapshots in tests/data/snapshots/: the CustomJob each example template compiles to
(tests/jobs/custom_jobs/test_compile.py) and the example study's HyperparameterTuningJob
(tests/jobs/tuning/test_study_job.py), against tests/data/stack-dev.json.

The tests only read them: a missing or different snapshot fails. After a deliberate change,
regenerate them with this command, then review the diff like code:

    .venv/bin/python tests/jobs/custom_jobs/update_snapshots.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from tests.conftest import REPO, SNAPSHOTS, TEMPLATES, TEST_DATA

TINY_TUNE = TEMPLATES / "tiny-tune.yaml"
STUDY_SNAPSHOT = SNAPSHOTS / "tiny-tune.study.json"
STACK_FILE = TEST_DATA / "stack-dev.json"
RUN_ID = "snapshot-20261122-080000-beef"
REGENERATE = ".venv/bin/python tests/jobs/custom_jobs/update_snapshots.py"


def template_snapshot(path: Path) -> Path:
    return SNAPSHOTS / f"{path.stem}.json"


def read_snapshot(path: Path) -> Any:
    """The committed snapshot's JSON; a missing one fails the test with the command that makes
    it (never written here: a test that wrote its expectation would compare it with itself)."""
    if not path.exists():
        import pytest

        pytest.fail(
            f"{path} is missing; make it with `{REGENERATE}`, review it, commit it",
            pytrace=False,
        )
    return json.loads(path.read_text())


def main() -> None:
    from jobs.core.stack import load_stack_file
    from jobs.custom_jobs.compile import compile_job
    from jobs.launch.render import render_json, render_study_json
    from jobs.spec.gcloud import load_template
    from jobs.tuning.study_job import compile_study

    stack = load_stack_file(STACK_FILE)
    written = {}
    for path in sorted(TEMPLATES.glob("*.yaml")):
        job = compile_job(load_template(path), stack, RUN_ID).to_proto()
        written[template_snapshot(path)] = render_json(job)
    study = compile_study(load_template(TINY_TUNE), stack, RUN_ID).to_proto()
    written[STUDY_SNAPSHOT] = render_study_json(study)
    SNAPSHOTS.mkdir(exist_ok=True)
    for path, text in written.items():
        path.write_text(text)
        print(f"wrote {path.relative_to(REPO)}")


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))  # run as a script: the repository's packages
    main()
