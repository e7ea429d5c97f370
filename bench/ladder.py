"""Time to capacity under a Spot stockout: `vtx launch` walking a capacity ladder, against a user
resubmitting the same Spot job, on the local platform with a capacity model.

The model (as `vtx local up --capacity FILE` takes it) stocks out Spot L4s in us-central1 and
gives the on-demand A100 quota a limit of zero there. The job is not the trainer: one line of
Python that prints `first step` and sleeps half a second, so that what is timed is getting a
machine, not importing torch.

- **ladder**: `vtx launch` of a template whose rung 1 is one Spot L4 and whose rung 2 is the same
  job on-demand (`capacity.ladder: [{set: {scheduling.strategy: standard}}]`).
- **single-rung retry**: what a user without a ladder does. `vtx launch` the Spot template, watch
  it (polling as often as the ladder does) until it fails with STOCKOUT, wait a fixed backoff and
  resubmit, `retries` times; then switch by hand to on-demand (`vtx launch` of the same job with
  `scheduling.strategy: standard`, same run id). The human's own reaction time is counted as 0,
  so this is the retry path's best case.

Both are measured from the launch call (in this process, through `jobs.launch`, what `vtx launch
--yes` runs, after a warm-up launch so that no repetition pays the SDK's import) to (a) the first
RUNNING the client sees and (b) the timestamp of the job's `first step` line. Variants alternate,
one run id each.

The per-rung decision on a zero-quota rung is what `vtx launch` does before submitting anything:
the live quota preflight (`jobs.quota.cloud_quotas.preflight`: Cloud Quotas' quotaInfos and the
region's jobs,
two GETs, here to the local platform) whose over-limit verdict skips the rung; timed alone (a new
HTTP session each time, as each launch has) and as the rung's whole planning
(`jobs.launch.plan.plan_rungs`: compile, check, price, preflight).

    python -m bench.ladder [--reps R] [--retries N] [--backoff-s B] [--poll-s P]
                           [--decision-reps D]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from bench.common import REPO, Section, Summary, rotated, summarize, table
from jobs.core.stack import StackOutputs
from jobs.core.states import is_placed

# gcsfs reads this when imported: the emulator speaks JSON only (see tests/conftest.py).
os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")

A100_ON_DEMAND = "aiplatform.googleapis.com/custom_model_training_nvidia_a100_gpus"
MODEL = {
    "regions": {
        "us-central1": {
            "accelerators": {"NVIDIA_L4": {"spot_stockout": True}},
            "quotas": {A100_ON_DEMAND: 0},
        }
    }
}
"""Spot L4s stock out and the on-demand A100 quota is zero, in the region the platform runs."""
FIRST_LINE = "first step"
BASE = {
    "name": "bench-ladder",
    "image": "trainer",
    "command": ["python", "-c", f"import time; print({FIRST_LINE!r}, flush=True); time.sleep(0.5)"],
    "pools": {"chief": {"machine": "g2-standard-4"}},
    "scheduling": {"strategy": "spot", "timeout": "10m"},
}
"""One Spot L4 (rung 1 of the ladder; the job the retrying user resubmits)."""
ON_DEMAND = {**BASE, "scheduling": {"strategy": "standard", "timeout": "10m"}}
LADDER = {**BASE, "capacity": {"ladder": [{"set": {"scheduling.strategy": "standard"}}]}}
ZERO_QUOTA = {**ON_DEMAND, "pools": {"chief": {"machine": "a2-highgpu-1g"}}}
"""One on-demand A100, whose quota limit is zero: the rung the preflight skips."""


@dataclass(frozen=True)
class Config:
    reps: int = 3
    """Repetitions of each variant."""
    retries: int = 2
    """How many times the retrying user resubmits the stocked-out Spot job before switching."""
    backoff_s: float = 5.0
    """The retrying user's fixed wait between a stockout and the resubmission (kept short so the
    bench stays bounded; a person or a cron retry waits minutes)."""
    poll_s: float = 0.5
    """How often both variants look at the job (`vtx launch --poll-s`; its default is 5 s)."""
    decision_reps: int = 10
    """Repetitions of the zero-quota rung's decision."""

    @property
    def command(self) -> str:
        return (
            f"python -m bench.ladder --reps {self.reps} --retries {self.retries} "
            f"--backoff-s {self.backoff_s:g} --poll-s {self.poll_s:g} "
            f"--decision-reps {self.decision_reps}"
        )


@dataclass
class Platform:
    """A running local platform and what launching on it needs."""

    stack: StackOutputs
    stack_file: Path
    templates: dict[str, Path]
    endpoint: str
    token: str


@dataclass(frozen=True)
class Timing:
    to_running_s: float
    """`vtx launch` called -> the client sees a RUNNING (or already SUCCEEDED) attempt."""
    to_first_line_s: float
    """`vtx launch` called -> the job's own timestamp on its first output line."""
    attempts: int
    waited_s: float
    """Of which the retrying user's backoff sleeps (0 for the ladder)."""


def _ts(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def launch(p: Platform, template: str, run_id: str, poll_s: float) -> str:
    """What `vtx launch TEMPLATE --yes --run-id RUN_ID --poll-s POLL_S` runs, through
    `jobs.launch`: the template checked, planned and walked; each move's line (a ladder's moves
    say their reasons); raises when the launch ends with a non-zero exit code."""
    from jobs.launch.checks import checked_template
    from jobs.launch.plan import LaunchOptions, plan_launch, stack_region
    from jobs.launch.run import Event, Failed, MovedOn, Placed, Runner, Submitted, drive
    from jobs.spec.document import load_document
    from jobs.vertex.client import Vertex

    path = p.templates[template]
    checked, problems = checked_template(load_document(path, []), stack_region(p.stack))
    if checked is None:
        raise RuntimeError(f"{path}: {problems}")
    options = LaunchOptions(run_id=run_id, poll_s=poll_s)
    plan = plan_launch(checked, p.stack, str(path), options)
    if plan.problems or plan.refusal:
        raise RuntimeError(f"{path}: not submitted: {plan.problems or plan.refusal}")
    said: list[str] = []

    def show(event: Event) -> None:
        match event:
            case Submitted(rung, name, attempt):
                said.append(f"{rung.label}: submitted {name} (attempt {attempt})")
            case MovedOn(rung, reason, _, _):
                said.append(f"{rung.label}: {reason}")
            case Placed(rung, succeeded):
                said.append(f"{rung.label}: {'succeeded' if succeeded else 'running'}")
            case Failed(message):
                said.append(f"run failed: {message}")

    code = drive(Runner(plan, Vertex(p.stack), poll_s=poll_s).events(), show)
    out = "\n".join(said)
    if code != 0:
        raise RuntimeError(f"launch of {path} exited {code}:\n{out}")
    return out


def _until(check: Callable[[], Any], poll_s: float, timeout_s: float = 120.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(poll_s)
    raise TimeoutError(f"nothing after {timeout_s:.0f} s")


def _first_line_at(p: Platform, run_id: str) -> float:
    from jobs.local.plumbing.client import read_logs

    def found() -> float | None:
        entries = read_logs(p.endpoint, p.token, run_id=run_id)["entries"]
        return next((_ts(e["timestamp"]) for e in entries if e["message"] == FIRST_LINE), None)

    return _until(found, 0.1)


def _settle(p: Platform, run_id: str) -> None:
    """Wait for every attempt of the run to end, so that the next repetition finds an idle
    platform."""
    from jobs.vertex.rest import VertexRest

    rest = VertexRest(p.stack)
    _until(lambda: all(j.terminal for j in rest.list(run_id)), 0.2)


def ladder_once(p: Platform, run_id: str, poll_s: float) -> Timing:
    t0 = time.time()
    out = launch(p, "ladder", run_id, poll_s)  # returns once an attempt runs (or succeeded)
    to_running = time.time() - t0
    if "STOCKOUT" not in out:
        raise RuntimeError(f"the ladder did not meet the stockout:\n{out}")
    first = _first_line_at(p, run_id) - t0
    _settle(p, run_id)
    return Timing(to_running, first, attempts=2, waited_s=0.0)


def _watch(p: Platform, run_id: str, poll_s: float) -> str:
    """The newest attempt's state once it is placed or has ended, polled as the ladder polls."""
    from jobs.vertex.rest import VertexRest

    rest = VertexRest(p.stack)

    def settled() -> str | None:
        newest = rest.list(run_id)[0]
        return newest.state if is_placed(newest.state) or newest.terminal else None

    return _until(settled, poll_s)


def retry_once(p: Platform, run_id: str, poll_s: float, retries: int, backoff_s: float) -> Timing:
    t0, waited = time.time(), 0.0
    for attempt in range(1, retries + 2):
        launch(p, "spot", run_id, poll_s)
        state = _watch(p, run_id, poll_s)
        if is_placed(state):  # Spot came back: never here under this model
            break
        if attempt <= retries:
            time.sleep(backoff_s)
            waited += backoff_s
    else:
        attempt += 1
        launch(p, "on_demand", run_id, poll_s)  # the switch by hand, after the last retry
        state = _watch(p, run_id, poll_s)
    if not is_placed(state):
        raise RuntimeError(f"retry path ended {state}")
    to_running = time.time() - t0
    first = _first_line_at(p, run_id) - t0
    _settle(p, run_id)
    return Timing(to_running, first, attempt, waited)


def decision_times(p: Platform, reps: int) -> tuple[list[float], list[float], str]:
    """Seconds to decide to skip the zero-quota rung: the preflight alone, and the rung's whole
    planning; the reason `vtx launch` prints."""
    from jobs.core.catalog import load_catalog
    from jobs.launch.plan import plan_rungs
    from jobs.quota.cloud_quotas import QuotaReader, preflight
    from jobs.spec.template import JobTemplate

    source = str(p.templates["zero_quota"])
    template = JobTemplate.from_document(ZERO_QUOTA, source)
    catalog = load_catalog()
    preflights, plannings, reason = [], [], ""
    for i in range(reps):
        start = time.perf_counter()
        rungs, problems = plan_rungs(
            template, p.stack, f"bench-quota-{i}", source, QuotaReader(p.stack)
        )
        plannings.append(time.perf_counter() - start)
        if problems or not rungs[0].hopeless:
            raise RuntimeError(f"the zero-quota rung was not skipped: {problems or rungs}")
        reason = rungs[0].hopeless
        plan = rungs[0].plan
        start = time.perf_counter()
        check = preflight(plan.quota, plan.cost.region, QuotaReader(p.stack), catalog)
        preflights.append(time.perf_counter() - start)
        if not check.over_limit:
            raise RuntimeError(f"the preflight did not find the zero quota: {check}")
    return preflights, plannings, reason


def start(tmp: Path) -> tuple[Platform, Path]:
    from jobs.local.platform.capacity import Capacity
    from jobs.local.platform.settings import LocalSettings
    from jobs.local.platform.state import stack_outputs_for
    from jobs.local.plumbing.ports import free_port
    from jobs.local.plumbing.processes import start_fresh

    data_dir = tmp / "platform"
    settings = LocalSettings(
        data_dir=data_dir,
        cwd=REPO,
        port=free_port(),
        gcs_port=free_port(),
        grace_s=2.0,
        capacity=Capacity.model_validate(MODEL),
    )
    state = start_fresh(settings)
    stack = stack_outputs_for(state)
    stack_file = tmp / "stack.json"
    stack_file.write_text(stack.model_dump_json())
    templates = {}
    for name, doc in {
        "ladder": LADDER,
        "spot": BASE,
        "on_demand": ON_DEMAND,
        "zero_quota": ZERO_QUOTA,
    }.items():
        templates[name] = tmp / f"{name}.yaml"
        templates[name].write_text(yaml.safe_dump(doc))
    return Platform(stack, stack_file, templates, state.vertex_endpoint, state.token), data_dir


def measure(p: Platform, c: Config) -> dict[str, list[Timing]]:
    """Both variants, alternated, after one warm-up launch (not counted) that pays the SDK's
    import and the first connections."""
    launch(p, "on_demand", "bench-warmup", c.poll_s)
    _settle(p, "bench-warmup")
    timings: dict[str, list[Timing]] = {"ladder": [], "retry": []}
    for rep in range(c.reps):
        for variant in rotated(list(timings), rep):
            run_id = f"bench-{variant}-{rep}"
            if variant == "ladder":
                timings[variant].append(ladder_once(p, run_id, c.poll_s))
            else:
                timings[variant].append(retry_once(p, run_id, c.poll_s, c.retries, c.backoff_s))
    return timings


def _n(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _cells(values: Summary) -> list[str]:
    return values.cells("{:.2f}")


def run(c: Config) -> Section:
    from jobs.local.plumbing.processes import stop_platform

    with tempfile.TemporaryDirectory() as tmp:
        platform, data_dir = start(Path(tmp))
        try:
            timings = measure(platform, c)
            preflights, plannings, reason = decision_times(platform, c.decision_reps)
        finally:
            stop_platform(data_dir)
    raw: dict[str, Any] = {v: [t.__dict__ for t in ts] for v, ts in timings.items()}
    raw |= {"preflight_s": preflights, "planning_s": plannings}
    body = "\n\n".join(
        [*_walk_part(timings, c), *_decision_part(preflights, plannings, reason), _meaning(c)]
    )
    title = "Capacity ladder vs single-rung retry under a Spot stockout"
    return Section(title, c.command, body, raw)


def _walk_part(timings: dict[str, list[Timing]], c: Config) -> list[str]:
    labels = {
        "ladder": "ladder: rung 1 Spot, rung 2 on-demand",
        "retry": f"single-rung retry: Spot, {_n(c.retries, 'resubmission')} {c.backoff_s:g} s "
        "apart, then on-demand by hand",
    }
    rows = []
    medians: dict[str, float] = {}
    for variant, ts in timings.items():
        running = summarize([t.to_running_s for t in ts])
        first = summarize([t.to_first_line_s for t in ts])
        busy = summarize([t.to_first_line_s - t.waited_s for t in ts])
        medians[variant] = first.median
        medians[f"{variant} busy"] = busy.median
        rows.append([labels[variant], ts[0].attempts, *_cells(running), *_cells(first)])
        rows[-1].append(f"{busy.median:.2f}")
    header = ["variant", "attempts", "to RUNNING min s", "median s", "max s"]
    header += ["to first line min s", "median s", "max s", "first line less backoffs, median s"]
    extra = (medians["retry busy"] - medians["ladder busy"]) / max(c.retries, 1)
    return [
        f"{_n(c.reps, 'repetition')} x 2 variants, alternated (one run id each), after one "
        "warm-up launch (not counted, it pays the SDK's import); seconds from the `vtx launch` "
        "call (in this process) to the first RUNNING the client sees and to the job's own "
        f"timestamp on its first line (`{FIRST_LINE}`; the job then sleeps 0.5 s). The capacity "
        "model stocks out Spot L4s in us-central1. Both variants look at the job every "
        f"{c.poll_s:g} s. The retry variant is modelled as a user without a ladder: `vtx launch` "
        f"the Spot job, watch it fail with STOCKOUT, wait {c.backoff_s:g} s and resubmit it (same "
        f"run id); after {_n(c.retries, 'resubmission')}, `vtx launch` the on-demand job; the "
        "person's own reaction time counts as 0 (its best case). The first line can come before "
        "the RUNNING the client sees: the client looks once per poll.",
        table(header, rows),
        "Time to the first line, single-rung retry / ladder (medians): "
        f"**{medians['retry'] / medians['ladder']:.1f}x**, most of it the modelled backoffs "
        f"({c.retries} x {c.backoff_s:g} s, a choice of this bench); less the backoffs "
        f"{medians['retry busy'] / medians['ladder busy']:.1f}x: each extra round of submit, "
        f"watch and stockout costs about {extra:.2f} s here.",
    ]


def _decision_part(preflights: list[float], plannings: list[float], reason: str) -> list[str]:
    pre, plan = summarize(preflights), summarize(plannings)
    rows = [
        ["preflight alone: quotaInfos + the region's jobs, a new HTTP session", len(preflights)],
        ["the rung's whole planning: compile, check, price, preflight", len(plannings)],
    ]
    rows[0] += pre.cells("{:.3f}")
    rows[1] += plan.cells("{:.3f}")
    aim = "met" if plan.max <= 1.0 else "not met"
    return [
        "Deciding to skip a rung whose quota limit is zero (one on-demand A100; the model's "
        "A100 quota in us-central1 is 0), before anything is submitted:",
        table(["zero-quota rung", "reps", "min s", "median s", "max s"], rows),
        f"The skip reason `vtx launch` prints: `{reason}`. Aim, at most 1 s per rung (max over "
        f"repetitions of the whole planning): {aim} ({plan.max:.3f} s).",
    ]


def _meaning(c: Config) -> str:
    return (
        "What it means: the ladder pays one stockout and moves on by itself, under the same run "
        f"id; the retrying user pays {c.retries + 1} stockouts, {_n(c.retries, 'backoff')} and a "
        "switch by hand. What is modelled and what is not: the local platform has no "
        "provisioning delay (a Spot L4 job fails with STOCKOUT at the executor's next tick, "
        "0.2 s; an on-demand job starts a local process at once), so the figures are vtx's own "
        "cost (planning, quota preflight, submit, polling) plus the modelled backoffs. Not "
        "modelled, and not measured here: how long Vertex takes to report a Spot stockout or to "
        "provision VMs, the person's reaction time, a backoff of realistic length, and Spot "
        "capacity coming back during the retries (under this model it never does). On Vertex "
        "the retry path costs about (retries + 1) x (time to a stockout) + retries x backoff + "
        "the switch, the ladder one time to a stockout: the gap grows with each of those, which "
        "this local run cannot size. The zero-quota decision is two GETs to the local platform; "
        "against Google it is the same two GETs (Cloud Quotas, Vertex) over the network, not "
        "measured here, and it replaces submitting a job only to have it refused."
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=Config.reps)
    parser.add_argument("--retries", type=int, default=Config.retries)
    parser.add_argument("--backoff-s", type=float, default=Config.backoff_s)
    parser.add_argument("--poll-s", type=float, default=Config.poll_s)
    parser.add_argument("--decision-reps", type=int, default=Config.decision_reps)
    a = parser.parse_args()
    config = Config(a.reps, a.retries, a.backoff_s, a.poll_s, a.decision_reps)
    print(run(config).markdown())


if __name__ == "__main__":
    main()
