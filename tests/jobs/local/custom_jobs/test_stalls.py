"""A replica stalled or slowed from outside: every process of its tree stopped, including a
child in a session of its own (as torch's elastic agent starts its workers), and let go again;
a slowed replica's duty cycle ends when it is no longer wanted."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator

import psutil
import pytest

from jobs.local.custom_jobs.stalls import SlowDown, replica_processes, signal_processes
from tests.conftest import HANG_S

# A runner whose child starts a grandchild in a new session, then both sleep.
TREE = (
    "import subprocess, sys, time; "
    "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'], "
    "start_new_session=True); time.sleep(600)"
)


@pytest.fixture
def runner() -> Iterator[psutil.Process]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import subprocess, sys; subprocess.run([sys.executable, '-c', {TREE!r}])",
        ],
        start_new_session=True,
    )
    root = psutil.Process(proc.pid)
    until(lambda: len(root.children(recursive=True)) == 2)
    yield root
    for child in replica_processes(proc.pid):
        child.send_signal(signal.SIGCONT)
        child.kill()
    proc.wait()


def until(done: Callable[[], bool]) -> None:
    deadline = time.monotonic() + HANG_S  # only catches a hang
    while not done():
        assert time.monotonic() < deadline
        time.sleep(0.02)


def statuses(root: psutil.Process) -> set[str]:
    return {p.status() for p in replica_processes(root.pid)}


def test_a_stall_stops_the_whole_tree_and_letting_go_resumes_it(runner: psutil.Process) -> None:
    worker = runner.children(recursive=True)[-1]
    assert worker.pid != runner.pid and len(replica_processes(runner.pid)) == 3
    assert signal_processes(runner.pid, signal.SIGSTOP) == 3
    until(lambda: statuses(runner) == {psutil.STATUS_STOPPED})
    assert signal_processes(runner.pid, signal.SIGCONT) == 3
    until(lambda: psutil.STATUS_STOPPED not in statuses(runner))


def test_a_slowdown_stops_and_resumes_until_it_is_no_longer_wanted(
    runner: psutil.Process,
) -> None:
    wanted = threading.Event()
    wanted.set()
    lock = threading.RLock()
    slow = SlowDown(runner.pid, 10.0, lock, wanted.is_set)
    slow.start()
    until(lambda: statuses(runner) == {psutil.STATUS_STOPPED})
    until(lambda: psutil.STATUS_STOPPED not in statuses(runner))  # its running tenth
    with lock:
        wanted.clear()
    slow.join(timeout=HANG_S)
    assert not slow.is_alive()
    signal_processes(runner.pid, signal.SIGCONT)  # as the executor lets it go
    until(lambda: psutil.STATUS_STOPPED not in statuses(runner))
