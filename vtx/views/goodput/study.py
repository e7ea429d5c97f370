"""A study's goodput as `vtx status STUDY` shows it: the summed line, a row and bar per trial
under ``--timeline``, and the ``goodput`` object of ``--format json`` (`jobs.tuning.study_goodput`).

``goodput`` in ``vtx status STUDY --format json`` (keys only ever added; unknown is ``null``)::

    goodput          productive step time over the slot time since the study's creation
                     (wall_s x slots, slots = parallelTrialCount); a fraction
    paid_goodput     productive step time over every trial job's running time
    wall_s, slots, slot_s, created, ended
    trial_s          the trials' wall times summed (each from its job's creation to its end)
    between_trials_s slot time no trial's job held (the study starting, the next trial being
                     suggested, the last round's free slots); not billed, no category
    paid_s, productive_s, usd, usd_unknown_because, usd_excludes_disks
    tokens, tokens_per_usd, tokens_per_usd_unknown_because
    steps_trained, unique_steps, steps_lost
    categories       as a run's (`vtx.views.goodput.run`), each summed over the trials
    trials           [{trial (its id), trial_state, custom_job, and the trial job's own goodput
                     object as `vtx status RUN` gives a run's: goodput, paid_goodput, wall_s,
                     ..., categories, attempts (its one attempt, with its phases)}]"""

from __future__ import annotations

from typing import Any

from rich.text import Text

from jobs.core.formats import duration, money, share
from jobs.tuning.study_goodput import StudyGoodput, TrialGoodput
from vtx.views.goodput.run import (
    BAR_WIDTH,
    bar,
    categories_json,
    goodput_json,
    legend,
    line_of,
)
from vtx.views.runs import rounded, when


def study_goodput_json(found: StudyGoodput) -> dict[str, Any]:
    return {
        "goodput": rounded(found.goodput),
        "paid_goodput": rounded(found.paid_goodput),
        "wall_s": rounded(found.wall_s, 3),
        "slots": found.slots,
        "slot_s": rounded(found.slot_s, 3),
        "created": when(found.created),
        "ended": when(found.ended),
        "trial_s": rounded(found.trial_s, 3),
        "between_trials_s": rounded(found.between_trials_s, 3),
        "paid_s": rounded(found.paid_s, 3),
        "productive_s": rounded(found.productive_s, 3),
        "usd": rounded(found.usd),
        "usd_unknown_because": found.usd_unknown_because,
        "usd_excludes_disks": found.usd_excludes_disks,
        "tokens": found.tokens,
        "tokens_per_usd": rounded(found.tokens_per_usd, 3),
        "tokens_per_usd_unknown_because": found.tokens_per_usd_unknown_because,
        "steps_trained": found.steps_trained,
        "unique_steps": found.unique_steps,
        "steps_lost": found.steps_lost,
        "categories": categories_json(found.categories),
        "trials": [_trial_json(t) for t in found.trials],
    }


def _trial_json(trial: TrialGoodput) -> dict[str, Any]:
    return {
        "trial": trial.trial.id,
        "trial_state": trial.trial.state,
        "custom_job": trial.trial.custom_job,
        **goodput_json(trial.goodput),
    }


def study_goodput_line(found: StudyGoodput) -> str:
    """``21.0% of 2 x 5m 0s since creation, 40.1% of 4m 10s paid; most lost to ...``."""
    head = (
        f"{share(found.goodput)} of {found.slots} x {duration(found.wall_s)} since creation "
        f"({found.slots} trial(s) at a time), "
        f"{share(found.paid_goodput)} of {duration(found.paid_s)} paid"
    )
    return line_of(head, found)


def study_timeline_rows(found: StudyGoodput, width: int = BAR_WIDTH) -> list[Text]:
    """One row per trial: its id, state, goodput (of its own wall time and of its paid time),
    cost, and its bar over the study's wall time from its creation; then the legend."""
    rows = [Text(f"{'trial':<6} {'state':<11} {'goodput':>7} {'paid':>7} {'cost':>9} |")]
    for t in found.trials:
        own = t.goodput
        text = Text(
            f"t{t.trial.id:<5} {t.trial.state:<11} {share(own.goodput):>7} "
            f"{share(own.paid_goodput):>7} {money(own.usd):>9} |"
        )
        phases = [p for a in own.attempts for p in a.phases]
        text.append_text(bar(phases, found.created, found.wall_s, width))
        text.append("|")
        rows.append(text)
    rows.append(legend([p for t in found.trials for a in t.goodput.attempts for p in a.phases]))
    return rows
