"""`--estimate`: the run's steps as the trainer counts them, step time, hours and cost."""

from __future__ import annotations

import json
import re
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO
from tests.trainer.conftest import DATASET, tiny_config
from trainer.config.accelerators import ACCELERATORS, peak_flops_per_s
from trainer.config.schema import ConfigError, TrainConfig, parse_config
from trainer.data.batches import BatchStream, build_rows
from trainer.model.loading import build_tokenizer
from trainer.training import estimate as estimate_module
from trainer.training import sizing
from trainer.training.cli import main
from trainer.training.estimate import Hardware, hardware, report
from trainer.training.loop import total_steps
from trainer.training.sizing import run_length

L4 = Hardware("NVIDIA_L4", 1, 1, 24, ACCELERATORS["NVIDIA_L4"].peak_flops_per_s)


def _epochs_config(tmp_path: Path, data: str | Path = DATASET, **overrides: Any) -> TrainConfig:
    options = {"max_steps": None, "num_train_epochs": 2, "data.eval_fraction": 0.05, **overrides}
    return parse_config(tiny_config(str(data), str(tmp_path), **options))


def _trainer_steps(cfg: TrainConfig, devices: int) -> int:
    """What the loop computes: rows built as training builds them, rank 0's stream."""
    train_rows, _ = build_rows(cfg, build_tokenizer(cfg.model))
    stream = BatchStream(train_rows, cfg.per_device_train_batch_size, cfg.seed, 0, devices)
    return total_steps(cfg, stream.batches_per_epoch, devices)


@pytest.mark.parametrize(
    ("devices", "options"),
    [
        (1, {}),
        (2, {"gradient_accumulation_steps": 3}),
        (1, {"data.packing": False}),
        (4, {"data.packing": False, "num_train_epochs": 1.5}),
    ],
)
def test_a_small_dataset_gives_the_trainers_own_step_count(
    tmp_path: Path, devices: int, options: dict[str, Any]
) -> None:
    cfg = _epochs_config(tmp_path, **options)

    length = run_length(cfg, devices)

    assert length.total_steps == _trainer_steps(cfg, devices)
    assert "all 400 examples read" in length.basis, length.basis


def test_a_large_dataset_is_extrapolated_from_a_packed_sample_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = _epochs_config(tmp_path)
    exact = _trainer_steps(cfg, 1)
    monkeypatch.setattr(sizing, "SAMPLE_EXAMPLES", 100)  # a quarter of the shipped 400

    length = run_length(cfg, 1)

    assert length.total_steps is not None
    assert abs(length.total_steps - exact) <= 0.15 * exact, (length.total_steps, exact)
    assert "400 examples counted" in length.basis and "first 100" in length.basis, length.basis
    assert length.tokens_per_row is not None and 0 < length.tokens_per_row <= 128


def test_max_steps_is_the_count_and_the_data_still_sets_tokens_per_step(tmp_path: Path) -> None:
    cfg = parse_config(tiny_config(str(DATASET), str(tmp_path), max_steps=17))

    out = report(cfg, L4, mfu=0.35, usd_per_hour=None)

    assert (out["total_steps"], out["total_steps_basis"]) == (17, "max_steps")
    # packed rows of 128 are nearly, never more than, full
    assert 0.8 * 256 < out["tokens_per_optimizer_step"] <= out["tokens_per_optimizer_step_max"]


def test_remote_jsonl_over_the_limit_is_counted_from_its_head_and_parquet_from_its_footer(
    tmp_path: Path, gcs_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import fsspec
    import pyarrow as pa
    import pyarrow.parquet as pq

    records = [json.loads(line) for line in DATASET.read_text().splitlines()]
    jsonl, parquet = f"gs://{gcs_bucket}/d/train.jsonl", f"gs://{gcs_bucket}/d/train.parquet"
    with fsspec.open(jsonl, "wb") as f:
        f.write(DATASET.read_bytes())
    with fsspec.open(parquet, "wb") as f:
        pq.write_table(pa.Table.from_pylist(records), f, row_group_size=50)
    monkeypatch.setattr(sizing, "REMOTE_COUNT_MAX_BYTES", 10_000)
    monkeypatch.setattr(sizing, "HEAD_BYTES", DATASET.stat().st_size // 4)

    head = sizing._measure(jsonl, "auto")
    footer = sizing._measure(parquet, "auto")

    assert not head.exact and abs(head.examples - len(records)) <= 0.1 * len(records)
    assert footer.exact and footer.examples == len(records)
    assert footer.head == records[: len(footer.head)] and footer.head


def test_unreadable_data_leaves_the_steps_unknown_with_what_to_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(path: str) -> Any:
        raise PermissionError("403 anonymous caller does not have storage.objects.get access")

    monkeypatch.setattr(sizing, "_measure_jsonl", refuse)
    monkeypatch.setattr(sizing, "is_remote", lambda path: True)
    epochs = _epochs_config(tmp_path, "gs://b/train.jsonl")
    fixed = parse_config(tiny_config("gs://b/train.jsonl", str(tmp_path), max_steps=9))

    unknown, known = run_length(epochs, 1), run_length(fixed, 1)

    assert unknown.total_steps is None and "--set max_steps=N" in unknown.basis
    assert "403" in unknown.basis
    assert known.total_steps == 9 and known.tokens_per_row is None


def test_missing_data_is_a_config_error_naming_the_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"data\.path: .*nothing\.jsonl does not exist"):
        run_length(_epochs_config(tmp_path, tmp_path / "nothing.jsonl"), 1)


def test_step_time_hours_and_cost_follow_the_stated_assumptions(tmp_path: Path) -> None:
    cfg = parse_config(tiny_config(str(DATASET), str(tmp_path), max_steps=1000))
    two_l4s = Hardware(L4.name, 2, 1, L4.memory_gib, L4.peak_flops_per_s)

    out = report(cfg, two_l4s, mfu=0.5, usd_per_hour=2.0)
    faster = report(cfg, two_l4s, mfu=1.0, usd_per_hour=None)

    flops = out["tokens_per_optimizer_step"] * out["flops_per_token"]
    assert out["step_time_s"] == pytest.approx(flops / (2 * 121e12 * 0.5), rel=1e-3)
    assert out["hours"] == pytest.approx(out["step_time_s"] * 1000 / 3600)
    assert out["cost_usd"] == pytest.approx(out["hours"] * 2.0)
    assert faster["step_time_s"] == pytest.approx(out["step_time_s"] / 2, rel=1e-3)
    assert faster["cost_usd"] is None and any("--usd-per-hour" in n for n in faster["notes"])
    assert any("MFU 50%" in note for note in out["notes"])
    assert out["fits"] is True and out["accelerator_memory_gib"] == 24


def test_without_a_gpu_or_an_accelerator_it_says_what_to_pass(tmp_path: Path) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the estimate uses it")
    cfg = parse_config(tiny_config(str(DATASET), str(tmp_path)))

    out = report(cfg, hardware(None, None, 1), mfu=0.35, usd_per_hour=1.0)

    assert out["accelerator"] is None and out["step_time_s"] is None and out["hours"] is None
    assert any("--accelerator TYPE" in note and "NVIDIA_L4" in note for note in out["notes"])


def _cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    previous = signal.getsignal(signal.SIGTERM)  # main() installs the stop request
    try:
        code = main(args)
    finally:
        signal.signal(signal.SIGTERM, previous)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_json_is_one_object_whose_keys_are_documented(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], write_config: Any
) -> None:
    config = write_config(tiny_config(str(DATASET), str(tmp_path), max_steps=100))
    args = ["--config", str(config), "--estimate", "--json", "--accelerator", "NVIDIA_L4"]

    code, out, _ = _cli([*args, "--devices", "2", "--nodes", "2", "--usd-per-hour", "3"], capsys)

    assert code == 0
    numbers = json.loads(out)
    documented = re.findall(
        r"^    ([a-z_]+) ", (estimate_module.__doc__ or "").split("--json")[-1], re.M
    )
    assert sorted(numbers) == sorted(documented), "the keys trainer/training/estimate.py lists"
    assert (numbers["accelerator_count"], numbers["nodes"], numbers["devices"]) == (2, 2, 4)
    assert numbers["total_steps"] == 100 and numbers["cost_usd"] > 0


def test_the_text_estimate_shows_time_cost_and_the_assumption(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], write_config: Any
) -> None:
    config = write_config(tiny_config(str(DATASET), str(tmp_path), max_steps=100))
    args = ["--config", str(config), "--estimate", "--accelerator", "NVIDIA_H100_80GB"]

    code, out, _ = _cli([*args, "--mfu", "0.4", "--usd-per-hour", "11"], capsys)

    assert code == 0
    for needle in ("step time", "MFU 40% of 1 x 989 TFLOP/s", "total steps", "at $11.00/h"):
        assert needle in out, out


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--estimate", "--mfu", "0"], "--mfu: 0 is not in (0, 1]"),
        (["--estimate", "--accelerator", "H100"], "invalid choice: 'H100'"),
        (["--estimate", "--nodes", "x"], "--nodes: 'x' is not a number"),
        (["--estimate", "--usd-per-hour", "inf"], "--usd-per-hour: 'inf' is not a finite"),
        (["--estimate", "--mfu", "nan"], "--mfu: 'nan' is not a finite number"),
        (["--json"], "--json goes with --estimate"),
    ],
)
def test_option_mistakes_exit_2_saying_what_is_wrong(
    args: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    config = str(REPO / "trainer/examples/tiny.yaml")
    with pytest.raises(SystemExit) as exited:
        main(["--config", config, *args])
    assert exited.value.code == 2
    assert needle in capsys.readouterr().err


# What `torch.cuda.get_device_name()` reports on each Vertex GPU (nvidia-smi's names).
CUDA_NAMES = {
    "NVIDIA_TESLA_T4": "Tesla T4",
    "NVIDIA_TESLA_V100": "Tesla V100-SXM2-16GB",
    "NVIDIA_L4": "NVIDIA L4",
    "NVIDIA_TESLA_A100": "NVIDIA A100-SXM4-40GB",
    "NVIDIA_A100_80GB": "NVIDIA A100-SXM4-80GB",
    "NVIDIA_H100_80GB": "NVIDIA H100 80GB HBM3",
    "NVIDIA_H100_MEGA_80GB": "NVIDIA H100 80GB HBM3",
    "NVIDIA_H200_141GB": "NVIDIA H200",
    "NVIDIA_B200": "NVIDIA B200",
}


@pytest.mark.parametrize("accelerator", ACCELERATORS)
def test_a_run_on_a_gpu_measures_mfu_against_the_peak_the_estimate_assumes(
    accelerator: str,
) -> None:
    expected = ACCELERATORS[accelerator].peak_flops_per_s
    assert peak_flops_per_s(CUDA_NAMES[accelerator]) == expected


def test_a_tokenizer_and_data_on_gcs_give_the_same_count_as_local_copies(
    tmp_path: Path, gcs_bucket: str
) -> None:
    import fsspec

    from tests.trainer.conftest import TOKENIZER

    prefix = f"gs://{gcs_bucket}/base"
    for path in TOKENIZER.iterdir():
        with fsspec.open(f"{prefix}/{path.name}", "wb") as f:
            f.write(path.read_bytes())
    with fsspec.open(f"{prefix}/model.safetensors", "wb") as f:
        f.write(b"not read")
    with fsspec.open(f"gs://{gcs_bucket}/train.jsonl", "wb") as f:
        f.write(DATASET.read_bytes())
    local = _epochs_config(tmp_path)
    remote = _epochs_config(
        tmp_path, f"gs://{gcs_bucket}/train.jsonl", **{"model.tokenizer": prefix}
    )

    assert run_length(remote, 2) == run_length(local, 2)


def test_only_a_prefixs_light_files_are_copied_for_the_tokenizer(tmp_path: Path) -> None:
    from trainer.model.loading import _copy_light_files

    source, target = tmp_path / "model", tmp_path / "copy"
    source.mkdir(), target.mkdir()
    for name in ("tokenizer.json", "config.json", "model.safetensors", "pytorch_model.bin"):
        (source / name).write_text("x")
    (source / "sub").mkdir()

    _copy_light_files(f"file://{source}", target)

    assert sorted(p.name for p in target.iterdir()) == ["config.json", "tokenizer.json"]


def test_without_an_accelerator_named_the_local_gpus_are_used(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import torch

    properties = type("Properties", (), {"total_memory": 23 * 2**30})
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=0: "NVIDIA L4")
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index=0: properties)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)

    local, one = hardware(None, None, 1), hardware(None, 1, 3)

    assert (local.name, local.devices, local.memory_gib) == ("NVIDIA L4 (this machine)", 2, 23)
    assert local.peak_flops_per_s == ACCELERATORS["NVIDIA_L4"].peak_flops_per_s
    assert (one.per_node, one.nodes, one.devices) == (1, 3, 3)
