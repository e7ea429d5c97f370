"""A job's start on a warm pool against a cold job, on the local platform.

Both variants launch the same one-line job (it prints `first step` and sleeps half a second, so
that what is timed is getting a machine and starting the program, not importing torch) through
`jobs.launch`, what `vtx launch --yes` runs:

- **warm**: the template names a persistent resource (`persistent_resource: bench-warm`, one
  n1-standard-4 + T4, created through the real SDK's PersistentResourceService client before the
  runs and RUNNING): the job is placed on a free replica of its pool;
- **cold**: the same template without it: the job goes through the platform's capacity admission
  as any CustomJob does.

Timed from the launch call to (a) the first RUNNING the client sees and (b) the job's own
timestamp on its first line; variants alternate, one run id each, after a warm-up launch of each
(not counted). Each ended job is also read by the product's goodput timeline
(`jobs.runs.goodput`, what `vtx status` shows): the seconds per category (waiting for capacity,
provisioning and container start, program start, productive steps, finish) from its record and
its trainer lines, which the job prints as the trainer does for five short steps. What this
measures, and what it cannot: the local platform provisions no VMs, so the minutes a cold Vertex
job spends getting a VM, booting it and pulling its image, which a warm pool saves, are absent
here; the ratio is the local platform's own two paths (a pool's free replica against capacity
admission), and the figure for Vertex must be measured there.

    python -m bench.warm_start [--reps R] [--poll-s P]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import yaml

from bench.common import REPO, Section, load_average, rotated, summarize, table

# The ladder bench's launch and waits, shared rather than copied (their names are its own).
from bench.ladder import FIRST_LINE, Platform, _first_line_at, _settle, _until, launch
from jobs.core.catalog import load_catalog
from jobs.core.states import is_placed
from jobs.runs.goodput import CATEGORY, Goodput, goodput_of
from jobs.runs.logs import LogEntry, local_entry
from jobs.runs.watch import attempts_of

# gcsfs reads this when imported: the emulator speaks JSON only (see tests/conftest.py).
os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")

RESOURCE_ID = "bench-warm"
T4 = {"machine": "n1-standard-4", "accelerator": "NVIDIA_TESLA_T4", "accelerator_count": 1}
STEPS = 5
PROGRAM = f"""import json, time
def say(message, **fields):
    print(json.dumps({{"severity": "INFO", "message": message, "rank": 0, **fields}}), flush=True)
print({FIRST_LINE!r}, flush=True)
say("starting")
say("training", step=0, total_steps={STEPS})
for step in range(1, {STEPS + 1}):
    time.sleep(0.1)
    say("train", step=step, loss=1.0, tokens_per_s=1000.0, tokens=step * 100)
say("done", step={STEPS})
"""
"""The job: its first line, then the trainer's progress lines (`jobs.core.trainer_events`) for
five 0.1 s steps, so that the goodput timeline (`jobs.runs.goodput`) can say where its time went;
it imports nothing but json, so "program start" is Python's start alone."""
COLD = {
    "name": "bench-warm-start",
    "image": "trainer",
    "command": ["python", "-c", PROGRAM],
    "pools": {"chief": T4},
    "scheduling": {"strategy": "standard", "timeout": "10m"},
}
WARM = {**COLD, "persistent_resource": RESOURCE_ID}
VARIANTS = ("warm", "cold")


@dataclass(frozen=True)
class Config:
    reps: int = 5
    poll_s: float = 0.2
    """How often the launch looks at the job (`vtx launch --poll-s`)."""

    @property
    def command(self) -> str:
        return f"python -m bench.warm_start --reps {self.reps} --poll-s {self.poll_s:g}"


PHASES = ("waiting", "provisioning", "startup", "productive", "finish", "idle")
"""The goodput categories this job's timeline can hold (`jobs.runs.goodput.CATEGORIES`)."""


@dataclass(frozen=True)
class Timing:
    to_running_s: float
    to_first_line_s: float
    phases_s: dict[str, float]
    """Goodput category -> seconds of the job's timeline (creation to end)."""
    wall_s: float
    goodput: float | None


def _entries(p: Platform, run_id: str) -> list[LogEntry]:
    """Every log entry of the run, page after page."""
    from jobs.local.plumbing.client import read_logs

    found, cursor = [], 0
    while True:
        page = read_logs(p.endpoint, p.token, run_id=run_id, cursor=cursor)
        if not page["entries"]:
            return found
        found += [local_entry(e) for e in page["entries"]]
        cursor = page["cursor"]


def timeline(p: Platform, run_id: str) -> Goodput:
    """The product's goodput timeline of the ended run (what `vtx status` shows), from the
    platform's record of its job and its log lines, priced as `vtx status --stack local`."""
    from jobs.vertex.rest import VertexRest

    (job,) = VertexRest(p.stack).list(run_id)
    ended = job.end_time or datetime.now(UTC)
    catalog = load_catalog().for_stack(p.stack)
    attempts = attempts_of([job], job.region or p.stack.region, ended, catalog)
    return goodput_of(attempts, _entries(p, run_id), ended)


def once(p: Platform, variant: str, run_id: str, poll_s: float) -> Timing:
    t0 = time.time()
    launch(p, variant, run_id, poll_s)  # returns once the job runs (or succeeded)
    to_running = time.time() - t0
    first = _first_line_at(p, run_id) - t0
    _settle(p, run_id)
    found = timeline(p, run_id)
    phases = {key: found.figure(key).seconds for key in PHASES}
    return Timing(to_running, first, phases, found.wall_s, found.goodput)


def _create_resource(p: Platform) -> None:
    """The warm pool, through the SDK's PersistentResourceService client, waited until RUNNING."""
    from google.cloud import aiplatform_v1

    from jobs.vertex.client import service_client
    from jobs.vertex.locations import parent

    client = service_client(aiplatform_v1.PersistentResourceServiceClient, p.stack)
    pool = aiplatform_v1.ResourcePool(
        id="t4",
        machine_spec=aiplatform_v1.MachineSpec(
            machine_type=T4["machine"],
            accelerator_type=T4["accelerator"],
            accelerator_count=T4["accelerator_count"],
        ),
        replica_count=1,
    )
    client.create_persistent_resource(
        parent=parent(p.stack),
        persistent_resource=aiplatform_v1.PersistentResource(resource_pools=[pool]),
        persistent_resource_id=RESOURCE_ID,
    ).result(timeout=120)
    name = f"{parent(p.stack)}/persistentResources/{RESOURCE_ID}"
    running = aiplatform_v1.PersistentResource.State.RUNNING
    _until(lambda: client.get_persistent_resource(name=name).state == running, 0.1)


def start(tmp: Path) -> tuple[Platform, Path]:
    from jobs.local.platform.settings import LocalSettings
    from jobs.local.platform.state import stack_outputs_for
    from jobs.local.plumbing.ports import free_port
    from jobs.local.plumbing.processes import start_fresh

    data_dir = tmp / "platform"
    settings = LocalSettings(
        data_dir=data_dir, cwd=REPO, port=free_port(), gcs_port=free_port(), grace_s=2.0
    )
    state = start_fresh(settings)
    stack = stack_outputs_for(state)
    stack_file = tmp / "stack.json"
    stack_file.write_text(stack.model_dump_json())
    templates = {}
    for name, doc in {"warm": WARM, "cold": COLD}.items():
        templates[name] = tmp / f"{name}.yaml"
        templates[name].write_text(yaml.safe_dump(doc))
    return Platform(stack, stack_file, templates, state.vertex_endpoint, state.token), data_dir


def _on_pool(p: Platform, run_id: str) -> bool:
    from jobs.vertex.rest import VertexRest

    (job,) = VertexRest(p.stack).list(run_id)
    return job.rest.get("jobSpec", {}).get("persistentResourceId") == RESOURCE_ID and is_placed(
        job.state
    )


def measure(p: Platform, c: Config) -> dict[str, list[Timing]]:
    for variant in VARIANTS:  # warm-up: the SDK's import, the first connections
        once(p, variant, f"bench-warmup-{variant}", c.poll_s)
    if not _on_pool(p, "bench-warmup-warm"):
        raise RuntimeError("the warm variant's job did not run on the persistent resource")
    timings: dict[str, list[Timing]] = {v: [] for v in VARIANTS}
    for rep in range(c.reps):
        for variant in rotated(list(VARIANTS), rep):
            timings[variant].append(once(p, variant, f"bench-{variant}-{rep}", c.poll_s))
    return timings


def run(c: Config) -> Section:
    from jobs.local.plumbing.processes import stop_platform

    load_before = load_average()[0]
    with tempfile.TemporaryDirectory() as tmp:
        platform, data_dir = start(Path(tmp))
        try:
            _create_resource(platform)
            timings = measure(platform, c)
        finally:
            stop_platform(data_dir)
    raw = {v: [t.__dict__ for t in ts] for v, ts in timings.items()}
    rows, medians, spans = [], {}, {}
    labels = {
        "warm": f"warm: on persistent resource {RESOURCE_ID} (1 x n1-standard-4 + T4, RUNNING)",
        "cold": "cold: the same job, no resource (capacity admission)",
    }
    for variant, ts in timings.items():
        running = summarize([t.to_running_s for t in ts])
        first = summarize([t.to_first_line_s for t in ts])
        medians[variant] = first.median
        spans[variant] = (first.min, first.max)
        rows.append([labels[variant], *running.cells("{:.2f}"), *first.cells("{:.2f}")])
    header = ["variant", "to RUNNING min s", "median s", "max s"]
    header += ["to first line min s", "median s", "max s"]
    phase_rows = [_phase_row(labels[v], ts) for v, ts in timings.items()]
    phase_header = ["variant", *(CATEGORY[k].label + " s" for k in PHASES), "wall s", "goodput"]
    ratio = medians["cold"] / medians["warm"]
    (warm_low, warm_high), (cold_low, cold_high) = spans["warm"], spans["cold"]
    overlap = warm_low <= cold_high and cold_low <= warm_high
    spread = (
        " The two variants' ranges (min to max) overlap: no difference beyond this run's spread."
        if overlap
        else " The two variants' ranges (min to max) do not overlap."
    )
    body = "\n\n".join(
        [
            f"{c.reps} repetitions x 2 variants, alternated (one run id each), after a warm-up "
            "launch of each (not counted); seconds from the launch call (`jobs.launch`, in this "
            "process) to the first RUNNING the client sees (it looks every "
            f"{c.poll_s:g} s) and to the job's own timestamp on its first line.",
            table(header, rows),
            "Where each job's time went, by the product's goodput timeline (`jobs.runs."
            "goodput`, what `vtx status` shows: from the job's createTime to its endTime, read "
            "off the platform's record of the job and its log lines; medians over the "
            "repetitions, in seconds). The job prints its first line, then the trainer's "
            f"progress lines for {STEPS} steps of 0.1 s: waiting for capacity is createTime to "
            "startTime, provisioning and container start is startTime to its first line, program "
            "start is from there to its `training` line (it imports only json), productive "
            "steps are its steps, and idle is from its last line to its endTime (the "
            "process's exit and the platform's record of it).",
            table(phase_header, phase_rows),
            f"The machine was shared while this ran (1-minute load average {load_before:.1f} "
            f"at the start, {load_average()[0]:.1f} at the end, on {os.cpu_count()} cores): "
            "sub-second figures here move with the other work on it.",
            f"Time to the first line, cold / warm (medians): **{ratio:.2f}x**. The local "
            "platform provisions no VMs: a cold job's process starts as soon as capacity "
            "admission lets it, so the minutes a cold Vertex job spends getting, booting and "
            "pulling onto a VM (what a warm pool saves) are not in this figure; it compares "
            "the local platform's two paths only." + spread,
        ]
    )
    return Section("Warm pool vs cold start on the local platform", c.command, body, raw)


def _phase_row(label: str, ts: list[Timing]) -> list[str]:
    """One variant's median seconds per category, its median wall time and goodput."""
    cells = [f"{statistics.median(t.phases_s[k] for t in ts):.2f}" for k in PHASES]
    wall = statistics.median(t.wall_s for t in ts)
    known = [t.goodput for t in ts if t.goodput is not None]
    goodput = f"{statistics.median(known):.0%}" if known else "unknown"
    return [label, *cells, f"{wall:.2f}", goodput]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=Config.reps)
    parser.add_argument("--poll-s", type=float, default=Config.poll_s)
    args = parser.parse_args()
    section = run(Config(reps=args.reps, poll_s=args.poll_s))
    print(section.markdown())
    print(json.dumps(section.raw))


if __name__ == "__main__":
    main()
