"""The control plane's deadline on request bodies (jobs/local/plumbing/request_deadline.py, the
GCS emulator's): a client that sends half a body and stalls is closed once the deadline passes,
while everyone else is served; a client that disconnects mid-body is one line in the log, not a
traceback.

A platform of its own with a deadline of a second (``read_timeout_s``), so the stall ends soon;
the tests wait for the connection's close, never on a clock.
"""

from __future__ import annotations

import socket
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobs.local.api.routes.vtx import HEALTH_PATH
from jobs.local.platform.settings import LocalSettings
from jobs.local.plumbing.ports import free_port
from jobs.local.plumbing.processes import start_fresh, stop_platform
from tests.conftest import HANG_S, REPO
from tests.jobs.local.local_helpers import PARENT, wait_for

DEADLINE_S = 1.0
CREATE = f"/v1/{PARENT}/customJobs"
GONE = "the client stopped mid-request"


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSettings]:
    settings = LocalSettings(
        data_dir=tmp_path_factory.mktemp("vtx-deadline"),
        cwd=REPO,
        port=free_port(),
        gcs_port=free_port(),
        grace_s=5.0,
        read_timeout_s=DEADLINE_S,
    )
    start_fresh(settings)
    try:
        yield settings
    finally:
        stop_platform(settings.data_dir)


def half_sent(settings: LocalSettings) -> bytes:
    """A create's headers with a Content-Length of 100, then 20 bytes of its body."""
    head = (
        f"POST {CREATE} HTTP/1.1\r\nHost: 127.0.0.1:{settings.port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"
    )
    return head.encode() + b'{"displayName": "hal'


def healthy(settings: LocalSettings) -> bool:
    with urllib.request.urlopen(f"{settings.vertex_endpoint}{HEALTH_PATH}", timeout=HANG_S) as r:
        return r.status == 200


def server_log(settings: LocalSettings) -> str:
    return Path(settings.data_dir, "server.log").read_text(errors="replace")


def test_a_half_sent_body_is_closed_after_the_deadline_while_others_are_served(
    platform: LocalSettings,
) -> None:
    with socket.create_connection(("127.0.0.1", platform.port), timeout=HANG_S) as stalled:
        stalled.sendall(half_sent(platform))
        assert healthy(platform)
        answer = b""
        while piece := stalled.recv(65536):  # b"": the server closed the connection
            answer += piece
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert b"DEADLINE_EXCEEDED" in answer
    assert healthy(platform)


def test_a_client_gone_mid_body_is_one_line_in_the_log(platform: LocalSettings) -> None:
    before = server_log(platform).count(GONE)
    with socket.create_connection(("127.0.0.1", platform.port), timeout=HANG_S) as gone:
        gone.sendall(half_sent(platform))
    wait_for(lambda: server_log(platform).count(GONE) > before)
    assert healthy(platform)
    log = server_log(platform)
    lines = [line for line in log.splitlines() if GONE in line]
    assert len(lines) == before + 1 and CREATE in lines[-1]
    assert "Traceback" not in log
