"""The command line of one training process, and its config, read without torch: a mistake in
either is reported in well under a second, before `trainer.cli` loads torch and transformers."""

from __future__ import annotations

import argparse
import sys

from trainer.config import ConfigError, TrainConfig, load_config


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m trainer", description="Fine-tune a causal LM, or estimate its memory."
    )
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


def read_config(args: argparse.Namespace) -> TrainConfig | None:
    """The config the arguments name, or None after printing why it cannot be used."""
    try:
        return load_config(args.config, args.overrides)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return None
