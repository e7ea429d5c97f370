"""`report_to: [wandb]` with the real wandb package in offline mode, read back from its files."""

from __future__ import annotations

import logging
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.json_handler import serving
from tests.trainer.config.test_secrets import FakeSecretManager
from tests.trainer.conftest import read_json_lines, run_in_process, tiny_config
from tests.trainer.tracking.wandb_offline import offline_runs
from trainer.config.env import TrackingEnv
from trainer.config.schema import ConfigError, parse_config
from trainer.config.secrets import EMULATOR_ENV, SECRETS_ENV
from trainer.tracking.reporters import check_reporting
from trainer.tracking.wandb_run import KEY_SECRET, already_logged, run_id
from trainer.training import cli
from trainer.training.loop import EXIT_PREEMPTED, SIGTERM_AFTER_STEP_ENV
from trainer.training.preemption import StopRequest

STEPS = 8


@pytest.fixture
def offline_wandb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """W&B in offline mode, every file it writes under tmp_path."""
    root = tmp_path / "wandb-root"
    for name in ("WANDB_DIR", "WANDB_CACHE_DIR", "WANDB_CONFIG_DIR", "WANDB_DATA_DIR"):
        path = root / name.lower()
        path.mkdir(parents=True)
        monkeypatch.setenv(name, str(path))
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("VTX_RUN_ID", "wandb-test-run")
    return root


def _config(data: Path, out: Path) -> dict[str, Any]:
    return tiny_config(
        str(data),
        str(out),
        max_steps=STEPS,
        save_steps=2,
        eval_steps=2,
        report_to=["wandb"],
        **{"data.eval_fraction": 0.2},
    )


def _logged(lines: list[dict[str, Any]]) -> set[tuple[int, str, float]]:
    """(step, name, value) of the `train` and `eval` log lines; not the keys that only the
    platform reads (the tokens so far, an eval's duration: its goodput timeline)."""
    fields = ("severity", "message", "logger", "rank", "step", "tokens", "eval_s")
    return {
        (e["step"], k, v)
        for e in lines
        if e["message"] in ("train", "eval")
        for k, v in e.items()
        if k not in fields
    }


def _records(history: list[dict[str, Any]]) -> set[tuple[int, str, float]]:
    """(step, name, value) of W&B's records, rounded as the log lines are."""
    return {
        (row["step"], k, round(v, 6))
        for row in history
        for k, v in row.items()
        if not k.startswith("_") and k != "step"
    }


def _per_metric(histories: list[list[dict[str, Any]]]) -> dict[str, list[tuple[int, float]]]:
    """(step, value) of each metric, in the order W&B received them, over all attempts."""
    out: dict[str, list[tuple[int, float]]] = {}
    for history in histories:
        for row in history:
            for key, value in row.items():
                if not key.startswith("_") and key != "step":
                    out.setdefault(key, []).append((row["step"], value))
    return out


def test_a_run_resumed_after_sigterm_is_one_wandb_run_with_one_continuous_step_sequence(
    tmp_path: Path,
    small_dataset: Path,
    offline_wandb: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """SIGTERM after step 4, an eval step: the first attempt logs steps 1-4 (the stop's step
    before its checkpoint) and defers the eval of step 4; the second logs that eval, then 5-8.
    Together: every metric at the steps and with the values of an uninterrupted run, once; and
    the uninterrupted run's records are its JSON log lines."""
    wandb_dir = Path(offline_wandb / "wandb_dir")
    straight_dir = tmp_path / "straight-wandb"
    straight_dir.mkdir()
    with monkeypatch.context() as patch:
        patch.setenv("WANDB_DIR", str(straight_dir))
        patch.setenv("VTX_RUN_ID", "straight-run")
        assert run_in_process(_config(small_dataset, tmp_path / "straight")) == 0
    (straight,) = offline_runs(straight_dir)
    assert _records(straight.history) == _logged(read_json_lines(capsys.readouterr().out))

    cfg = _config(small_dataset, tmp_path / "interrupted")
    monkeypatch.setenv(SIGTERM_AFTER_STEP_ENV, "4")
    assert run_in_process(cfg) == EXIT_PREEMPTED
    monkeypatch.delenv(SIGTERM_AFTER_STEP_ENV)
    assert run_in_process(cfg) == 0
    first, second = offline_runs(wandb_dir)

    assert first.run_id == second.run_id == "wandb-test-run"
    assert (first.exit_code, second.exit_code) == (EXIT_PREEMPTED, 0)
    assert first.project == "vtx"
    assert "memory_percent" in first.stats and "memory_percent" in second.stats  # system figures
    assert first.config["learning_rate"] == 3e-3 and first.config["vtx"]["run_id"]

    expected = _per_metric([straight.history])
    got = _per_metric([first.history, second.history])
    assert sorted(expected) == sorted(got)
    assert [s for s, _ in got["loss"]] == list(range(1, STEPS + 1))
    assert [s for s, _ in got["eval_loss"]] == [2, 4, 6, 8]
    # Same steps, each once, and (a bit-identical resume on CPU) the same values but timings.
    assert {k: [s for s, _ in v] for k, v in got.items()} == {
        k: [s for s, _ in v] for k, v in expected.items()
    }
    for name in ("loss", "eval_loss", "lr", "grad_norm", "padding_efficiency"):
        assert got[name] == expected[name], name
    assert {"lr", "grad_norm", "tokens_per_s", "padding_efficiency"} <= set(got)


def test_wandb_without_a_key_or_offline_mode_stops_before_training_naming_the_secret(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in ("WANDB_API_KEY", "WANDB_MODE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    cfg = parse_config(tiny_config("data.jsonl", str(tmp_path), report_to=["wandb"]))
    with pytest.raises(ConfigError, match=f"WANDB_API_KEY: {KEY_SECRET}"):
        check_reporting(cfg, TrackingEnv(), in_job=True)
    monkeypatch.setenv("WANDB_MODE", "offline")
    check_reporting(cfg, TrackingEnv(), in_job=True)
    monkeypatch.setenv("WANDB_MODE", "online")
    monkeypatch.setenv("WANDB_API_KEY", "k" * 40)
    check_reporting(cfg, TrackingEnv(), in_job=True)


def test_the_run_id_is_the_vtx_run_id_per_trial_else_the_checkpoint_directory() -> None:
    assert run_id(TrackingEnv(run_id="l4-lora-20261123-1"), "gs://b/c/") == "l4-lora-20261123-1"
    assert run_id(TrackingEnv(run_id="s-1", trial_id="3"), "gs://b/runs/s-1/3/c") == "s-1-trial-3"
    local = run_id(TrackingEnv(), "outputs/checkpoints")
    assert local == run_id(TrackingEnv(), str(Path("outputs/checkpoints").resolve()) + "/")
    assert local != run_id(TrackingEnv(), "other/checkpoints")


def test_steps_an_earlier_attempt_logged_are_not_logged_again() -> None:
    # Resumed from step 4 after a death at step 7 (no SIGTERM): 5-7 are computed again.
    assert [s for s in range(1, 10) if already_logged(s, 4, 7)] == [5, 6, 7]
    assert not already_logged(4, 4, 7)  # the deferred eval of the checkpoint's own step
    assert not any(already_logged(s, None, 7) or already_logged(s, 4, None) for s in range(9))


def test_the_key_read_from_secret_manager_is_in_no_output_or_wandb_file(
    tmp_path: Path,
    small_dataset: Path,
    offline_wandb: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    key = f"wandbkey{uuid.uuid4().hex}"
    manager = FakeSecretManager()
    manager.values["projects/123/secrets/wandb-api-key/versions/latest"] = key
    monkeypatch.setenv("WANDB_API_KEY", "")  # undone after the test: the export sets it
    monkeypatch.setenv(EMULATOR_ENV, manager.host)
    monkeypatch.setenv("CLOUD_ML_PROJECT_ID", "123")
    monkeypatch.setenv(SECRETS_ENV, f"WANDB_API_KEY={KEY_SECRET}")
    config = tmp_path / "config.yaml"
    cfg = _config(small_dataset, tmp_path / "run")
    cfg["max_steps"] = 2
    config.write_text(yaml.safe_dump(cfg))
    stop = StopRequest().install()
    try:
        with serving(manager.server), caplog.at_level(logging.DEBUG):
            assert cli.main(["--config", str(config)], stop) == 0
    finally:
        stop.uninstall()
    assert manager.requested == ["projects/123/secrets/wandb-api-key/versions/latest"]
    out = capsys.readouterr()
    said = out.out + out.err + caplog.text
    assert "secrets exported" in said and key not in said
    files = [p for p in offline_wandb.rglob("*") if p.is_file()]
    assert any(p.suffix == ".wandb" for p in files)
    for path in files:
        assert key not in path.read_bytes().decode("latin-1"), path
