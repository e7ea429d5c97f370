"""`guard:` in a template, checked like every other key: each mistake with its path and what to
write instead; an action that cannot apply to the run (next_rung without a ladder, a study)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from jobs.core.guard import Guard
from jobs.core.stack import StackOutputs
from jobs.custom_jobs.compile import compile_job
from jobs.launch.checks import validate_template_doc
from jobs.spec.gcloud import load_template
from jobs.spec.template import JobTemplate
from tests.conftest import TEMPLATES

BASE: dict[str, Any] = {
    "name": "guarded",
    "image": "trainer",
    "pools": {"chief": {"machine": "n1-standard-4", "replicas": 1}},
}


def with_guard(guard: Any, **more: Any) -> dict[str, Any]:
    return copy.deepcopy(BASE) | {"guard": guard} | more


def problems(doc: dict[str, Any]) -> list[tuple[str, str, str | None]]:
    return [(p.path, p.message, p.hint) for p in validate_template_doc(doc)]


def test_a_whole_guard_is_valid() -> None:
    guard = {"no_progress": "20m", "min_tokens_per_s": 1000, "window": "10m", "action": "cancel"}
    assert problems(with_guard(guard)) == []
    assert problems(with_guard({"no_progress": 600, "action": "restart"})) == []


@pytest.mark.parametrize(
    ("guard", "path", "said"),
    [
        ({"no_progress": "soon"}, "guard.no_progress", "20m"),
        ({"window": 0}, "guard.window", "positive duration"),
        ({"min_tokens_per_s": -1}, "guard.min_tokens_per_s", "min_tokens_per_s: 1000"),
        ({"action": "reboot"}, "guard.action", "one of cancel, restart, next_rung"),
        ({"no_progess": "20m"}, "guard.no_progess", "did you mean no_progress?"),
    ],
)
def test_each_mistake_names_its_key_and_what_to_write(guard: dict, path: str, said: str) -> None:
    found = problems(with_guard(guard))
    assert [p[0] for p in found] == [path]
    assert said in f"{found[0][1]} {found[0][2]}"


def test_next_rung_needs_a_ladder() -> None:
    (found,) = problems(with_guard({"no_progress": "20m", "action": "next_rung"}))
    assert found[0] == "guard.action" and "no ladder" in found[1]
    assert "action: restart" in (found[2] or "")
    ladder = {"ladder": [{"set": {"scheduling.strategy": "standard"}}]}
    guard = {"no_progress": "20m", "action": "next_rung"}
    assert problems(with_guard(guard, capacity=ladder)) == []


def test_a_rung_cannot_change_the_runs_guard() -> None:
    ladder = {"ladder": [{"set": {"guard.no_progress": "1h"}}]}
    found = problems(with_guard({"no_progress": "20m"}, capacity=ladder))
    assert [p[0] for p in found] == ["capacity.ladder[0].set.guard.no_progress"]


def test_a_study_is_not_guarded() -> None:
    template = load_template(TEMPLATES / "tiny-tune.yaml").to_document()
    template["guard"] = {"no_progress": "20m"}
    assert [p[0] for p in problems(template)] == ["guard"]


def test_a_guarded_job_beats_often_enough(stack: StackOutputs) -> None:
    job = compile_job(JobTemplate.model_validate(with_guard({"no_progress": "3s"})), stack, "r-1")
    env = {e["name"]: e["value"] for e in job.rest["jobSpec"]["workerPoolSpecs"][0]
           ["containerSpec"]["env"]}  # fmt: skip
    assert env["VTX_HEARTBEAT_S"] == "0.6"
    stack_default = stack.model_copy(update={"guard": Guard(no_progress="20m")})
    job = compile_job(JobTemplate.model_validate(BASE), stack_default, "r-1")
    assert "VTX_HEARTBEAT_S" in str(job.rest)
    unguarded = compile_job(JobTemplate.model_validate(BASE), stack, "r-1")
    assert "VTX_HEARTBEAT_S" not in str(unguarded.rest)
