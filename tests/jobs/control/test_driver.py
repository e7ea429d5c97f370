"""The driver through the real clients against the local platform: run records written on
their generation in the GCS emulator, jobs created with the SDK and listed over REST. Each test
keeps its records in a bucket of its own (its stack's checkpoints bucket), so the platform's own
controller, which watches vtx-local-checkpoints, never touches them."""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from bench.controller import QUEUED_T4, HttpCalls
from jobs.control.driver import Driver
from jobs.control.record import RunRecord, record_of, vertex_of
from jobs.control.records import Conflict, Records
from jobs.core.stack import StackOutputs
from jobs.launch.plan import LaunchOptions, plan_launch
from jobs.spec.gcloud import load_template
from jobs.vertex.job_records import JobRecord
from jobs.vertex.rest import VertexRest
from tests.conftest import TEMPLATES
from tests.jobs.core.price_tables import stand_in_for_the_platform
from tests.jobs.local.local_helpers import capacity_platform, wait_for

SLEEPER = {
    "name": "ctl",
    "image": "trainer",
    "command": ["python", "-c", "import time; time.sleep(600)"],
    "pools": {"chief": {"machine": "n1-standard-4"}},
    "scheduling": {"timeout": "30m"},
}


def own_bucket(platform: StackOutputs) -> StackOutputs:
    """``platform``'s stack with a checkpoints bucket of its own, made here."""
    from jobs.vertex.google_session import storage_client

    bucket = f"vtx-ctl-{uuid.uuid4().hex[:12]}"
    storage_client(platform).create_bucket(bucket)
    buckets = platform.buckets.model_copy(update={"checkpoints": bucket})
    return platform.model_copy(update={"buckets": buckets})


@pytest.fixture
def stack(local_platform: StackOutputs) -> StackOutputs:
    """The local stack with a checkpoints bucket of this test's own."""
    return own_bucket(local_platform)


def planned(
    stack: StackOutputs,
    tmp_path: Path,
    run_id: str,
    budget_usd: float | None = None,
    accelerator: str | None = None,
) -> RunRecord:
    path = tmp_path / f"{run_id}.yaml"
    template = dict(SLEEPER)
    if budget_usd is not None:
        template["budget"] = {"max_cost_usd": budget_usd}
    if accelerator is not None:
        template["pools"] = {"chief": {"machine": "n1-standard-4", "accelerator": accelerator}}
    path.write_text(yaml.safe_dump(template))
    plan = plan_launch(load_template(path), stack, str(path), LaunchOptions(run_id=run_id))
    assert not plan.problems, plan.problems
    return record_of(plan)


@pytest.fixture
def cancel_after(stack: StackOutputs):
    rest = VertexRest(stack)
    runs: list[str] = []
    yield runs
    for run_id in runs:
        for job in rest.list(run_id):
            if not job.terminal:
                rest.cancel(job.name)


def test_a_record_is_written_only_on_the_generation_read(stack: StackOutputs, tmp_path: Path):
    records = Records(stack)
    record = planned(stack, tmp_path, "ctl-generations")
    first = records.create(record)
    with pytest.raises(Conflict):
        records.create(record)  # a run has one record
    second = records.write(record.model_copy(update={"stopping": "x"}), first)
    with pytest.raises(Conflict):
        records.write(record, first)  # stale: someone wrote since
    stored = records.read(record.run_id)
    assert stored is not None and stored.generation == second and stored.record.stopping == "x"
    assert [s.record.run_id for s in records.live()] == [record.run_id]


RACE_RUNS = 50


@pytest.fixture(scope="module")
def queued_platform(
    gcs_emulator: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[StackOutputs]:
    """A control plane of its own whose capacity model queues every T4 job."""
    data_dir = tmp_path_factory.mktemp("queued") / "platform"
    with capacity_platform(data_dir, gcs_emulator, QUEUED_T4) as platform:
        yield platform


@pytest.fixture
def queued_stack(queued_platform: StackOutputs) -> StackOutputs:
    """The queuing platform with a checkpoints bucket of this test's own (the platform's own
    controller watches another)."""
    return own_bucket(queued_platform)


def test_two_drivers_at_once_submit_each_attempt_once(
    queued_stack: StackOutputs, tmp_path: Path
) -> None:
    """50 live runs, two controllers passing over them at once, twice each: exactly one job per
    run, its marker the one the record claimed. The jobs ask for a T4 the capacity model never
    gives, so all 50 stay PENDING (live through every pass) without 50 replica processes on
    the machine, as jobs queued for capacity on Vertex hold no VM; the drivers' decisions are
    the same for a PENDING job as for a RUNNING one (watch it)."""
    stack = queued_stack
    records = Records(stack)
    run_ids = [f"ctl-race-{n}" for n in range(RACE_RUNS)]
    plans = [planned(stack, tmp_path, r, accelerator="NVIDIA_TESLA_T4") for r in run_ids]
    with ThreadPoolExecutor(8) as pool:  # the records' creates, batched
        list(pool.map(records.create, plans))
    drivers = [Driver(stack), Driver(stack)]
    start = threading.Barrier(len(drivers))
    conflicts: list[int] = []

    def passes(driver: Driver) -> None:
        start.wait()
        for _ in range(2):
            conflicts.append(driver.run_pass().conflicts)

    threads = [threading.Thread(target=passes, args=(d,)) for d in drivers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    jobs: dict[str, list[JobRecord]] = {r: [] for r in run_ids}
    for job in VertexRest(stack).list():
        jobs[job.run_id or ""].append(job)
    assert {r: len(found) for r, found in jobs.items()} == dict.fromkeys(run_ids, 1)
    for run_id in run_ids:
        (job,) = jobs[run_id]
        assert job.state == "JOB_STATE_PENDING" and job.labels["vtx-attempt"] == "a1"
        stored = records.read(run_id)
        assert stored is not None
        assert [(a.marker, a.job) for a in stored.record.attempts] == [("a1", job.name)]


VERTEX_CALLS = ("vertex list", "vertex create", "vertex get", "vertex cancel")


def test_a_pass_asks_vertex_one_listing_per_region_however_many_runs(
    queued_stack: StackOutputs, tmp_path: Path
) -> None:
    """Jobs are listed once a pass in each region and matched to the records by their run-id
    label: a submit reuses that listing (no listing of its run before the create), and a pass
    that only watches asks Vertex for the listings alone, for two runs as for five. Every
    HTTP request of this process is counted."""
    stack, calls = queued_stack, HttpCalls(queued_stack)
    records = Records(stack)
    regions = len(stack.job_regions)

    def counted(new: list[str]) -> dict[str, int]:
        for run_id in new:
            records.create(planned(stack, tmp_path, run_id, accelerator="NVIDIA_TESLA_T4"))
        with calls.counting() as counts:
            report = Driver(stack).run_pass()
        assert not report.errors and not report.conflicts, report
        return {k: counts[k] for k in VERTEX_CALLS if counts[k]} | {
            k: counts[k] for k in ("gcs list", "gcs write", "other")
        }

    # GCS writes: a submit's claim and its job's name; a record whose decision changed (a
    # submit's run now watched); one liveness object a pass (`Records.passed`), whatever else.
    two = counted(["ctl-count-0", "ctl-count-1"])  # both submitted
    assert two == {
        "vertex list": regions, "vertex create": 2, "gcs list": 1, "gcs write": 2 * 2 + 1,
        "other": 0,
    }  # fmt: skip
    five = counted(["ctl-count-2", "ctl-count-3", "ctl-count-4"])  # two watched, three new
    assert five == {
        "vertex list": regions, "vertex create": 3, "gcs list": 1, "gcs write": 3 * 2 + 2 + 1,
        "other": 0,
    }  # fmt: skip
    watched = counted([])  # all five watched, three of them for the first time
    assert watched == {"vertex list": regions, "gcs list": 1, "gcs write": 3 + 1, "other": 0}
    unchanged = counted([])  # five runs decided as the last pass did: no record rewritten
    assert unchanged == {"vertex list": regions, "gcs list": 1, "gcs write": 1, "other": 0}
    looked = records.last_pass()
    assert looked is not None and looked.runs == 5 and looked.vertex == vertex_of(stack)
    assert [len(VertexRest(stack).list(f"ctl-count-{n}")) for n in range(5)] == [1] * 5


def test_a_studys_submit_reuses_the_passs_listing(
    queued_stack: StackOutputs, tmp_path: Path
) -> None:
    """A study's submit refuses a run that already has a study or a job from the pass's own
    listing, as a CustomJob's submit does: the pass lists jobs and studies once per region,
    and nothing more before the create."""
    stack, calls = queued_stack, HttpCalls(queued_stack)
    doc = yaml.safe_load((TEMPLATES / "tiny-tune.yaml").read_text())
    # Trials that ask for a T4 the queuing platform never gives: they wait, holding nothing.
    doc["pools"] = {"chief": {"machine": "n1-standard-4", "accelerator": "NVIDIA_TESLA_T4"}}
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(doc))
    run_id = "ctl-study-count"
    plan = plan_launch(load_template(path), stack, str(path), LaunchOptions(run_id=run_id))
    assert not plan.problems and plan.study is not None, plan.problems
    Records(stack).create(record_of(plan))
    with calls.counting() as counts:
        report = Driver(stack).run_pass()
    rest = VertexRest(stack)
    studies = rest.list_studies(run_id)
    for study in studies:
        rest.cancel_study(study["name"])
    assert not report.errors and not report.conflicts, report
    assert len(studies) == 1
    regions = len(stack.job_regions)
    # One listing of customJobs and one of studies per region: the pass's, none per run.
    assert {k: counts[k] for k in VERTEX_CALLS if counts[k]} == {
        "vertex list": 2 * regions, "vertex create": 1
    }  # fmt: skip


def test_a_job_submitted_by_a_pass_that_died_before_its_write_is_adopted(
    stack: StackOutputs, tmp_path: Path, cancel_after: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = "ctl-adopt"
    cancel_after.append(run_id)
    records = Records(stack)
    records.create(planned(stack, tmp_path, run_id))

    class Killed(BaseException):
        """What kill -9 leaves: the job created, the record not written after it."""

    def killed(*args: object) -> None:
        raise Killed

    dying = Driver(stack)
    monkeypatch.setattr(dying, "record_job", killed)
    with pytest.raises(Killed):
        dying.run_pass()
    created = VertexRest(stack).list(run_id)
    assert len(created) == 1
    stored = records.read(run_id)
    assert stored is not None and stored.record.attempts[0].job is None
    report = Driver(stack).run_pass()
    assert any(line.startswith(f"adopt {created[0].name}") for line in report.actions[run_id])
    stored = records.read(run_id)
    assert stored is not None and stored.record.attempts[0].job == created[0].name
    wait_for(lambda: VertexRest(stack).get(created[0].name).state != "JOB_STATE_QUEUED")
    assert len(VertexRest(stack).list(run_id)) == 1


def test_a_broken_table_in_the_prices_folder_does_not_stop_the_budget(
    stack: StackOutputs, tmp_path: Path, cancel_after: list[str]
) -> None:
    # A list-shaped table and a FIFO beside a good stand-in table in the user's prices folder:
    # each is left out (a FIFO read would hang the pass); the good one still prices the run.
    run_id = "ctl-broken-prices"
    cancel_after.append(run_id)
    folder = Path(os.environ["VTX_PRICES_DIR"])
    broken = [folder / "billing-training-us-central1-2099-01-06.yaml", folder / "fifo.yaml"]
    records = Records(stack)
    driver = Driver(stack)
    with stand_in_for_the_platform({"us-central1": (36.0, 9.0)}, "2099-01-05"):  # 1 cent a s
        broken[0].write_text("- not\n- a table\n")
        os.mkfifo(broken[1])
        try:
            records.create(planned(stack, tmp_path, run_id, budget_usd=0.000002))
            rest = VertexRest(stack)

            def stopped() -> RunRecord | None:
                driver.run_pass()
                stored = records.read(run_id)
                return stored.record if stored and stored.record.outcome else None

            record = wait_for(stopped)
        finally:
            for path in broken:
                path.unlink(missing_ok=True)
    assert record.outcome is not None and record.outcome.state == "CANCELLED"
    assert "crossed budget.max_cost_usd $0.000002" in (record.outcome.reason or "")
    assert [j.state for j in rest.list(run_id)] == ["JOB_STATE_CANCELLED"]


def test_a_record_that_is_none_is_reported_and_the_other_runs_go_on(
    stack: StackOutputs, tmp_path: Path, cancel_after: list[str]
) -> None:
    """A record that does not parse is one run's trouble: the pass names it and walks the
    others, as it does a run whose Vertex call failed."""
    from jobs.control.records import record_path
    from jobs.vertex.google_session import storage_client

    cancel_after.append("ctl-beside-broken")
    records = Records(stack)
    records.create(planned(stack, tmp_path, "ctl-beside-broken"))
    bucket = storage_client(stack).bucket(stack.buckets.checkpoints)
    bucket.blob(record_path("ctl-broken")).upload_from_string("{not json")
    report = Driver(stack).run_pass()
    assert len(report.errors) == 1 and report.errors[0].startswith("ctl-broken: gs://")
    assert "is not a vtx run record" in report.errors[0]
    assert report.actions["ctl-beside-broken"][0].startswith("submit ")
    assert len(VertexRest(stack).list("ctl-beside-broken")) == 1
