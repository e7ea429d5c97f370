"""`vtx review` details: `--against` shows differing values whole, numbers as written, one verdict
worded the same in Markdown and HTML, and a misspelt stack answered with the stacks there are."""

from __future__ import annotations

import copy
import json
import re
from html import unescape
from pathlib import Path
from typing import Any

import pytest

from infra.review.builder import Report, build_report
from infra.review.diff import diff_stacks
from infra.review.render_html import to_html
from infra.review.render_markdown import to_markdown
from infra.review.sources import (
    ReviewResource,
    ReviewSource,
    ReviewSourceError,
    from_preview_json,
    require_stack,
)

PREVIEW = Path(__file__).parent / "fixtures" / "preview-dev.json"
BUCKET = "gcp:storage/bucket:Bucket"


def _source(stack: str, *resources: tuple[str, str, dict[str, Any]]) -> ReviewSource:
    return ReviewSource(
        stack=stack,
        environment=stack,
        origin="test",
        resources=tuple(
            ReviewResource(
                urn=f"urn:pulumi:{stack}::vtx::{kind}::{name}",
                type=kind,
                name=name,
                inputs=inputs,
                outputs={},
                component="storage",
            )
            for kind, name, inputs in resources
        ),
        platform={},
    )


def _diff(left_inputs: dict[str, Any], right_inputs: dict[str, Any]) -> dict[str, tuple[str, str]]:
    left = _source("dev", (BUCKET, "data", left_inputs))
    right = _source("prod", (BUCKET, "data", right_inputs))
    diff = diff_stacks(left, right, build_report(left), build_report(right))
    return {change.key: (change.left, change.right) for change in diff.changed}


def test_long_values_that_differ_are_shown_whole() -> None:
    common = "x" * 300
    changes = _diff({"description": common + "-a"}, {"description": common + "-b"})
    assert changes == {"description": (f'"{common}-a"', f'"{common}-b"')}


def test_diff_names_the_nested_key_that_differs_not_the_whole_object() -> None:
    labels = {f"key{i}": "v" * 40 for i in range(10)}
    changes = _diff(
        {"labels": {**labels, "team": "a"}},
        {"labels": {**labels, "team": "b", "tier": "gold"}},
    )
    assert changes == {"labels.team": ('"a"', '"b"'), "labels.tier": ("null", '"gold"')}


def test_lists_of_objects_are_compared_item_by_item_and_plain_lists_whole() -> None:
    rules = [{"action": {"type": "Delete"}, "condition": {"age": 3.0}}]
    changes = _diff(
        {"lifecycleRules": rules, "cors": ["a", "b"]},
        {"lifecycleRules": [{**rules[0], "condition": {"age": 14.0}}], "cors": ["b", "a"]},
    )
    assert changes == {
        "lifecycleRules[0].condition.age": ("3", "14"),
        "cors": ('["a", "b"]', '["b", "a"]'),
    }


def test_whole_numbers_print_as_integers_and_fractions_stay() -> None:
    changes = _diff(
        {"softDeletePolicy": {"retentionDurationSeconds": 604800.0}, "sampling": 0.5},
        {"softDeletePolicy": {"retentionDurationSeconds": 2592000.0}, "sampling": 0.25},
    )
    assert changes == {
        "softDeletePolicy.retentionDurationSeconds": ("604800", "2592000"),
        "sampling": ("0.5", "0.25"),
    }


def test_equal_whole_number_and_float_are_no_difference() -> None:
    assert _diff({"size": 3}, {"size": 3.0}) == {}


# --- one verdict in both formats --------------------------------------------------------------


def _markdown_verdict(report: Report) -> str:
    line = next(line for line in to_markdown(report).splitlines() if line.startswith("Source: "))
    return line.split(". ", 1)[1].replace("**", "")


def _html_verdict(report: Report) -> str:
    banner = re.search(r'<p class="verdict">(.*?)</p>', to_html(report), re.S)
    assert banner is not None
    return unescape(re.sub(r"<[^>]+>", "", banner.group(1))).split(". ", 1)[1]


def _preview_with(tmp_path: Path, member: str | None = None, unlabelled: bool = False) -> Report:
    """The preview fixture with a grant to ``member`` on a bucket, or a bucket without labels."""
    digest = json.loads(PREVIEW.read_text())
    steps = digest["steps"]
    if member is not None:
        step = copy.deepcopy(next(s for s in steps if s["urn"].endswith("checkpoints-trainer")))
        step["urn"] = step["newState"]["urn"] = step["urn"].replace("checkpoints-trainer", "x")
        step["newState"]["inputs"]["member"] = member
        steps.append(step)
    if unlabelled:
        bucket = next(s for s in steps if s["urn"].endswith("::staging"))
        bucket["newState"]["inputs"].pop("labels", None)
    path = tmp_path / "preview.json"
    path.write_text(json.dumps(digest))
    return build_report(from_preview_json(path, "dev"))


def _fixture_reports(offline, tmp_path: Path) -> dict[str, Report]:
    return {
        "offline dev": offline["dev"][1],
        "offline prod": offline["prod"][1],
        "preview": build_report(from_preview_json(PREVIEW, "dev")),
        "public grant": _preview_with(tmp_path, member="allUsers"),
        "unlabelled bucket": _preview_with(tmp_path, unlabelled=True),
        "both": _preview_with(tmp_path, member="allAuthenticatedUsers", unlabelled=True),
    }


def test_html_and_markdown_state_the_same_verdict(offline, tmp_path: Path) -> None:
    reports = _fixture_reports(offline, tmp_path)
    verdicts = {name: _markdown_verdict(report) for name, report in reports.items()}
    for name, report in reports.items():
        assert _html_verdict(report) == verdicts[name], name
    # The fixtures cover both outcomes and a non-zero advisory count, so agreement means something.
    assert verdicts["offline dev"] == "All mandatory policies pass (0 advisory finding(s))."
    assert verdicts["public grant"].startswith("1 mandatory policy violation(s): do not apply")
    assert verdicts["unlabelled bucket"].startswith("All mandatory policies pass (1 advisory")
    assert verdicts["both"] == (
        "1 mandatory policy violation(s): do not apply (1 advisory finding(s))."
    )


def test_html_verdict_is_coloured_by_outcome(offline, tmp_path: Path) -> None:
    assert '<span class="pass">All mandatory' in to_html(offline["dev"][1])
    assert '<span class="fail">1 mandatory' in to_html(_preview_with(tmp_path, member="allUsers"))


# --- stack names ------------------------------------------------------------------------------


def test_unknown_stack_error_lists_the_stacks_there_are(tmp_path: Path) -> None:
    for stack in ("staging", "dev", "prod"):
        (tmp_path / f"Pulumi.{stack}.yaml").write_text("config: {}\n")
    (tmp_path / "Pulumi.yaml").write_text("name: vtx\n")  # the project file is no stack
    with pytest.raises(
        ReviewSourceError, match=r"no stack 'prdo'.*stacks here: dev, prod, staging"
    ):
        require_stack("prdo", tmp_path)
    require_stack("staging", tmp_path)


def test_unknown_stack_in_an_empty_project_says_there_are_none(tmp_path: Path) -> None:
    with pytest.raises(ReviewSourceError, match=r"stacks here: none"):
        require_stack("dev", tmp_path)
