"""bench.trainer.gpu's dry run: every part of the GPU script on CPU at toy sizes, so a lent GPU's
minutes are never spent on a bug the CPU could have shown."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.common import children_forked_after
from bench.trainer import gpu
from bench.trainer import trainer_vs_hf as tvh

PARTS = ["0.5B full", "1.5B full, 128k vocabulary", "drill", "0.5B LoRA", "attention", "checkpoint"]


@pytest.fixture(scope="module", autouse=True)
def _one_zygote() -> Iterator[None]:
    """Every test here forks its children from one process that imported torch once."""
    with children_forked_after(gpu.PRELOAD):
        yield


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, str]:
    out = tmp_path_factory.mktemp("gpu")
    gpu.run(out, dry_run=True, budget_s=3600)
    return json.loads((out / "gpu.json").read_text()), (out / "gpu.md").read_text()


@pytest.mark.slow(cost_s=40)  # the dry run, children forked from one zygote
def test_every_part_runs_and_reports(dry_run: tuple[dict, str]) -> None:
    raw, markdown = dry_run
    assert raw["dry_run"] is True
    assert raw["skipped"] == []
    assert list(raw["figures"]) == ["card", *PARTS]
    for heading in ["The card", "0.5B full fine-tune", "0.5B LoRA", "Attention per bucket"]:
        assert f"#### {heading}" in markdown
    assert raw["figures"]["card"]["matmul_flops_per_s"] > 0
    # The one place in the suite where the trainer's compiled path runs with its production
    # backend (Inductor) end to end; tests/trainer/model/test_small_parts.py compares losses
    # on aot_eager.
    compiled = raw["figures"]["0.5B full"][gpu.OURS_COMPILED.name]
    assert "error" not in compiled[0] and compiled[0]["tokens_per_s"] > 0, compiled


def test_both_sides_train_every_case_on_equal_tokens(dry_run: tuple[dict, str]) -> None:
    figures = dry_run[0]["figures"]
    full = figures["0.5B full"]
    assert set(full) == {v.name for v in gpu.throughput_variants("sdpa")}
    for case in ["0.5B full", "0.5B LoRA", "1.5B full, 128k vocabulary"]:
        runs = figures[case]
        assert {name.split(":")[0] for name in runs} == {"ours", "HF"}, case
        per_step = [run[0]["tokens_per_step"] for run in runs.values()]
        assert all(run[0]["tokens_per_s"] > 0 for run in runs.values()), case
        # Equal tokens per step on average: a few toy steps land within a factor of two.
        assert max(per_step) / min(per_step) < 2, (case, per_step)


def test_the_checkpoint_and_drill_parts_measure_what_they_name(dry_run: tuple[dict, str]) -> None:
    figures = dry_run[0]["figures"]
    for mode in ("async", "sync"):
        assert len(figures["checkpoint"][mode]["blocked_s"]) >= 2, mode
    drill = figures["drill"]
    assert drill["stop_exit"] == drill["expected_exit"] == 143
    assert drill["resume_exit"] == 0
    assert drill["differing"] == 0  # on CPU the resumed run is bit-identical
    assert drill["again_differing"] == 0  # and so is the undisturbed run made twice
    assert "**bit-identical**" in dry_run[1]


def test_parts_past_the_budget_are_skipped_and_named(tmp_path: Path) -> None:
    gpu.run(tmp_path, dry_run=True, budget_s=0)
    raw = json.loads((tmp_path / "gpu.json").read_text())
    assert list(raw["figures"]) == ["card"]
    assert raw["skipped"] == PARTS
    text = (tmp_path / "gpu.md").read_text()
    assert "Not run (time budget spent): 0.5B full, 1.5B full, 128k vocabulary, drill" in text


def test_a_variant_that_fails_costs_its_row_not_the_case(tmp_path: Path) -> None:
    data = str(tvh.make_dataset(tmp_path / "data.jsonl", records=40, median_words=10))
    work = tvh.workload(data, {"model_type": "no-such-model"}, 64, 1, 2, 1)
    results = gpu.run_case(work, [gpu.OURS], 1, lambda _: None)
    assert "is not a transformers model type" in results["ours: packing"][0]["error"]
    markdown = gpu.case_markdown("broken", results, work, peak=1.0)
    assert "| ours: packing | failed: " in markdown
    assert "no ratio, a side has no run that finished" in markdown


def test_the_probe_profiles_a_step_and_measures_the_loss(tmp_path: Path) -> None:
    """bench.trainer.gpu_probe's profile and loss parts at toy sizes (its drill is
    bench.trainer.gpu's, above)."""
    from bench.common import run_json_child
    from bench.trainer import gpu_probe

    data = str(tvh.make_dataset(tmp_path / "data.jsonl", records=200, median_words=20.0))
    body = json.dumps({"dry_run": True, "data": data})
    profile = run_json_child("bench.trainer.gpu_probe", ["--child", "profile", body], timeout_s=600)
    assert len(profile["step_s"]) == gpu_probe.PROFILE_STEPS
    assert "aten::mm" in profile["by_host"]  # the recorded steps' matrix multiplies
    loss = gpu_probe.loss_child(dry_run=True)
    assert loss["chunked"]["s"] > 0 and loss["materialised"]["s"] > 0
