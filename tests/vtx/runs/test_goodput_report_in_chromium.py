"""`vtx report`'s page in a real browser (headless Chromium), as the review's page is tested:
it loads without console errors and fetches nothing; its timeline has one lane per attempt,
stacked and inside the page, each lane's phases end to end in time order; its curves are drawn;
and a screenshot shows each lane's longest phase in its category's colour where the layout
says it is. The run: a stocked-out ladder rung, then an attempt preempted once."""

from __future__ import annotations

import itertools
import json
import re
from html import unescape
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from jobs.runs.goodput import CATEGORY, Goodput
from tests.chromium import chromium
from tests.jobs.runs.run_records import goodput, preempted_once, rest_job
from vtx.views.goodput.run_page import goodput_page

WIDTH_PX = 1100
_SLACK_PX = 1.0

pytestmark = pytest.mark.usefixtures("browser")

_PROBE = """<script>
const box = (r) => [r.left + scrollX, r.top + scrollY, r.right + scrollX, r.bottom + scrollY];
const svg = document.querySelector("svg.timeline");
const probe = document.createElement("pre");
probe.id = "probe";
probe.textContent = JSON.stringify({
  width: document.documentElement.clientWidth,
  height: document.documentElement.scrollHeight,
  timeline: box(svg.getBoundingClientRect()),
  lanes: [...svg.querySelectorAll("g.lane")].map((g) => ({
    attempt: g.dataset.attempt,
    phases: [...g.querySelectorAll("rect.phase")].map((r) => ({
      category: r.dataset.category, box: box(r.getBoundingClientRect()),
    })),
    marks: [...g.querySelectorAll("line.preemption, line.rung-move")].map((l) => l.classList[0]),
  })),
  curves: [...document.querySelectorAll("svg.curve")].map((s) => ({
    metric: s.dataset.metric, points: s.querySelectorAll("polyline").length,
  })),
});
document.body.append(probe);
</script>"""


def _run() -> Goodput:
    stocked_out = rest_job("0", -30, "JOB_STATE_FAILED", ended_s=-20, strategy="SPOT")
    stocked_out["error"] = {"code": 8, "message": "STOCKOUT: no Spot capacity"}
    ran = rest_job("1", -15, "JOB_STATE_SUCCEEDED", started_s=10, ended_s=100)
    ran["name"] = ran["name"].replace("us-central1", "us-east4")
    return goodput([stocked_out, ran], preempted_once())


def _layout(tmp_path: Path, page: str) -> dict[str, Any]:
    probed = tmp_path / "probe.html"
    probed.write_text(page.replace("</body>", _PROBE + "</body>"))
    proc = chromium(tmp_path, f"--window-size={WIDTH_PX},900", "--dump-dom", probed.as_uri())
    assert proc.returncode == 0, proc.stderr
    found = re.search(r'<pre id="probe">(.*?)</pre>', proc.stdout, re.S)
    assert found, "the probe did not run"
    return json.loads(unescape(found.group(1)))


def _rgb(colour: str) -> tuple[int, int, int]:
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)


def test_report_in_chromium_has_a_lane_per_attempt_and_shows_its_colours(
    tmp_path: Path,
) -> None:
    run = _run()
    page = goodput_page("run-1", run)
    assert "<script" not in page

    layout = _layout(tmp_path, page)
    lanes = layout["lanes"]
    assert [lane["attempt"] for lane in lanes] == ["1", "2"]
    assert lanes[0]["marks"] == ["rung-move"] and lanes[1]["marks"] == ["preemption"]
    timeline = layout["timeline"]
    assert timeline[0] >= 0 and timeline[2] <= layout["width"]
    for lane in lanes:
        boxes = [p["box"] for p in lane["phases"]]
        assert [p["category"] for p in lane["phases"]] == [
            p.category for p in run.attempts[int(lane["attempt"]) - 1].phases
        ]
        for box in boxes:
            assert timeline[0] - _SLACK_PX <= box[0] <= box[2] <= timeline[2] + _SLACK_PX
        for before, after in itertools.pairwise(boxes):
            assert abs(before[2] - after[0]) <= _SLACK_PX  # end to end, in time order
    first, second = (lane["phases"][0]["box"] for lane in lanes)
    assert first[3] <= second[1]  # lanes stacked, not overlapping
    assert lanes[0]["phases"][-1]["box"][2] <= lanes[1]["phases"][0]["box"][0] + _SLACK_PX
    assert {c["metric"]: c["points"] for c in layout["curves"]} == {"loss": 1, "tokens_per_s": 1}

    report = tmp_path / "report.html"
    report.write_text(page)
    shot = tmp_path / "report.png"
    height = int(layout["height"]) + 10
    proc = chromium(
        tmp_path,
        "--enable-logging=stderr",
        f"--window-size={WIDTH_PX},{height}",
        f"--screenshot={shot}",
        report.as_uri(),
    )
    assert proc.returncode == 0 and shot.exists(), proc.stderr
    assert "CONSOLE" not in proc.stderr and "Uncaught" not in proc.stderr
    with Image.open(shot) as png:
        pixels = png.convert("RGB")
        for lane in lanes:
            widest = max(lane["phases"], key=lambda p: p["box"][2] - p["box"][0])
            left, top, right, bottom = widest["box"]
            got = pixels.getpixel((int((left + right) / 2), int((top + bottom) / 2)))
            fill = _rgb(CATEGORY[widest["category"]].colour)
            assert all(abs(g - f) <= 3 for g, f in zip(got, fill, strict=True)), (widest, got)
