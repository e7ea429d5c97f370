"""`vtx local up|down|status`: the happy path and every misuse gives a message, no traceback."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
from typer.testing import CliRunner

from jobs.local.platform.state import PlatformState, write_state
from jobs.local.plumbing.ports import free_port
from tests.conftest import HANG_S
from vtx.cli import app


@pytest.fixture
def vtx(tmp_path: Path):
    runner = CliRunner()

    def invoke(*args: str):
        result = runner.invoke(app, ["local", *args, "--data-dir", str(tmp_path / "local")])
        assert "Traceback" not in result.output
        assert result.exception is None or isinstance(result.exception, SystemExit)
        return result

    yield invoke
    invoke("down")  # whatever a failed assertion left running


def _flat(text: str) -> str:
    return " ".join(text.replace("│", " ").split())  # rich wraps long lines, boxes and all


def test_up_status_down_and_their_misuses(vtx) -> None:
    ports = ["--port", str(free_port()), "--gcs-port", str(free_port())]
    nothing = vtx("down")
    assert nothing.exit_code == 0 and "nothing to stop" in _flat(nothing.output)
    first = vtx("up", *ports)
    assert first.exit_code == 0, first.output
    again = vtx("up", *ports)
    assert again.exit_code == 1
    assert "already running" in _flat(again.output)

    status = vtx("status", "--json")
    assert status.exit_code == 0
    info = json.loads(status.output)
    assert info["running"] is True
    assert info["vertex_endpoint"].startswith("http://127.0.0.1:")
    assert info["gcs_endpoint"].startswith("http://127.0.0.1:")
    assert info["data_dir"].endswith("local")
    assert info["active_jobs"] == {}
    assert "active jobs         none" in vtx("status").output

    assert vtx("down").exit_code == 0
    gone = vtx("down")  # twice is not an error: the platform is down either way
    assert gone.exit_code == 0
    assert "nothing to stop" in _flat(gone.output)
    assert json.loads(vtx("status", "--json").output)["running"] is False


def test_up_starts_the_controller_down_stops_it_and_up_restores_a_crashed_one(vtx) -> None:
    assert vtx("up", "--port", str(free_port()), "--gcs-port", str(free_port())).exit_code == 0
    info = json.loads(vtx("status", "--json").output)
    assert info["controller_running"] is True
    controller = psutil.Process(info["controller_pid"])
    assert controller.cmdline()[1:3] == ["-m", "jobs.control"]
    controller.kill()  # kill -9: a crash
    controller.wait(timeout=HANG_S)
    crashed = vtx("status", "--json")
    assert json.loads(crashed.output)["controller_running"] is False
    assert "controller          stopped: `vtx local up` starts it" in vtx("status").output
    restored = vtx("up")
    assert restored.exit_code == 0, restored.output
    assert "the controller had stopped; started it again" in _flat(restored.output)
    again = json.loads(vtx("status", "--json").output)
    assert again["controller_running"] is True
    assert again["controller_pid"] != info["controller_pid"]
    assert again["server_pid"] == info["server_pid"]  # only what stopped is started
    assert vtx("down").exit_code == 0
    assert not psutil.pid_exists(again["controller_pid"]) or (
        psutil.Process(again["controller_pid"]).status() == psutil.STATUS_ZOMBIE
    )


def test_port_in_use_is_named(vtx) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = vtx("up", "--port", str(port), "--gcs-port", str(free_port()))
    assert result.exit_code == 1
    assert f"port {port} on 127.0.0.1 is already in use" in _flat(result.output)


def _write_stale_state(data_dir: Path) -> PlatformState:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    data_dir.mkdir(exist_ok=True)
    state = PlatformState(
        data_dir=str(data_dir),
        cwd=str(data_dir),
        vertex_port=free_port(),
        gcs_port=free_port(),
        server_pid=dead.pid,
        server_create_time=0.0,
        gcs_pid=dead.pid,
        gcs_create_time=0.0,
        token="unused",
    )
    write_state(state)
    return state


def test_stale_state_file_is_reported_and_cleared(vtx, tmp_path: Path) -> None:
    data_dir = tmp_path / "local"
    _write_stale_state(data_dir)
    status = vtx("status")
    assert status.exit_code == 1
    assert "stale state file" in _flat(status.output)
    down = vtx("down")  # a stale file is cleared and said; nothing ran, so nothing failed
    assert down.exit_code == 0
    assert "stale state file" in _flat(down.output)
    assert not (data_dir / "state.json").exists()


def test_up_over_a_dead_platform_starts_it_again_on_its_recorded_ports(vtx, tmp_path: Path) -> None:
    """Both processes died (a crash): replicas that outlived them know those ports."""
    dead = _write_stale_state(tmp_path / "local")
    result = vtx("up", "--port", str(free_port()), "--gcs-port", str(free_port()))
    assert result.exit_code == 0, result.output
    said = _flat(result.output)
    assert f"both stopped; started them again on :{dead.vertex_port} and :{dead.gcs_port}" in said
    assert "local platform up" in result.output


def test_one_port_for_both_servers_is_refused(vtx, tmp_path: Path) -> None:
    port = str(free_port())
    result = vtx("up", "--port", port, "--gcs-port", port)
    assert result.exit_code == 1
    assert f"--port and --gcs-port are both {port}" in _flat(result.output)
    assert not (tmp_path / "local" / "state.json").exists()


@pytest.mark.parametrize("option", ["--port", "--gcs-port"])
def test_port_out_of_range_is_a_usage_error(vtx, option: str) -> None:
    result = vtx("up", option, "70000")
    assert result.exit_code == 2
    assert "less than or equal to 65535" in _flat(result.output)


@pytest.mark.parametrize(
    ("option", "value"), [("--grace-s", "-1"), ("--chaos", "inf"), ("--max-replicas", "0")]
)
def test_nonsense_executor_knobs_are_usage_errors(vtx, option: str, value: str) -> None:
    result = vtx("up", option, value)
    assert result.exit_code == 2
    assert f"Invalid value for '{option}'" in _flat(result.output)


def test_a_taken_default_port_gives_way_but_a_chosen_one_does_not(
    vtx, monkeypatch: pytest.MonkeyPatch
) -> None:
    from jobs.local.platform.settings import LocalSettings

    monkeypatch.delenv("VTX_LOCAL_PORT", raising=False)
    default = LocalSettings().port
    with socket.socket() as busy:
        with contextlib.suppress(OSError):  # another program holds it already: the same case
            busy.bind(("127.0.0.1", default))
            busy.listen()
        result = vtx("up", "--gcs-port", str(free_port()))
        assert result.exit_code == 0, result.output
        assert f"the default port {default} is in use: using" in _flat(result.output)
        endpoint = json.loads(vtx("status", "--json").output)["vertex_endpoint"]
        assert not endpoint.endswith(f":{default}")
        assert vtx("down").exit_code == 0
        monkeypatch.setenv("VTX_LOCAL_PORT", str(default))  # chosen by the user: kept, named
        chosen = vtx("up", "--gcs-port", str(free_port()))
    assert chosen.exit_code == 1
    assert f"port {default} on 127.0.0.1 is already in use" in _flat(chosen.output)
