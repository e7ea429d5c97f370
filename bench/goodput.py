"""Goodput of a Spot job preempted K times on the local platform, against the tutorial pattern.

A real job on the local platform (`jobs.local`: control plane, process executor, GCS emulator)
runs the tiny example (`trainer/examples/tiny.yaml`, data and checkpoints in the emulated GCS,
a checkpoint every 10 steps, one line of log per step). At K seeded steps the bench delivers a
preemption exactly as `vtx local preempt` does (SIGTERM, grace, SIGKILL, then the platform's
restart); the trainer checkpoints on SIGTERM and the restarted replica resumes.

The figures are the product's (`jobs.runs.goodput`, what `vtx status` shows), from the
platform's record of the job and its timestamped logs: goodput = productive step time (each
step's duration, counted once) / wall time from the job's creation to its end; steps
recomputed (steps trained more than once); time to first step after each restart (from the
trainer's stop request, logged as the SIGTERM's step ends, to the restarted replica's first
step).

Beside them, the same run read by the bench's earlier definition (`earlier`, what this section
reported before the product had a model), where the two differ: its wall time starts at the
bench's clock just before the create request, not at the job's createTime; its step time is
every gap between two step lines of one start of the trainer (from its ``training`` line), so
the evaluations and save stalls between them count as steps; its time to first step starts at
the bench's preempt request, not at the trainer's stop line. The product also gives what the
earlier definition had no record for: goodput over the paid time, and badput by category in
seconds and dollars.

The tutorial pattern (HF Trainer saving every N steps to the VM's local disk, `gsutil cp` at
the end) loses everything on a preemption: the disk goes with the VM. It is simulated on the
same run: the same preemption instants, this run's mean step time, its first start-up time
and its measured restart gaps, every preemption sending the tutorial job back to step 0.

    python -m bench.goodput [--preemptions K] [--steps N] [--seed S]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.common import REPO, Section, count_of, table
from jobs.core.catalog import load_catalog
from jobs.core.formats import fine_money
from jobs.core.states import is_final
from jobs.runs.goodput import CATEGORY, STOP, Goodput, goodput_of
from jobs.runs.logs import local_entry
from jobs.runs.watch import attempts_of
from jobs.vertex.job_records import JobRecord
from jobs.vertex.rest import VertexRest

# gcsfs reads this when imported: the emulator speaks JSON only (see tests/conftest.py).
os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
GRACE_S = 3.0
"""SIGTERM to SIGKILL. The platform refuses another preemption for two grace periods after one
(the replicas' exits in that window belong to it): at Vertex's 30 s, a job this short would see
one preemption only. The tiny model checkpoints within a second of its SIGTERM."""


def _ts(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


@dataclass
class Run:
    submitted: float = 0.0
    ended: float = 0.0
    preempted_at: list[float] = field(default_factory=list)
    entries: list[dict[str, Any]] = field(default_factory=list)
    state: int = 0
    error: str = ""
    record: JobRecord | None = None
    """The platform's own record of the job, read once it ended."""


def _step_records(entries: list[dict[str, Any]]) -> list[tuple[int, float, dict[str, Any]]]:
    """(restart, time, record) for each trainer JSON line of the primary replica (restart: which
    start of it wrote the line, 0 its first)."""
    out = []
    for e in entries:
        if e["replica"] != "workerpool0-0" or not e["message"].startswith("{"):
            continue
        try:
            record = json.loads(e["message"])
        except json.JSONDecodeError:
            continue
        out.append((e["restart"], _ts(e["timestamp"]), record))
    return out


def _client(endpoint: str) -> Any:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform_v1

    return aiplatform_v1.JobServiceClient(
        transport="rest",
        credentials=AnonymousCredentials(),
        client_options={"api_endpoint": endpoint},
    )


def run_job(preemptions: int, steps: int, seed: int) -> Run:
    """Start a local platform, run the job with seeded preemptions, stop the platform."""
    import gcsfs
    from google.cloud import aiplatform_v1

    from jobs.local.platform.settings import LocalSettings
    from jobs.local.platform.state import (
        LOCAL_BUCKETS,
        LOCAL_PROJECT,
        LOCAL_REGION,
        stack_outputs_for,
    )
    from jobs.local.plumbing.client import LocalApiError, preempt_replica, read_logs
    from jobs.local.plumbing.ports import free_port
    from jobs.local.plumbing.processes import start_fresh, stop_platform

    points = sorted(random.Random(seed).sample(range(10, steps - 10, 5), preemptions))
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp) / "platform"
        settings = LocalSettings(
            data_dir=data_dir, cwd=REPO, port=free_port(), gcs_port=free_port(), grace_s=GRACE_S
        )
        state = start_fresh(settings)
        try:
            os.environ["STORAGE_EMULATOR_HOST"] = state.gcs_endpoint
            data = f"{LOCAL_BUCKETS.data}/bench/tiny.jsonl"
            gcsfs.GCSFileSystem(token="anon").put_file(
                str(REPO / "trainer/examples/data/tiny.jsonl"), data
            )
            argv = ["python", "-m", "trainer", "--config", "trainer/examples/tiny.yaml"]
            for item in (
                f"data.path=gs://{data}",
                f"max_steps={steps}",
                "logging_steps=1",
                "save_steps=10",
            ):
                argv += ["--set", item]
            job = aiplatform_v1.CustomJob(
                display_name="bench-goodput",
                job_spec={
                    "worker_pool_specs": [
                        {
                            "machine_spec": {"machine_type": "n1-standard-4"},
                            "replica_count": 1,
                            "container_spec": {"image_uri": "local/trainer:bench", "command": argv},
                        }
                    ],
                    "scheduling": {"strategy": "SPOT"},
                    "base_output_directory": {
                        "output_uri_prefix": f"gs://{LOCAL_BUCKETS.checkpoints}/runs/bench-goodput"
                    },
                },
            )
            jobs = _client(state.vertex_endpoint)
            parent = f"projects/{LOCAL_PROJECT}/locations/{LOCAL_REGION}"
            run = Run(submitted=time.time())
            name = jobs.create_custom_job(parent=parent, custom_job=job).name
            cursor, pending = 0, list(points)
            while True:
                page = read_logs(state.vertex_endpoint, state.token, job=name, cursor=cursor)
                run.entries += page["entries"]
                cursor = page["cursor"]
                current = jobs.get_custom_job(name=name)
                if is_final(current.state):
                    run.state, run.ended = current.state, current.end_time.timestamp()
                    run.error = current.error.message
                    break
                restart = max((e["restart"] or 0 for e in run.entries), default=0)
                done = [
                    r.get("step", 0)
                    for a, _, r in _step_records(run.entries)
                    if a == restart and r.get("message") == "train" and r.get("step")
                ]
                if pending and done and done[-1] >= pending[0]:
                    try:
                        preempt_replica(state.vertex_endpoint, state.token, name)
                    except LocalApiError as exc:
                        if exc.status != "ABORTED":
                            raise
                        # Still going through the previous preemption: the platform refuses a
                        # second one until its restart is done, so this one waits a poll.
                    else:
                        run.preempted_at.append(time.time())
                        pending.pop(0)
                time.sleep(0.2)
            page = read_logs(state.vertex_endpoint, state.token, job=name, cursor=cursor)
            run.entries += page["entries"]
            run.record = VertexRest(stack_outputs_for(state)).get(name)
        finally:
            stop_platform(data_dir)
    return run


def product_goodput(run: Run) -> Goodput:
    """The product's goodput timeline of the job (`jobs.runs.goodput`, what `vtx status`
    shows), read off the platform's record of the job and its log entries."""
    assert run.record is not None, "the job's record was not read"
    ended = run.record.end_time or datetime.now(UTC)
    # Priced as `vtx status --stack local` prices it: the local stack's stand-in tables.
    catalog = load_catalog().with_stand_in_prices()
    attempts = attempts_of([run.record], run.record.region, ended, catalog)
    return goodput_of(attempts, [local_entry(e) for e in run.entries], ended)


def analyse(run: Run, steps: int) -> dict[str, Any]:
    """The product's figures of the run (`product_goodput`)."""
    found = product_goodput(run)
    (attempt,) = found.attempts
    submitted = found.submitted.timestamp()
    per_step = [
        p.seconds / (p.steps[1] - p.steps[0] + 1)
        for a in found.attempts
        for p in a.phases
        if p.category == "productive" and p.steps
        for _ in range(p.steps[1] - p.steps[0] + 1)
    ]
    first_step = min((p.at.timestamp() for p in found.points), default=submitted)
    return {
        "state": run.state,
        "error": run.error,
        "wall_s": found.wall_s,
        "paid_s": found.paid_s,
        "productive_s": found.productive_s,
        "goodput": found.goodput or 0.0,
        "paid_goodput": found.paid_goodput or 0.0,
        "steps_trained": found.steps_trained,
        "steps_recomputed": found.steps_lost,
        "unique_steps": found.unique_steps,
        "to_first_step_s": found.to_first_step_s,
        "first_start_s": first_step - submitted,
        "median_step_s": statistics.median(per_step) if per_step else float("nan"),
        "mean_step_s": found.productive_s / max(found.unique_steps, 1),
        "preempted_at_s": [p - submitted for p in run.preempted_at],
        "badput_s": {f.key: f.seconds for f in found.badput},
        "badput_usd": {f.key: f.usd for f in found.badput},
        "usd_per_h": attempt.usd_per_h,
        "usd_unknown_because": attempt.usd_unknown_because,
    }


def earlier(run: Run) -> dict[str, Any]:
    """The bench's own definition from before the product's model, on the same run: wall time
    from the bench's clock at submission to the job's end; each step's time the gap since the
    previous step line of the same start (from its ``training`` line), its last execution
    counted; time to first step from the bench's preempt request."""
    durations: dict[int, float] = {}
    first_step: dict[int, float] = {}
    previous: dict[int, float] = {}
    for restart, t, record in _step_records(run.entries):
        message = record.get("message", "")
        if message == "training":
            previous[restart] = t
        # A step ends with its metrics line, or, for the step a SIGTERM interrupted, with the
        # trainer's stop line (it checkpoints instead of logging metrics).
        if message != "train" and not message.startswith(STOP):
            continue
        first_step.setdefault(restart, t)
        durations[record["step"]] = t - previous.get(restart, t)  # the last run of it wins
        previous[restart] = t
    productive = sum(durations.values())
    wall = run.ended - run.submitted
    restarts = sorted(a for a in first_step if a > 0)
    to_first_step = [first_step[a] - p for p, a in zip(run.preempted_at, restarts, strict=False)]
    return {
        "wall_s": wall,
        "productive_s": productive,
        "goodput": productive / wall if wall else 0.0,
        "to_first_step_s": to_first_step,
        "first_start_s": min(first_step.values(), default=run.submitted) - run.submitted,
    }


def _spread(values: list[float]) -> str:
    if not values:
        return "n/a"
    return f"{min(values):.1f} / {statistics.median(values):.1f} / {max(values):.1f}"


def comparison(ours: dict[str, Any], old: dict[str, Any]) -> str:
    """The product's figures beside the earlier definition's, and why each pair differs."""
    rows = [
        ["wall time, s", f"{ours['wall_s']:.2f}", f"{old['wall_s']:.2f}",
         "from the job's createTime (the platform's record) vs from the bench's clock just "
         "before its create request: the request's round trip, and two clocks"],
        ["productive step time, s", f"{ours['productive_s']:.2f}", f"{old['productive_s']:.2f}",
         "the product counts a gap between step-loop lines as step time only when the later "
         "line advanced the step, less what that line measured (eval_s, blocked_s); the "
         "earlier definition counts every gap before a train or stop line as a step's, and "
         "its stop line (which carries the last finished step's number) replaces that step's "
         "duration with the moments since its train line"],
        ["goodput over wall time", f"{ours['goodput']:.1%}", f"{old['goodput']:.1%}",
         "the two rows above"],
        ["goodput over paid time", f"{ours['paid_goodput']:.1%}", "(not defined)",
         f"the product's only: over the job's running time ({ours['paid_s']:.1f} s, startTime "
         "to endTime), the time the meter prices"],
        ["time to first step after restart, min / median / max s",
         _spread(ours["to_first_step_s"]), _spread(old["to_first_step_s"]),
         "from the trainer's stop line (logged when the SIGTERM's step ends, after the bench's "
         "preempt request reached it) vs from the bench's preempt request"],
        ["first start-up, s", f"{ours['first_start_s']:.1f}", f"{old['first_start_s']:.1f}",
         "to the first train line vs to the first step line, each from its own start of the "
         "wall time"],
    ]  # fmt: skip
    return table(["figure", "product (jobs.runs.goodput)", "bench's earlier definition",
                  "why they differ"], rows)  # fmt: skip


def _priced(ours: dict[str, Any]) -> str:
    """What the dollars are: the price `vtx status --stack local` meters this job at."""
    if ours["usd_per_h"] is None:
        return f"dollars unknown: {ours['usd_unknown_because']}"
    return (
        f"dollars at {fine_money(ours['usd_per_h'])}/h for the job's running time, the Spot "
        "n1-standard-4 price `vtx status --stack local` meters it at (the local platform's "
        "stand-in table, once `vtx prices refresh --stack local` has read it; not Google's)"
    )


def badput_table(ours: dict[str, Any]) -> str:
    """The product's badput by category: seconds, share of the wall time, dollars."""
    rows = [
        [CATEGORY[key].label, CATEGORY[key].library or "(vtx's own)", f"{seconds:.2f}",
         f"{seconds / ours['wall_s']:.1%}", fine_money(ours["badput_usd"][key])]
        for key, seconds in ours["badput_s"].items()
    ]  # fmt: skip
    return table(["badput category", "ml-goodput-measurement", "seconds", "share of wall",
                  "dollars"], rows)  # fmt: skip


def tutorial(ours: dict[str, Any], steps: int) -> dict[str, Any]:
    """The same preemption instants, but each one sends the job back to step 0."""
    step_s = ours["productive_s"] / max(ours["unique_steps"], 1)  # this run's mean step
    gaps = ours["to_first_step_s"] or [ours["first_start_s"]]
    t, lost = ours["first_start_s"], 0  # time the current restart's first step starts
    for i, at in enumerate(ours["preempted_at_s"]):
        if at >= t + steps * step_s:
            break  # it would have finished before this preemption
        lost += max(0, int((at - t) / step_s))
        t = at + gaps[min(i, len(gaps) - 1)]
    wall = t + steps * step_s
    productive = steps * step_s
    return {
        "wall_s": wall,
        "productive_s": productive,
        "goodput": productive / wall,
        "steps_recomputed": lost,
    }


def run(preemptions: int = 3, steps: int = 100, seed: int = 0) -> Section:
    measured = run_job(preemptions, steps, seed)
    ours = analyse(measured, steps)
    old = earlier(measured)
    sim = tutorial(ours, steps)
    restart = ours["to_first_step_s"]
    restart_cell = (
        f"{min(restart):.1f} / {statistics.median(restart):.1f} / {max(restart):.1f}"
        if restart
        else "n/a"
    )
    rows = [
        [
            "vtx trainer on the local platform (measured)",
            f"{ours['wall_s']:.1f}",
            f"{ours['productive_s']:.1f}",
            f"{ours['goodput']:.1%}",
            ours["steps_recomputed"],
            restart_cell,
        ],
        [
            "tutorial pattern, local disk (simulated on the same run)",
            f"{sim['wall_s']:.1f}",
            f"{sim['productive_s']:.1f}",
            f"{sim['goodput']:.1%}",
            sim["steps_recomputed"],
            "same gaps (assumed)",
        ],
    ]
    median_restart = statistics.median(restart) if restart else float("nan")
    state_ok = "SUCCEEDED" if ours["state"] == 4 else f"state {ours['state']} ({ours['error']})"
    body = "\n\n".join(
        [
            f"One job of {steps} steps, {preemptions} preemptions at seeded steps (seed {seed}), "
            f"{len(ours['preempted_at_s'])} delivered before the job ended; job {state_ok}; "
            f"{ours['steps_trained']} step executions for {ours['unique_steps']} steps. "
            f"Preemptions at {', '.join(f'{p:.1f}' for p in ours['preempted_at_s'])} s "
            f"after submission; step time median {ours['median_step_s']:.3f} s, mean "
            f"{ours['mean_step_s']:.3f} s (the simulation uses the mean); first start-up "
            f"{ours['first_start_s']:.1f} s.",
            table(
                [
                    "pattern",
                    "wall s",
                    "productive step s",
                    "goodput",
                    "steps recomputed",
                    "time to first step after restart, min / median / max s",
                ],
                rows,
            ),
            (
                "What it means: preempted "
                f"{count_of(len(ours['preempted_at_s']), 'time')}, the vtx job "
                "recomputed "
                f"{ours['steps_recomputed']} steps (it checkpoints on SIGTERM and resumes from "
                f"there); the tutorial pattern would have recomputed {sim['steps_recomputed']} "
                "(everything done before each preemption). Both goodputs are low because this "
                f"tiny job's steps take {ours['mean_step_s']:.3f} s on average while each "
                f"restart took {median_restart:.1f} s (median) from the preemption to the "
                "next first step (a new process importing torch and "
                "transformers, then loading the checkpoint); the restart cost does not grow "
                "with the run, the work the tutorial pattern loses grows with the time between "
                "preemptions."
            ),
            "**The product's figures beside the bench's earlier definition.** The table above "
            "is the product's (`jobs.runs.goodput`, what `vtx status` shows); before that "
            "model existed this section read the run its own way. Both, on this same run:",
            comparison(ours, old),
            f"**Badput by category** (the product's; the phases tile the {ours['wall_s']:.1f} s "
            f"of wall time with the productive steps; {_priced(ours)}; $0 for time nobody is "
            "billed for; docs/goodput.md says what each is read from):",
            badput_table(ours),
        ]
    )
    return Section(
        "Goodput under preemption",
        f"python -m bench.goodput --preemptions {preemptions} --steps {steps} --seed {seed}",
        body,
        raw={"ours": ours, "earlier": old, "tutorial": sim},
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--preemptions", type=int, default=3)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    a = parser.parse_args()
    print(run(a.preemptions, a.steps, a.seed).markdown())


if __name__ == "__main__":
    main()
