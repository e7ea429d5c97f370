"""`vtx review` of stacks with further regions (capacity_regions): the regional attachments,
subnets, NATs and keys are shown, each attachment with the output that names it, and the policy
pack finds nothing new."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_review_report import _engine_violations

from infra.review.builder import Report, build_report
from infra.review.render_html import to_html
from infra.review.render_markdown import to_markdown
from infra.review.sources import ReviewSource, from_offline

STACKS = Path(__file__).resolve().parents[1] / "stacks"


@pytest.fixture(scope="module")
def ladder() -> dict[str, tuple[ReviewSource, Report]]:
    reviews = {}
    for mode in ("psc", "peering"):
        source = from_offline(f"ladder-{mode}", STACKS / f"Pulumi.ladder-{mode}.yaml")
        reviews[mode] = (source, build_report(source))
    return reviews


def test_each_attachment_shows_the_output_that_names_it(ladder) -> None:
    source, report = ladder["psc"]
    exported = {a["name"]: a["exported_as"] for a in report.network["attachment"]}
    regions = source.platform["regions"]
    assert exported == {
        "acme-vtx-prod-vertex": source.platform["network_attachment"],
        "acme-vtx-prod-vertex-us-east4": regions["us-east4"]["network_attachment"],
        "acme-vtx-prod-vertex-us-west1": regions["us-west1"]["network_attachment"],
    }
    assert len(set(exported.values())) == 3


def test_network_section_names_the_further_regions_and_their_parts(ladder) -> None:
    _, report = ladder["psc"]
    text = to_markdown(report)
    assert "further regions: us-east4, us-west1" in text
    for part in ("acme-vtx-prod-psc-us-east4", "acme-vtx-prod-nat-us-west1", "10.31.0.16/28"):
        assert part in text
    assert "acme-vtx-prod-us-east4-key" in text  # the regional key, in the diagram
    assert "acme-vtx-prod-vertex-us-west1" in to_html(report)
    _, peering = ladder["peering"]
    assert "further regions: us-east4" in to_markdown(peering)
    assert peering.network["attachment"] == []


@pytest.mark.parametrize("mode", ["psc", "peering"])
def test_further_regions_add_no_policy_finding(ladder, mode: str) -> None:
    _, report = ladder[mode]
    findings = [(p.policy, v) for p in report.policy for v in p.violations]
    assert findings == []
    assert report.mandatory_failures == 0


@pytest.mark.parametrize("mode", ["psc", "peering"])
def test_the_crossguard_pack_finds_nothing_either(ladder, mode: str) -> None:
    """What `pulumi preview --policy-pack infra/policy` would report on these stacks."""
    source, _ = ladder[mode]
    assert _engine_violations(source.resources, str(source.environment)) == set()
