"""Command line of one training process: parse, load the config, train or estimate."""

from __future__ import annotations

import argparse
import sys

from trainer.config import ConfigError, TrainConfig, load_config
from trainer.env import VertexEnv
from trainer.estimate import print_estimate
from trainer.loop import train
from trainer.preemption import StopRequest
from trainer.secrets import SecretsError, export_secrets


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m trainer", description=__doc__)
    parser.add_argument("--config", required=True, help="training YAML (see trainer/examples)")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY.PATH=VALUE",
        help="override a config value, e.g. --set data.path=gs://bucket/train.jsonl",
    )
    parser.add_argument(
        "--estimate", action="store_true", help="print sizes and memory; no training"
    )
    parser.add_argument(
        "--accelerator", default="NVIDIA_H100_80GB", help="for --estimate: Vertex accelerator type"
    )
    parser.add_argument("--devices", type=int, default=1, help="for --estimate: devices in the job")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None, stop: StopRequest | None = None) -> int:
    """Pass the `stop` that `python -m trainer` installs before importing this module (and with
    it torch): a SIGTERM during start-up must become a stop request, not a death."""
    stop = stop or StopRequest().install()
    args = parse_args(argv)
    try:
        cfg = load_config(args.config, args.overrides)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        return _run(cfg, args, stop)
    except ConfigError as exc:
        # Some mistakes surface only when the model is built (transformers checks model.config,
        # peft model.lora): those end as a message naming the key too, not as a traceback.
        print(f"error: {args.config}: {exc}", file=sys.stderr)
        return 2


def _run(cfg: TrainConfig, args: argparse.Namespace, stop: StopRequest) -> int:
    if args.estimate:
        print_estimate(cfg, args.accelerator, args.devices)
        return 0
    try:
        export_secrets()
    except SecretsError as exc:  # its message holds no value: printing it is safe
        print(f"error: secrets not exported: {exc}", file=sys.stderr)
        return 2
    return train(cfg, VertexEnv.from_environ(), stop)
