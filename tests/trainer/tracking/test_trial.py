"""A hyperparameter tuning trial: its parameters as Vertex appends them to the container's args,
and its metric in the file format of Google's cloudml-hypertune (compared with the real one)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from jobs.local.plumbing.ports import free_port
from tests.conftest import REPO
from tests.trainer.conftest import EXAMPLES, tiny_config
from trainer.checkpoint.fingerprint import differences, trajectory
from trainer.config.arguments import parse_args, read_config
from trainer.config.env import TrackingEnv, VertexEnv
from trainer.config.schema import ConfigError, parse_config
from trainer.launch import torchrun_argv
from trainer.tracking.reporters import check_reporting
from trainer.tracking.trial_metric import KEEP_REPORTS, MetricFile, metric_source, metric_tag

CONFIG = str(EXAMPLES / "tiny-lora.yaml")


def _read(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[object, str]:
    cfg = read_config(parse_args(["--config", CONFIG, *argv]))
    return cfg, capsys.readouterr().err


# ---- parameters: --KEY=VALUE after our options, with --set's rules ---------------------------


def test_trial_arguments_set_config_keys_as_set_does(capsys: pytest.CaptureFixture[str]) -> None:
    cfg, _ = _read(
        ["--set", "seed=3", "--learning_rate=1e-05", "--model.lora.r", "4",
         "--per_device_train_batch_size=2.0", "--lr_scheduler_type=linear"],
        capsys,
    )  # fmt: skip
    assert cfg is not None
    assert (cfg.seed, cfg.learning_rate, cfg.model.lora.r) == (3, 1e-05, 4)
    assert cfg.per_device_train_batch_size == 2 and cfg.lr_scheduler_type == "linear"
    same, _ = _read(["--set", "seed=3", "--set", "learning_rate=1e-05", "--set", "model.lora.r=4",
                     "--set", "per_device_train_batch_size=2.0",
                     "--set", "lr_scheduler_type=linear"], capsys)  # fmt: skip
    assert same == cfg


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--learnin_rate=0.1"], "learnin_rate: unknown key; did you mean `learning_rate`?"),
        (["--model.lora.rank=8"], "model.lora.rank: unknown key (known here: alpha, dropout"),
        (["--learning_rate=fast"], "learning_rate: 'fast' must be a finite number > 0"),
        (["--model.lora.r=2.5"], "model.lora.r: 2.5 must be a whole number >= 1"),
        (["--warmup_ratio", "-0.5"], "warmup_ratio: -0.5 must be a finite number in [0, 1)"),
        (["--seed"], "--seed: no value; write --seed=VALUE"),
        (["8"], "unexpected argument '8'"),
        (["--est=1"], "est: unknown key"),  # never taken for --estimate by its prefix
    ],
)
def test_a_bad_trial_argument_stops_naming_the_key(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg, err = _read(argv, capsys)
    assert cfg is None and said in err, err


def test_the_launcher_hands_every_worker_the_same_trial_arguments() -> None:
    """Vertex appends the parameters to every replica's args; `trainer.launch` passes its own
    arguments to torchrun, which starts each local worker with them."""
    from torch.distributed.run import parse_args as torchrun_parse

    trainer_args = ["--config", CONFIG, "--learning_rate=0.01", "--model.lora.r", "4"]
    argv = torchrun_argv(VertexEnv(nnodes=2, node_rank=1), 4, trainer_args)
    parsed = torchrun_parse(argv)
    assert (parsed.module, parsed.training_script) == (True, "trainer")
    assert parsed.training_script_args == trainer_args


def test_a_trials_parameters_are_part_of_what_its_checkpoints_record(tmp_path: Path) -> None:
    """A retried trial resumes (same parameters); another trial's checkpoints never match."""
    base = tiny_config("d.jsonl", str(tmp_path))
    one = parse_config({**base, "learning_rate": 0.01})
    other = parse_config({**base, "learning_rate": 0.02, "output_dir": "elsewhere"})
    assert differences(trajectory(one, 1), trajectory(one, 1)) == []
    assert differences(trajectory(one, 1), trajectory(other, 1)) == ["learning_rate: 0.01 -> 0.02"]


# ---- the metric: which one, and the lines cloudml-hypertune writes ---------------------------


def test_the_metric_is_the_platforms_tag_else_the_configs_else_eval_or_train_loss() -> None:
    with_eval = parse_config(tiny_config("d.jsonl", "o", **{"data.eval_fraction": 0.1}))
    without = parse_config(tiny_config("d.jsonl", "o"))
    chosen = parse_config(tiny_config("d.jsonl", "o", hypertune_metric="grad_norm"))
    assert metric_tag(with_eval, TrackingEnv(trial_id="1")) == "eval_loss"
    assert metric_tag(without, TrackingEnv(trial_id="1")) == "train_loss"
    assert metric_tag(chosen, TrackingEnv(trial_id="1")) == "grad_norm"
    assert metric_tag(chosen, TrackingEnv(metric_tag="loss")) == "loss"
    assert metric_source("train_loss", without) == metric_source("loss", without) == "loss"
    with pytest.raises(ConfigError, match="'accuracy' is not one the trainer logs"):
        metric_source("accuracy", with_eval)
    with pytest.raises(ConfigError, match="eval_loss needs an eval set"):
        metric_source("eval_loss", without)


def test_a_trial_stops_before_training_on_a_metric_the_trainer_never_logs() -> None:
    cfg = parse_config(tiny_config("d.jsonl", "o"))
    check_reporting(cfg, TrackingEnv(), in_job=True)
    with pytest.raises(ConfigError, match="'accuracy' is not one the trainer logs"):
        check_reporting(cfg, TrackingEnv(metric_tag="accuracy"), in_job=True)
    with pytest.raises(ConfigError, match="eval_loss needs an eval set"):
        check_reporting(cfg, TrackingEnv(trial_id="2", metric_tag="eval_loss"), in_job=True)
    typo = parse_config(tiny_config("d.jsonl", "o", hypertune_metric="los"))
    with pytest.raises(ConfigError, match="'los' is not one"):
        check_reporting(typo, TrackingEnv(), in_job=False)  # checked outside a trial too


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("trial", [None, "7", ""])
def test_metric_lines_are_those_cloudml_hypertune_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, trial: str | None
) -> None:
    import hypertune

    reports = [("eval_loss", 2.5, 10), ("eval_loss", 1, 0), ("eval_loss", 0.1 + 0.2, 130)]
    reports += [("loss", i / 7, i) for i in range(KEEP_REPORTS + 3)]  # past the kept 100
    theirs_path, ours_path = tmp_path / "theirs" / "m", tmp_path / "ours" / "m"
    if trial is None:
        monkeypatch.delenv("CLOUD_ML_TRIAL_ID", raising=False)
    else:
        monkeypatch.setenv("CLOUD_ML_TRIAL_ID", trial)
    monkeypatch.setenv("CLOUD_ML_HP_METRIC_FILE", str(theirs_path))
    theirs = hypertune.HyperTune()
    ours = MetricFile(str(ours_path), TrackingEnv.from_environ().trial_id)
    for tag, value, step in reports:
        theirs.report_hyperparameter_tuning_metric(tag, value, step)
        ours.report(tag, value, step)
        assert theirs_path.read_text().count("\n") == ours_path.read_text().count("\n")
    assert len(_lines(ours_path)) == KEEP_REPORTS
    # Byte for byte but the timestamps (time.time() of each call): keys, order, separators.
    assert _untimed(ours_path) == _untimed(theirs_path)
    assert all(isinstance(line["timestamp"], float) for line in _lines(ours_path))


def _untimed(path: Path) -> str:
    return re.sub(r'"timestamp": [0-9.e+-]+', '"timestamp": T', path.read_text())


def test_a_trial_run_through_the_launcher_applies_its_parameters_and_reports_its_metric(
    tmp_path: Path,
) -> None:
    """The container's path: `python -m trainer.launch` with Vertex's appended parameters and a
    trial's environment; the metric file has a line per eval and the final model's."""
    cfg = tiny_config(
        str(EXAMPLES / "data" / "tiny.jsonl"), str(tmp_path / "out"), eval_steps=2,
        max_steps=50, **{"data.eval_fraction": 0.2},
    )  # fmt: skip
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(cfg))
    metrics = tmp_path / "hypertune" / "output.metrics"
    env = {
        **os.environ,
        "CLOUD_ML_TRIAL_ID": "3",
        "CLOUD_ML_HP_METRIC_TAG": "eval_loss",
        "CLOUD_ML_HP_METRIC_FILE": str(metrics),
        "OMP_NUM_THREADS": "1",
        # torchrun's own port, not the default 29500 that another test's run may hold.
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
    }
    trial_args = ["--max_steps=5", "--learning_rate", "0.01"]
    done = subprocess.run(
        [sys.executable, "-m", "trainer.launch", "--config", str(config), *trial_args],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = _lines(metrics)
    assert [(line["trial"], line["global_step"]) for line in lines] == [
        ("3", "2"),
        ("3", "4"),
        ("3", "5"),  # each eval, then the final model's (max_steps=5)
    ]
    assert all(float(str(line["eval_loss"])) > 0 for line in lines)
    evals = [e for e in map(json.loads, _json_lines(done.stdout)) if e.get("message") == "eval"]
    assert [float(str(line["eval_loss"])) for line in lines] == pytest.approx(
        [e["eval_loss"] for e in evals], abs=1e-6
    )


def _json_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("{")]
