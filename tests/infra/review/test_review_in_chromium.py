"""The HTML review in a real browser (headless Chromium): it loads without console errors, its
diagram's boxes lie inside the page and hold their text in the font the browser really used, and
a screenshot shows the boxes' colours where the page's layout says they are.

Skipped where Chromium is not installed and ``make test`` could not install it; failed instead
under ``CI=true`` (tests/chromium.py). The layout is read from a copy of the page with a probe
script appended (the report itself carries no script); the screenshot is of the report itself.
"""

from __future__ import annotations

import json
import re
from html import unescape
from itertools import combinations
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from infra.review.layered_svg import PALETTE
from infra.review.render_html import to_html
from tests.chromium import chromium as _chromium
from vtx.commands.review import Format, render_review

PREVIEW = Path(__file__).parent / "fixtures" / "preview-dev.json"
WIDTH_PX = 1280
_SLACK_PX = 1.0  # sub-pixel rounding between an SVG box and the browser's layout of it

pytestmark = pytest.mark.usefixtures("browser")

# Appended to a copy of the page: every diagram's box, its texts' boxes, in page pixels.
_PROBE = """<script>
const box = (r) => [r.left + scrollX, r.top + scrollY, r.right + scrollX, r.bottom + scrollY];
const svgs = [...document.querySelectorAll("svg.diagram")].map((svg) => ({
  label: svg.getAttribute("aria-label"),
  box: box(svg.getBoundingClientRect()),
  nodes: [...svg.querySelectorAll("g.node")].map((g) => ({
    kind: g.dataset.kind,
    box: box(g.querySelector("rect").getBoundingClientRect()),
    texts: [...g.querySelectorAll("text")].map((t) => box(t.getBoundingClientRect())),
  })),
}));
const probe = document.createElement("pre");
probe.id = "probe";
probe.textContent = JSON.stringify({
  width: document.documentElement.clientWidth,
  height: document.documentElement.scrollHeight,
  svgs,
});
document.body.append(probe);
</script>"""


def _layout(tmp_path: Path, page: str) -> dict[str, Any]:
    probed = tmp_path / "probe.html"
    probed.write_text(page.replace("</body>", _PROBE + "</body>"))
    proc = _chromium(tmp_path, f"--window-size={WIDTH_PX},900", "--dump-dom", probed.as_uri())
    assert proc.returncode == 0, proc.stderr
    found = re.search(r'<pre id="probe">(.*?)</pre>', proc.stdout, re.S)
    assert found, "the probe did not run"
    return json.loads(unescape(found.group(1)))


def _inside(inner: list[float], outer: list[float]) -> bool:
    return (
        inner[0] >= outer[0] - _SLACK_PX
        and inner[1] >= outer[1] - _SLACK_PX
        and inner[2] <= outer[2] + _SLACK_PX
        and inner[3] <= outer[3] + _SLACK_PX
    )


def _apart(a: list[float], b: list[float]) -> bool:
    return a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1]


def _rgb(colour: str) -> tuple[int, int, int]:
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_diagram_in_chromium_lies_within_the_page_and_shows_in_a_screenshot(
    offline, stack: str, tmp_path: Path
) -> None:
    page = to_html(offline[stack][1])
    layout = _layout(tmp_path, page)
    labels = [svg["label"] for svg in layout["svgs"]]
    assert labels == [f"network path of a {stack} job", f"who may do what in the {stack} stack"]
    for svg in layout["svgs"]:
        assert svg["box"][0] >= 0 and svg["box"][2] <= layout["width"], svg["label"]
        assert len(svg["nodes"]) >= 5
        for node in svg["nodes"]:
            assert _inside(node["box"], svg["box"]), (svg["label"], node)
            # The font the browser picked fits the box sized for it (text is not clipped).
            for text in node["texts"]:
                assert _inside(text, node["box"]), (svg["label"], node)
            # Readable: not shrunk to fit (a box holds at least one 16 px line plus padding).
            assert node["box"][3] - node["box"][1] >= 30
        for a, b in combinations(svg["nodes"], 2):
            assert _apart(a["box"], b["box"]), (a, b)

    report = tmp_path / "review.html"
    report.write_text(page)
    shot = tmp_path / f"review-{stack}.png"
    height = int(layout["height"]) + 10
    proc = _chromium(
        tmp_path, f"--window-size={WIDTH_PX},{height}", f"--screenshot={shot}", report.as_uri()
    )
    assert proc.returncode == 0 and shot.exists(), proc.stderr
    with Image.open(shot) as png:
        pixels = png.convert("RGB")
        for svg in layout["svgs"]:
            for node in svg["nodes"]:
                left, top, right, _ = node["box"]
                # Inside the box's top padding, clear of its border and its text: its fill.
                x, y = int((left + right) / 2), int(top) + 4
                fill = _rgb(PALETTE[node["kind"]][0])
                got = pixels.getpixel((x, y))
                assert all(abs(g - f) <= 3 for g, f in zip(got, fill, strict=True)), (
                    svg["label"],
                    node,
                    got,
                )


def test_html_report_renders_in_headless_chromium_without_console_errors(tmp_path: Path) -> None:
    page = tmp_path / "review.html"
    page.write_text(render_review("dev", preview_json=PREVIEW, fmt=Format.html)[0])
    proc = _chromium(tmp_path, "--enable-logging=stderr", "--v=0", "--dump-dom", page.as_uri())
    assert proc.returncode == 0, proc.stderr
    assert "Policies" in proc.stdout
    assert "CONSOLE" not in proc.stderr and "Uncaught" not in proc.stderr
