"""One training process: train or estimate with the config `trainer.config.arguments` read (this
module loads torch, through the loop)."""

from __future__ import annotations

import argparse
import sys

from trainer.config.arguments import parse_args, read_config
from trainer.config.env import TrackingEnv, VertexEnv
from trainer.config.schema import ConfigError, TrainConfig
from trainer.config.secrets import SecretsError, export_secrets
from trainer.tracking.reporters import check_reporting
from trainer.training.estimate import hardware, print_report, report
from trainer.training.loop import train
from trainer.training.preemption import StopRequest
from trainer.training.preflight import preflight


def main(argv: list[str] | None = None, stop: StopRequest | None = None) -> int:
    """Pass the `stop` that `python -m trainer` installs before importing this module (and with
    it torch): a SIGTERM during start-up must become a stop request, not a death."""
    stop = stop or StopRequest().install()
    args = parse_args(argv)
    cfg = read_config(args)
    if cfg is None:
        return 2
    return run(cfg, args, stop)


def run(cfg: TrainConfig, args: argparse.Namespace, stop: StopRequest) -> int:
    """Train or estimate with a config already read (`python -m trainer` reads it before this
    module loads torch, so that a bad config fails fast)."""
    try:
        return _run(cfg, args, stop)
    except ConfigError as exc:
        # Some mistakes surface only when the model is built (transformers checks model.config,
        # peft model.lora): those end as a message naming the key too, not as a traceback.
        print(f"error: {args.config}: {exc}", file=sys.stderr)
        return 2


def _run(cfg: TrainConfig, args: argparse.Namespace, stop: StopRequest) -> int:
    if args.estimate:
        hw = hardware(args.accelerator, args.accelerator_count, args.nodes)
        print_report(report(cfg, hw, args.mfu, args.usd_per_hour), args.json)
        return 0
    try:
        export_secrets()
    except SecretsError as exc:  # its message holds no value: printing it is safe
        print(f"error: secrets not exported: {exc}", file=sys.stderr)
        return 2
    env, tracking = VertexEnv.from_environ(), TrackingEnv.from_environ()
    # Before the model and data are built: a missing W&B key or a tuning metric the trainer
    # never logs would otherwise fail at the first report, or never report at all.
    check_reporting(cfg, tracking, env.in_job)
    # Then every location and size the config names, before the tokenizer, data and model load.
    preflight(cfg, env)
    return train(cfg, env, stop, tracking)
