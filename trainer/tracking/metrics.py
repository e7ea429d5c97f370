"""Structured logs and throughput (MFU against trainer.config.accelerators' peaks).

Logs are one JSON object per line on stdout with `severity` and `message`: Cloud Logging turns
each into a structured entry (`jsonPayload.step`, `jsonPayload.loss`...) that can be filtered.
On a terminal outside a job they are readable lines instead, above the progress bar
(`trainer.tracking.progress` decides). TensorBoard, W&B and a tuning trial's metric:
trainer.tracking.reporters.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Mapping
from typing import Any

from tqdm import tqdm

from trainer.config.env import VertexEnv
from trainer.tracking.events import Event

# Libraries whose INFO lines are for their own developers, kept to warnings and errors: fsspec
# logs its readahead cache's settings for every file opened ("AdaptiveReadaheadCache enabled
# ..."), one line per file and rank in a job's logs; gcsfs, how it found credentials.
QUIET_LIBRARIES = ("fsspec", "gcsfs")
# LogRecord attributes that are not user-provided `extra=` fields.
_RECORD_FIELDS = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}
_SEVERITY = {"WARNING": "WARNING", "ERROR": "ERROR", "CRITICAL": "CRITICAL", "DEBUG": "DEBUG"}


class JsonFormatter(logging.Formatter):
    """One line of JSON per record; `extra=` fields become top-level keys."""

    def __init__(self, rank: int) -> None:
        super().__init__()
        self.rank = rank

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "severity": _SEVERITY.get(record.levelname, "INFO"),
            "message": record.getMessage(),
            "logger": record.name,
            "rank": self.rank,
        }
        entry.update({k: v for k, v in vars(record).items() if k not in _RECORD_FIELDS})
        if record.exc_info:
            entry["message"] += "\n" + self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def _value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


class HumanFormatter(logging.Formatter):
    """`[rank R] SEVERITY message key=value ...`, every `extra=` field kept; the prefix is left
    out for rank 0 and the severity for INFO, the lines a person reads most."""

    def __init__(self, rank: int) -> None:
        super().__init__()
        self.prefix = f"[rank {rank}] " if rank else ""

    def format(self, record: logging.LogRecord) -> str:
        fields = {k: v for k, v in vars(record).items() if k not in _RECORD_FIELDS}
        level = "" if record.levelno == logging.INFO else f"{record.levelname} "
        text = " ".join([record.getMessage(), *(f"{k}={_value(v)}" for k, v in fields.items())])
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return f"{self.prefix}{level}{text}"


class TqdmHandler(logging.StreamHandler):
    """Writes through `tqdm.write`, which lifts a bar drawn on stdout or stderr, prints the line
    and redraws the bar below it, so log lines and the bar never mangle each other."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            tqdm.write(self.format(record), file=self.stream)
        except Exception:  # logging's contract: a failing handler never raises into the caller
            self.handleError(record)


def log_start(environ: Mapping[str, str] | None = None) -> None:
    """In a job, one JSON line as the process starts, before torch and transformers load
    (seconds): the platform's goodput timeline (jobs/runs/goodput.py) measures a start's
    import and load time from it, and the time a restart took up to it. Outside a job, where
    a person reads the terminal, nothing."""
    env = os.environ if environ is None else environ
    if not VertexEnv.from_environ(env).in_job:
        return
    try:
        rank = int(env.get("RANK") or 0)  # torchrun's global rank; Vertex's node rank without it
    except ValueError:
        rank = 0
    line = {"severity": "INFO", "message": Event.STARTING.value, "logger": __name__, "rank": rank}
    print(json.dumps(line), flush=True)


def setup_logging(rank: int, human: bool = False, level: int = logging.INFO) -> None:
    """JSON lines on stdout; with `human` (a terminal, see trainer.tracking.progress), readable
    lines written above the progress bar."""
    handler = TqdmHandler(sys.stdout) if human else logging.StreamHandler(sys.stdout)
    handler.setFormatter(HumanFormatter(rank) if human else JsonFormatter(rank))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for name in QUIET_LIBRARIES:
        logging.getLogger(name).setLevel(logging.WARNING)


class Throughput:
    """Tokens and time since the last report."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.start = time.perf_counter()
        self.tokens = 0
        self.slots = 0
        self.loss_sum = 0.0
        self.loss_count = 0

    def add(self, tokens: int, slots: int, loss: float) -> None:
        self.tokens += tokens
        self.slots += slots
        self.loss_sum += loss
        self.loss_count += 1

    def report(
        self, flops_per_token: float, peak: float | None, world_size: int
    ) -> dict[str, float]:
        elapsed_s = max(time.perf_counter() - self.start, 1e-9)
        tokens_per_s = self.tokens / elapsed_s
        out = {
            "loss": self.loss_sum / max(self.loss_count, 1),
            "tokens_per_s": tokens_per_s,
            "padding_efficiency": self.tokens / max(self.slots, 1),
        }
        if peak:
            out["mfu"] = tokens_per_s * flops_per_token / (peak * world_size)
        return out
