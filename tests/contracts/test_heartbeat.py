"""The trainer's heartbeat against the protocol the controller reads (`jobs.core.heartbeat`):
the trainer's own copy of the names (`trainer.tracking.heartbeat`), and the object a real run
writes, parsed by the platform's model."""

from __future__ import annotations

from pathlib import Path

from jobs.core import heartbeat as protocol
from tests.trainer.conftest import run_in_process, tiny_config, write_small_dataset
from trainer.tracking import heartbeat as trainer_copy


def test_the_trainer_names_the_heartbeat_as_the_platform_does() -> None:
    assert {p.name: p.value for p in trainer_copy.Phase} == {
        p.name: p.value for p in protocol.Phase
    }
    assert trainer_copy.HEARTBEAT_OBJECT == protocol.HEARTBEAT_OBJECT
    assert trainer_copy.HEARTBEAT_INTERVAL_ENV == protocol.HEARTBEAT_INTERVAL_ENV
    assert trainer_copy.HEARTBEAT_DEFAULT_S == protocol.HEARTBEAT_DEFAULT_S
    assert trainer_copy.HEARTBEAT_VERSION == protocol.HEARTBEAT_VERSION


def test_a_run_writes_a_heartbeat_the_platform_reads(tmp_path: Path) -> None:
    """In a job's layout (AIP_CHECKPOINT_DIR = <prefix>checkpoints/): the beat lands in the
    run's prefix, names the job, and ends done at the last step with its tokens."""
    prefix = tmp_path / "runs" / "r1"
    cfg = tiny_config(str(write_small_dataset(tmp_path)), str(tmp_path / "unused"), max_steps=6)
    environ = {
        "CLOUD_ML_JOB_ID": "4242",
        "AIP_CHECKPOINT_DIR": f"{prefix}/checkpoints/",
        "AIP_MODEL_DIR": f"{prefix}/model/",
    }
    assert run_in_process(cfg, environ) == 0
    beat = protocol.Heartbeat.model_validate_json((prefix / protocol.HEARTBEAT_OBJECT).read_text())
    assert beat.job == "4242" and beat.phase is protocol.Phase.DONE
    assert beat.step == beat.total_steps == 6 and beat.tokens > 0
    assert beat.stepped_at is not None and beat.tokens_per_s is not None
