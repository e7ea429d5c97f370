"""What a checkpoint was trained with, so that a resume never silently mixes two trainings.

Every committed checkpoint records the settings that change the training trajectory: the whole
config (model, data, optimizer, schedule, batch sizes, seed, precision, early stopping) less the
keys that only say where outputs go, how often to log or save, or how fast to run. On start, a
run resumes only from a checkpoint whose record matches; otherwise it stops and names what
differs, unless the config says to continue on purpose (``allow_config_change_on_resume``, as
explicit as HF's ``resume_from_checkpoint``).

The number of processes is not part of the record: what it shapes is the global batch, the rows
of one optimizer step (per-device batch x gradient accumulation x processes), and that is
recorded instead. A run on another number of processes (a capacity ladder's next rung) keeps the
recorded global batch by changing the gradient accumulation (`accumulation_for`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainer.config.schema import ConfigError, TrainConfig

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
        "wandb_project",
        "wandb_entity",
        "hypertune_metric",
        "disable_tqdm",
        "per_device_eval_batch_size",
        "torch_compile",
        # How the loss is computed (chunks of logits, or all at once), not its value: the tests
        # of trainer.model.chunked_loss hold both paths to the same loss and gradients.
        "loss_chunk_mb",
        "allow_config_change_on_resume",
        "model.gradient_checkpointing",
        "model.lora.merge_on_export",
        # Recorded as part of the global batch: alone it would tie a run to its process count.
        "gradient_accumulation_steps",
    }
)
"""Dotted config keys that change neither the weights nor the order of the data."""
GLOBAL_BATCH = "global_batch_size"
"""Rows per optimizer step: per_device_train_batch_size x gradient_accumulation_steps x
processes."""


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
    batch = cfg.per_device_train_batch_size * cfg.gradient_accumulation_steps * world_size
    return {**kept, GLOBAL_BATCH: batch}


def accumulation_for(global_batch: int, per_device: int, written_by: int, world_size: int) -> int:
    """The gradient accumulation that keeps `global_batch` rows per step on `world_size`
    processes with `per_device` rows per micro-batch. The per-device batch itself stays: it
    decides which rows form each micro-batch (the data position counts those), so changing it
    would change the trajectory. ConfigError, naming the numbers and the ways out, when no
    whole accumulation keeps the global batch."""
    per_step = per_device * world_size
    if global_batch % per_step == 0:
        return global_batch // per_step
    micro_batches = global_batch // per_device
    counts = [n for n in range(1, micro_batches + 1) if micro_batches % n == 0]
    raise ConfigError(
        f"{processes(world_size)} cannot keep the global batch of {global_batch} rows that "
        f"{processes(written_by)} trained with (per_device_train_batch_size {per_device} x "
        f"gradient_accumulation_steps {global_batch // (per_device * written_by)} x "
        f"{processes(written_by)}): {global_batch} is not a multiple of {per_device} x "
        f"{world_size} = {per_step}, so no gradient accumulation keeps it. Resume on a number "
        f"of processes that divides {micro_batches} ({', '.join(map(str, counts))}), or "
        "continue with another global batch on purpose with "
        "--set allow_config_change_on_resume=true"
    )


def differences(recorded: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """``key: recorded -> current`` for every setting both sides know and disagree on. A key
    only one side has (a trainer version added or removed a setting) is not a difference."""
    recorded = _as_now(recorded)
    return [
        f"{key}: {recorded[key]!r} -> {current[key]!r}"
        for key in sorted(recorded.keys() & current.keys())
        if recorded[key] != current[key]
    ]


def _as_now(recorded: Mapping[str, Any]) -> Mapping[str, Any]:
    """A record in today's words: earlier trainers wrote `max_steps: -1` (or 0) where the config
    now says null (count the steps from num_train_epochs), the same run."""
    steps = recorded.get("max_steps")
    if isinstance(steps, int) and steps <= 0:
        return {**recorded, "max_steps": None}
    return recorded


def processes(count: int) -> str:
    return f"{count} process" if count == 1 else f"{count} processes"


def mismatch_message(step: int, checkpoint: str, diffs: list[str]) -> str:
    return (
        f"the checkpoint of step {step} in {checkpoint} was trained with other settings "
        f"({'; '.join(diffs)}): resuming would mix two trainings. Either start a new run "
        "(a new output prefix: `vtx launch` without --run-id, or --set output_dir=NEW "
        "outside a job), or continue on purpose with "
        "--set allow_config_change_on_resume=true"
    )
