"""Problem: one thing wrong with an input, reported with where it is and what to write instead.

Shared by template validation, job policies, the local control plane's 400 answers and the
infra config checks' CLI output, so every error in vtx reads the same way."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from jobs.core.credentials import redact


@dataclass(frozen=True)
class Problem:
    path: str
    """Field path inside the document, dotted (``pools.chief.accelerator_count``)."""
    message: str
    """What is wrong."""
    hint: str | None = None
    """What to write instead, when there is a clear fix."""
    source: str | None = None
    """The file the document came from, when there is one."""

    def __post_init__(self) -> None:
        # A problem may quote what it was given (a value, a key) and is printed, logged and
        # answered by the local API: a credential-shaped part never leaves in it.
        for name in ("path", "message", "hint"):
            text = getattr(self, name)
            if text:
                object.__setattr__(self, name, redact(text))

    def __str__(self) -> str:
        where = f"{self.source}: " if self.source else ""
        text = f"{where}{self.path}: {self.message}"
        return f"{text} (hint: {self.hint})" if self.hint else text


class HintedValueError(ValueError):
    """A field check failure that also says what to write instead (pydantic keeps the error in
    its ``ctx``; the Problem built from it takes ``hint`` from there)."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.hint = hint


def join_path(path: str, key: str | int) -> str:
    """``a.b[0]``; keys holding '.' (or empty) as ``['a.b']`` so the path stays readable."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    if key == "" or "." in key or "[" in key:
        return f"{path}[{key!r}]"
    return f"{path}.{key}" if path else key


def field_path(parts: Iterable[str | int]) -> str:
    """The path of a field from its parts (pydantic's ``loc``): ``pools.chief.env['A.B']``."""
    path = ""
    for part in parts:
        path = join_path(path, part)
    return path or "(top)"


class Refused(Exception):
    """What stops a command before it sends anything: every problem found, each naming what to
    do (`vtx model upload`, `vtx deploy`, `vtx undeploy` plan this way)."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems
