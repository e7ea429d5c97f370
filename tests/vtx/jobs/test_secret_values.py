"""A template holding a key under a neutral env name (or in args, or a label) is refused by
every command that reads it, exit 1, and no command prints the key."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import yaml
from rich.console import Console
from typer.testing import CliRunner

from tests.conftest import TEMPLATES, TEST_DATA
from vtx.cli import app
from vtx.views.problems import print_error

WANDB = "0a1b2c3d4e" * 4
HF = "hf_" + "a1B2c3D4" * 5
STACK = str(TEST_DATA / "stack-dev.json")
runner = CliRunner(env={"COLUMNS": "200"})


def _template(tmp_path: Path, **changes: object) -> str:
    doc = yaml.safe_load((TEMPLATES / "smoke-cpu.yaml").read_text())
    for key, value in changes.items():
        doc[key] = value
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


COMMANDS = [
    ["validate"],
    ["cost"],
    ["render", "--stack-file", STACK, "--format", "json"],
    ["render", "--stack-file", STACK, "--format", "yaml"],
    ["render", "--stack-file", STACK, "--format", "wandb-launch"],
    ["launch", "--stack-file", STACK, "--dry-run"],
]
PLACES = {
    "env W&B": ({"env": {"MY_SETTING": WANDB}}, "env.MY_SETTING", WANDB),
    "env HF": ({"env": {"MY_SETTING": HF}}, "env.MY_SETTING", HF),
    "arg": ({"args": ["--config", "x.yaml", "--key", WANDB]}, "args[3]", WANDB),
    "label": ({"labels": {"team": HF.lower()}}, "labels.team", HF.lower()),
}


@pytest.mark.parametrize(
    "command", COMMANDS, ids=lambda c: c[0] if len(c) == 1 else f"{c[0]} {c[-1]}"
)
@pytest.mark.parametrize("place", PLACES, ids=list(PLACES))
def test_every_command_refuses_a_key_and_never_prints_it(
    tmp_path: Path, command: list[str], place: str
) -> None:
    changes, path, key = PLACES[place]
    file = _template(tmp_path, **changes)
    result = runner.invoke(app, [command[0], file, *command[1:]])
    assert result.exit_code == 1, result.output
    assert key not in result.output
    assert f"{path}: " in result.output and "has the shape of" in result.output


def test_render_prints_a_commit_id_that_says_it_is_one(tmp_path: Path) -> None:
    file = _template(tmp_path, env={"GIT_COMMIT": WANDB}, labels={"git-sha": WANDB})
    result = runner.invoke(app, ["render", file, "--stack-file", STACK, "--format", "json"])
    assert result.exit_code == 0, result.output
    assert WANDB in result.output


def test_import_refuses_a_key_it_cannot_move_to_secrets(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "workerPoolSpecs": [
                    {
                        "machineSpec": {"machineType": "n1-standard-4"},
                        "containerSpec": {"imageUri": "img", "args": ["--key", WANDB]},
                    }
                ]
            }
        )
    )
    result = runner.invoke(app, ["import", str(path)])
    assert result.exit_code == 1
    assert "workerPoolSpecs[0].containerSpec.args[1]: " in result.output
    assert WANDB not in result.output


def test_a_one_line_error_that_quotes_a_key_shows_its_shape_only() -> None:
    """Every CLI error line (a client's or the API's message quoting a value) is redacted."""
    out = io.StringIO()
    print_error(Console(file=out, width=200), f"invalid value {HF!r} at args[3]")
    assert HF not in out.getvalue()
    assert "<a Hugging Face token" in out.getvalue() and "args[3]" in out.getvalue()
