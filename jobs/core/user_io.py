"""Files a person names on the command line, and JSON they type: read and written so that
nothing they can name hangs, fills the memory or ends in a traceback.

Reading takes a regular file only, or stdin where the caller takes ``-``, and at most a size
limit the caller gives:

- the path is checked with ``os.stat`` before it is opened, because opening a FIFO that has no
  writer blocks in ``open()`` itself, before any read could be bounded; a directory, a FIFO, a
  device (``/dev/zero`` says it is 0 bytes and never ends) or a socket is refused by name;
- it is then opened with ``O_NONBLOCK`` and checked again with ``fstat``, so a path swapped for
  a FIFO between the two calls cannot block either;
- it is read as ``limit + 1`` bytes at most, so a file that grew after the check is caught too.

Writing (``-o``) turns every ``OSError`` into one ``UserFileError`` that names the path and what
to do: a directory, a folder that does not exist, no permission, a read-only or a full disk
(``/dev/full``). Writing to a pipe or ``/dev/stdout`` stays allowed.

``load_json_text`` parses JSON typed on the command line or read from such a file, refusing
nesting deeper than ``MAX_JSON_DEPTH`` (Python's parser raises RecursionError near 1,000 levels,
and ``requests`` would hit the same on the way out) and integers beyond Python's digit limit,
each as a ``ValueError`` of one line."""

from __future__ import annotations

import errno
import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

STDIN = "-"
"""The name that means standard input, where a command takes it."""
MAX_JSON_DEPTH = 64
"""Levels of lists and objects in JSON a person writes (instances, parameters): an image as
nested lists is 3 or 4, a chat prompt 3."""

_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class UserFileError(Exception):
    """A named file that cannot be read or written; ``str()`` is the whole one-line message:
    ``<path> <reason>; <hint>``."""

    def __init__(self, path: str, reason: str, hint: str | None = None) -> None:
        self.path = path
        self.reason = reason
        self.hint = hint
        self.missing = reason == "does not exist"
        super().__init__(f"{path} {reason}" + (f"; {hint}" if hint else ""))


def shown_path(path: Path | str) -> str:
    """``path`` printable on any terminal (a non-UTF-8 file name holds surrogates)."""
    return str(path).encode("utf-8", "backslashreplace").decode("utf-8")


def read_user_file(
    path: Path | str, limit: int, *, stdin: bool = False, too_big: str | None = None
) -> bytes:
    """The bytes of the regular file at ``path`` (or of stdin, when ``stdin`` and the path is
    ``-``), at most ``limit`` of them; UserFileError for anything else. ``too_big``: what to do
    about a file over the limit, in the caller's words."""
    if stdin and str(path) == STDIN:
        return _read_stdin(limit, too_big)
    shown = shown_path(path)
    other = "save it to a regular file and name that" + (
        ", or pass - and pipe it in" if stdin else ""
    )
    try:
        _check_regular(os.stat(path).st_mode, shown, other)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as stream:
            found = os.fstat(stream.fileno())
            _check_regular(found.st_mode, shown, other)
            if found.st_size > limit:
                raise _too_big(shown, found.st_size, limit, too_big)
            data = stream.read(limit + 1)
    except FileNotFoundError:
        raise UserFileError(shown, "does not exist") from None
    except NotADirectoryError:
        raise UserFileError(shown, "does not exist", "a part of the path is a file") from None
    except PermissionError:
        raise UserFileError(shown, "cannot be read: permission denied") from None
    except OSError as exc:
        raise UserFileError(shown, f"cannot be read: {exc.strerror or exc}") from None
    if len(data) > limit:  # it grew after the check
        raise _too_big(shown, None, limit, too_big)
    return data


def _check_regular(mode: int, shown: str, hint: str) -> None:
    if stat.S_ISDIR(mode):
        raise UserFileError(shown, "is a directory", "name a file")
    for test, kind in _KINDS:
        if test(mode):
            raise UserFileError(shown, f"is {kind}, not a regular file", hint)


def _read_stdin(limit: int, too_big: str | None) -> bytes:
    # The binary buffer where there is one: a test harness's stdin may be text only.
    stream = getattr(sys.stdin, "buffer", None)
    try:
        data = stream.read(limit + 1) if stream is not None else sys.stdin.read(limit + 1)
    except OSError as exc:
        raise UserFileError("stdin", f"cannot be read: {exc.strerror or exc}") from None
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogateescape")
    if len(data) > limit:
        raise UserFileError(
            "stdin", f"holds more than {limit:,} bytes; at most {limit:,} are read", too_big
        )
    return data


def _too_big(shown: str, size: int | None, limit: int, hint: str | None) -> UserFileError:
    """``size``: the file's, where known; None: more than ``limit``."""
    what = f"{size:,} bytes" if size is not None else f"more than {limit:,} bytes"
    return UserFileError(shown, f"is {what}; files here are read up to {limit:,} bytes", hint)


def write_user_file(path: Path, text: str) -> None:
    """``text`` (UTF-8) into ``path``; UserFileError of one line for every way it can fail."""
    shown = shown_path(path)
    try:
        with open(path, "w", encoding="utf-8") as out:
            out.write(text)
    except IsADirectoryError:
        raise UserFileError(
            shown, "is a directory", "name a file (inside it, or elsewhere)"
        ) from None
    except FileNotFoundError:
        folder = shown_path(path.parent)
        raise UserFileError(
            shown,
            f"cannot be written: the folder {folder} does not exist",
            f"create it first (mkdir -p {folder}) or name another path",
        ) from None
    except NotADirectoryError:
        raise UserFileError(
            shown, "cannot be written: a part of its folder path is a file", "name another path"
        ) from None
    except PermissionError:
        raise UserFileError(
            shown, "cannot be written: permission denied", "name a path you may write to"
        ) from None
    except OSError as exc:
        raise _write_error(shown, exc) from None


def require_regular_target(path: Path) -> None:
    """UserFileError unless ``path`` names a regular file or nothing yet: for a file a command
    writes whole (a report), where a pipe, a device or ``/dev/stdout`` would take only part of
    what it means (a page its reader opens by name)."""
    shown = shown_path(path)
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return  # a new file: write_user_file says what is wrong with its folder, if anything
    except OSError as exc:
        raise UserFileError(shown, f"cannot be written: {exc.strerror or exc}") from None
    _check_regular(mode, shown, "name a regular file path")


def _write_error(shown: str, exc: OSError) -> UserFileError:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return UserFileError(
            shown,
            "was not written whole: no space left on its disk",
            "free some space or name a path on another disk; the file may be incomplete",
        )
    if exc.errno == errno.EROFS:
        return UserFileError(
            shown, "cannot be written: the file system is read-only", "name another path"
        )
    return UserFileError(shown, f"cannot be written: {exc.strerror or exc}")


def load_json_text(text: str | bytes) -> Any:
    """The JSON value in ``text``; ValueError of one line when it is not JSON, nests deeper
    than MAX_JSON_DEPTH or holds an integer past Python's digit limit."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None
    except RecursionError:
        raise ValueError(_too_deep()) from None
    except ValueError as exc:  # an integer of more than sys.get_int_max_str_digits() digits
        raise ValueError(f"not usable JSON: {str(exc)[:200]}") from None
    if _nests_deeper(value, MAX_JSON_DEPTH):
        raise ValueError(_too_deep())
    return value


def _too_deep() -> str:
    return f"JSON nested more than {MAX_JSON_DEPTH} levels deep: flatten it"


def _nests_deeper(value: Any, limit: int) -> bool:
    """Whether lists and objects in ``value`` nest more than ``limit`` levels (iterative: the
    value may be as deep as the parser allows)."""
    pending = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        pending.extend((child, depth + 1) for child in children)
    return False
