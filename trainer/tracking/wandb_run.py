"""Weights & Biases: one W&B run per vtx run, across all its attempts (`report_to: [wandb]`).

- Identity: the W&B run id is the vtx run id (`VTX_RUN_ID`, which names the run's output prefix
  `gs://<checkpoints>/runs/<run id>/` and is the same in every attempt), plus `-trial-<id>` in a
  tuning trial (the trials of a study share the vtx run id; each has its own outputs). Outside
  vtx it is `vtx-` and a hash of the checkpoint directory: what decides that a run resumes also
  decides that its W&B run does. Every attempt calls `wandb.init(id=..., resume="allow")`.
- Steps: each record carries the trainer's `step` (W&B's x-axis for every metric, as HF's
  callback does with its global step), next to the metrics under the names of the JSON log lines.
  W&B's own `_step` only counts records, so an eval that a SIGTERM save deferred, which the
  resumed attempt runs at the checkpoint's step, is kept: `log(step=...)` below W&B's counter
  would be dropped. A SIGTERM save logs its step first, so the resumed attempt continues at the
  next one. After a death without SIGTERM the steps between the last checkpoint and the last
  record are computed again; W&B's resumed summary says how far the earlier attempt got, and
  those steps are not logged twice (online only: offline runs know nothing of earlier attempts).
- The API key is `WANDB_API_KEY`, from Secret Manager through the template's `secrets:`
  (`WANDB_API_KEY: wandb-api-key`); it is never read, printed or logged here, only checked for.
- Rank 0 only; `wandb` is imported when a run starts (it takes about a second).
"""

from __future__ import annotations

import hashlib
import logging
import netrc
import os
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlparse

from trainer.config.env import TrackingEnv
from trainer.config.schema import ConfigError, TrainConfig

log = logging.getLogger(__name__)

KEY_ENV = "WANDB_API_KEY"
KEY_SECRET = "wandb-api-key"
"""The Secret Manager secret the stacks create for the key."""
NO_KEY_MODES = ("offline", "disabled")
STEP = "step"
EXIT_PREEMPTED = 143


def check_credentials(environ: Mapping[str, str], in_job: bool) -> None:
    """ConfigError, before training, when W&B could not log in: no key, not offline, and (outside
    a job) no `wandb login`."""
    if environ.get(KEY_ENV) or environ.get("WANDB_MODE", "").lower() in NO_KEY_MODES:
        return
    if not in_job and _logged_in(environ):
        return
    raise ConfigError(
        f"report_to has wandb but {KEY_ENV} is not set: add the W&B key to the template's "
        f"secrets (`secrets: {{{KEY_ENV}: {KEY_SECRET}}}`, the Secret Manager secret the stack "
        "creates; put the key in it with `gcloud secrets versions add "
        f"{KEY_SECRET} --data-file=-`), or set WANDB_MODE=offline to log locally"
    )


def _logged_in(environ: Mapping[str, str]) -> bool:
    """`wandb login` wrote a key for the W&B host to ~/.netrc."""
    host = urlparse(environ.get("WANDB_BASE_URL", "https://api.wandb.ai")).hostname or ""
    try:
        return netrc.netrc(environ.get("NETRC")).authenticators(host) is not None
    except (OSError, netrc.NetrcParseError):
        return False


def run_id(tracking: TrackingEnv, checkpoint_dir: str) -> str:
    """The W&B run id of this vtx run (see the module's doc)."""
    if tracking.run_id:
        trial = f"-trial-{tracking.trial_id}" if tracking.trial_id else ""
        return re.sub(r"[^A-Za-z0-9_.-]", "-", f"{tracking.run_id}{trial}")
    where = checkpoint_dir if "://" in checkpoint_dir else os.path.abspath(checkpoint_dir)
    return f"vtx-{hashlib.sha256(where.rstrip('/').encode()).hexdigest()[:16]}"


def already_logged(step: int, resumed_at: int | None, logged_through: int | None) -> bool:
    """A step an earlier attempt logged and this one computed again: after the checkpoint it
    resumed from, up to the last step W&B holds. The checkpoint's own step is never one: the
    resumed attempt logs only its deferred eval there."""
    if resumed_at is None or logged_through is None:
        return False
    return resumed_at < step <= logged_through


class WandbReporter:
    """The trainer's metrics, its config and W&B's system figures, to one W&B run."""

    def __init__(
        self,
        cfg: TrainConfig,
        tracking: TrackingEnv,
        checkpoint_dir: str,
        resumed_at: int | None,
    ) -> None:
        import wandb

        self.resumed_at = resumed_at
        name = cfg.run_name or tracking.run_id
        if name and tracking.trial_id:
            name = f"{name} trial {tracking.trial_id}"
        self.run = wandb.init(
            id=run_id(tracking, checkpoint_dir),
            resume="allow",
            project=cfg.wandb_project or os.environ.get("WANDB_PROJECT") or "vtx",
            entity=cfg.wandb_entity or os.environ.get("WANDB_ENTITY") or None,
            name=name,
            group=tracking.run_id if tracking.trial_id else None,
            config=self._config(cfg, tracking),
            # stdout stays the JSON lines Cloud Logging reads; W&B's banner stays out of them.
            settings=wandb.Settings(console="off", quiet=True),
        )
        self.run.define_metric(STEP)
        self.run.define_metric("*", step_metric=STEP)
        summary = self.run.summary.get(STEP) if self.run.resumed else None
        self.logged_through = int(summary) if isinstance(summary, int | float) else None
        log.info(
            "wandb run",
            extra={"wandb_run_id": self.run.id, "url": self.run.url, "resumed": self.run.resumed},
        )

    @staticmethod
    def _config(cfg: TrainConfig, tracking: TrackingEnv) -> dict[str, Any]:
        vtx = {"run_id": tracking.run_id, "trial_id": tracking.trial_id}
        return {**cfg.model_dump(mode="json"), "vtx": vtx}

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        if already_logged(step, self.resumed_at, self.logged_through):
            return
        self.run.log({**metrics, STEP: step})

    def close(self, exit_code: int = 0) -> None:
        if exit_code == EXIT_PREEMPTED:
            self.run.mark_preempting()  # W&B shows it preempted, to be resumed, not crashed
        self.run.finish(exit_code=exit_code)
        import wandb

        # Stops W&B's service process now rather than at exit, and lets a later run in this
        # process (tests) start from the environment as it is then, not as W&B first read it.
        wandb.teardown()
