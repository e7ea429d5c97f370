"""`vtx report RUN --output FILE.html`: one self-contained page (inline CSS and SVG, no script,
nothing fetched) of a run's goodput: a lane per attempt with its phases coloured, preemptions
and capacity-ladder moves marked; the loss and tokens/s over the same wall-time axis; the
figures and every category's seconds and dollars.

The SVG's parts carry classes a test reads back from the browser's DOM: ``svg.timeline``,
``g.lane`` (``data-attempt``), ``rect.phase`` (``data-category``), ``line.preemption``,
``line.rung-move``; ``svg.curve`` (``data-metric``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from html import escape

from jobs.core.formats import duration, money, share
from jobs.pricing.estimates import disks_note
from jobs.runs.goodput import (
    CATEGORIES,
    CATEGORY,
    AttemptTimeline,
    CategoryFigure,
    Figures,
    Goodput,
    TrainPoint,
)

WIDTH = 960
LABEL_W = 170
"""The lanes' label column; the time axis fills the rest."""
LANE_H, LANE_GAP = 28, 10
AXIS_H = 28
CURVE_H = 170

_CSS = """
body { font-family: system-ui, sans-serif; margin: 24px; color: #212121; max-width: 1000px; }
h1 { font-size: 22px; } h2 { font-size: 17px; margin-top: 28px; }
table { border-collapse: collapse; margin: 8px 0; }
td, th { border: 1px solid #ccc; padding: 4px 8px; text-align: left; font-size: 14px; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
svg { display: block; max-width: 100%; height: auto; }
svg text { font-size: 12px; fill: #333; }
.swatch { display: inline-block; width: 12px; height: 12px; margin-right: 4px;
  vertical-align: middle; border: 1px solid #0003; }
.legend span.item { margin-right: 14px; white-space: nowrap; font-size: 13px; }
"""


def _x(origin: datetime, span_s: float, at: datetime) -> float:
    return LABEL_W + (WIDTH - LABEL_W - 10) * (at - origin).total_seconds() / max(span_s, 1e-9)


def _axis(span_s: float, y: float) -> str:
    parts = [f'<line x1="{LABEL_W}" y1="{y}" x2="{WIDTH - 10}" y2="{y}" stroke="#999"/>']
    for i in range(6):
        seconds = span_s * i / 5
        x = LABEL_W + (WIDTH - LABEL_W - 10) * i / 5
        anchor = "start" if i == 0 else "end" if i == 5 else "middle"
        parts.append(
            f'<line x1="{x:.1f}" y1="{y}" x2="{x:.1f}" y2="{y + 4}" stroke="#999"/>'
            f'<text x="{x:.1f}" y="{y + 17}" text-anchor="{anchor}">'
            f"{escape(duration(seconds))}</text>"
        )
    return "".join(parts)


@dataclass(frozen=True)
class Lane:
    """One row of the timeline: a run's attempt, or a study's trial (its one attempt)."""

    data: str
    """Its ``data-*`` attribute: ``data-attempt="2"``, ``data-trial="3"``."""
    label: str
    attempt: AttemptTimeline


def _lane_svg(lane: Lane, y: float, origin: datetime, span_s: float) -> str:
    attempt = lane.attempt
    parts = [
        f'<g class="lane" {lane.data}>',
        f'<text x="4" y="{y + LANE_H / 2 + 4}">{escape(lane.label)}</text>',
    ]
    for phase in attempt.phases:
        x0, x1 = _x(origin, span_s, phase.start), _x(origin, span_s, phase.end)
        category = CATEGORY[phase.category]
        steps = f", steps {phase.steps[0]}-{phase.steps[1]}" if phase.steps else ""
        tip = f"{category.label}: {phase.seconds:.1f} s{steps}"
        parts.append(
            f'<rect class="phase" data-category="{category.key}" x="{x0:.2f}" y="{y}" '
            f'width="{max(x1 - x0, 0):.2f}" height="{LANE_H}" fill="{category.colour}">'
            f"<title>{escape(tip)}</title></rect>"
        )
    for at in attempt.preemptions:
        x = _x(origin, span_s, at)
        parts.append(
            f'<line class="preemption" x1="{x:.2f}" y1="{y - 3}" x2="{x:.2f}" '
            f'y2="{y + LANE_H + 3}" stroke="#000" stroke-width="2" stroke-dasharray="3 2">'
            "<title>preemption: stop requested (SIGTERM)</title></line>"
        )
    if attempt.moved_on:
        x = _x(origin, span_s, attempt.end)
        parts.append(
            f'<line class="rung-move" x1="{x:.2f}" y1="{y - 3}" x2="{x:.2f}" '
            f'y2="{y + LANE_H + LANE_GAP + 3}" stroke="#b71c1c" stroke-width="3">'
            "<title>the capacity ladder moved on to the next rung</title></line>"
        )
    parts.append("</g>")
    return "".join(parts)


def lanes_svg(lanes: list[Lane], origin: datetime, span_s: float, aria: str) -> str:
    """A lane per attempt (or trial), phases as coloured rectangles with their category in a
    tooltip, over ``span_s`` seconds from ``origin``."""
    height = len(lanes) * (LANE_H + LANE_GAP) + AXIS_H
    rows = [
        _lane_svg(lane, i * (LANE_H + LANE_GAP) + 4, origin, span_s) for i, lane in enumerate(lanes)
    ]
    axis = _axis(span_s, height - AXIS_H + 2)
    return (
        f'<svg class="timeline" role="img" aria-label="{escape(aria)}" '
        f'viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" '
        f'xmlns="http://www.w3.org/2000/svg">{"".join(rows)}{axis}</svg>'
    )


def timeline_svg(found: Goodput, run: str) -> str:
    """A lane per attempt of the run."""
    lanes = [
        Lane(f'data-attempt="{a.number}"', f"#{a.number} {a.region} {a.strategy}", a)
        for a in found.attempts
    ]
    return lanes_svg(lanes, found.submitted, found.wall_s, f"timeline of run {run}")


def curve_svg(
    found: Goodput, metric: str, label: str, value: Callable[[TrainPoint], float | None]
) -> str:
    """``metric`` of every ``train`` line over the run's wall time (the timeline's axis)."""
    points = [(p.at, v) for p in found.points if (v := value(p)) is not None]
    top, plot_h = 10, CURVE_H - AXIS_H - 10
    body = ""
    if points:
        low, high = min(v for _, v in points), max(v for _, v in points)
        spread = (high - low) or 1.0

        def y(v: float) -> float:
            return top + plot_h * (1 - (v - low) / spread)

        coords = " ".join(
            f"{_x(found.submitted, found.wall_s, at):.2f},{y(v):.2f}" for at, v in points
        )
        body = (
            f'<polyline points="{coords}" fill="none" stroke="#1565c0" stroke-width="2"/>'
            f'<text x="4" y="{top + 10}">{escape(f"{high:.4g}")}</text>'
            f'<text x="4" y="{top + plot_h}">{escape(f"{low:.4g}")}</text>'
            f'<text x="4" y="{top + plot_h / 2 + 4}">{escape(label)}</text>'
        )
    else:
        body = f'<text x="{LABEL_W}" y="{top + 20}">no {escape(label)} in the logs</text>'
    return (
        f'<svg class="curve" data-metric="{metric}" role="img" '
        f'aria-label="{escape(label)} over wall time" viewBox="0 0 {WIDTH} {CURVE_H}" '
        f'width="{WIDTH}" height="{CURVE_H}" xmlns="http://www.w3.org/2000/svg">'
        f"{body}{_axis(found.wall_s, CURVE_H - AXIS_H + 2)}</svg>"
    )


def money_cells(found: Figures) -> tuple[str, str]:
    """(tokens per paid dollar, cost): each figure, or unknown with the reason."""
    note = disks_note(found.usd_excludes_disks)
    tokens_per_usd = (
        f"{found.tokens_per_usd:,.0f}{note}"
        if found.tokens_per_usd is not None
        else f"unknown: {found.tokens_per_usd_unknown_because}"
    )
    cost = money(found.usd) + (
        f" (unknown: {found.usd_unknown_because})" if found.usd is None else note
    )
    return tokens_per_usd, cost


def _figures(found: Goodput) -> str:
    tokens_per_usd, cost = money_cells(found)
    rows = [
        ("goodput (productive step time / wall time since submission)", share(found.goodput)),
        ("goodput of paid time (/ the attempts' running time)", share(found.paid_goodput)),
        ("wall time since submission", duration(found.wall_s)),
        ("paid time", duration(found.paid_s)),
        ("productive step time", f"{found.productive_s:.1f} s"),
        ("cost at the catalog's price", cost),
        ("tokens trained", "unknown" if found.tokens is None else f"{found.tokens:,}"),
        ("tokens per paid dollar", tokens_per_usd),
        ("steps trained / unique / computed again",
         f"{found.steps_trained} / {found.unique_steps} / {found.steps_lost}"),
        ("preemption to the next first step",
         ", ".join(f"{s:.1f} s" for s in found.to_first_step_s) or "-"),
        ("attempts", str(len(found.attempts))),
    ]  # fmt: skip
    return figures_table(rows)


def figures_table(rows: list[tuple[str, str]]) -> str:
    cells = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in rows)
    return f'<table class="figures">{cells}</table>'


def categories_table(
    figures: list[CategoryFigure], span_s: float, span: str, excludes_disks: bool = False
) -> str:
    """Every category's seconds, share of ``span_s`` (named ``span``) and dollars (whose head
    says when they leave the boot disks out)."""
    head = (
        "<tr><th>category</th><th>ml-goodput-measurement</th><th>read from</th>"
        f"<th>seconds</th><th>share of {escape(span)}</th>"
        f"<th>dollars{escape(disks_note(excludes_disks))}</th></tr>"
    )
    rows = []
    for figure in figures:
        category = CATEGORY[figure.key]
        usd = (
            money(figure.usd)
            if figure.usd is not None
            else (f"unknown: {figure.usd_unknown_because}")
        )
        part = figure.seconds / span_s if span_s else None
        rows.append(
            f'<tr data-category="{category.key}"><td><span class="swatch" '
            f'style="background:{category.colour}"></span>{escape(category.label)}</td>'
            f"<td>{escape(category.library or '(vtx: not a BadputType)')}</td>"
            f"<td>{escape(category.source)}</td>"
            f'<td class="num">{figure.seconds:.1f}</td><td class="num">{share(part)}</td>'
            f"<td>{escape(usd)}</td></tr>"
        )
    return f'<table class="categories">{head}{"".join(rows)}</table>'


def legend_html() -> str:
    items = "".join(
        f'<span class="item"><span class="swatch" style="background:{c.colour}"></span>'
        f"{escape(c.label)}</span>"
        for c in CATEGORIES
    )
    marks = (
        '<span class="item">dashed black line: preemption (stop requested)</span>'
        '<span class="item">red line: the capacity ladder moved on</span>'
    )
    return f'<p class="legend">{items}{marks}</p>'


def goodput_page(run: str, found: Goodput) -> str:
    title = f"vtx report: goodput of run {run}"
    body = [
        f"<p>From {escape(found.submitted.isoformat())} (submission) to "
        f"{escape(found.ended.isoformat())}; one lane per attempt (CustomJob).</p>",
        "<h2>Timeline</h2>",
        timeline_svg(found, run),
        legend_html(),
        "<h2>Loss over wall time</h2>",
        curve_svg(found, "loss", "loss", lambda p: p.loss),
        "<h2>Tokens/s over wall time</h2>",
        curve_svg(found, "tokens_per_s", "tokens/s", lambda p: p.tokens_per_s),
        "<h2>Figures</h2>",
        _figures(found),
        "<h2>Where the time went</h2>",
        categories_table(found.categories, found.wall_s, "wall time", found.usd_excludes_disks),
        NAMES_NOTE,
    ]
    return page(title, body)


NAMES_NOTE = (
    "<p>Categories named after Google's ml-goodput-measurement BadputType where one fits; "
    "see docs/goodput.md for what each is read from.</p>"
)


def page(title: str, body: list[str]) -> str:
    """The whole document: ``title`` as its heading, ``body``'s parts after it."""
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title><style>{_CSS}</style></head>"
        f"<body><h1>{escape(title)}</h1>{''.join(body)}</body></html>\n"
    )
