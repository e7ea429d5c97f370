"""How problems and errors print: the red ``error:`` line, a template's problems with what to
write instead, and its warnings."""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from jobs.core.credentials import redact
from jobs.core.problems import Problem


def print_error(console: Console, message: object, label: str = "error") -> None:
    """One red-labelled line on `console`; the message is escaped, because paths and API
    messages may hold [brackets] that rich would take for markup, and redacted, because an
    error may quote what it was given (a value of a job, an API's answer about it)."""
    console.print(f"[red]{label}:[/red] {escape(redact(str(message)))}", highlight=False)


def print_problems(console: Console, problems: Iterable[Problem]) -> None:
    for p in problems:
        where = f"{p.source}: " if p.source else ""
        line = Text(f"✗ {where}", style="red")
        line.append(f"{p.path}: ", style="bold")
        line.append(p.message)
        console.print(line)
        if p.hint:
            console.print(Text(f"    write instead: {p.hint}", style="cyan"))


def print_warnings(console: Console, problems: Iterable[Problem]) -> None:
    """Like ``print_problems``, in yellow: worth fixing, not a reason to refuse the job."""
    for p in problems:
        where = f"{p.source}: " if p.source else ""
        line = Text(f"! warning: {where}", style="yellow")
        line.append(f"{p.path}: ", style="bold")
        line.append(p.message)
        console.print(line)
        if p.hint:
            console.print(Text(f"    instead: {p.hint}", style="cyan"))
