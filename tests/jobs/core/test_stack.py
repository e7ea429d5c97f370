"""`--stack-file`: whatever the file holds, a StackError naming it, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobs.core.stack import MAX_STACK_FILE_BYTES, StackError, load_stack_file


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"[" * 100_000 + b"]" * 100_000, "is not a stack output"),  # RecursionError before
        (b'{"project": ' + b"9" * 5000 + b"}", "is not a stack output"),  # int digits limit
        (b"\xff\xfe{}", "cannot read stack file"),
        (b"{" + b" " * MAX_STACK_FILE_BYTES + b"}", "a stack output is a few KiB"),
        (b"{not json", "is not JSON"),
        (b'{"project": 1}', "is not a vtx stack output"),
    ],
)
def test_a_hostile_stack_file_is_a_stack_error(tmp_path: Path, content: bytes, says: str) -> None:
    path = tmp_path / "stack.json"
    path.write_bytes(content)
    with pytest.raises(StackError, match=says):
        load_stack_file(path)
