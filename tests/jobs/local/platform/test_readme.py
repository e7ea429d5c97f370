"""The README's local rehearsal runs as written, in its order, on a platform nobody prepared.

Each line of the README's "Rehearse locally" block is run through a shell from the checkout,
with only the placeholders JOB_ID and RUN_ID replaced by what `vtx launch` printed. The data
dir and the ports come from the environment (VTX_LOCAL_DIR, VTX_LOCAL_PORT,
VTX_LOCAL_GCS_PORT), so the commands themselves stay untouched.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from jobs.local.plumbing.ports import free_port
from tests.conftest import HANG_S, REPO

SECTION = "## Rehearse locally before paying for GPUs"


def rehearsal_commands() -> list[str]:
    text = (REPO / "README.md").read_text()
    block = text.split(SECTION, 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    lines = [line.split("#", 1)[0].strip() for line in block.splitlines()]
    return [line for line in lines if line]


def test_the_readme_rehearsal_block_is_what_this_test_runs() -> None:
    commands = rehearsal_commands()
    assert commands[0] == "vtx local up"
    assert commands[-1] == "vtx local down"
    assert any(c.startswith("vtx launch jobs/templates/smoke-cpu.yaml") for c in commands)


@pytest.mark.slow(cost_s=120)
def test_readme_rehearsal_runs_as_written(tmp_path: Path) -> None:
    bin_dir = str(Path(sys.executable).parent)  # where `vtx` is installed
    env = os.environ | {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "VTX_LOCAL_DIR": str(tmp_path / "local"),
        "VTX_LOCAL_PORT": str(free_port()),
        "VTX_LOCAL_GCS_PORT": str(free_port()),
        "COLUMNS": "200",
    }
    found: dict[str, str] = {}
    transcript: list[str] = []
    try:
        for command in rehearsal_commands():
            for name, value in found.items():
                command = command.replace(name, value)
            assert "_ID" not in command, f"a placeholder is left in {command!r}"
            done = subprocess.run(
                shlex.split(command),
                cwd=REPO,
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
            )
            output = done.stdout + done.stderr
            transcript.append(f"$ {command}\n{output}")
            assert done.returncode == 0, "\n".join(transcript)
            assert "Traceback" not in output, "\n".join(transcript)
            if match := re.search(r"submitted projects/\S+/customJobs/(\d+)", output):
                found["JOB_ID"] = match.group(1)
            if match := re.search(r"run id: (\S+)", output):
                found["RUN_ID"] = match.group(1)
    finally:
        subprocess.run(
            ["vtx", "local", "down"], cwd=REPO, env=env, capture_output=True, timeout=HANG_S
        )
    story = "\n".join(transcript)
    assert "preempting workerpool1-0" in story
    assert "state" in story.lower() and "succeeded" in story.lower(), story
