"""Every `vtx ... --help` page names values readably: no type label on flags, one value's type
on repeatable options, arguments in capitals in the usage line."""

from __future__ import annotations

import re

import pytest
import typer
from typer.testing import CliRunner

from vtx.cli import app


def _command_paths(group: typer.main.TyperGroup, prefix: tuple[str, ...] = ()) -> list[tuple]:
    paths: list[tuple] = []
    for name, command in group.commands.items():
        path = (*prefix, name)
        paths.append(path)
        if isinstance(command, typer.main.TyperGroup):
            paths.extend(_command_paths(command, path))
    return paths


COMMANDS = _command_paths(typer.main.get_command(app))


def test_every_command_is_walked() -> None:
    names = {" ".join(p) for p in COMMANDS}
    assert {"launch", "validate", "status", "logs", "local up", "local preempt", "review"} <= names


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_help_labels_read_as_words(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "<bool>" not in result.output
    assert "<list[" not in result.output
    usage = next(line for line in result.output.splitlines() if "Usage:" in line)
    assert not re.search(r"\{\w+\}", usage), usage  # `{file}`: Typer's label, not a word


def test_flags_show_no_value_and_arguments_are_capitals() -> None:
    out = CliRunner().invoke(app, ["launch", "--help"], env={"COLUMNS": "200"}).output
    assert re.search(r"Usage: .*launch \[OPTIONS\] FILE\b", out)
    yes_line = next(line for line in out.splitlines() if "--yes" in line)
    assert "<" not in yes_line
    set_line = next(line for line in out.splitlines() if "--set" in line)
    assert "<str>" in set_line
