"""The launch plan says the run's progress guard: the template's keys over the stack's
defaults, which keys the stack gave, and that nothing enforces it without a controller."""

from __future__ import annotations

import copy

from rich.console import Console

from jobs.core.guard import Guard
from jobs.core.stack import StackOutputs
from jobs.launch.plan import plan_launch
from jobs.spec.template import JobTemplate
from tests.jobs.quota.quota_fakes import FakeGoogle, google, quota_stack, reader
from vtx.views.launch import print_launch_plan

__all__ = ["google", "quota_stack"]  # fixtures

TEMPLATE = {
    "name": "guarded",
    "image": "trainer",
    "pools": {"chief": {"machine": "n1-standard-4", "replicas": 1}},
    "scheduling": {"timeout": "24h"},
}


def shown(template: dict, stack: StackOutputs, fake: FakeGoogle) -> str:
    out = Console(record=True, width=200, soft_wrap=True)
    plan = plan_launch(JobTemplate.model_validate(template), stack, "t.yaml",
                       reader=reader(stack, fake))  # fmt: skip
    assert not plan.problems
    print_launch_plan(out, plan)
    return out.export_text()


def test_the_plan_shows_the_guard_and_where_its_keys_came_from(
    google: FakeGoogle, quota_stack: StackOutputs
) -> None:
    stack = quota_stack.model_copy(
        update={"controller": True, "guard": Guard(no_progress="30m", action="restart")}
    )
    template = copy.deepcopy(TEMPLATE) | {"guard": {"no_progress": "20m"}}
    text = shown(template, stack, google)
    assert "guard: no step for 20m -> restart (action from the stack's defaults)" in text
    assert "not enforced" not in text
    assert "guard:" not in shown(TEMPLATE, quota_stack, google)


def test_without_a_controller_the_plan_says_the_guard_is_not_enforced(
    google: FakeGoogle, quota_stack: StackOutputs
) -> None:
    template = copy.deepcopy(TEMPLATE) | {"guard": {"no_progress": "20m"}}
    assert "the guard is not enforced" in shown(template, quota_stack, google)
