"""A run's goodput as `vtx status` shows it: one line in the table, a bar per attempt under
``--timeline``, and the ``goodput`` object of ``--format json`` (`jobs.runs.goodput`).

``goodput`` in ``vtx status --format json`` (keys only ever added; unknown is ``null``)::

    goodput, paid_goodput   productive step time over the wall time since submission, and over
                            the time paid for (the attempts' running time); fractions
    wall_s, paid_s, productive_s, submitted, ended
    usd, usd_unknown_because        the run's cost so far (the meter's)
    usd_excludes_disks      usd (and each category's) leaves the boot disks out (unknown price)
    tokens, tokens_per_usd, tokens_per_usd_unknown_because
    steps_trained, unique_steps, steps_lost (executions of a step after its first)
    to_first_step_s         from each stop request (SIGTERM) to the next start's first step
    categories   [{category, label, badput_type (ml-goodput-measurement's name, or null),
                 source (vertex, trainer, both or controller), seconds, usd, usd_unknown_because}]
    attempts     [{attempt, job, region, strategy, state, usd_per_h, moved_on (it never ran,
                 or lost its machines for capacity: a ladder moved on), preemptions (times),
                 phases: [{category, start, end, seconds, billed, steps ([first, last] or
                 null)}]}]"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from rich.text import Text

from jobs.core.formats import duration, money, share
from jobs.pricing.estimates import disks_note
from jobs.runs.goodput import (
    CATEGORIES,
    CATEGORY,
    AttemptTimeline,
    CategoryFigure,
    Figures,
    Goodput,
    Phase,
)
from vtx.views.runs import rounded, when

BAR_WIDTH = 60


def goodput_json(found: Goodput) -> dict[str, Any]:
    return {
        "goodput": rounded(found.goodput),
        "paid_goodput": rounded(found.paid_goodput),
        "wall_s": rounded(found.wall_s, 3),
        "paid_s": rounded(found.paid_s, 3),
        "productive_s": rounded(found.productive_s, 3),
        "submitted": when(found.submitted),
        "ended": when(found.ended),
        "usd": rounded(found.usd),
        "usd_unknown_because": found.usd_unknown_because,
        "usd_excludes_disks": found.usd_excludes_disks,
        "tokens": found.tokens,
        "tokens_per_usd": rounded(found.tokens_per_usd, 3),
        "tokens_per_usd_unknown_because": found.tokens_per_usd_unknown_because,
        "steps_trained": found.steps_trained,
        "unique_steps": found.unique_steps,
        "steps_lost": found.steps_lost,
        "to_first_step_s": [rounded(s, 3) for s in found.to_first_step_s],
        "categories": categories_json(found.categories),
        "attempts": [_attempt_json(a) for a in found.attempts],
    }


def categories_json(figures: list[CategoryFigure]) -> list[dict[str, Any]]:
    return [
        {
            "category": f.key,
            "label": CATEGORY[f.key].label,
            "badput_type": CATEGORY[f.key].library,
            "source": CATEGORY[f.key].source,
            "seconds": rounded(f.seconds, 3),
            "usd": rounded(f.usd),
            "usd_unknown_because": f.usd_unknown_because,
        }
        for f in figures
    ]


def _attempt_json(attempt: AttemptTimeline) -> dict[str, Any]:
    return {
        "attempt": attempt.number,
        "job": attempt.job,
        "region": attempt.region,
        "strategy": attempt.strategy,
        "state": attempt.state,
        "usd_per_h": rounded(attempt.usd_per_h),
        "moved_on": attempt.moved_on,
        "preemptions": [when(at) for at in attempt.preemptions],
        "phases": [_phase_json(p) for p in attempt.phases],
    }


def _phase_json(phase: Phase) -> dict[str, Any]:
    return {
        "category": phase.category,
        "start": when(phase.start),
        "end": when(phase.end),
        "seconds": rounded(phase.seconds, 3),
        "billed": phase.billed,
        "steps": list(phase.steps) if phase.steps else None,
    }


def goodput_line(found: Goodput) -> str:
    """``21.0% of 1m 40s since submission, 23.3% of 1m 30s paid; most lost: ...``."""
    head = (
        f"{share(found.goodput)} of {duration(found.wall_s)} since submission, "
        f"{share(found.paid_goodput)} of {duration(found.paid_s)} paid"
    )
    return line_of(head, found)


def line_of(head: str, found: Figures) -> str:
    """The goodput line after its ``head`` (the shares): the two largest badputs, steps
    computed again, tokens per dollar (a run's and a study's say these alike); dollars that
    leave the boot disks out say so."""
    parts = [head]
    note = disks_note(found.usd_excludes_disks)
    if worst := found.badput[:2]:
        lost = ", ".join(
            f"{CATEGORY[f.key].label} {duration(f.seconds)} ({money(f.usd)}{note if f.usd else ''})"
            for f in worst
        )
        parts.append(f"most lost to {lost}")
    parts.append(f"{found.steps_lost} step(s) computed again")
    if found.tokens_per_usd is not None:
        parts.append(f"{found.tokens_per_usd:,.0f} tokens per ${note}")
    else:
        parts.append(f"tokens per $ unknown: {found.tokens_per_usd_unknown_because}")
    return "; ".join(parts)


def _cell_category(phases: list[Phase], start: float, end: float, origin: float) -> str | None:
    """The category holding most of [start, end) (seconds from ``origin``); None: no phase."""
    best, most = None, 0.0
    for p in phases:
        a = (p.start.timestamp() - origin, p.end.timestamp() - origin)
        overlap = min(a[1], end) - max(a[0], start)
        if overlap > most or (best is None and a[0] <= start < a[1]):
            best, most = p.category, max(overlap, most)
    return best


def bar(phases: list[Phase], origin: datetime, span_s: float, width: int = BAR_WIDTH) -> Text:
    """``width`` cells over ``span_s`` seconds from ``origin``, each the letter of the phase
    that held most of it; blank outside the phases."""
    start, cell = origin.timestamp(), max(span_s, 1e-9) / width
    text = Text()
    for i in range(width):
        key = _cell_category(phases, i * cell, (i + 1) * cell, start)
        if key is None:
            text.append(" ")
        else:
            text.append(CATEGORY[key].letter, style=f"bold {CATEGORY[key].colour}")
    return text


def legend(phases: list[Phase]) -> Text:
    """The letters of the categories that hold any time in ``phases``."""
    present = {p.category for p in phases if p.seconds}
    text = Text("legend: ")
    for category in CATEGORIES:
        if category.key in present:
            text.append(category.letter, style=f"bold {category.colour}")
            text.append(f" {category.label}  ")
    return text


def timeline_rows(found: Goodput, width: int = BAR_WIDTH) -> list[Text]:
    """One bar per attempt over the run's whole wall time (an attempt's lane is blank outside
    its own time), each cell the letter of the phase that held most of it; then the legend."""
    rows = []
    for attempt in found.attempts:
        text = Text(f"a{attempt.number} {attempt.region:<12} {attempt.strategy:<8} |")
        text.append_text(bar(attempt.phases, found.submitted, found.wall_s, width))
        text.append(f"| {attempt.state.removeprefix('JOB_STATE_')}")
        if attempt.preemptions:
            text.append(f", {len(attempt.preemptions)} preemption(s)")
        rows.append(text)
    rows.append(legend([p for a in found.attempts for p in a.phases]))
    return rows
