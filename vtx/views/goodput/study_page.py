"""`vtx report STUDY --output FILE.html`: one self-contained page (inline CSS and SVG, no script,
nothing fetched) of a study's goodput: a lane per trial (its CustomJob's phases) over the study's
wall time from its creation, the summed figures, every category's seconds and dollars summed
over the trials, and a row per trial. The lanes carry the run page's classes
(`vtx.views.goodput.run_page`), ``g.lane`` with ``data-trial`` (the trial's id)."""

from __future__ import annotations

from html import escape

from jobs.core.formats import duration, money, share
from jobs.tuning.study_goodput import StudyGoodput
from vtx.views.goodput.run_page import (
    NAMES_NOTE,
    Lane,
    categories_table,
    figures_table,
    lanes_svg,
    legend_html,
    money_cells,
    page,
)


def _figures(found: StudyGoodput) -> str:
    tokens_per_usd, cost = money_cells(found)
    rows = [
        ("goodput (productive step time / slot time since creation)", share(found.goodput)),
        ("goodput of paid time (/ the trial jobs' running time)", share(found.paid_goodput)),
        ("wall time since creation", duration(found.wall_s)),
        ("trials at a time (parallelTrialCount)", str(found.slots)),
        ("slot time (wall time x trials at a time)", duration(found.slot_s)),
        ("trial jobs' wall time, summed", duration(found.trial_s)),
        ("slot time no trial job held", duration(found.between_trials_s)),
        ("paid time", duration(found.paid_s)),
        ("productive step time", f"{found.productive_s:.1f} s"),
        ("cost at the catalog's price", cost),
        ("tokens trained", "unknown" if found.tokens is None else f"{found.tokens:,}"),
        ("tokens per paid dollar", tokens_per_usd),
        ("steps trained / unique / computed again",
         f"{found.steps_trained} / {found.unique_steps} / {found.steps_lost}"),
        ("trials with a job", str(len(found.trials))),
    ]  # fmt: skip
    return figures_table(rows)


def _trials(found: StudyGoodput) -> str:
    head = (
        "<tr><th>trial</th><th>state</th><th>job</th><th>goodput</th><th>of paid time</th>"
        "<th>wall time</th><th>paid time</th><th>dollars</th></tr>"
    )
    rows = []
    for t in found.trials:
        own = t.goodput
        cells = (
            t.trial.id,
            t.trial.state,
            (t.trial.custom_job or "-").rsplit("/", 1)[-1],
            share(own.goodput),
            share(own.paid_goodput),
            duration(own.wall_s),
            duration(own.paid_s),
            money(own.usd),
        )
        tds = "".join(f"<td>{escape(c)}</td>" for c in cells)
        rows.append(f'<tr data-trial="{escape(t.trial.id)}">{tds}</tr>')
    return f'<table class="trials">{head}{"".join(rows)}</table>'


def study_goodput_page(run: str, found: StudyGoodput) -> str:
    lanes = [
        Lane(f'data-trial="{escape(t.trial.id)}"', f"trial {t.trial.id} {t.trial.state}", a)
        for t in found.trials
        for a in t.goodput.attempts
    ]
    body = [
        f"<p>From {escape(found.created.isoformat())} (the study's creation) to "
        f"{escape(found.ended.isoformat())}; one lane per trial (its CustomJob), "
        f"{found.slots} trial(s) at a time.</p>",
        "<h2>Timeline</h2>",
        lanes_svg(lanes, found.created, found.wall_s, f"timeline of study {run}"),
        legend_html(),
        "<h2>Figures</h2>",
        _figures(found),
        "<h2>Trials</h2>",
        _trials(found),
        "<h2>Where the time went (summed over the trials)</h2>",
        categories_table(
            found.categories, found.trial_s, "the trials' wall time", found.usd_excludes_disks
        ),
        NAMES_NOTE,
    ]
    return page(f"vtx report: goodput of study {run}", body)
