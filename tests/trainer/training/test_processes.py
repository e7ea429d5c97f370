"""Real processes: the container entrypoint on two 'nodes' over gloo, and SIGTERM.

A SIGKILL while a checkpoint commits is the drill tests/drills/test_drill_kill_during_checkpoint.py
(blocking and background saves, each resumed from the previous committed step)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobs.local.plumbing.ports import free_port
from tests.conftest import HANG_S, REPO
from tests.trainer.conftest import DATASET, EXAMPLES, read_json_lines, tiny_config
from trainer.config.env import VertexEnv
from trainer.launch import EXIT_PREEMPTED, exit_code_for, torchrun_argv

TIMEOUT_S = HANG_S


class Replica:
    """One replica as the local platform runs it: its own process group, Vertex's env."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, *args],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.lines: list[str] = []
        self.reached = threading.Event()
        self.watch_step: int | None = None
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)
            if (
                self.watch_step is not None
                and f'"step": {self.watch_step},' in line
                and '"train"' in line
            ):
                self.reached.set()

    def wait(self) -> int:
        try:
            code = self.proc.wait(timeout=TIMEOUT_S)
        finally:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)
        self._reader.join(timeout=10)
        return code

    def events(self) -> list[dict[str, Any]]:
        return read_json_lines("".join(self.lines))

    def output(self) -> str:
        return "".join(self.lines)[-4000:]


def test_torchrun_gets_vertex_node_topology():
    env = VertexEnv(nnodes=2, node_rank=1, master_addr="workerpool0-0", master_port=29400)
    argv = torchrun_argv(env, 8, ["--config", "c.yaml"])
    assert argv[:5] == [
        "--nnodes=2",
        "--node_rank=1",
        "--master_addr=workerpool0-0",
        "--master_port=29400",
        "--nproc_per_node=8",
    ]
    assert argv[-4:] == ["--module", "trainer", "--config", "c.yaml"]


@pytest.mark.parametrize(
    ("codes", "expected"), [([143], 143), ([143, -15], 143), ([143, 1], 1), ([-9], 1), ([2], 2)]
)
def test_exit_code_is_143_only_when_every_worker_stopped_for_preemption(codes, expected):
    assert exit_code_for(codes) == expected


@pytest.mark.slow(cost_s=40)
def test_two_nodes_stop_together_on_either_preemption_and_resume_from_gcs(gcs_bucket):
    """The local demo's path: chief + worker over gloo, gs:// everywhere, SIGTERM to one
    replica's process group (worker first, then the chief), then a clean finish."""
    import gcsfs

    max_steps = 20
    fs = gcsfs.GCSFileSystem(token="anon")
    fs.put_file(str(DATASET), f"{gcs_bucket}/examples/tiny.jsonl")
    run = f"gs://{gcs_bucket}/runs/demo"
    base_env = {
        **os.environ,
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
        "WORLD_SIZE": "2",
        "AIP_CHECKPOINT_DIR": f"{run}/checkpoints/",
        "AIP_MODEL_DIR": f"{run}/model/",
        "AIP_TENSORBOARD_LOG_DIR": f"{run}/logs/",
        "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false",
        "OMP_NUM_THREADS": "1",
    }
    args = [
        "-m", "trainer.launch",
        "--config", str(EXAMPLES / "tiny-lora.yaml"),
        "--set", f"data.path=gs://{gcs_bucket}/examples/tiny.jsonl",
        "--set", "logging_steps=1",
        # As Vertex appends a tuning trial's parameter: both nodes must apply it (a node left at
        # the config's 60 steps would still be stepping, in all-reduces its peer never joins,
        # when the other evaluates and exports). A margin of steps after the second preemption
        # for the SIGTERM to land, no more: each step is two processes' all-reduce on a shared CPU.
        f"--max_steps={max_steps}",
    ]  # fmt: skip

    def start_job() -> list[Replica]:
        return [Replica(args, {**base_env, "RANK": str(rank)}) for rank in range(2)]

    def preempt(victim_rank: int, at_step: int, resumes_from: int | None) -> int:
        replicas = start_job()
        victim = replicas[victim_rank]
        victim.watch_step = at_step
        assert victim.reached.wait(TIMEOUT_S), victim.output()
        os.killpg(victim.proc.pid, signal.SIGTERM)  # what a preemption of that replica does
        for replica in replicas:
            assert replica.wait() == EXIT_PREEMPTED, replica.output()
        resumed = [e["step"] for e in replicas[0].events() if e["message"] == "resumed"]
        assert resumed == ([] if resumes_from is None else [resumes_from])
        stops = {
            e["rank"]: e["step"]
            for r in replicas
            for e in r.events()
            if e["message"].startswith("stop requested")
        }
        assert stops[0] == stops[1], "both ranks must stop at the same step"
        fs.invalidate_cache()
        assert fs.exists(f"{gcs_bucket}/runs/demo/checkpoints/step-{stops[0]:09d}/COMMITTED")
        return stops[0]

    first_stop = preempt(victim_rank=1, at_step=3, resumes_from=None)
    second_stop = preempt(victim_rank=0, at_step=first_stop + 3, resumes_from=first_stop)
    assert first_stop < second_stop < max_steps

    chief, worker = start_job()
    assert chief.wait() == 0, chief.output()
    assert worker.wait() == 0, worker.output()
    resumed = [e for e in chief.events() if e["message"] == "resumed"]
    assert resumed and resumed[0]["step"] == second_stop
    fs.invalidate_cache()
    assert fs.exists(f"{gcs_bucket}/runs/demo/model/adapter_model.safetensors")
    assert fs.exists(f"{gcs_bucket}/runs/demo/model/merged/model.safetensors")


def _catches_sigterm(pid: int) -> bool:
    """Whether the process has a SIGTERM handler (Linux: the SigCgt mask in /proc)."""
    status = Path(f"/proc/{pid}/status").read_text()
    caught = int(
        next(line for line in status.splitlines() if line.startswith("SigCgt:")).split()[1], 16
    )
    return bool(caught & (1 << (signal.SIGTERM - 1)))


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_sigterm_during_start_up_is_a_stop_request_taken_before_torch_loads(
    tmp_path, small_dataset
):
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(tiny_config(str(small_dataset), str(tmp_path / "out"))))
    proc = subprocess.Popen(
        [sys.executable, "-m", "trainer", "--config", str(config)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        while proc.poll() is None and not _catches_sigterm(proc.pid):
            pass
        maps = Path(f"/proc/{proc.pid}/maps").read_text()
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "libtorch" not in maps, "the SIGTERM handler came after torch was loaded"
    assert proc.returncode == EXIT_PREEMPTED, output[-3000:]
    assert any("during start-up" in e.get("message", "") for e in read_json_lines(output)), output


def test_a_bad_config_fails_with_exit_2_before_torch_is_loaded(tmp_path: Path) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text("model: {name: x\n")
    probe = (
        "import runpy, sys\n"
        f"sys.argv = ['trainer', '--config', {str(config)!r}]\n"
        "try:\n    runpy.run_module('trainer', run_name='__main__')\n"
        "except SystemExit as exc:\n    print(exc.code, 'torch' in sys.modules)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=HANG_S, check=False
    )
    assert proc.stdout.split() == ["2", "False"], proc.stdout + proc.stderr
    assert "invalid YAML" in proc.stderr
