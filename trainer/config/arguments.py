"""The command line of one training process, and its config, read without torch: a mistake in
either is reported in well under a second, before `trainer.training.cli` loads torch and
transformers.

A hyperparameter tuning trial gets its parameters the way Vertex passes them: one argument per
parameter appended to the container's args, `--PARAMETER_ID=VALUE` (or `--PARAMETER_ID VALUE`).
A parameter id is a config key as `--set` takes it (`learning_rate`, `model.lora.r`), and the
value goes through exactly what `--set KEY=VALUE` does (YAML value, the config's types and checks,
an unknown key named with the nearest known one). `python -m trainer.launch` passes its arguments
to every process unchanged, so every rank applies the same parameters."""

from __future__ import annotations

import argparse
import math
import sys

from trainer.config.accelerators import ACCELERATORS, DEFAULT_MFU
from trainer.config.loading import load_config
from trainer.config.schema import ConfigError, TrainConfig


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Our options; anything else is kept, in order, as `trial_args` (see the module's doc)."""
    parser = argparse.ArgumentParser(
        prog="python -m trainer",
        description="Fine-tune a causal LM, or estimate its memory, time and cost. A tuning "
        "trial's parameters may follow as --KEY=VALUE (KEY as --set takes it).",
        # A trial's `--KEY` must never be taken for one of our options by a matching prefix.
        allow_abbrev=False,
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
        "--estimate",
        action="store_true",
        help="print sizes, memory, step time, total steps, hours and cost; no training",
    )
    _add_estimate_options(parser.add_argument_group("--estimate options"))
    args, trial_args = parser.parse_known_args(argv)
    args.trial_args = trial_args
    if args.json and not args.estimate:
        parser.error("--json goes with --estimate (training logs JSON lines by itself)")
    return args


def _add_estimate_options(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--accelerator",
        choices=list(ACCELERATORS),
        metavar="TYPE",
        help=f"Vertex accelerator type: {', '.join(ACCELERATORS)} (default: this machine's GPU)",
    )
    group.add_argument(
        "--accelerator-count",
        "--devices",
        dest="accelerator_count",
        type=_positive_int,
        metavar="N",
        help="devices per node (default: 1, or this machine's GPU count)",
    )
    group.add_argument(
        "--nodes", type=_positive_int, default=1, metavar="N", help="machines (default: 1)"
    )
    group.add_argument(
        "--mfu",
        type=_fraction,
        default=DEFAULT_MFU,
        metavar="F",
        help=f"assumed fraction of the bf16 peak (default: {DEFAULT_MFU}); a run logs its own",
    )
    group.add_argument(
        "--usd-per-hour",
        type=_non_negative,
        metavar="USD",
        help="the job's price per hour (see `vtx cost`), for the cost",
    )
    group.add_argument(
        "--json", action="store_true", help="one JSON object (keys: trainer/training/estimate.py)"
    )


def _number(text: str, kind: type[int] | type[float]) -> float:
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):  # float() reads "inf" and "nan"; a cost or an MFU never is
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def _positive_int(text: str) -> int:
    value = int(_number(text, int))
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a positive integer")
    return value


def _fraction(text: str) -> float:
    value = _number(text, float)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"{text} is not in (0, 1], e.g. 0.35")
    return value


def _non_negative(text: str) -> float:
    value = _number(text, float)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"{text} is not a price (>= 0)")
    return value


def trial_overrides(trial_args: list[str]) -> list[str]:
    """A trial's `--KEY=VALUE` / `--KEY VALUE` arguments as `KEY=VALUE` overrides, in order."""
    overrides: list[str] = []
    args = iter(trial_args)
    for arg in args:
        key, sep, value = arg.removeprefix("--").partition("=")
        if not arg.startswith("--") or not key:
            raise ConfigError(
                f"unexpected argument {arg[:60]!r}: a tuning trial's parameters come as "
                "--KEY=VALUE, KEY a config key as --set takes it (e.g. --learning_rate=0.001)"
            )
        if not sep:
            following = next(args, None)
            if following is None or following.startswith("--"):
                raise ConfigError(f"{arg[:60]}: no value; write {arg[:60]}=VALUE")
            value = following
        overrides.append(f"{key}={value}")
    return overrides


def read_config(args: argparse.Namespace) -> TrainConfig | None:
    """The config the arguments name, or None after printing why it cannot be used."""
    try:
        trial = trial_overrides(getattr(args, "trial_args", []))
        return load_config(args.config, args.overrides, trial)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return None
