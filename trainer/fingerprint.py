"""What a checkpoint was trained with, so that a resume never silently mixes two trainings.

Every committed checkpoint records the settings that change the training trajectory: the whole
config (model, data, optimizer, schedule, batch sizes, seed, precision, early stopping) less the
keys that only say where outputs go, how often to log or save, or how fast to run, plus the
world size. On start, a run resumes only from a checkpoint whose record matches; otherwise it
stops and names what differs, unless the config says to continue on purpose
(``allow_config_change_on_resume``, as explicit as HF's ``resume_from_checkpoint``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainer.config import TrainConfig

NOT_TRAJECTORY = frozenset(
    {
        "output_dir",
        "run_name",
        "logging_steps",
        "save_steps",
        "save_every_minutes",
        "save_total_limit",
        "async_save",
        "report_to",
        "disable_tqdm",
        "per_device_eval_batch_size",
        "torch_compile",
        "allow_config_change_on_resume",
        "model.gradient_checkpointing",
        "model.lora.merge_on_export",
    }
)
"""Dotted config keys that change neither the weights nor the order of the data."""
WORLD_SIZE = "world_size"


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, Mapping) and value:
        flat: dict[str, Any] = {}
        for key, item in value.items():
            flat.update(_flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return flat
    return {prefix: value}


def trajectory(cfg: TrainConfig, world_size: int) -> dict[str, Any]:
    """The settings a checkpoint records (JSON values, dotted keys)."""
    flat = _flatten(cfg.model_dump(mode="json"))
    kept = {
        key: value
        for key, value in flat.items()
        if key not in NOT_TRAJECTORY and not any(key.startswith(f"{k}.") for k in NOT_TRAJECTORY)
    }
    return {**kept, WORLD_SIZE: world_size}


def differences(recorded: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """``key: recorded -> current`` for every setting both sides know and disagree on. A key
    only one side has (a trainer version added or removed a setting) is not a difference."""
    return [
        f"{key}: {recorded[key]!r} -> {current[key]!r}"
        for key in sorted(recorded.keys() & current.keys())
        if recorded[key] != current[key]
    ]


def mismatch_message(step: int, checkpoint: str, diffs: list[str]) -> str:
    return (
        f"the checkpoint of step {step} in {checkpoint} was trained with other settings "
        f"({'; '.join(diffs)}): resuming would mix two trainings. Either start a new run "
        "(a new output prefix: `vtx launch` without --run-id, or --set output_dir=NEW "
        "outside a job), or continue on purpose with "
        "--set allow_config_change_on_resume=true"
    )
