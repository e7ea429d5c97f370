"""The capacity ladder: the ``capacity:`` field, each rung built as ``--set`` would and checked
like the base, and the pure decisions of the walk, as tables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from jobs.core.states import JobState
from jobs.launch.checks import validate_document, validate_template_doc
from jobs.spec.document import load_document
from jobs.spec.ladder import (
    DONE,
    NEXT,
    PLACED,
    STOP,
    WAIT,
    Decision,
    after_running,
    judge,
    next_rung,
    on_create_error,
    rung_documents,
)
from tests.conftest import TEMPLATES

BASE: dict[str, Any] = {
    "name": "lad",
    "image": "trainer",
    "command": ["python", "-c", "pass"],
    "pools": {"chief": {"machine": "g2-standard-8"}},
    "scheduling": {"strategy": "spot"},
}


def with_ladder(ladder: list[Any], **capacity: Any) -> dict[str, Any]:
    return {**BASE, "capacity": {"ladder": ladder, **capacity}}


def problems_of(doc: dict[str, Any]) -> dict[str, str]:
    return {p.path: p.message for p in validate_template_doc(doc, "us-central1")}


# ---- the field ----------------------------------------------------------------------------------


def test_rungs_are_the_base_then_each_override_in_order() -> None:
    doc = with_ladder(
        [
            {"set": {"scheduling.strategy": "standard"}, "max_wait": "20m"},
            {"region": "us-east4", "set": {"pools.chief.machine": "g2-standard-24"}},
        ],
        max_wait="15m",
    )
    rungs, problems = rung_documents(doc)
    assert problems == []
    assert [r.number for r in rungs] == [1, 2, 3]
    assert "capacity" not in rungs[0].doc
    assert rungs[0].doc == {k: v for k, v in doc.items() if k != "capacity"}
    assert rungs[1].doc["scheduling"] == {"strategy": "standard"}
    assert rungs[2].doc["region"] == "us-east4"
    assert rungs[2].doc["pools"]["chief"]["machine"] == "g2-standard-24"
    assert rungs[2].doc["scheduling"] == {"strategy": "spot"}  # from the base, not rung 2
    assert [r.max_wait_s for r in rungs] == [900, 1200, 900]


def test_a_ladder_without_max_wait_waits_as_long_as_vertex_lets_it() -> None:
    rungs, _ = rung_documents(with_ladder([{"region": "us-east4"}]))
    assert [r.max_wait_s for r in rungs] == [None, None]


def test_a_valid_ladder_has_no_problems() -> None:
    doc = with_ladder(
        [{"set": {"scheduling.strategy": "standard"}}, {"region": "us-east4"}], max_wait="15m"
    )
    assert problems_of(doc) == {}


@pytest.mark.parametrize(
    ("ladder", "path", "says"),
    [
        ([{}], "capacity.ladder[0]", "a rung changes nothing"),
        ([{"set": {"name": "other"}}], "capacity.ladder[0].set.name", "cannot change 'name'"),
        ([{"set": {"capacity.max_wait": "1h"}}], "capacity.ladder[0].set.capacity.max_wait", ""),
        ([{"set": {"pools..machine": "x"}}], "capacity.ladder[0].set", "is not a key path"),
        ([{"set": {"command.3": "x"}}], "capacity.ladder[0].set.command.3", "past the end"),
        (
            [{"set": {"pools.chief.machine": "g2-standard-99"}}],
            "capacity.ladder[0]: pools.chief.machine",
            "unknown machine type",
        ),
        (
            [{"region": "us-central1"}, {"set": {"scheduling.strategy": "sometimes"}}],
            "capacity.ladder[1]: scheduling.strategy",
            "",
        ),
        ([{"region": "us-east4", "max_wait": "soon"}], "capacity.ladder[0].max_wait", "duration"),
        ([{"regoin": "us-east4"}], "capacity.ladder[0].regoin", "unknown field"),
    ],
)
def test_each_rung_is_checked_like_the_base_at_its_place(
    ladder: list[Any], path: str, says: str
) -> None:
    found = problems_of(with_ladder(ladder))
    assert path in found, found
    assert says in found[path]


def test_an_unknown_field_under_capacity_is_named_with_a_guess() -> None:
    [problem] = validate_template_doc({**BASE, "capacity": {"ladders": []}}, "us-central1")
    assert problem.path == "capacity.ladders"
    assert problem.hint == "did you mean ladder?"


def test_the_readme_ladder_example_is_valid(tmp_path: Path) -> None:
    readme = (TEMPLATES / "README.md").read_text()
    block = readme.split("## Capacity ladder", 1)[1].split("```\n", 2)[1]
    example = yaml.safe_load(block)
    example["extends"] = str(TEMPLATES / example["extends"])
    path = tmp_path / "ladder.yaml"
    path.write_text(yaml.safe_dump(example))
    document = load_document(path)
    assert validate_document(document.doc, document.kind, "us-central1") == []
    rungs, _ = rung_documents(document.doc)
    assert [r.max_wait_s for r in rungs] == [900, 1800, 900, 900]


# ---- the walk's decisions -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("hopeless", "start", "chosen"),
    [
        ([None, None], 0, 0),
        (["zero quota", None], 0, 1),
        (["zero quota", "over limit"], 0, None),
        ([None, None, None], 1, 1),
        ([None, "zero quota", None], 1, 2),
        ([None], 1, None),
        ([], 0, None),
    ],
)
def test_the_next_rung_is_the_first_not_known_hopeless(
    hopeless: list[str | None], start: int, chosen: int | None
) -> None:
    assert next_rung(hopeless, start) == chosen


STOCKOUT = "STOCKOUT: Spot capacity for NVIDIA_L4 is exhausted. Resources are insufficient"
FLEX_LATE = "The job waited its maxWaitDuration of 60 s for resources (FLEX_START)"


@pytest.mark.parametrize(
    ("state", "error", "waited_s", "max_wait_s", "last", "expected"),
    [
        ("JOB_STATE_SUCCEEDED", None, 5, 60, False, Decision(DONE)),
        ("JOB_STATE_RUNNING", None, 5, 60, False, Decision(PLACED)),
        ("JOB_STATE_RUNNING", None, 500, 60, False, Decision(PLACED)),
        ("JOB_STATE_FAILED", STOCKOUT, 40, None, False, Decision(NEXT, "STOCKOUT after 40 s")),
        ("JOB_STATE_FAILED", STOCKOUT, 40, None, True, Decision(NEXT, "STOCKOUT after 40 s")),
        (
            "JOB_STATE_FAILED",
            FLEX_LATE,
            600,
            None,
            False,
            Decision(NEXT, "FLEX_START max wait passed after 10 min"),
        ),
        (
            "JOB_STATE_FAILED",
            "exit code 1",
            9,
            None,
            False,
            Decision(STOP, "FAILED: exit code 1"),
        ),
        ("JOB_STATE_CANCELLED", None, 9, None, False, Decision(STOP, "CANCELLED: no error given")),
        ("JOB_STATE_QUEUED", None, 10, 60, False, Decision(WAIT)),
        ("JOB_STATE_PENDING", None, 59.9, 60, False, Decision(WAIT)),
        (
            "JOB_STATE_PENDING",
            None,
            60,
            60,
            False,
            Decision(NEXT, "still PENDING after 60 s (max_wait)"),
        ),
        (
            "JOB_STATE_QUEUED",
            None,
            1200,
            900,
            False,
            Decision(NEXT, "still QUEUED after 20 min (max_wait)"),
        ),
        ("JOB_STATE_PENDING", None, 9999, 60, True, Decision(WAIT)),
        ("JOB_STATE_PENDING", None, 9999, None, False, Decision(WAIT)),
        ("JOB_STATE_CANCELLING", None, 9999, 60, False, Decision(WAIT)),
    ],
)
def test_an_attempts_state_decides_wait_move_on_or_end(
    state: str,
    error: str | None,
    waited_s: float,
    max_wait_s: float | None,
    last: bool,
    expected: Decision,
) -> None:
    assert judge(state, error, waited_s, max_wait_s, last=last) == expected


@pytest.mark.parametrize("state", list(JobState))
def test_an_attempt_in_a_final_state_is_never_waited_for(state: JobState) -> None:
    """Whatever v1 state an attempt ends in, the walk is done with it (and only then)."""
    decision = judge(state.value, "boom", 0, None, last=True)
    if state.final:
        assert decision.action in (DONE, STOP), decision
    else:
        assert decision.action in (WAIT, PLACED), decision


def test_a_resource_exhausted_code_is_a_capacity_failure_whatever_the_message() -> None:
    decision = judge("JOB_STATE_FAILED", "no machines", 3, None, last=False, code=8)
    assert decision.action == NEXT


@pytest.mark.parametrize(
    ("http_code", "action"), [(429, NEXT), (400, STOP), (403, STOP), (503, STOP), (None, STOP)]
)
def test_only_a_quota_429_on_create_moves_to_the_next_rung(
    http_code: int | None, action: str
) -> None:
    assert on_create_error(http_code).action == action


@pytest.mark.parametrize(
    ("state", "error", "code", "expected"),
    [
        ("JOB_STATE_SUCCEEDED", None, None, Decision(DONE)),
        ("JOB_STATE_FAILED", "STOCKOUT: Spot capacity for NVIDIA_L4 is exhausted", 8,
         Decision(NEXT, "STOCKOUT while running")),
        ("JOB_STATE_FAILED", "Resources are insufficient in region: us-central1", None,
         Decision(NEXT, "resources exhausted while running")),
        ("JOB_STATE_FAILED", "replica workerpool0-0 exited with code 1", 3,
         Decision(STOP, "FAILED: replica workerpool0-0 exited with code 1")),
        ("JOB_STATE_CANCELLED", None, None, Decision(STOP, "CANCELLED: no error given")),
    ],
)  # fmt: skip
def test_an_attempt_that_ran_moves_on_only_when_it_lost_its_machines_for_capacity(
    state: str, error: str | None, code: int | None, expected: Decision
) -> None:
    assert after_running(state, error, code) == expected


def test_a_base_warm_pool_is_the_first_rungs_alone() -> None:
    doc = {**BASE, "persistent_resource": "warm-l4", "capacity": {"ladder": [{}]}}
    (base, off_the_pool), problems = rung_documents(doc)
    assert problems == []  # off the base's warm pool is a change
    assert base.doc["persistent_resource"] == "warm-l4"
    assert "persistent_resource" not in off_the_pool.doc
    assert {k: v for k, v in base.doc.items() if k != "persistent_resource"} == off_the_pool.doc


def test_a_rung_names_its_warm_pool_with_the_shorthand() -> None:
    doc = with_ladder([{"persistent_resource": "warm-l4", "region": "us-east4"}])
    (base, warm), problems = rung_documents(doc)
    assert problems == [] and "persistent_resource" not in base.doc
    assert (warm.doc["persistent_resource"], warm.doc["region"]) == ("warm-l4", "us-east4")
    bad = problems_of(with_ladder([{"persistent_resource": "Warm_L4"}]))
    message = bad["capacity.ladder[0].persistent_resource"]
    assert message.startswith("must be a persistent resource id") and "63 characters" in message
