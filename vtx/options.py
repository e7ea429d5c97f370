"""What the commands share: their option types, the console, the stack the options name, and the
one wrapper that turns an API failure into a message and an exit code."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from jobs.core.stack import StackError, StackOutputs, load_pulumi_stack, load_stack_file
from jobs.core.user_io import UserFileError, write_user_file
from jobs.launch.checks import checked_template
from jobs.local.platform.state import local_stack_outputs
from jobs.runs.logs import LogsError
from jobs.spec.document import load_document
from jobs.spec.template import JobTemplate
from jobs.vertex.errors import VertexError
from vtx.views.problems import print_error, print_problems

FileArg = Annotated[
    Path, typer.Argument(help="A vtx template, or gcloud CustomJobSpec/CustomJob YAML.")
]
SetOpt = Annotated[
    list[str] | None,
    typer.Option("--set", help="Override a field: key.path=value (YAML value). Repeatable."),
]
PollOpt = Annotated[
    float, typer.Option("--poll-s", hidden=True, help="Seconds between polls when following.")
]
StackOpt = Annotated[str | None, typer.Option("--stack", help="Stack name (Pulumi), or `local`.")]
StackFileOpt = Annotated[
    Path | None, typer.Option("--stack-file", help="Exported `platform` stack output JSON.")
]
RegionOpt = Annotated[
    str | None, typer.Option("--region", help="Region to check against (default: the stack's).")
]
RefArg = Annotated[str, typer.Argument(help="Run id, job id or full job resource name.")]
FollowOpt = Annotated[bool, typer.Option("--follow", "-f", help="Until the run ends.")]


def console(stderr: bool = False) -> Console:
    return Console(stderr=stderr, soft_wrap=True)


def fail(message: str, code: int = 2) -> typer.Exit:
    print_error(console(stderr=True), message)
    return typer.Exit(code)


def write_output(path: Path, text: str) -> None:
    """``text`` into the ``--output`` file, or the command ends with one line saying why not
    (a directory, a missing folder, no permission, a full disk) and exit code 2."""
    try:
        write_user_file(path, text)
    except UserFileError as exc:
        raise fail(f"--output {exc}") from None


@contextmanager
def api_errors(out: Console, label: str = "error") -> Iterator[None]:
    """Vertex and log failures become one red line and exit code 1 (never a traceback)."""
    try:
        yield
    except (VertexError, LogsError) as exc:
        print_error(out, exc, label)
        raise typer.Exit(1) from exc


def _stack_outputs(stack: str | None, stack_file: Path | None) -> StackOutputs:
    if stack_file is not None:
        return load_stack_file(stack_file)
    if stack == "local":
        return local_stack_outputs()
    if stack is None:
        raise StackError("no stack given: pass --stack NAME, --stack local or --stack-file FILE")
    return load_pulumi_stack(stack)


def optional_stack(stack: str | None, stack_file: Path | None) -> StackOutputs | None:
    """The stack the options name, or None when they name none."""
    if stack is None and stack_file is None:
        return None
    try:
        return _stack_outputs(stack, stack_file)
    except StackError as exc:
        raise fail(str(exc)) from exc


def required_stack(stack: str | None, stack_file: Path | None) -> StackOutputs:
    outputs = optional_stack(stack, stack_file)
    if outputs is None:
        raise fail("no stack given: pass --stack NAME, --stack local or --stack-file FILE")
    return outputs


def load_template(path: Path, overrides: list[str], region: str | None) -> JobTemplate:
    """The template at ``path`` read and checked whole, or the command ends with its problems."""
    template, problems = checked_template(load_document(path, overrides), region)
    if template is None:
        print_problems(console(), problems)
        raise typer.Exit(1)
    return template
