"""What a person at a terminal sees: a tqdm bar, with readable log lines printed above it.

Two audiences, two formats, chosen once at start-up (`choose_output`):
- a job (Vertex, or the local platform, which pipes every replica's output) or any stdout that
  is not a terminal: one JSON object per line, for Cloud Logging and `vtx logs`; no bar.
- a terminal: each log record as one readable line (`train step=5 loss=2.31 lr=0.003 ...`),
  every field kept, written above the bar as HF Trainer prints its metric dicts; and, on rank 0
  only, when stderr is a terminal too, a bar on stderr: steps done/total, it/s, elapsed<ETA,
  the last step's loss and the last logged tokens/s. `disable_tqdm: true` (HF's name) keeps the
  readable lines and drops the bar.

`python -m trainer ... > run.jsonl` therefore writes JSON to the file and draws the bar on the
terminal. Nothing is logged only to the bar: every number in it is also in a log line, at
`logging_steps`, and in TensorBoard.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import IO

from tqdm import tqdm


@dataclass(frozen=True)
class OutputMode:
    human_logs: bool
    """Readable log lines (stdout is a terminal, outside a job) instead of JSON."""
    bar: bool
    """Draw the progress bar (rank 0, stderr is a terminal, outside a job, not disabled)."""


def choose_output(
    in_job: bool, rank: int, disable_tqdm: bool, stdout: IO[str], stderr: IO[str]
) -> OutputMode:
    """JSON inside a job whatever the streams: Cloud Logging parses it, and a job's output is
    read by programs (`vtx logs`), not watched live on a terminal."""
    human = not in_job and _is_terminal(stdout)
    bar = not in_job and rank == 0 and not disable_tqdm and _is_terminal(stderr)
    return OutputMode(human_logs=human, bar=bar)


def _is_terminal(stream: IO[str]) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class ProgressBar:
    """The bar of one run, or a no-op where `enabled` is False (other ranks, jobs, pipes)."""

    def __init__(self, enabled: bool, total_steps: int, done_steps: int) -> None:
        self.bar: tqdm | None = None
        self.postfix: dict[str, str] = {}
        if enabled:
            # initial: a resumed run's ETA counts only the steps left, at this run's rate.
            self.bar = tqdm(
                total=total_steps, initial=done_steps, desc="train", unit="step", file=sys.stderr
            )

    def step(self, loss: float) -> None:
        if self.bar is None:
            return
        self.postfix["loss"] = f"{loss:.4f}"
        self.bar.set_postfix(self.postfix, refresh=False)  # drawn by update, at most 10/s
        self.bar.update(1)

    def tokens_per_s(self, value: float) -> None:
        """Set at each logging interval: a per-step figure would jump with every batch."""
        self.postfix["tokens/s"] = f"{value:,.0f}"

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
