"""Replicas that flood their logs: the control plane keeps answering while their lines are
copied a bounded part at a time (in order, none lost), a line of megabytes is cut as Cloud
Logging cuts an entry, and `vtx local down` stops them all within the grace period."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import psutil
import pytest

from jobs.core.stack import StackOutputs
from jobs.local.custom_jobs.replica_runner import CUT_MARK, ENTRY_BYTES
from jobs.local.platform.settings import LocalSettings
from jobs.local.platform.state import PlatformState, stack_outputs_for
from jobs.local.plumbing.ports import free_port
from jobs.local.plumbing.processes import NotRunning, start_fresh, stop_platform
from tests.conftest import HANG_S, REPO
from tests.jobs.local.custom_jobs.executor_helpers import (
    kill_leftovers,
    replica_processes,
    still_running,
)
from tests.jobs.local.local_helpers import (
    PARENT,
    client,
    custom_job,
    logs,
    pool,
    replica_output,
    wait_for,
    wait_terminal,
)

ANSWER_S = HANG_S
"""The client's timeout: a server stalled by the copying never answers (the flood never ends),
so only a hang may reach it, never a slow answer on a busy machine."""

# Numbered lines, as fast as Python writes them, until stopped.
FLOOD = """
import itertools, sys
for i in itertools.count():
    sys.stdout.write(f"{i:09d} " + "x" * 90 + "\\n")
"""

# As many, then an exit: its job ends once they are all copied.
BURST = """
import sys
for i in range(5_000):
    sys.stdout.write(f"{i:09d} " + "x" * 90 + "\\n")
"""

# A line of 8 MB, then one that never ends.
LONG_LINES = """
import sys, time
sys.stdout.write("before\\n" + "y" * 8_000_000 + "\\nafter\\n" + "z" * 8_000_000)
sys.stdout.flush()
time.sleep(600)
"""


@contextmanager
def own_platform(gcs_emulator: str, tmp_path: Path) -> Iterator[PlatformState]:
    """A platform this test may stop (short grace); whatever is left of it is removed after,
    its megabytes of logs too."""
    data_dir = tmp_path / "platform"
    settings = LocalSettings(data_dir=data_dir, cwd=REPO, port=free_port(), grace_s=2.0)
    state = start_fresh(settings, gcs_endpoint=gcs_emulator)
    try:
        yield state
    finally:
        with suppress(NotRunning):  # stopped by the test already
            stop_platform(data_dir)
        shutil.rmtree(data_dir, ignore_errors=True)


def numbered(i: int) -> str:
    """The ``i``-th line FLOOD and BURST write."""
    return f"{i:09d} " + "x" * 90


def numbered_runs(entries: list[dict]) -> dict[str, int]:
    """Per replica, how many of its numbered lines ``entries`` hold; asserts they come in order
    from 0, without a gap."""
    seen: dict[str, int] = {}
    for entry in entries:
        if entry["replica"] == "service":
            continue
        n = seen.get(entry["replica"], 0)
        assert entry["message"] == numbered(n), (entry["replica"], n)
        seen[entry["replica"]] = n + 1
    return seen


def flooding(platform: StackOutputs, data_dir: Path, job_name: str) -> list[psutil.Process]:
    """The job's processes once its two runners and their two commands run and replica lines
    are in its logs; [] before. Not the primary's line on the first page: that page may fill
    with the lines of a replica whose file was copied first."""
    processes = replica_processes(data_dir, job_name)
    if len(processes) < 4:
        return []
    page = logs(platform, job=job_name)
    return processes if any(e["replica"] != "service" for e in page["entries"]) else []


def first_pages(platform: StackOutputs, job_name: str, pages: int = 5) -> list[dict]:
    entries, cursor = [], 0
    for _ in range(pages):
        page = logs(platform, job=job_name, cursor=cursor)
        entries += page["entries"]
        cursor = page["cursor"]
    return entries


@pytest.mark.slow(cost_s=25)
def test_flooding_replicas_leave_the_api_answering_and_stop_with_the_platform(
    gcs_emulator: str, tmp_path: Path
) -> None:
    processes = []
    try:
        with own_platform(gcs_emulator, tmp_path) as state:
            platform = stack_outputs_for(state)
            jobs = client(state.vertex_endpoint)
            # Two replicas in two pools: two files that never end, copied in every round. More
            # flood each its own CPU and add nothing the copier treats differently.
            spec = custom_job("flood", pool(FLOOD), pool(FLOOD))
            flood = jobs.create_custom_job(parent=PARENT, custom_job=spec, timeout=ANSWER_S)
            processes = wait_for(lambda: flooding(platform, Path(state.data_dir), flood.name))
            assert len(processes) == 4  # two runners, two commands

            spec = custom_job("burst", pool(BURST))
            burst = jobs.create_custom_job(parent=PARENT, custom_job=spec, timeout=ANSWER_S)
            listed = jobs.list_custom_jobs(request={"parent": PARENT}, timeout=ANSWER_S)
            assert {flood.name, burst.name} <= {job.name for job in listed}
            assert wait_terminal(jobs, burst.name).state == 4  # SUCCEEDED, its lines all copied
            lines = replica_output(platform, burst.name, "workerpool0-0")
            assert lines == [numbered(i) for i in range(5_000)]

            assert numbered_runs(first_pages(platform, flood.name))

            stop_platform(Path(state.data_dir))
            assert still_running(processes) == []
    finally:
        kill_leftovers(processes)


def test_a_line_of_megabytes_is_cut_and_one_without_an_end_is_not_waited_for(
    gcs_emulator: str, tmp_path: Path
) -> None:
    processes = []
    try:
        with own_platform(gcs_emulator, tmp_path) as state:
            platform = stack_outputs_for(state)
            jobs = client(state.vertex_endpoint)
            spec = custom_job("long", pool(LONG_LINES))
            job = jobs.create_custom_job(parent=PARENT, custom_job=spec, timeout=ANSWER_S)
            lines = wait_for(
                lambda: len(out := replica_output(platform, job.name, "workerpool0-0")) >= 4 and out
            )
            processes = replica_processes(Path(state.data_dir), job.name)
            assert lines == [
                "before",
                "y" * ENTRY_BYTES + CUT_MARK,
                "after",
                "z" * ENTRY_BYTES + CUT_MARK,
            ]
            listed = jobs.list_custom_jobs(request={"parent": PARENT}, timeout=ANSWER_S)
            assert job.name in {j.name for j in listed}

            stop_platform(Path(state.data_dir))
            assert still_running(processes) == []
    finally:
        kill_leftovers(processes)
