"""The metric a hyperparameter tuning trial reports, in the file Vertex reads it from.

Vertex (and the local platform) read a trial's measurements from the lines Google's
`cloudml-hypertune` package writes: the file `CLOUD_ML_HP_METRIC_FILE` (default
`/tmp/hypertune/output.metrics`) holds the reporting process's last 100 reports, rewritten whole
on each report, one JSON object per line with sorted keys:

    {"checkpoint_path": "", "global_step": "20", "eval_loss": "2.53", "timestamp": 1.7e9,
     "trial": "3"}

`MetricFile` writes exactly that, in a few lines, instead of depending on the package: its last
release (0.1.0.dev6, 2019) is an sdist only, unmaintained, and does nothing more than this.
tests/trainer/tracking/test_trial.py compares its lines with the ones the real package writes.

Which metric: the study's metric id, which the platform passes as `CLOUD_ML_HP_METRIC_TAG`, else
the config's `hypertune_metric`, else `eval_loss` when there is an eval set and `train_loss`
otherwise. Names are the trainer's own: `eval_loss` (the `eval` log line), and the fields of the
`train` log line (`loss`, `lr`, `grad_norm`, `tokens_per_s`, ...), with `train_loss` another name
for the train line's `loss`.
"""

from __future__ import annotations

import collections
import json
import os
import time
from collections.abc import Mapping

from trainer.config.env import TrackingEnv
from trainer.config.schema import ConfigError, TrainConfig

KEEP_REPORTS = 100
"""cloudml-hypertune keeps this many of a process's reports in the file."""
TRAIN_METRICS = ("loss", "tokens_per_s", "padding_efficiency", "mfu", "lr", "grad_norm")
"""The fields of the `train` log line (`mfu` on GPUs only)."""
ALIASES = {"train_loss": "loss"}
EVAL_LOSS = "eval_loss"


def has_eval_set(cfg: TrainConfig) -> bool:
    return bool(cfg.data.eval_path or cfg.data.eval_fraction)


def metric_tag(cfg: TrainConfig, tracking: TrackingEnv) -> str:
    """The name the trial reports under (see the module's doc)."""
    if tracking.metric_tag:
        return tracking.metric_tag
    if cfg.hypertune_metric:
        return cfg.hypertune_metric
    return EVAL_LOSS if has_eval_set(cfg) else "train_loss"


def metric_source(tag: str, cfg: TrainConfig) -> str:
    """The trainer's logged metric a tag reports; ConfigError, before training, for a tag the
    trainer never logs or an eval metric without an eval set."""
    source = ALIASES.get(tag, tag)
    known = [EVAL_LOSS, *ALIASES, *TRAIN_METRICS]
    if source not in (EVAL_LOSS, *TRAIN_METRICS):
        raise ConfigError(
            f"the tuning metric {tag!r:.60} is not one the trainer logs; use one of "
            f"{', '.join(known)} (the study's metric id, or hypertune_metric)"
        )
    if source == EVAL_LOSS and not has_eval_set(cfg):
        raise ConfigError(
            f"the tuning metric {tag} needs an eval set: set data.eval_fraction (e.g. 0.1) or "
            "data.eval_path, or tune on train_loss"
        )
    return source


class MetricFile:
    """cloudml-hypertune's `HyperTune.report_hyperparameter_tuning_metric`, line for line."""

    def __init__(self, path: str, trial_id: str | None) -> None:
        self.path = path
        self.trial = str(trial_id if trial_id is not None else 0)
        self.reports: collections.deque[dict[str, object]] = collections.deque(maxlen=KEEP_REPORTS)
        directory = os.path.dirname(path)
        if directory:
            os.makedirs(directory, exist_ok=True)

    def report(self, tag: str, value: float, step: int, checkpoint_path: str = "") -> None:
        self.reports.append(
            {
                "timestamp": time.time(),
                "trial": self.trial,
                tag: str(float(value)),
                "global_step": str(int(step) if step else 0),
                "checkpoint_path": checkpoint_path,
            }
        )
        # Rewritten whole, as the package does: the file holds the last KEEP_REPORTS reports.
        with open(self.path, "w") as f:
            for report in self.reports:
                f.write(json.dumps(report, sort_keys=True) + "\n")


class HypertuneReporter:
    """Reports the trial's metric each time the trainer logs it; rank 0 of a trial only."""

    def __init__(self, cfg: TrainConfig, tracking: TrackingEnv) -> None:
        self.tag = metric_tag(cfg, tracking)
        self.source = metric_source(self.tag, cfg)
        self.file = MetricFile(tracking.metric_file, tracking.trial_id)

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        if self.source in metrics:
            self.file.report(self.tag, metrics[self.source], step)

    def close(self, exit_code: int = 0) -> None:
        """Nothing to flush: every report is written when it is made."""
