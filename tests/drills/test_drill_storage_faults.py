"""Drill: storage that fails. Checkpoint uploads and data reads go through a proxy that answers
503, drops connections, loses replies to stored uploads and truncates downloads; the run is
also preempted once, so its checkpoint is read back through the same faulty path.

Retried, nothing lost: the run completes, resumes from the checkpoint it wrote, and its final
weights (exported to gs:// through the proxy) are bit-identical to an undisturbed local run.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from drill_fault_proxy import (
    CHECKPOINT_READ,
    DATA_READ,
    RESUMABLE,
    UPLOAD,
    FaultPlan,
    FaultProxy,
)
from drill_support import (
    assert_bit_identical,
    drill_config,
    final_weights,
    read_json_lines,
    resumed_from,
    run_in_process,
    write_small_dataset,
)

from trainer.training.loop import EXIT_PREEMPTED, SIGTERM_AFTER_STEP_ENV

SEED = 503
STOP_AFTER = 6
COMMON = {"max_steps": 12, "save_steps": 4, "save_total_limit": 2}


@pytest.fixture
def proxy(gcs_emulator: str, monkeypatch: pytest.MonkeyPatch):
    proxy = FaultProxy(gcs_emulator, FaultPlan(seed=SEED)).start()
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", proxy.endpoint)
    try:
        yield proxy
    finally:
        proxy.stop()


def test_storage_faults_are_retried_and_lose_nothing(
    tmp_path: Path, gcs_bucket: str, proxy: FaultProxy, monkeypatch, capsys
) -> None:
    import gcsfs

    dataset = write_small_dataset(tmp_path)
    reference = tmp_path / "undisturbed"
    assert run_in_process(drill_config(str(dataset), str(reference), **COMMON)) == 0

    proxy.enabled = False  # staging the input is not part of the drill
    gcsfs.GCSFileSystem(token="anon").put_file(str(dataset), f"{gcs_bucket}/data/small.jsonl")
    proxy.enabled = True
    root = f"gs://{gcs_bucket}/runs/faulty"
    environ = {"AIP_CHECKPOINT_DIR": f"{root}/checkpoints/", "AIP_MODEL_DIR": f"{root}/model/"}
    cfg = drill_config(f"gs://{gcs_bucket}/data/small.jsonl", str(tmp_path / "unused"), **COMMON)

    monkeypatch.setenv(SIGTERM_AFTER_STEP_ENV, str(STOP_AFTER))
    assert run_in_process(cfg, environ) == EXIT_PREEMPTED
    monkeypatch.delenv(SIGTERM_AFTER_STEP_ENV)
    capsys.readouterr()
    assert run_in_process(cfg, environ) == 0
    out = capsys.readouterr().out
    assert resumed_from(out) == STOP_AFTER
    assert any(r.get("message") == "done" for r in read_json_lines(out))

    proxy.enabled = False
    assert_bit_identical(final_weights(str(reference / "model")), final_weights(f"{root}/model"))
    faults = dict(proxy.injected)
    for kinds in ((UPLOAD, RESUMABLE), (DATA_READ,), (CHECKPOINT_READ,)):
        assert sum(n for (kind, _), n in faults.items() if kind in kinds) >= 2, faults
    assert not (tmp_path / "unused").exists()
