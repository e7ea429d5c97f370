"""Replica programs, service lines and replica processes, for the executor tests and the CLI's."""

from __future__ import annotations

from pathlib import Path

import psutil

from jobs.core.stack import StackOutputs
from jobs.local.platform.state import process_alive
from jobs.local.platform.store import STORE_FILE, Store
from tests.jobs.local.local_helpers import (
    replica_output,
)

SLEEP = "import time; print('up', flush=True); time.sleep(600)"


def service_lines(platform: StackOutputs, job_name: str) -> list[str]:
    return replica_output(platform, job_name, "service")


def replica_processes(data_dir: Path, job_name: str) -> list[psutil.Process]:
    """The runners of a job's replicas, as the store records them, and the commands they run."""
    store = Store(data_dir / STORE_FILE)
    try:
        runtime = store.get_runtime(job_name.rsplit("/", 1)[1])
    finally:
        store.close()
    assert runtime is not None
    found = []
    for replica in runtime["replicas"]:
        if process_alive(replica["pid"], replica["create_time"]):
            runner = psutil.Process(replica["pid"])
            found += [runner, *runner.children(recursive=True)]
    return found


def still_running(processes: list[psutil.Process]) -> list[psutil.Process]:
    """Those of ``processes`` that run (a zombie waits only for its parent to reap it)."""
    running = []
    for proc in processes:
        try:
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                running.append(proc)
        except psutil.NoSuchProcess:
            continue
    return running


def kill_leftovers(processes: list[psutil.Process]) -> None:
    """SIGKILL what a failed test left running."""
    for proc in still_running(processes):
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            continue
