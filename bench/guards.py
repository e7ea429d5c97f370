"""`guards`: what a progress guard costs and how fast it acts.

1. The heartbeat's cost to training: the tiny example (`trainer/examples/tiny.yaml`) trained in
   this process, with the chief's heartbeat beating every 0.2 s (the floor `VTX_HEARTBEAT_S`
   may ask; a guarded job beats at most this often) against the same run with the heartbeat
   off, alternated; each run's tokens/s is the trainer's own meter over all its steps (its one
   `train` line: start-up, export and saves left out). And the step's own share,
   `Heartbeat.stepped`, timed alone. Beats go to a local file (an object write to GCS costs the
   thread more, the step the same).
2. From a hang to the controller's action on the local platform: a guarded tiny run
   (`guard: {no_progress: 3s}`), its replica stalled with `vtx local stall`'s call once its
   heartbeat shows training, the time until the controller's cancel (its move in the run's
   record) and until the record holds the outcome (the cancelled job ended), against the bound
   the guard promises for the cancel: the window plus two passes (a pass every 2 s).

    python -m bench.guards [--reps N] [--steps N] [--hangs N]
"""

from __future__ import annotations

import argparse
import logging
import os
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from bench.common import REPO, Section, rotated, summarize, table

# gcsfs reads this when imported: the emulator speaks JSON only (see tests/conftest.py).
os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")

WINDOW_S = 3.0
BEAT_S = 0.2
TIMEOUT_S = 1800
"""The runs' scheduling.timeout (30m): what a hang costs with no guard but the timeout."""


def _config(output_dir: str, steps: int) -> Any:
    from trainer.config.schema import parse_config

    raw = yaml.safe_load((REPO / "trainer/examples/tiny.yaml").read_text())
    examples = REPO / "trainer/examples"
    raw["model"]["tokenizer"] = str(examples / "tokenizer")
    raw["data"]["path"] = str(examples / "data/tiny.jsonl")
    raw |= {
        "output_dir": output_dir,
        "max_steps": steps,
        "save_steps": None,
        "eval_steps": None,
        "logging_steps": steps,
        "report_to": [],
        "disable_tqdm": True,
    }
    raw["data"]["eval_fraction"] = 0.0  # fmt: skip
    return parse_config(raw)


class _TrainLine(logging.Handler):
    """The trainer's `train` line's tokens/s (its meter since the last line)."""

    def __init__(self) -> None:
        super().__init__()
        self.tokens_per_s: float | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage() == "train":
            self.tokens_per_s = getattr(record, "tokens_per_s", None)


def train_once(steps: int, beat: bool) -> float:
    """The tokens/s of one in-process run of ``steps`` steps (one `train` line at the end)."""
    from trainer.config.env import VertexEnv
    from trainer.training import loop

    original = loop.Heartbeat

    def silent(*args: Any, **kwargs: Any) -> Any:
        return original(*args, **{**kwargs, "enabled": False})

    os.environ["VTX_HEARTBEAT_S"] = f"{BEAT_S:g}"
    line = _TrainLine()
    logging.getLogger(loop.__name__).addHandler(line)
    if not beat:
        loop.Heartbeat = silent  # type: ignore[assignment,misc]
    try:
        with tempfile.TemporaryDirectory() as out:
            code = loop.train(_config(out, steps), VertexEnv())
    finally:
        loop.Heartbeat = original  # type: ignore[misc]
        os.environ.pop("VTX_HEARTBEAT_S", None)
        logging.getLogger(loop.__name__).removeHandler(line)
    if code != 0 or line.tokens_per_s is None:
        raise RuntimeError(f"the tiny run exited {code} (tokens/s: {line.tokens_per_s})")
    return line.tokens_per_s


def stepped_s(calls: int = 100_000) -> float:
    """Seconds per `Heartbeat.stepped` call (what a step pays), the thread beating meanwhile."""
    from trainer.tracking.heartbeat import Heartbeat, Phase

    with tempfile.TemporaryDirectory() as out:
        beat = Heartbeat(f"{out}/progress/heartbeat.json", None, BEAT_S)
        beat.phase(Phase.TRAINING)
        started = time.perf_counter()
        for step in range(calls):
            beat.stepped(step, step * 100)
        took = time.perf_counter() - started
        beat.close()
    return took / calls


def _until(what: str, check: Callable[[], Any], timeout_s: float = 300.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    raise RuntimeError(f"{what}: not within {timeout_s:g} s")


def hang_once(stack: Any, tmp: Path, endpoint: str, token: str) -> dict[str, float]:
    """One guarded run stalled once training: seconds from the stall to the outcome recorded
    and to the job's cancel seen."""
    from jobs.control.driver import Driver
    from jobs.control.record import record_of
    from jobs.control.records import Records
    from jobs.core.heartbeat import Phase
    from jobs.launch.plan import LaunchOptions, plan_launch
    from jobs.local.plumbing.client import hinder_replica
    from jobs.spec.gcloud import load_template
    from jobs.vertex.rest import VertexRest

    run_id = f"bench-guard-{uuid.uuid4().hex[:6]}"
    command = ["python", "-m", "trainer", "--config", "trainer/examples/tiny.yaml"]
    for override in ("max_steps=100000", "save_steps=null", "eval_steps=null"):
        command += ["--set", override]
    path = tmp / f"{run_id}.yaml"
    path.write_text(yaml.safe_dump({
        "name": "bench-guard", "image": "trainer", "command": command,
        "pools": {"chief": {"machine": "n1-standard-4"}},
        "scheduling": {"timeout": f"{TIMEOUT_S}s"},
        "guard": {"no_progress": f"{WINDOW_S:g}s"},
    }))  # fmt: skip
    plan = plan_launch(load_template(path), stack, str(path), LaunchOptions(run_id=run_id))
    if plan.problems:
        raise RuntimeError(f"the bench's template: {plan.problems}")
    records = Records(stack)
    records.create(record_of(plan))
    Driver(stack).reconcile_run(run_id)  # the first attempt, as `vtx launch` submits it

    def training() -> bool:
        beat = records.heartbeat(run_id)
        return bool(beat and beat.phase is Phase.TRAINING and beat.stepped_at)

    _until("the first step", training)
    job = VertexRest(stack).list(run_id)[0].name
    hinder_replica(endpoint, token, job)
    stalled = datetime.now(UTC)

    def ended() -> Any:
        stored = records.read(run_id)
        return stored.record if stored and stored.record.outcome else None

    record = _until("the guard's action", ended)
    outcome_s = (datetime.now(UTC) - stalled).total_seconds()
    if not (record.outcome.reason or "").startswith("guard.no_progress"):
        raise RuntimeError(f"the run ended otherwise: {record.outcome}")
    (cancel,) = [m for m in record.moves if "guard.no_progress" in m.what and "cancel " in m.what]
    return {"to_cancel_s": (cancel.at - stalled).total_seconds(), "to_outcome_s": outcome_s}


def hangs(reps: int) -> list[dict[str, float]]:
    from bench.ladder import start
    from jobs.local.plumbing.processes import stop_platform

    with tempfile.TemporaryDirectory() as tmp:
        platform, data_dir = start(Path(tmp))
        try:
            return [
                hang_once(platform.stack, Path(tmp), platform.endpoint, platform.token)
                for _ in range(reps)
            ]
        finally:
            stop_platform(data_dir)


def run(reps: int = 3, steps: int = 100, hang_reps: int = 3) -> Section:
    from jobs.local.plumbing.processes import CONTROLLER_INTERVAL_S

    train_once(10, beat=True)  # warm-up: imports, first allocations (not counted)
    walls: dict[str, list[float]] = {"with": [], "without": []}
    for rep in range(reps):
        for variant in rotated(list(walls), rep):
            walls[variant].append(train_once(steps, beat=variant == "with"))
    per_call = stepped_s()
    timings = hangs(hang_reps)
    with_, without = summarize(walls["with"]), summarize(walls["without"])
    step_ms = 1000 / without.median * _tokens_per_step()
    to_cancel = summarize([t["to_cancel_s"] for t in timings])
    to_outcome = summarize([t["to_outcome_s"] for t in timings])
    bound = WINDOW_S + 2 * CONTROLLER_INTERVAL_S
    body = "\n\n".join([
        f"{reps} repetitions x 2 variants, alternated, after a warm-up run: the tiny example "
        f"trained in this process for {steps} steps, the heartbeat beating every {BEAT_S:g} s "
        "to a local file, against it off; tokens/s is the trainer's meter over the steps.",
        table(["variant", "min tokens/s", "median", "max"],
              [["heartbeat on", *with_.cells("{:.0f}")],
               ["heartbeat off", *without.cells("{:.0f}")]]),
        f"Throughput on / off (medians): **{with_.median / without.median:.3f}x** (1 = no "
        f"cost; the two variants' spread above says how much of that is noise). What the step "
        f"itself pays, `Heartbeat.stepped`: **{per_call * 1e6:.2f} us** a call, "
        f"{per_call * 1e3 / step_ms * 100:.4f}% of the ~{step_ms:.0f} ms step measured here; "
        "the rest of any difference is the beating thread sharing the cores.",
        f"From a hang to the controller's action, local platform, {hang_reps} guarded runs "
        f"(`no_progress: {WINDOW_S:g}s`), each stalled once its heartbeat showed training. "
        f"Stall -> the controller's cancel (its move's time in the record): min "
        f"{to_cancel.min:.1f} s, median **{to_cancel.median:.1f} s**, max {to_cancel.max:.1f} "
        f"s, against the guard's bound of {bound:g} s (the window plus two passes "
        f"{CONTROLLER_INTERVAL_S:g} s apart). Stall -> the run's outcome recorded (the "
        f"cancelled job ended: SIGCONT, its SIGTERM save, then a pass): median "
        f"{to_outcome.median:.1f} s, max {to_outcome.max:.1f} s. With `scheduling.timeout` "
        f"as the only guard (these runs' {TIMEOUT_S} s), each hang would have been paid until "
        f"the timeout: **{TIMEOUT_S / to_cancel.median:,.0f}x** the guarded median.",
    ])  # fmt: skip
    raw = {"walls": walls, "stepped_s": per_call, "hangs": timings, "bound_s": bound}
    command = f"python -m bench.guards --reps {reps} --steps {steps} --hangs {hang_reps}"
    return Section("Progress guards: the heartbeat's cost and a hang's time to action", command,
                   body, raw)  # fmt: skip


def _tokens_per_step() -> float:
    """Tokens a step of the bench's config trains: the global batch's slots (packed rows)."""
    raw = yaml.safe_load((REPO / "trainer/examples/tiny.yaml").read_text())
    return float(raw["per_device_train_batch_size"] * raw["data"]["max_seq_length"])


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.guards")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--hangs", type=int, default=3)
    args = parser.parse_args()
    print(run(args.reps, args.steps, args.hangs).markdown())


if __name__ == "__main__":
    main()
