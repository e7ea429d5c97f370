"""What every command that changes something does after its plan: refuse, stop at a dry run,
ask, then do it (launch, study and ladder launch, model upload, deploy, undeploy)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import typer
from rich.console import Console

from jobs.core.problems import Refused
from vtx.views.problems import print_error


def ask(question: str) -> bool:
    return typer.confirm(question, default=False)


@dataclass(frozen=True)
class Ask:
    """How a command goes ahead after its plan: ``yes`` does not ask, ``dry_run`` stops."""

    yes: bool = False
    dry_run: bool = False
    confirm: Callable[[str], bool] = ask


def confirmed(
    out: Console,
    show: Callable[[], None],
    answer: Ask,
    question: str,
    *,
    refusal: str | None = None,
    refused: str = "not submitted",
    done: str = "submitted",
) -> int | None:
    """Print the plan (``show``); None to go ahead, else the exit code to end with: 1 for a
    ``refusal`` (printed under the label ``refused``), 0 for a dry run, 1 for a no. ``done``
    says what would have happened: "nothing submitted", "not submitted"."""
    show()
    if refusal:
        print_error(out, refusal, refused)
        return 1
    if answer.dry_run:
        out.print(f"dry run: nothing {done}")
        return 0
    if not answer.yes and not answer.confirm(question):
        out.print(f"not {done}")
        return 1
    return None


def print_refused(out: Console, refused: Refused, label: str) -> int:
    """Every problem of a plan that was refused before anything was sent; the exit code, 1."""
    for problem in refused.problems:
        print_error(out, problem, label)
    return 1
