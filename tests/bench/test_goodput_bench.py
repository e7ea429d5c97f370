"""bench/goodput.py's reading of a run, without a platform: the product's figures beside the
bench's earlier definition on the same job record and lines, and where each differs (the wall
time's start, evaluations counted as step time, the restart measured from the preempt request)."""

from __future__ import annotations

import json
from typing import Any

from bench.goodput import Run, analyse, badput_table, comparison, earlier
from jobs.vertex.job_records import JobRecord
from tests.jobs.runs.run_records import STOP, T0, rest_job, stamp


def line(at_s: float, restart: int, message: str, **keys: Any) -> dict[str, Any]:
    """An entry of the local platform's /vtx/logs page: rank 0's JSON line."""
    record = json.dumps({"message": message, "rank": 0, **keys})
    job = "projects/p/locations/us-central1/customJobs/1"
    return {"timestamp": stamp(at_s), "job": job, "replica": "workerpool0-0", "attempt": 1,
            "restart": restart, "message": record}  # fmt: skip


def preempted_run() -> Run:
    """Created at 0 (the bench's clock said 0.5 before its request), running 2 -> 40; an eval
    between steps 5 and 6 (10 -> 13); a preempt request at 14.5, the stop line at 15, the
    restart's first step at 30."""
    entries = [
        line(5, 0, "training", step=0, total_steps=20),
        line(10, 0, "train", step=5, loss=3.0, tokens=50),
        line(13, 0, "eval", step=5, eval_s=2.0),
        line(14, 0, "train", step=6, loss=2.9, tokens=60),
        line(15, 0, STOP, step=7),
        line(16, 0, "checkpoint saved", step=7, blocked_s=1.0),
        line(25, 1, "resumed", step=7, restore_s=1.0),
        line(26, 1, "training", step=7, total_steps=20),
        line(30, 1, "train", step=20, loss=2.0, tokens=200),
        line(31, 1, "done", step=20),
    ]
    job = rest_job("1", 0, "JOB_STATE_SUCCEEDED", started_s=2, ended_s=40, strategy="SPOT")
    return Run(
        submitted=T0.timestamp() - 0.5,
        ended=T0.timestamp() + 40,
        preempted_at=[T0.timestamp() + 14.5],
        entries=entries,
        state=4,
        record=JobRecord.from_rest(job),
    )


def test_the_product_and_the_earlier_definition_differ_where_the_section_says() -> None:
    run = preempted_run()
    ours, old = analyse(run, 20), earlier(run)

    assert (ours["wall_s"], old["wall_s"]) == (40, 40.5)  # createTime vs the bench's clock
    # The earlier definition counts the eval as step 6's time (10 -> 14); the product does not.
    assert old["productive_s"] == 5 + 4 + 1 + 4  # steps 1-5, 6, 7 (to the stop line), 8-20
    assert ours["productive_s"] == 5 + 1 + 1 + 4
    assert ours["badput_s"]["eval"] == 3
    assert (ours["to_first_step_s"], old["to_first_step_s"]) == ([15.0], [15.5])
    assert ours["paid_s"] == 38 and ours["paid_goodput"] == ours["productive_s"] / 38

    text = comparison(ours, old)
    assert "| wall time, s | 40.00 | 40.50 |" in text
    assert "| goodput over paid time |" in text and "(not defined)" in text
    assert "| 15.0 / 15.0 / 15.0 | 15.5 / 15.5 / 15.5 |" in text
    badput = badput_table(ours)
    assert "| evaluation | CUSTOM_BADPUT_EVENTS | 3.00 | 7.5% |" in badput
    assert "| waiting for capacity | (vtx's own) | 2.00 | 5.0% | $0.00 |" in badput
    # Priced as `vtx status --stack local` meters it: unknown (and why) without a Spot figure.
    assert ("unknown" in badput) == (ours["usd_per_h"] is None)
