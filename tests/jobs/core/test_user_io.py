"""jobs.core.user_io: what a person names is read only when it is a regular file (or stdin),
within a limit, and written with one-line errors; JSON they type cannot nest past the parser.

The FIFO tests carry a timeout: before the regular-file check, opening a FIFO with no writer
blocked forever, and a regression must fail, not hang the suite."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

from jobs.core.user_io import (
    MAX_JSON_DEPTH,
    UserFileError,
    load_json_text,
    read_user_file,
    write_user_file,
)
from tests.conftest import HANG_S

FIFO_TIMEOUT_S = HANG_S


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe.yaml"
    os.mkfifo(path)
    return path


@pytest.mark.timeout(FIFO_TIMEOUT_S)
@pytest.mark.parametrize("stdin", [False, True], ids=["file only", "stdin allowed"])
def test_a_fifo_without_a_writer_is_refused_not_waited_on(fifo: Path, stdin: bool) -> None:
    with pytest.raises(UserFileError) as refused:
        read_user_file(fifo, 1024, stdin=stdin)
    assert str(refused.value).startswith(f"{fifo} is a FIFO (named pipe), not a regular file; ")
    assert ("pass - and pipe it in" in str(refused.value)) == stdin


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_a_device_that_never_ends_is_refused_before_reading() -> None:
    with pytest.raises(UserFileError, match=r"^/dev/zero is a character device, not a regular"):
        read_user_file(Path("/dev/zero"), 1024)


def test_a_directory_a_missing_file_and_a_file_over_the_limit(tmp_path: Path) -> None:
    with pytest.raises(UserFileError, match="is a directory; name a file"):
        read_user_file(tmp_path, 1024)
    with pytest.raises(UserFileError) as missing:
        read_user_file(tmp_path / "nope.yaml", 1024)
    assert missing.value.missing and missing.value.reason == "does not exist"
    big = tmp_path / "big.yaml"
    big.write_bytes(b"x" * 1025)
    with pytest.raises(UserFileError, match=r"is 1,025 bytes; files here are read up to 1,024.*"):
        read_user_file(big, 1024, too_big="cut it")
    big.write_bytes(b"x" * 1024)
    assert read_user_file(big, 1024) == b"x" * 1024


def test_a_dash_is_stdin_only_where_the_caller_takes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"[1]")))
    assert read_user_file("-", 1024, stdin=True) == b"[1]"
    with pytest.raises(UserFileError, match=r"^- does not exist"):  # a file named "-"
        read_user_file("-", 1024)


def test_stdin_is_read_no_further_than_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    class Endless(io.RawIOBase):
        """/dev/zero as stdin: what was asked for, for ever."""

        def readable(self) -> bool:
            return True

        def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
            buffer[:] = b"\0" * len(buffer)
            return len(buffer)

    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BufferedReader(Endless())))
    with pytest.raises(UserFileError, match=r"^stdin holds more than 1,024 bytes"):
        read_user_file("-", 1024, stdin=True)


def test_every_write_failure_is_one_line_naming_the_path_and_the_fix(tmp_path: Path) -> None:
    with pytest.raises(UserFileError, match=f"^{tmp_path} is a directory; name a file"):
        write_user_file(tmp_path, "x")
    missing = tmp_path / "no" / "job.yaml"
    with pytest.raises(UserFileError) as refused:
        write_user_file(missing, "x")
    assert str(refused.value) == (
        f"{missing} cannot be written: the folder {missing.parent} does not exist; create it "
        f"first (mkdir -p {missing.parent}) or name another path"
    )
    (tmp_path / "file").write_text("")
    with pytest.raises(UserFileError, match="a part of its folder path is a file"):
        write_user_file(tmp_path / "file" / "job.yaml", "x")
    write_user_file(tmp_path / "job.yaml", "é\n")
    assert (tmp_path / "job.yaml").read_bytes() == "é\n".encode()


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_full_disk_is_one_line() -> None:
    with pytest.raises(UserFileError, match=r"^/dev/full was not written whole: no space left"):
        write_user_file(Path("/dev/full"), "x" * 100_000)


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_no_permission_is_one_line(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    with pytest.raises(UserFileError, match="cannot be written: permission denied"):
        write_user_file(locked / "job.yaml", "x")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[" * 10_000, f"nested more than {MAX_JSON_DEPTH} levels"),  # RecursionError before
        ("[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1), "nested more than"),
        ("9" * 5000, "not usable JSON"),  # past Python's digit limit
        ("{not json", "not JSON (Expecting property name"),
    ],
    ids=["past the parser", "a level past the limit", "huge integer", "not JSON"],
)
def test_hostile_json_is_one_value_error(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says.replace("(", r"\(")):
        load_json_text(text)


def test_json_at_the_depth_limit_is_read() -> None:
    text = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
    assert load_json_text(text) == json.loads(text)
