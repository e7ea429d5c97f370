"""What the VM agent does for one replica: run its command, timestamp its output, record its exit.

`python -m jobs.local.custom_jobs.replica_runner --log FILE --exit FILE -- COMMAND...`

The executor starts this as the leader of a new process group, so signals sent to the group
reach the command too (as a VM's shutdown reaches every process in the container). It writes
one JSON line per output line to ``--log`` and ``{"exit_code": N}`` to ``--exit`` when the
command ends. Both are files, so a control plane that crashed and restarted can re-attach:
it finds the exit code on disk instead of in a ``wait()`` it can no longer do.

An output line longer than Cloud Logging keeps of a log entry (``ENTRY_BYTES``) is cut there and
marked: the runner never holds more of a line than that, so a command that writes megabytes
without a newline (or never writes one) costs it no memory and its log one entry.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from jobs.core.formats import now_rfc3339

ENTRY_BYTES = 256 * 1024
"""Cloud Logging's limit on the size of a LogEntry, about 256 KB (docs/vertex-facts.md,
"Logs"): the most of one output line a log entry keeps here."""
CUT_MARK = f" [cut at {ENTRY_BYTES} bytes: Cloud Logging takes log entries of up to 256 KB]"
RECORD_BYTES_MAX = 8 * ENTRY_BYTES
"""The longest JSON line the runner writes: JSON escapes a byte of a line to at most 6 bytes
(``\\ufffd`` for a byte that is not UTF-8), and the timestamp and keys fit in the rest."""


def exit_code(returncode: int) -> int:
    """A shell-style exit code: 128+N for death by signal N (SIGTERM -> 143)."""
    return 128 - returncode if returncode < 0 else returncode


def output_lines(stream: BinaryIO) -> Iterator[str]:
    """The lines of ``stream``, without their newline, each cut to ``ENTRY_BYTES`` (and marked):
    the rest of a longer line is read a piece at a time and dropped."""
    while raw := stream.readline(ENTRY_BYTES + 1):
        if raw.endswith(b"\n") or len(raw) <= ENTRY_BYTES:  # a whole line, or the last one
            yield raw.decode("utf-8", errors="replace").rstrip("\n")
            continue
        yield raw[:ENTRY_BYTES].decode("utf-8", errors="replace") + CUT_MARK
        while (rest := stream.readline(ENTRY_BYTES)) and not rest.endswith(b"\n"):
            pass


def run(command: list[str], log_path: Path, exit_path: Path) -> int:
    # Survive the group's SIGTERM long enough to record the command's exit. A Python handler,
    # not SIG_IGN: ignored dispositions would be inherited by the command across exec.
    signal.signal(signal.SIGTERM, lambda _signum, _frame: None)
    with log_path.open("a", encoding="utf-8") as log:
        try:
            proc = subprocess.Popen(
                command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        except OSError as exc:
            log.write(json.dumps({"ts": now_rfc3339(), "m": f"cannot start {command[0]}: {exc}"}))
            log.write("\n")
            code = 127
        else:
            assert proc.stdout is not None
            for line in output_lines(proc.stdout):
                log.write(json.dumps({"ts": now_rfc3339(), "m": line}) + "\n")
                log.flush()
            code = exit_code(proc.wait())
    tmp = exit_path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"exit_code": code, "ts": now_rfc3339()}))
    tmp.replace(exit_path)
    return code


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--exit", type=Path, required=True)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    run(command, args.log, args.exit)


if __name__ == "__main__":
    main()
