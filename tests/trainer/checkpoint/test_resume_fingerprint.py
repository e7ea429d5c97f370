"""A resume never silently mixes two trainings: each checkpoint records the settings that shape
training; a run resumes only when they match, or when the config allows the change on purpose."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.trainer.conftest import read_json_lines, run_in_process, tiny_config
from trainer.checkpoint.fingerprint import accumulation_for, differences, trajectory
from trainer.config.schema import ConfigError, parse_config


def _events(text: str, message: str) -> list[dict]:
    return [e for e in read_json_lines(text) if e.get("message") == message]


def test_the_record_leaves_out_what_only_says_where_or_how_often(tmp_path: Path) -> None:
    base = tiny_config("data.jsonl", str(tmp_path))
    record = trajectory(parse_config(base), world_size=2)
    assert record["learning_rate"] == 3e-3 and record["global_batch_size"] == 2 * 1 * 2
    assert record["data.max_seq_length"] == 128 and record["seed"] == 7
    assert not {"output_dir", "logging_steps", "save_steps", "report_to"} & record.keys()
    assert not {"world_size", "gradient_accumulation_steps"} & record.keys()
    quieter = trajectory(parse_config({**base, "logging_steps": 5, "output_dir": "x"}), 2)
    assert differences(record, quieter) == []
    # Half the processes, twice the accumulation: the same global batch, the same trajectory.
    halved = trajectory(parse_config({**base, "gradient_accumulation_steps": 2}), 1)
    assert differences(record, halved) == []
    other = trajectory(parse_config({**base, "seed": 8}), 4)
    assert differences(record, other) == ["global_batch_size: 4 -> 8", "seed: 7 -> 8"]
    # A setting only one side knows (another trainer version) is not a difference.
    assert differences({**record, "new_setting": 1}, record) == []


def test_an_earlier_trainers_max_steps_minus_one_reads_as_null(tmp_path: Path) -> None:
    """Trainers before `max_steps: null` recorded an epoch-based run's max_steps as -1."""
    epochs = trajectory(parse_config(tiny_config("data.jsonl", str(tmp_path), max_steps=None)), 1)
    assert differences({**epochs, "max_steps": -1}, epochs) == []
    fixed = trajectory(parse_config(tiny_config("data.jsonl", str(tmp_path), max_steps=8)), 1)
    assert differences({**fixed, "max_steps": -1}, fixed) == ["max_steps: None -> 8"]


def test_resume_stops_on_changed_settings_names_them_and_resumes_when_allowed(
    tmp_path: Path, small_dataset: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tiny_config(str(small_dataset), str(tmp_path))
    assert run_in_process(cfg) == 0
    capsys.readouterr()

    changed = {**cfg, "learning_rate": 1e-3}
    with pytest.raises(ConfigError) as err:
        run_in_process(changed)
    message = str(err.value)
    assert "step 8" in message and "learning_rate: 0.003 -> 0.001" in message
    assert "output_dir=NEW" in message and "allow_config_change_on_resume=true" in message
    assert not _events(capsys.readouterr().out, "resumed")

    # Logging more often does not shape training: the run resumes and says what it checked.
    assert run_in_process({**cfg, "logging_steps": 2}) == 0
    (resumed,) = _events(capsys.readouterr().out, "resumed")
    assert resumed["step"] == 8 and resumed["checkpoint"].endswith("step-000000008")
    assert "settings that shape training match" in resumed["verified"]

    assert run_in_process({**changed, "allow_config_change_on_resume": True}) == 0
    out = capsys.readouterr().out
    (warning,) = _events(out, "resuming with changed settings")
    assert warning["changed"] == ["learning_rate: 0.003 -> 0.001"]
    assert "on purpose" in _events(out, "resumed")[0]["verified"]


@pytest.mark.parametrize(
    ("global_batch", "written_by", "world_size", "accumulation"),
    [(8, 2, 1, 4), (8, 1, 2, 2), (8, 2, 4, 1), (24, 4, 3, 4)],
)
def test_another_process_count_keeps_the_global_batch_by_changing_accumulation(
    global_batch: int, written_by: int, world_size: int, accumulation: int
) -> None:
    assert accumulation_for(global_batch, 2, written_by, world_size) == accumulation


def test_a_global_batch_no_accumulation_keeps_is_refused_with_the_numbers_and_the_fix() -> None:
    with pytest.raises(ConfigError) as err:
        accumulation_for(global_batch=12, per_device=2, written_by=2, world_size=4)
    assert str(err.value) == (
        "4 processes cannot keep the global batch of 12 rows that 2 processes trained with "
        "(per_device_train_batch_size 2 x gradient_accumulation_steps 3 x 2 processes): 12 is "
        "not a multiple of 2 x 4 = 8, so no gradient accumulation keeps it. Resume on a number "
        "of processes that divides 6 (1, 2, 3, 6), or continue with another global batch on "
        "purpose with --set allow_config_change_on_resume=true"
    )


def test_a_checkpoint_with_per_process_data_positions_is_refused_with_the_reason(
    tmp_path: Path, small_dataset: Path
) -> None:
    """An older trainer's marker (no `format`): its data positions are per process, which this
    trainer cannot place, so it says so instead of resuming at a wrong batch."""
    cfg = tiny_config(str(small_dataset), str(tmp_path), max_steps=2, save_steps=None)
    assert run_in_process(cfg) == 0
    marker = tmp_path / "checkpoints" / "step-000000002" / "COMMITTED"
    recorded = json.loads(marker.read_text())
    marker.write_text(json.dumps({k: v for k, v in recorded.items() if k != "format"}))
    with pytest.raises(ConfigError, match="older trainer, which kept one data position per"):
        run_in_process(cfg)
