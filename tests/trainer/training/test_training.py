"""End-to-end runs in this process (fast: no interpreter start-up), on tiny models."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO
from tests.trainer.conftest import (
    assert_bit_identical,
    final_weights,
    read_json_lines,
    run_in_process,
    tiny_config,
)
from trainer.checkpoint.store import Checkpointer, step_dir
from trainer.training.loop import EXIT_PREEMPTED, SIGTERM_AFTER_STEP_ENV


def run_until_sigterm(
    cfg: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    after_step: int,
    environ: dict[str, str] | None = None,
) -> None:
    """Run with the trainer's fault hook sending SIGTERM after `after_step`: the run must exit
    as preempted. The hook is disarmed again afterwards."""
    monkeypatch.setenv(SIGTERM_AFTER_STEP_ENV, str(after_step))
    assert run_in_process(cfg, environ) == EXIT_PREEMPTED
    monkeypatch.delenv(SIGTERM_AFTER_STEP_ENV)


def test_loss_decreases_on_the_example_data(tmp_path, capsys):
    cfg = tiny_config(
        str(REPO / "trainer/examples/data/tiny.jsonl"),
        str(tmp_path),
        max_steps=30,
        save_steps=None,
        learning_rate=1e-2,
    )
    assert run_in_process(cfg) == 0
    logs = [e for e in read_json_lines(capsys.readouterr().out) if e.get("message") == "train"]
    assert {
        "severity",
        "step",
        "loss",
        "lr",
        "grad_norm",
        "tokens_per_s",
        "padding_efficiency",
    } <= set(logs[0])
    losses = [e["loss"] for e in logs]
    assert len(losses) == 30
    assert sum(losses[-5:]) / 5 < 0.75 * losses[0]
    assert (tmp_path / "model" / "model.safetensors").exists()
    assert (tmp_path / "model" / "tokenizer.json").exists()


@pytest.mark.parametrize(
    ("stop_after", "accumulation", "fsdp"),
    [
        (3, 1, False),  # inside the first epoch (4 batches per epoch)
        # Step 3 ends mid-epoch 2: the stop and the resume straddle an epoch boundary.
        (3, 3, False),
        (3, 1, True),  # FSDP2-sharded parameters and optimizer state (DTensors) through DCP
    ],
)
def test_resume_after_sigterm_is_bit_identical(
    tmp_path, small_dataset, monkeypatch, stop_after, accumulation, fsdp
):
    common = {
        "max_steps": 8,
        "gradient_accumulation_steps": accumulation,
        "save_steps": 2,
        "fsdp": fsdp,
    }
    straight = tiny_config(str(small_dataset), str(tmp_path / "straight"), **common)
    assert run_in_process(straight) == 0

    interrupted = tiny_config(str(small_dataset), str(tmp_path / "interrupted"), **common)
    run_until_sigterm(interrupted, monkeypatch, stop_after)
    assert not (tmp_path / "interrupted" / "model").exists()
    committed = sorted(
        p.parent.name for p in (tmp_path / "interrupted" / "checkpoints").glob("*/COMMITTED")
    )
    assert committed[-1] == f"step-{stop_after:09d}"

    assert run_in_process(interrupted) == 0
    assert_bit_identical(
        final_weights(tmp_path / "straight" / "model"),
        final_weights(tmp_path / "interrupted" / "model"),
    )


def test_lora_resume_is_bit_identical_and_exports_adapter_and_merged(
    tmp_path, small_dataset, monkeypatch
):
    lora = {
        "model.lora": {"r": 4, "alpha": 8, "merge_on_export": True},
        "max_steps": 6,
        "save_steps": None,
    }
    straight = tiny_config(str(small_dataset), str(tmp_path / "a"), **lora)
    assert run_in_process(straight) == 0
    resumed = tiny_config(str(small_dataset), str(tmp_path / "b"), **lora)
    run_until_sigterm(resumed, monkeypatch, 2)
    assert run_in_process(resumed) == 0
    adapter = "adapter_model.safetensors"
    assert_bit_identical(
        final_weights(tmp_path / "a" / "model", adapter),
        final_weights(tmp_path / "b" / "model", adapter),
    )
    assert (tmp_path / "b" / "model" / "adapter_config.json").exists()
    merged = final_weights(tmp_path / "b" / "model" / "merged")
    assert not any("lora" in key for key in merged)


def test_checkpoints_go_to_gcs_and_resume_from_there(
    tmp_path, small_dataset, gcs_bucket, monkeypatch
):
    import gcsfs

    root = f"gs://{gcs_bucket}/runs/r1"
    environ = {
        "AIP_CHECKPOINT_DIR": f"{root}/checkpoints/",
        "AIP_MODEL_DIR": f"{root}/model/",
        "AIP_TENSORBOARD_LOG_DIR": f"{root}/logs/",
    }
    cfg = tiny_config(
        f"gs://{gcs_bucket}/data/small.jsonl",
        str(tmp_path / "unused"),
        max_steps=6,
        save_steps=2,
        save_total_limit=1,
        report_to=["tensorboard"],
    )
    fs = gcsfs.GCSFileSystem(token="anon")
    fs.put_file(str(small_dataset), f"{gcs_bucket}/data/small.jsonl")

    run_until_sigterm(cfg, monkeypatch, 5, environ)
    fs.invalidate_cache()
    markers = sorted(fs.glob(f"{gcs_bucket}/runs/r1/checkpoints/*/COMMITTED"))
    assert [m.split("/")[-2] for m in markers] == [
        "step-000000005"
    ]  # save_total_limit=1 pruned 2 and 4

    assert run_in_process(cfg, environ) == 0
    fs.invalidate_cache()
    assert fs.exists(f"{gcs_bucket}/runs/r1/model/model.safetensors")
    assert fs.glob(f"{gcs_bucket}/runs/r1/logs/events.out.tfevents.*")
    assert not (tmp_path / "unused").exists()

    # The exported model is a valid starting point: LoRA on it, straight from its gs:// prefix.
    follow_up = tiny_config(
        f"gs://{gcs_bucket}/data/small.jsonl",
        str(tmp_path / "follow-up"),
        max_steps=2,
        save_steps=None,
        model={"name_or_path": f"{root}/model", "lora": {"r": 2}},
    )
    assert run_in_process(follow_up) == 0
    assert (tmp_path / "follow-up" / "model" / "adapter_model.safetensors").exists()


def test_half_written_checkpoint_is_ignored_and_removed(tmp_path, small_dataset):
    cfg = tiny_config(str(small_dataset), str(tmp_path), max_steps=4, save_steps=2)
    assert run_in_process(cfg) == 0
    ckpts = tmp_path / "checkpoints"
    # Simulate a crash mid-write of a later step: data present, no marker.
    partial = Path(step_dir(str(ckpts), 9))
    partial.mkdir()
    (partial / "__0_0.distcp").write_bytes(b"truncated")
    # Training on for 2 more steps changes the schedule: on purpose, so it is allowed.
    resumed = tiny_config(
        str(small_dataset),
        str(tmp_path),
        max_steps=6,
        save_steps=2,
        allow_config_change_on_resume=True,
    )
    assert run_in_process(resumed) == 0
    assert not partial.exists()
    import torch.distributed as dist

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        assert Checkpointer(str(ckpts), keep=2, async_save=False).committed_steps() == [4, 6]
    finally:
        dist.destroy_process_group()


def test_resume_after_sigterm_at_an_eval_step_still_evaluates_it(
    tmp_path, small_dataset, monkeypatch
):
    """The SIGTERM path skips the step's eval to stay inside 30 s; the resumed run must run it,
    or early stopping decides on a different eval history than an uninterrupted run."""
    common = {
        "max_steps": 8,
        "save_steps": None,
        "eval_steps": 2,
        # Any eval after the first counts as no improvement: the run stops at the second eval.
        "early_stopping_patience": 1,
        "early_stopping_threshold": 100.0,
        "data.eval_fraction": 0.2,
    }
    straight = tiny_config(str(small_dataset), str(tmp_path / "straight"), **common)
    assert run_in_process(straight) == 0

    interrupted = tiny_config(str(small_dataset), str(tmp_path / "interrupted"), **common)
    run_until_sigterm(interrupted, monkeypatch, 2)
    assert run_in_process(interrupted) == 0
    assert_bit_identical(
        final_weights(tmp_path / "straight" / "model"),
        final_weights(tmp_path / "interrupted" / "model"),
    )
