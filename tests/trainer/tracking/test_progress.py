"""What `python -m trainer` prints: a bar and readable lines on a terminal, JSON lines elsewhere.

The two end-to-end tests run the tiny config in a real process, once on a pseudo-terminal and
once on pipes, because the choice depends on the process's own streams."""

from __future__ import annotations

import fcntl
import io
import json
import os
import pty
import struct
import subprocess
import sys
import termios
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import HANG_S, REPO
from tests.trainer.conftest import tiny_config
from trainer.config.env import VertexEnv
from trainer.tracking.progress import choose_output

TIMEOUT_S = HANG_S
STEPS = 6


class FakeStream(io.StringIO):
    def __init__(self, terminal: bool) -> None:
        super().__init__()
        self.terminal = terminal

    def isatty(self) -> bool:
        return self.terminal


def _env_outside_a_job() -> dict[str, str]:
    """This environment less Vertex's job variables (a developer's shell)."""
    return {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("CLOUD_ML_", "AIP_")) and k not in ("CLUSTER_SPEC", "TF_CONFIG")
    }


def _trainer_argv(write_config: Callable[..., Path], small_dataset: Path, out: Path) -> list[str]:
    cfg = tiny_config(str(small_dataset), str(out), max_steps=STEPS, save_steps=None)
    return [sys.executable, "-m", "trainer", "--config", str(write_config(cfg))]


def _run_on_a_terminal(argv: list[str]) -> tuple[int, str]:
    """Run `argv` with stdin, stdout and stderr on one pseudo-terminal 120 columns wide; return
    its exit code and everything it wrote."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    proc = subprocess.Popen(
        argv, cwd=REPO, env=_env_outside_a_job(), stdin=follower, stdout=follower, stderr=follower
    )
    os.close(follower)
    chunks = []
    while True:  # read as it comes: a full terminal buffer would block the child
        try:
            data = os.read(leader, 65536)
        except OSError:  # EIO: the child closed its side
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    return proc.wait(timeout=TIMEOUT_S), b"".join(chunks).decode()


def test_a_terminal_gets_a_bar_with_eta_and_every_metric_as_a_readable_line(
    tmp_path: Path, small_dataset: Path, write_config: Callable[..., Path]
) -> None:
    code, text = _run_on_a_terminal(_trainer_argv(write_config, small_dataset, tmp_path / "out"))

    assert code == 0, text
    bar = [part for part in text.split("\r") if part.startswith("train:")]
    assert bar, text
    final = bar[-1]
    # done/total, elapsed<remaining, the rate, and the loss in the postfix
    assert f"{STEPS}/{STEPS} [" in final and "<00:00" in final, final
    assert "step/s" in final or "s/step" in final, final
    assert "loss=" in final, final
    # a line printed above the bar: "\r" + blanks over the bar + "\r" + the line + "\r\n"
    lines = [line.rstrip("\r").split("\r")[-1] for line in text.split("\n")]
    assert not [line for line in lines if line.startswith("{")], "JSON on a terminal"
    logged = [line for line in lines if line.startswith("train step=")]
    # every step logged (logging_steps 1), none lost to the bar, each with its numbers
    assert [line.split()[1] for line in logged] == [f"step={n}" for n in range(1, STEPS + 1)]
    assert all("loss=" in line and "tokens_per_s=" in line for line in logged), logged
    assert any(line.startswith("done step=6") for line in lines), text


def test_pipes_get_json_lines_and_no_bar(
    tmp_path: Path, small_dataset: Path, write_config: Callable[..., Path]
) -> None:
    proc = subprocess.run(
        _trainer_argv(write_config, small_dataset, tmp_path / "out"),
        cwd=REPO,
        env=_env_outside_a_job(),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )

    assert proc.returncode == 0, proc.stdout + proc.stderr
    entries = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    steps = [e["step"] for e in entries if e["message"] == "train"]
    assert steps == list(range(1, STEPS + 1))
    assert "\r" not in proc.stdout + proc.stderr and "train:" not in proc.stderr, proc.stderr


def test_json_inside_a_job_even_on_a_terminal_and_the_bar_only_on_rank_0() -> None:
    terminal, pipe = FakeStream(terminal=True), FakeStream(terminal=False)
    in_job = VertexEnv.from_environ({"CLOUD_ML_JOB_ID": "123"}).in_job
    assert in_job and not VertexEnv.from_environ({}).in_job

    job = choose_output(in_job, 0, False, terminal, terminal)
    assert (job.human_logs, job.bar) == (False, False)
    laptop = choose_output(False, 0, False, terminal, terminal)
    assert (laptop.human_logs, laptop.bar) == (True, True)
    other_rank = choose_output(False, 1, False, terminal, terminal)
    assert (other_rank.human_logs, other_rank.bar) == (True, False)
    disabled = choose_output(False, 0, True, terminal, terminal)
    assert (disabled.human_logs, disabled.bar) == (True, False)
    # `python -m trainer ... > run.jsonl`: JSON to the file, the bar on the terminal
    redirected = choose_output(False, 0, False, pipe, terminal)
    assert (redirected.human_logs, redirected.bar) == (False, True)


@pytest.mark.parametrize("stream", [object(), FakeStream(terminal=False)])
def test_streams_that_are_not_terminals_get_json(stream: object) -> None:
    mode = choose_output(False, 0, False, stream, stream)  # type: ignore[arg-type]
    assert (mode.human_logs, mode.bar) == (False, False)
