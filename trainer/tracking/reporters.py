"""Where the trainer's metrics go besides its JSON log lines: one `log(step, metrics)` and
`close(exit_code)` in front of TensorBoard, Weights & Biases and a tuning trial's metric file.

The loop logs each `train` and `eval` line, then hands the same numbers under the same names
(`loss`, `lr`, `grad_norm`, `tokens_per_s`, `padding_efficiency`, `mfu`; `eval_loss`) and the
same step to `Reporters.log`. All of it happens on rank 0 only; other ranks get no reporters.

- TensorBoard (`report_to: [tensorboard]`, the default): scalars `train/<name>` and
  `eval/loss` under `AIP_TENSORBOARD_LOG_DIR` (else `<output_dir>/logs`).
- W&B (`report_to: [wandb]`): trainer/tracking/wandb_run.py.
- A tuning trial (`CLOUD_ML_TRIAL_ID` or `CLOUD_ML_HP_METRIC_TAG` set):
  trainer/tracking/trial_metric.py.

MLflow is not among them: see trainer/README.md (Tracking).
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from trainer.config.env import TrackingEnv
from trainer.config.schema import TrainConfig
from trainer.tracking.trial_metric import EVAL_LOSS, HypertuneReporter, metric_source, metric_tag
from trainer.tracking.wandb_run import WandbReporter, check_credentials

log = logging.getLogger(__name__)


class Reporter(Protocol):
    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        """Record `metrics` (the log line's names) at optimizer step `step`."""

    def close(self, exit_code: int = 0) -> None:
        """Flush and finish; `exit_code` is the run's (143: preempted, to be resumed)."""


class TensorBoardReporter:
    """Scalars to TensorBoard. Events are written to a local directory and copied to a `gs://`
    log directory after every flush: the event writer appends to its file, and GCS objects
    cannot be appended to. A resumed run writes a new event file that starts by purging the
    steps after its checkpoint, which an earlier attempt may have logged before it died: they
    are computed again, and TensorBoard shows each step once, with this attempt's values."""

    def __init__(self, log_dir: str, resumed_at: int | None) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.remote = log_dir if "://" in log_dir else None
        self.local = Path(tempfile.mkdtemp(prefix="vtx-tb-")) if self.remote else Path(log_dir)
        purge_step = None if resumed_at is None else resumed_at + 1
        self.writer = SummaryWriter(str(self.local), purge_step=purge_step)
        if purge_step is not None:
            self._restart(purge_step)

    def _restart(self, purge_step: int) -> None:
        """A SessionLog START at `purge_step`: torch's `purge_step` alone writes a bare event
        that TensorBoard's legacy reader honours and its plugin reader (the one the UI uses)
        does not; both purge on this, as on a TensorFlow restart."""
        from tensorboard.compat.proto.event_pb2 import Event, SessionLog

        start = SessionLog(status=SessionLog.START)
        self.writer.file_writer.add_event(
            Event(step=purge_step, wall_time=time.time(), session_log=start)
        )

    @staticmethod
    def tag(name: str) -> str:
        return "eval/loss" if name == EVAL_LOSS else f"train/{name}"

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        for name, value in metrics.items():
            self.writer.add_scalar(self.tag(name), value, step)
        self.writer.flush()
        if self.remote:
            self._upload()

    def _upload(self) -> None:
        import fsspec

        fs, root = fsspec.core.url_to_fs(self.remote)
        for path in self.local.iterdir():
            fs.put_file(str(path), f"{root.rstrip('/')}/{path.name}")

    def close(self, exit_code: int = 0) -> None:
        self.writer.close()
        if self.remote:
            self._upload()


class Reporters:
    """Every reporter of this process, in front of one interface; none on ranks above 0."""

    def __init__(self, reporters: list[Reporter]) -> None:
        self.reporters = reporters

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        for reporter in self.reporters:
            reporter.log(step, metrics)

    def close(self, exit_code: int = 0) -> None:
        for reporter in self.reporters:
            try:
                reporter.close(exit_code)
            except Exception:  # one tracker failing to flush must not hide the others' data
                log.exception("closing %s failed", type(reporter).__name__)


def check_reporting(cfg: TrainConfig, tracking: TrackingEnv, in_job: bool) -> None:
    """ConfigError, before training, for what would make a reporter fail later: a tuning
    metric the trainer does not log (`hypertune_metric` is checked outside trials too), or
    W&B without credentials."""
    tag = metric_tag(cfg, tracking) if tracking.is_trial else cfg.hypertune_metric
    if tag:
        metric_source(tag, cfg)
    if "wandb" in cfg.report_to:
        check_credentials(os.environ, in_job)


def build_reporters(
    cfg: TrainConfig,
    tracking: TrackingEnv,
    rank: int,
    tensorboard_dir: str | None,
    checkpoint_dir: str,
    resumed_at: int | None,
) -> Reporters:
    """This process's reporters. `resumed_at`: the checkpoint's step when resuming, else None."""
    if rank != 0:
        return Reporters([])
    reporters: list[Reporter] = []
    if tensorboard_dir is not None:
        reporters.append(TensorBoardReporter(tensorboard_dir, resumed_at))
    if "wandb" in cfg.report_to:
        reporters.append(WandbReporter(cfg, tracking, checkpoint_dir, resumed_at))
    if tracking.is_trial:
        reporters.append(HypertuneReporter(cfg, tracking))
    return Reporters(reporters)
