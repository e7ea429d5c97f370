"""The files the job commands are named: a template, a stack file or an ``-o`` path that is not
a plain file ends the command with one line (exit 1 for a template, whose problems are listed
like any other; 2 for an option's path), never a hang, an unbounded read or a traceback.

The FIFO tests carry a timeout: before jobs.core.user_io, opening a FIFO with no writer blocked
`vtx validate` forever, and a regression must fail, not hang the suite."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tests.conftest import REPO, TEST_DATA
from vtx.cli import app

SMOKE = REPO / "jobs" / "templates" / "smoke-cpu.yaml"
STACK = TEST_DATA / "stack-dev.json"
FIFO_TIMEOUT_S = 60
runner = CliRunner(env={"COLUMNS": "400"})
COMMANDS = {
    "validate": ["validate"],
    "cost": ["cost"],
    "render": ["render", "--stack-file", str(STACK)],
    "import": ["import"],
    "launch --dry-run": ["launch", "--dry-run", "--stack-file", str(STACK)],
}
GCLOUD_SPEC = {
    "workerPoolSpecs": [
        {
            "machineSpec": {"machineType": "n1-standard-4"},
            "replicaCount": 1,
            "containerSpec": {"imageUri": "us-docker.pkg.dev/p/r/trainer:1"},
        }
    ]
}


def vtx(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    return result.exit_code, result.output


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "job.yaml"
    os.mkfifo(path)
    return path


@pytest.mark.timeout(FIFO_TIMEOUT_S)
@pytest.mark.parametrize("command", COMMANDS.values(), ids=list(COMMANDS))
def test_a_fifo_as_the_template_is_a_problem_not_a_hang(fifo: Path, command: list[str]) -> None:
    code, out = vtx(command[0], str(fifo), *command[1:])
    assert code == 1, out
    assert f"✗ {fifo}: (file): is a FIFO (named pipe), not a regular file" in out, out


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_a_device_as_the_template_is_a_problem_not_an_endless_read() -> None:
    code, out = vtx("validate", "/dev/zero")
    assert code == 1, out
    assert "✗ /dev/zero: (file): is a character device, not a regular file" in out


@pytest.mark.timeout(FIFO_TIMEOUT_S)
def test_a_fifo_as_the_stack_file_is_one_line(fifo: Path) -> None:
    code, out = vtx("render", str(SMOKE), "--stack-file", str(fifo))
    assert code == 2, out
    assert f"error: stack file {fifo} is a FIFO (named pipe), not a regular file" in out


def _missing_folder(tmp_path: Path) -> tuple[Path, str]:
    path = tmp_path / "no" / "job.yaml"
    return path, f"cannot be written: the folder {path.parent} does not exist; create it first"


def _directory(tmp_path: Path) -> tuple[Path, str]:
    return tmp_path, "is a directory; name a file"


def _full_disk(tmp_path: Path) -> tuple[Path, str]:
    if not Path("/dev/full").exists():
        pytest.skip("needs /dev/full")
    return Path("/dev/full"), "was not written whole: no space left on its disk"


OUTPUTS = {"a missing folder": _missing_folder, "a directory": _directory, "/dev/full": _full_disk}


@pytest.mark.parametrize("where", OUTPUTS.values(), ids=list(OUTPUTS))
def test_render_into_a_path_it_cannot_write_is_one_line_exit_2(tmp_path: Path, where) -> None:
    path, says = where(tmp_path)
    code, out = vtx("render", str(SMOKE), "--stack-file", str(STACK), "-o", str(path))
    assert code == 2, out
    assert out.startswith(f"error: --output {path} {says}"), out
    assert len(out.strip().splitlines()) == 1, out


@pytest.mark.parametrize("where", OUTPUTS.values(), ids=list(OUTPUTS))
def test_import_into_a_path_it_cannot_write_is_one_line_exit_2(tmp_path: Path, where) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(GCLOUD_SPEC))
    path, says = where(tmp_path)
    code, out = vtx("import", str(spec), "-o", str(path))
    assert code == 2, out
    assert out.startswith(f"error: --output {path} {says}"), out


def test_render_and_import_still_write_their_file(tmp_path: Path) -> None:
    rendered = tmp_path / "job.yaml"
    code, out = vtx("render", str(SMOKE), "--stack-file", str(STACK), "-o", str(rendered))
    assert code == 0, out
    assert "workerPoolSpecs" in rendered.read_text()
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(GCLOUD_SPEC))
    imported = tmp_path / "template.yaml"
    code, out = vtx("import", str(spec), "-o", str(imported))
    assert code == 0, out
    assert "pools" in yaml.safe_load(imported.read_text())
