"""The controller's pass at scale: one `jobs.control.driver.Driver` pass over many live runs on
the local platform, its seconds and the API calls it makes.

The platform gets a capacity model with no on-demand T4 in us-central1, so every run's job (one
n1-standard-4 with a T4) is created and then waits PENDING: a live run through every pass, as a
job queued for capacity on Vertex, and no replica process per run on the machine. The records
live in a bucket of the bench's own, so the platform's own controller (which watches
vtx-local-checkpoints) never touches them.

- **submit pass**: the first pass over N new records: each run's first attempt claimed in its
  record, created, and its job's name written back.
- **watch pass**: each further pass over the same N live runs: every run decided again (its job
  PENDING: wait); a record is written only when its decision changed (the first watch pass
  after the submit), and each pass writes the controller's liveness, one object.

Every HTTP request this process makes is counted by kind (`HttpCalls`, around
`requests.Session.request`, which both google-cloud-storage and the SDK's REST transport go
through): Vertex listings (pages), creates, gets and cancels; GCS listings, reads and writes.
The aim is Vertex listings per region per pass, never per run.

    python -m bench.controller [--runs N] [--reps R]
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from bench.common import REPO, Section, count_of, rotated, summarize, table
from jobs.core.stack import StackOutputs

QUEUED_T4 = {"regions": {"us-central1": {"accelerators": {"NVIDIA_TESLA_T4": {"on_demand": 0}}}}}
"""No on-demand T4 to give in us-central1: every T4 job waits PENDING."""
JOB = {
    "name": "bench-ctl",
    "image": "trainer",
    "command": ["python", "-c", "print('never starts')"],
    "pools": {"chief": {"machine": "n1-standard-4", "accelerator": "NVIDIA_TESLA_T4"}},
    "scheduling": {"timeout": "1h"},
}
KINDS = (
    "vertex list",
    "vertex create",
    "vertex get",
    "vertex cancel",
    "gcs list",
    "gcs read",
    "gcs write",
    "other",
)


class HttpCalls:
    """Every HTTP request made in this process while ``counting()``, by kind (`kind_of`)."""

    def __init__(self, stack: StackOutputs) -> None:
        self.vertex = urlsplit(stack.vertex_endpoint or "").netloc
        self.gcs = urlsplit(stack.gcs_endpoint or "").netloc
        self.counts: Counter[str] = Counter()

    def kind_of(self, method: str, url: str) -> str:
        parts = urlsplit(url)
        path, method = parts.path, method.upper()
        if parts.netloc == self.vertex:
            if path.endswith(":cancel"):
                return "vertex cancel"
            if path.endswith(("/customJobs", "/hyperparameterTuningJobs")):
                return "vertex list" if method == "GET" else "vertex create"
            return "vertex get" if method == "GET" else "other"
        if parts.netloc == self.gcs:
            if method == "GET" and path.endswith("/o"):
                return "gcs list"
            if method == "GET":
                return "gcs read"
            if method in ("POST", "PUT", "PATCH"):
                return "gcs write"
        return "other"

    @contextmanager
    def counting(self) -> Iterator[Counter[str]]:
        """The counts of the requests made inside the block (a fresh Counter)."""
        import requests

        original = requests.Session.request
        counts: Counter[str] = Counter()

        def counted(session: Any, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
            counts[self.kind_of(method, url)] += 1
            return original(session, method, url, *args, **kwargs)

        requests.Session.request = counted  # type: ignore[method-assign]
        try:
            yield counts
        finally:
            requests.Session.request = original  # type: ignore[method-assign]
            self.counts.update(counts)


@dataclass(frozen=True)
class PassFigures:
    kind: str
    workers: int
    runs: int
    seconds: float
    calls: dict[str, int]
    conflicts: int
    errors: int


def start(tmp: Path, runs: int) -> tuple[StackOutputs, Path]:
    """A local platform with the queuing capacity model, room in its replica slots for every
    run's job, and its stack with a checkpoints bucket of the bench's own."""
    from jobs.local.platform.capacity import Capacity
    from jobs.local.platform.settings import LocalSettings
    from jobs.local.platform.state import stack_outputs_for
    from jobs.local.plumbing.ports import free_port
    from jobs.local.plumbing.processes import start_fresh
    from jobs.vertex.google_session import storage_client

    data_dir = tmp / "platform"
    settings = LocalSettings(
        data_dir=data_dir,
        cwd=REPO,
        port=free_port(),
        gcs_port=free_port(),
        grace_s=2.0,
        max_replicas=max(runs, 8),  # no job held in the platform's own FIFO: all wait on a T4
        capacity=Capacity.model_validate(QUEUED_T4),
    )
    stack = stack_outputs_for(start_fresh(settings))
    bucket = f"vtx-bench-ctl-{uuid.uuid4().hex[:8]}"
    storage_client(stack).create_bucket(bucket)
    buckets = stack.buckets.model_copy(update={"checkpoints": bucket})
    return stack.model_copy(update={"buckets": buckets}), data_dir


def create_records(stack: StackOutputs, tmp: Path, runs: int) -> None:
    """``runs`` records as `vtx launch` writes them: each run planned (compiled, checked,
    priced, its quota preflighted) under its own run id; the writes batched."""
    from jobs.control.record import record_of
    from jobs.control.records import Records
    from jobs.launch.plan import LaunchOptions, plan_launch
    from jobs.spec.gcloud import load_template

    path = tmp / "job.yaml"
    path.write_text(yaml.safe_dump(JOB))
    template = load_template(path)
    records = []
    for n in range(runs):
        plan = plan_launch(template, stack, str(path), LaunchOptions(run_id=f"bench-ctl-{n}"))
        if plan.problems or plan.refusal:
            raise RuntimeError(f"not planned: {plan.problems or plan.refusal}")
        records.append(record_of(plan))
    store = Records(stack)
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(store.create, records))


def one_pass(stack: StackOutputs, calls: HttpCalls, kind: str, workers: int) -> PassFigures:
    """One pass of a fresh `Driver` (as each Scheduler call makes), timed and counted."""
    from jobs.control.driver import Driver

    with calls.counting() as counts:
        start = time.perf_counter()
        report = Driver(stack, workers=workers).run_pass()
        seconds = time.perf_counter() - start
    return PassFigures(
        kind, workers, report.runs, seconds, dict(counts), report.conflicts, len(report.errors)
    )


def measure(runs: int, reps: int) -> tuple[list[PassFigures], int]:
    """The submit pass, then ``reps`` watch passes of each worker count, alternated; the
    stack's job regions."""
    from jobs.control.driver import PASS_WORKERS
    from jobs.local.plumbing.processes import stop_platform
    from jobs.vertex.client import Vertex

    with tempfile.TemporaryDirectory() as tmp:
        stack, data_dir = start(Path(tmp), runs)
        try:
            create_records(stack, Path(tmp), runs)
            assert Vertex(stack).client  # the SDK's import, paid before any pass is timed
            calls = HttpCalls(stack)
            figures = [one_pass(stack, calls, "submit", PASS_WORKERS)]
            for rep in range(reps):
                for workers in rotated([PASS_WORKERS, 1], rep):
                    figures.append(one_pass(stack, calls, "watch", workers))
        finally:
            stop_platform(data_dir)
    return figures, len(stack.job_regions)


def _row(passes: list[PassFigures]) -> list[Any]:
    seconds = summarize([f.seconds for f in passes])
    first = passes[0]
    calls = passes[-1].calls
    return [
        f"{first.kind}, {count_of(first.workers, 'worker')} ({len(passes)} x)",
        first.runs,
        *seconds.cells("{:.1f}"),
        f"{1000 * seconds.median / max(first.runs, 1):.1f}",
        *(calls.get(k, 0) for k in KINDS),
        sum(f.conflicts for f in passes),
        sum(f.errors for f in passes),
    ]


def run(runs: int = 1000, reps: int = 3) -> Section:
    figures, regions = measure(runs, reps)
    groups: dict[tuple[str, int], list[PassFigures]] = {}
    for f in figures:
        groups.setdefault((f.kind, f.workers), []).append(f)
    header = ["pass", "live runs", "min s", "median s", "max s", "ms per run (median)"]
    header += [*KINDS, "conflicts", "errors"]
    watch = [f for f in figures if f.kind == "watch"]
    many = [f for f in watch if f.workers > 1]
    one = [f for f in watch if f.workers == 1]
    ratio = summarize([f.seconds for f in one]).median / summarize([f.seconds for f in many]).median
    lists = {f.calls.get("vertex list", 0) for f in watch}
    per_run = max(sum(f.calls.get(k, 0) for k in ("vertex create", "vertex get")) for f in watch)
    writes = watch[-1].calls.get("gcs write", 0)
    gcs_lists = watch[-1].calls.get("gcs list", 0)
    one_median = summarize([f.seconds for f in one]).median
    body = "\n\n".join(
        [
            f"One `Driver` pass over {runs} live runs on the local platform, a fresh driver per "
            "pass (as each of Cloud Scheduler's calls makes one): the submit pass (each run's "
            f"first attempt claimed, created, recorded), then {count_of(reps, 'repetition')} "
            f"of a watch pass with the driver's {many[0].workers} workers and with one, "
            "alternated, over the same runs, their jobs PENDING (the capacity model has no T4 "
            "to give, so no replica runs). Calls: every HTTP request of the bench's process, "
            "by kind (Vertex listings per page, GCS per request; `gcs read` counts the records "
            "and one read of the bucket); the calls columns are the last pass's of its row. "
            f"The stack has {count_of(regions, 'job region')}; a listing page holds up to 100 "
            "jobs. Servers: the local platform's control plane and GCS emulator, on the same "
            "2 shared cores.",
            table(header, [_row(g) for g in groups.values()]),
            f"Each watch pass asked Vertex {' or '.join(map(str, sorted(lists)))} listing pages "
            f"({count_of(regions, 'region')}, {runs} jobs at up to 100 a page: per region, not "
            f"per run) and at most {per_run} creates or gets. GCS is asked for the records' "
            f"listing ({count_of(gcs_lists, 'page')}), then once per run for its record; a "
            "record is written only when something in it changed (the first watch pass after "
            "the submit: the decision went from submit to watch), so an unchanged pass writes "
            f"{writes} object(s), the controller's liveness. One worker / {many[0].workers} "
            f"workers, watch pass (medians): **{ratio:.1f}x**.",
            "What it means: the minute's Scheduler call on GCP has to finish one pass within "
            "its minute. A run's time in a pass is almost all waiting on GCS (its record read, "
            "and written on its generation when it changed), so the runs are reconciled "
            "several at once; Vertex sees the same few listings whatever the number of runs. "
            "With one worker a pass takes the runs times a read's round trip (and a write's "
            f"for each changed record): {one_median:.0f} s here for {runs} runs, against the "
            "minute.",
        ]
    )
    raw = {"runs": runs, "regions": regions, "passes": [f.__dict__ for f in figures]}
    return Section(
        f"Controller: one pass over {runs} live runs",
        f"python -m bench.controller --runs {runs} --reps {reps}",
        body,
        raw,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    print(run(args.runs, args.reps).markdown())


if __name__ == "__main__":
    main()
