"""Vertex's job semantics on local processes: concurrency, failures, timeouts, cancel with
SIGKILL escalation, and restarts after a preemption (one worker or the whole job)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from jobs.core.stack import StackOutputs
from jobs.local.custom_jobs.lifecycle import PREEMPTION_EXITS_NOTE
from tests.jobs.local.custom_jobs.executor_helpers import SLEEP, service_lines
from tests.jobs.local.local_helpers import (
    PARENT,
    RESTARTS_THEN_SUCCEEDS,
    client,
    custom_job,
    logs,
    pool,
    post,
    replica_output,
    wait_for,
    wait_terminal,
)


def test_twenty_concurrent_jobs_are_all_accounted_for(local_platform: StackOutputs) -> None:
    jobs = client(local_platform.vertex_endpoint)
    label = {"vtx-run-id": "twenty"}

    def submit(i: int) -> str:
        job = custom_job(f"c{i}", pool(f"print('job {i}')"), labels=label)
        return jobs.create_custom_job(parent=PARENT, custom_job=job).name

    with ThreadPoolExecutor(max_workers=20) as pool_:
        names = list(pool_.map(submit, range(20)))

    assert len(set(names)) == 20
    finished = [wait_terminal(jobs, name) for name in names]
    assert [j.state for j in finished] == [4] * 20
    for i, name in enumerate(names):
        assert replica_output(local_platform, name, "workerpool0-0") == [f"job {i}"]
    listed = jobs.list_custom_jobs(
        request={"parent": PARENT, "filter": 'labels.vtx-run-id="twenty"'}
    )
    assert {j.name for j in listed} == set(names)
    # One run id covers all twenty jobs' logs.
    entries = logs(local_platform, run_id="twenty")["entries"]
    assert {e["job"] for e in entries if e["replica"] == "workerpool0-0"} == set(names)


def test_worker_exiting_nonzero_fails_the_job_and_stops_the_primary(
    local_platform: StackOutputs,
) -> None:
    jobs = client(local_platform.vertex_endpoint)
    job = jobs.create_custom_job(
        parent=PARENT, custom_job=custom_job("fail", pool(SLEEP), pool("exit(3)"))
    )
    done = wait_terminal(jobs, job.name)
    assert done.state == 5  # FAILED
    assert "workerpool1-0 exited with a non-zero status of 3" in done.error.message
    service = service_lines(local_platform, job.name)
    assert "workerpool0-0 exited with code 143" in service  # stopped by SIGTERM


def test_timeout_fails_the_job(local_platform: StackOutputs) -> None:
    jobs = client(local_platform.vertex_endpoint)
    job = jobs.create_custom_job(
        parent=PARENT, custom_job=custom_job("slow", pool(SLEEP), scheduling={"timeout": "1s"})
    )
    done = wait_terminal(jobs, job.name)
    assert done.state == 5
    assert done.error.code == 4  # DEADLINE_EXCEEDED
    assert "timeout" in done.error.message


def test_cancel_escalates_to_sigkill_when_sigterm_is_ignored(local_platform: StackOutputs) -> None:
    stubborn = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print('up', flush=True); time.sleep(600)"
    )
    jobs = client(local_platform.vertex_endpoint)
    job = jobs.create_custom_job(parent=PARENT, custom_job=custom_job("stubborn", pool(stubborn)))
    wait_for(lambda: replica_output(local_platform, job.name, "workerpool0-0"))
    jobs.cancel_custom_job(name=job.name)
    assert jobs.get_custom_job(name=job.name).state in (6, 7)  # CANCELLING, then CANCELLED
    done = wait_terminal(jobs, job.name)
    assert done.state == 7
    service = service_lines(local_platform, job.name)
    assert "workerpool0-0 still running after grace: SIGKILL" in service
    assert "workerpool0-0 exited with code 137" in service


COLLECTIVE_STOP = """
import json, os, pathlib, signal, sys, time
drill = pathlib.Path(os.environ["DRILL_DIR"])
me = json.loads(os.environ["CLUSTER_SPEC"])["task"]["type"]
starts = drill / f"{me}.starts"
previous = starts.read_text().count("x") if starts.exists() else 0
starts.write_text("x" * (previous + 1))
if previous:
    if me == "workerpool0":
        worker = drill / "workerpool1.starts"
        while worker.read_text().count("x") < 2:  # finish only once the worker is back
            time.sleep(0.05)
        print("resumed and finished", flush=True)
        sys.exit(0)
    time.sleep(600)
stop = drill / "stop"
def on_term(*_):
    stop.write_text("stop")
    sys.exit(143)
signal.signal(signal.SIGTERM, on_term)
print("ready", flush=True)
while not stop.exists():
    time.sleep(0.05)
sys.exit(143)
"""


@pytest.mark.parametrize("whole_job", [False, True], ids=["worker-restart", "job-restart"])
def test_preemption_restarts_and_collective_exits_do_not_fail_the_job(
    local_platform: StackOutputs, tmp_path: Path, whole_job: bool
) -> None:
    endpoint = local_platform.vertex_endpoint
    jobs = client(endpoint)
    env = {"DRILL_DIR": str(tmp_path)}
    job = jobs.create_custom_job(
        parent=PARENT,
        custom_job=custom_job(
            "drill",
            pool(COLLECTIVE_STOP, env=env),
            pool(COLLECTIVE_STOP, env=env),
            scheduling={"strategy": "SPOT", "restart_job_on_worker_restart": whole_job},
        ),
    )
    wait_for(
        lambda: (
            len(logs(local_platform, job=job.name)["entries"]) >= 2
            and all(
                replica_output(local_platform, job.name, r)
                for r in ("workerpool0-0", "workerpool1-0")
            )
        )
    )
    status, answer = post(
        local_platform,
        f"/vtx/jobs/{job.name.rsplit('/', 1)[1]}:preempt",
        {"replica": "workerpool1-0"},
    )
    assert (status, answer["replica"]) == (200, "workerpool1-0")

    done = wait_terminal(jobs, job.name)
    assert done.state == 4, done.error
    assert (tmp_path / "workerpool0.starts").read_text() == "xx"
    assert (tmp_path / "workerpool1.starts").read_text() == "xx"
    service = service_lines(local_platform, job.name)
    # Whichever replica's exit is seen first, the notes name workerpool1-0, the one preempted.
    notes = [line for line in service if "; restarting " in line]
    assert notes and all(line.startswith("workerpool1-0 preempted") for line in notes), notes
    if whole_job:
        assert notes[0].endswith("; restarting every replica")
    else:  # each replica is restarted on its own, the primary as part of the worker's preemption
        assert "workerpool1-0 preempted; restarting workerpool1-0" in notes
        assert (
            "workerpool1-0 preempted (workerpool0-0 stopped with it); restarting workerpool0-0"
            in notes
        )
    assert service.count(PREEMPTION_EXITS_NOTE) == 1
    assert not any("non-zero" in line for line in service)
    assert replica_output(local_platform, job.name, "workerpool0-0")[-1] == "resumed and finished"
    entries = logs(local_platform, job=job.name)["entries"]
    restarts = {e["restart"] for e in entries if e["replica"] == "workerpool0-0"}
    assert restarts == {0, 1}  # each line says which start of its replica wrote it
    assert {e["attempt"] for e in entries} == {1}  # one CustomJob: its restarts are not attempts
    assert {e["restart"] for e in entries if e["replica"] == "service"} == {None}
    assert service[:2] == ["job accepted: 2 replica(s)", "workerpool0-0 started"]
    if whole_job:
        assert "restarting every replica (restart 1)" in service
    assert "workerpool0-0 restarted (restart 1)" in service
    assert not any("attempt" in line for line in service)


def test_preempting_a_job_that_is_not_running_is_refused(local_platform: StackOutputs) -> None:
    jobs = client(local_platform.vertex_endpoint)
    job = jobs.create_custom_job(parent=PARENT, custom_job=custom_job("quick", pool("pass")))
    wait_terminal(jobs, job.name)
    status, answer = post(local_platform, f"/vtx/jobs/{job.name.rsplit('/', 1)[1]}:preempt")
    assert status == 400
    assert "is not running" in answer["error"]["message"]


def test_seeded_chaos_preempts_a_spot_job_which_then_restarts(
    local_platform: StackOutputs, tmp_path: Path
) -> None:
    jobs = client(local_platform.vertex_endpoint)
    job = jobs.create_custom_job(
        parent=PARENT,
        custom_job=custom_job(
            "chaos",
            pool(RESTARTS_THEN_SUCCEEDS, env={"STARTS": str(tmp_path / "starts")}),
            scheduling={"strategy": "SPOT"},
            labels={"vtx-chaos-per-hour": "3600", "vtx-chaos-seed": "1"},
        ),
    )
    done = wait_terminal(jobs, job.name)
    assert done.state == 4, done.error
    service = service_lines(local_platform, job.name)
    assert any(line.startswith("preempting workerpool0-0 (chaos)") for line in service)
    assert len((tmp_path / "starts").read_text()) >= 2


CRASH_ONCE = """
import os, pathlib
starts = pathlib.Path(os.environ["STARTS"])
n = len(starts.read_text()) if starts.exists() else 0
starts.write_text("x" * (n + 1))
if n == 0:
    os.abort()  # SIGABRT: exit 134, which Vertex retries
"""


@pytest.mark.parametrize("disable_retries", [False, True], ids=["retried", "retries-disabled"])
def test_sigabrt_exit_is_retried_unless_retries_are_disabled(
    local_platform: StackOutputs, tmp_path: Path, disable_retries: bool
) -> None:
    jobs = client(local_platform.vertex_endpoint)
    job = jobs.create_custom_job(
        parent=PARENT,
        custom_job=custom_job(
            "abort",
            pool(CRASH_ONCE, env={"STARTS": str(tmp_path / "starts")}),
            scheduling={"disable_retries": disable_retries},
        ),
    )
    done = wait_terminal(jobs, job.name)
    if disable_retries:
        assert done.state == 5
        assert "non-zero status of 134" in done.error.message
        assert (tmp_path / "starts").read_text() == "x"
    else:
        assert done.state == 4, done.error
        assert (tmp_path / "starts").read_text() == "xx"
        service = service_lines(local_platform, job.name)
        assert "workerpool0-0 crashed (134); retrying the job" in service
        assert "retrying the job (retry 1 of 3)" in service
        assert "workerpool0-0 restarted (restart 1)" in service
