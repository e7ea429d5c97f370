"""A control-plane crash loses nothing: `bring_up` (what `vtx local up` runs) starts only the
control plane again, running replicas are re-attached, replicas that ended while it was down
are accounted for by their recorded exit, and a replica whose machine vanished is restarted as
Vertex restarts a lost worker; `vtx local down` afterwards stops the replicas still running,
even when both servers died again."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import psutil

from jobs.local.platform.settings import LocalSettings
from jobs.local.platform.state import (
    PlatformState,
    controller_alive,
    read_state,
    stack_outputs_for,
)
from jobs.local.platform.store import Store
from jobs.local.plumbing.ports import free_port
from jobs.local.plumbing.processes import bring_up, start_fresh, stop_platform
from tests.conftest import REPO
from tests.jobs.local.custom_jobs.executor_helpers import (
    SLEEP,
    kill_leftovers,
    replica_processes,
    still_running,
)
from tests.jobs.local.local_helpers import (
    PARENT,
    RESTARTS_THEN_SUCCEEDS,
    client,
    custom_job,
    pool,
    replica_output,
    wait_for,
    wait_terminal,
)

WAIT_FOR_FILE = """
import os, pathlib, time
print("waiting", flush=True)
while not pathlib.Path(os.environ["GO"]).exists():
    time.sleep(0.05)
print("finished", flush=True)
"""


def test_control_plane_crash_and_restart_loses_no_job_and_down_fails_the_running_ones(
    gcs_emulator: str, tmp_path: Path
) -> None:
    """The crash and restart, then `vtx local down` with a job still running: its replicas are
    stopped and it FAILED (one platform for both: a start of its own each cost as much as the
    rest of either)."""
    repo = REPO
    data_dir = tmp_path / "platform"
    settings = LocalSettings(data_dir=data_dir, cwd=repo, port=free_port(), grace_s=5.0)
    state = start_fresh(settings, gcs_endpoint=gcs_emulator)
    platform = stack_outputs_for(state)
    try:
        jobs = client(state.vertex_endpoint)

        def submit(name: str, code: str, **env: str) -> str:
            job = custom_job(name, pool(code, env=env))
            return jobs.create_custom_job(parent=PARENT, custom_job=job).name

        done_before = submit("before", "print('early')")
        wait_terminal(jobs, done_before)
        survives = submit("survives", WAIT_FOR_FILE, GO=str(tmp_path / "go-survives"))
        ends_while_down = submit("ends", WAIT_FOR_FILE, GO=str(tmp_path / "go-ends"))
        lost = submit("lost", RESTARTS_THEN_SUCCEEDS, STARTS=str(tmp_path / "starts"))
        for name in (survives, ends_while_down, lost):
            wait_for(lambda name=name: replica_output(platform, name, "workerpool0-0"))

        server = psutil.Process(state.server_pid)
        server.kill()  # kill -9, as a crash
        server.wait(timeout=10)
        (tmp_path / "go-ends").write_text("go")
        # The "machine" of `lost` disappears: its runner and command die without a record.
        runtime = Store(data_dir / "jobs.sqlite").get_runtime(lost.rsplit("/", 1)[1])
        assert runtime is not None
        os.killpg(runtime["replicas"][0]["pid"], signal.SIGKILL)
        started = bring_up(settings)
        assert started.note and "control plane had stopped" in started.note
        state = started.state
        platform = stack_outputs_for(state)

        assert jobs.get_custom_job(name=done_before).state == 4
        assert jobs.get_custom_job(name=survives).state == 3  # still RUNNING, re-attached
        assert wait_terminal(jobs, ends_while_down).state == 4
        assert replica_output(platform, ends_while_down, "workerpool0-0") == [
            "waiting",
            "finished",
        ]
        assert wait_terminal(jobs, lost).state == 4
        assert (tmp_path / "starts").read_text() == "xx"
        service = replica_output(platform, lost, "service")
        assert "workerpool0-0 was lost (no exit recorded)" in service
        (tmp_path / "go-survives").write_text("go")
        assert wait_terminal(jobs, survives).state == 4

        left = submit("left", "import time; time.sleep(600)")
        wait_for(lambda: jobs.get_custom_job(name=left).state == 3)
    finally:
        stop_platform(data_dir)
    # `vtx local down` stops the replicas still running and fails their jobs.
    record = Store(data_dir / "jobs.sqlite").get_job(left.rsplit("/", 1)[1])
    assert record is not None
    assert record["state"] == "JOB_STATE_FAILED"
    assert "vtx local down" in record["error"]["message"]
    mentions = [" ".join(p.info["cmdline"] or []) for p in psutil.process_iter(["cmdline"])]
    assert [line for line in mentions if str(data_dir) in line] == []


# Waits for $GO, then lists the data bucket through the emulator its environment names.
WAIT_THEN_LIST = """
import json, os, pathlib, time, urllib.request
print("waiting", flush=True)
while not pathlib.Path(os.environ["GO"]).exists():
    time.sleep(0.05)
url = os.environ["STORAGE_EMULATOR_HOST"] + "/storage/v1/b/vtx-local-data/o"
with urllib.request.urlopen(url, timeout=10) as resp:
    print(*[item["name"] for item in json.load(resp)["items"]], flush=True)
"""


def test_both_servers_killed_come_back_on_their_ports_and_down_after_a_second_kill_stops_replicas(
    tmp_path: Path,
) -> None:
    """kill -9 of the control plane and the emulator while jobs run: `vtx local up` (which
    passes its own default or free ports) starts both on the recorded ports, and a job, whose
    replicas outlived them, goes on and reaches its storage. Then both are killed again and
    `vtx local down` runs: no control plane is left to stop the replicas that outlived them, so
    `down` stops them itself (the process groups the store records) rather than saying there is
    nothing to stop. One platform for both: a start of its own cost as much as either."""
    data_dir = tmp_path / "platform"
    settings = LocalSettings(
        data_dir=data_dir, cwd=REPO, port=free_port(), gcs_port=free_port(), grace_s=5.0
    )
    state = start_fresh(settings)
    processes: list[psutil.Process] = []
    stopped = False
    try:
        jobs = client(state.vertex_endpoint)
        go = tmp_path / "go"
        job = jobs.create_custom_job(
            parent=PARENT,
            custom_job=custom_job("outlives", pool(WAIT_THEN_LIST, env={"GO": str(go)})),
        )
        left = jobs.create_custom_job(parent=PARENT, custom_job=custom_job("left", pool(SLEEP)))
        platform = stack_outputs_for(state)
        for name in (job.name, left.name):
            wait_for(lambda name=name: replica_output(platform, name, "workerpool0-0"))
        processes = replica_processes(data_dir, left.name)
        assert len(processes) == 2  # the runner and its command
        kill_both(state)

        started = bring_up(settings.replace(port=free_port(), gcs_port=free_port()))
        assert started.note and "both stopped" in started.note
        assert (started.state.vertex_port, started.state.gcs_port) == (
            state.vertex_port,
            state.gcs_port,
        )
        assert started.state.token == state.token
        # One controller: the first, which outlived both servers, gave way to the new one's.
        assert not controller_alive(state) and controller_alive(started.state)
        assert jobs.get_custom_job(name=job.name).state == 3  # still RUNNING, re-attached
        assert jobs.get_custom_job(name=left.name).state == 3
        go.write_text("go")
        assert wait_terminal(jobs, job.name).state == 4
        assert replica_output(platform, job.name, "workerpool0-0") == [
            "waiting",
            "examples/tiny.jsonl",
        ]

        assert still_running(processes) == processes  # `left`'s replicas outlived both again
        kill_both(started.state)
        stopped = True
        assert stop_platform(data_dir).data_dir == state.data_dir
        assert still_running(processes) == []
        assert read_state(data_dir) is None
    finally:
        if not stopped:
            stop_platform(data_dir)
        kill_leftovers(processes)


def kill_both(state: PlatformState) -> None:
    """kill -9 of the control plane and the emulator, as a crash."""
    assert state.gcs_pid is not None  # the platform's own emulator, not a shared one
    for pid in (state.server_pid, state.gcs_pid):
        process = psutil.Process(pid)
        process.kill()
        process.wait(timeout=10)
