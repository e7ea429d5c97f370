"""The review as JSON for machines: every section, keys ``resources``, ``iam``, ``policy``..."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from infra.review.builder import Report
from infra.review.diff import StackDiff


def to_data(report: Report, diff: StackDiff | None = None) -> dict[str, Any]:
    data = dataclasses.asdict(report)
    data["mandatory_violations"] = report.mandatory_failures
    data["platform"] = dict(report.platform)
    if diff is not None:
        data["diff"] = dataclasses.asdict(diff)
    return data


def to_json(report: Report, diff: StackDiff | None = None) -> str:
    return json.dumps(to_data(report, diff), indent=2, default=str) + "\n"
