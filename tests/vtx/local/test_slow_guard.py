"""A run slowed under its tokens/s floor moves to its ladder's next rung, which resumes from its
checkpoints, end to end on the local platform: the real trainer's heartbeat, `vtx local slow`
(its replica SIGSTOPped and SIGCONTed in a duty cycle), the controller beside the platform
judging the beat and walking the ladder with nobody following, and `vtx status` saying why.

No race with the run's end: the first rung trains for far more steps than the test lasts, and
is slowed only once its beat says it is training above its floor; the second rung is the same
command with few steps, so the run ends soon after it resumes. Rung 1 saves no checkpoint on
its own (no save or eval phase, which a guard does not judge, can start while it is slowed):
its checkpoint is the one the trainer commits on the cancel's SIGTERM, as on Vertex."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from jobs.control.records import Records
from jobs.core.heartbeat import Heartbeat, Phase
from jobs.core.stack import StackOutputs
from jobs.vertex.rest import VertexRest
from tests.vtx.local.guard_helpers import job_id, record, trainer_lines, until, vtx

FLOOR = 250
"""tokens/s. The tiny model at 32 tokens a row and 2 rows a step, on one thread, trains at
about 1,000 tokens/s on a loaded 2-core machine; slowed 100 times, at about 50."""
WINDOW = "2s"
SLOW_FACTOR = "100"
TRAINER = ["python", "-m", "trainer", "--config", "trainer/examples/tiny.yaml"]
SETTINGS = (
    "data.max_seq_length=32",
    "per_device_train_batch_size=2",
    "save_steps=null",
    "eval_steps=null",
    "logging_steps=1000",
)
FIRST_RUNG_STEPS = 100_000
"""Never reached: the first rung ends only by the guard."""
LAST_RUNG_STEPS = 60


def command(*settings: str) -> list[str]:
    return [*TRAINER, *(a for s in (*SETTINGS, *settings) for a in ("--set", s))]


def template(path: Path) -> Path:
    path.write_text(yaml.safe_dump({
        "name": "slowed",
        "image": "trainer",
        "command": command(f"max_steps={FIRST_RUNG_STEPS}"),
        # One thread: two threads spinning on a shared 2-core machine train 20x slower.
        "env": {"OMP_NUM_THREADS": "1"},
        "pools": {"chief": {"machine": "n1-standard-4"}},
        "scheduling": {"timeout": "30m"},
        "capacity": {"max_wait": "10m", "ladder": [{"set": {"command": command(
            f"max_steps={LAST_RUNG_STEPS}",
            # The step count is part of the trajectory a checkpoint records.
            "allow_config_change_on_resume=true",
        )}}]},
        "guard": {"min_tokens_per_s": FLOOR, "window": WINDOW, "action": "next_rung"},
    }))  # fmt: skip
    return path


# Two trainer start-ups (20-50 s each here): set-up and call took 104-179 s on a 2-core machine
# under a load of 9 to 16; most of it is start-up, the slow-to-breach is 5-9 s.
@pytest.mark.slow(cost_s=120)
def test_a_run_slowed_under_its_floor_moves_to_its_next_rung_and_resumes(
    local_platform: StackOutputs, tmp_path: Path
) -> None:
    run_id = f"slowed-{uuid.uuid4().hex[:6]}"
    out = vtx("launch", str(template(tmp_path / "slowed.yaml")), "--stack", "local", "-y",
              "--run-id", run_id)  # fmt: skip
    assert f"under {FLOOR} tokens/s for {WINDOW} -> next_rung" in " ".join(out.split())
    records, rest = Records(local_platform), VertexRest(local_platform)

    def above_the_floor() -> Heartbeat | None:
        beat = records.heartbeat(run_id)
        if beat and beat.phase is Phase.TRAINING and (beat.tokens_per_s or 0) >= FLOOR:
            return beat
        jobs = rest.list(run_id)
        if any(j.terminal for j in jobs):  # said at once, not after the hang deadline
            raise AssertionError(f"{[j.state for j in jobs]} before a beat over {FLOOR}: {beat}")
        return None

    beat = until(f"the first rung training over {FLOOR} tokens/s", above_the_floor)
    assert beat.total_steps == FIRST_RUNG_STEPS and beat.step < FIRST_RUNG_STEPS // 10
    slowed_at = datetime.now(UTC)
    said = " ".join(vtx("local", "slow", run_id, "--factor", SLOW_FACTOR).split())
    assert f"{SLOW_FACTOR}x slower" in said

    ended = until("the run's end", lambda: record(local_platform, run_id).outcome)
    after = record(local_platform, run_id)
    lines = trainer_lines(local_platform, run_id)
    story = "\n".join(m.what for m in after.moves)
    assert ended.state == "SUCCEEDED", f"{ended}\n{story}"
    # The breach: the first rung's, after the slow, acted on by moving to the second rung.
    assert [a.rung for a in after.attempts] == [0, 1], story
    (breach,) = after.breaches
    assert breach.startswith("next_rung: guard.min_tokens_per_s: "), breach
    assert f"under {FLOOR} since" in breach and f"(window {WINDOW})" in breach
    first, second = after.attempts
    assert first.gave_up == breach.removeprefix("next_rung: ")
    assert first.slow_since is not None
    assert any(m.at >= slowed_at and "to move on: guard.min_tokens_per_s" in m.what
               for m in after.moves), story  # fmt: skip
    # The second rung restored the first rung's last committed checkpoint, and finished.
    first_job, second_job = job_id(first.job or ""), job_id(second.job or "")
    committed = [e["step"] for e in lines
                 if e["job"] == first_job and e["message"] == "checkpoint committed"]  # fmt: skip
    resumed = [e for e in lines if e["job"] == second_job and e["message"] == "resumed"]
    assert committed and resumed, lines
    assert resumed[0]["step"] == committed[-1] > 0
    done = [e for e in lines if e["job"] == second_job and e["message"] == "done"]
    assert done and done[0]["step"] == max(LAST_RUNG_STEPS, committed[-1])
    # What people see.
    text = " ".join(vtx("status", run_id, "--stack", "local").split())
    assert f"guard breached: {breach}" in text
