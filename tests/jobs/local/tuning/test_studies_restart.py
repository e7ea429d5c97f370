"""Studies across the control plane's life: a crash (kill -9) loses no study, trials that
ended while it was down are read back with their metrics, and `vtx local down` fails an
active study as it fails jobs (one platform for both: starting one costs seconds)."""

from __future__ import annotations

from pathlib import Path

import psutil

from jobs.local.platform.settings import LocalSettings
from jobs.local.platform.state import stack_outputs_for
from jobs.local.platform.store import Store
from jobs.local.plumbing.ports import free_port
from jobs.local.plumbing.processes import bring_up, start_fresh, stop_platform
from tests.conftest import REPO
from tests.jobs.local.local_helpers import (
    PARENT,
    client,
    replica_output,
    tuning_job,
    wait_for,
    wait_study,
)

# Waits for $GO, then reports its rank as the loss through Google's hypertune writer.
WAIT_THEN_REPORT = """
import os, pathlib, sys, time, hypertune
print("waiting", flush=True)
while not pathlib.Path(os.environ["GO"]).exists():
    time.sleep(0.05)
rank = int(sys.argv[-1].split("=")[1])
hypertune.HyperTune().report_hyperparameter_tuning_metric("loss", rank / 10, global_step=5)
"""


def _settings(tmp_path: Path) -> LocalSettings:
    repo = REPO
    return LocalSettings(data_dir=tmp_path / "platform", cwd=repo, port=free_port(), grace_s=2.0)


def test_a_study_survives_a_crash_and_down_fails_it(gcs_emulator: str, tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    state = start_fresh(settings, gcs_endpoint=gcs_emulator)
    try:
        jobs = client(state.vertex_endpoint)
        code = WAIT_THEN_REPORT.replace('os.environ["GO"]', repr(str(tmp_path / "go")))
        created = jobs.create_hyperparameter_tuning_job(
            parent=PARENT, hyperparameter_tuning_job=tuning_job("crash", code, max_trials=2)
        )
        platform = stack_outputs_for(state)

        def both_wait() -> bool:
            trials = jobs.get_hyperparameter_tuning_job(name=created.name).trials
            return len(trials) == 2 and all(
                replica_output(platform, t.custom_job, "workerpool0-0") for t in trials
            )

        wait_for(both_wait)
        server = psutil.Process(state.server_pid)
        server.kill()  # kill -9, as a crash
        server.wait(timeout=10)
        (tmp_path / "go").write_text("go")  # the trials report and end while it is down
        bring_up(settings)

        done = wait_study(jobs, created.name)
        assert done.state == 4, done.error
        assert [t.final_measurement.metrics[0].value for t in done.trials] == [0.1, 0.2]
        assert [t.final_measurement.step_count for t in done.trials] == [5, 5]

        left = jobs.create_hyperparameter_tuning_job(
            parent=PARENT,
            hyperparameter_tuning_job=tuning_job("left", "import time; time.sleep(600)"),
        )
        wait_for(lambda: jobs.get_hyperparameter_tuning_job(name=left.name).state == 3)
    finally:
        stop_platform(settings.data_dir)
    # `vtx local down` fails an active study as it fails jobs.
    record = Store(settings.data_dir / "jobs.sqlite").get_study(left.name.rsplit("/", 1)[1])
    assert record is not None
    assert record["state"] == "JOB_STATE_FAILED"
    assert "vtx local down" in record["error"]["message"]
    assert {t["state"] for t in record["trials"]} == {"INFEASIBLE"}


def test_a_cancel_cut_short_by_a_crash_is_finished_by_the_restart(
    gcs_emulator: str, tmp_path: Path
) -> None:
    """The control plane records a study's cancel and dies before its trials' jobs are
    cancelled: the next one cancels them, and the study ends CANCELLED."""
    settings = _settings(tmp_path)
    state = start_fresh(settings, gcs_endpoint=gcs_emulator)
    try:
        jobs = client(state.vertex_endpoint)
        created = jobs.create_hyperparameter_tuning_job(
            parent=PARENT,
            hyperparameter_tuning_job=tuning_job("cut-short", "import time; time.sleep(600)"),
        )
        wait_for(lambda: jobs.get_hyperparameter_tuning_job(name=created.name).state == 3)
        server = psutil.Process(state.server_pid)
        server.kill()  # kill -9, right after it recorded the cancel (below)
        server.wait(timeout=10)
        store = Store(settings.data_dir / "jobs.sqlite")
        study_id = created.name.rsplit("/", 1)[1]
        [(resource, runtime)] = store.active_studies(("JOB_STATE_RUNNING",))
        resource["state"] = "JOB_STATE_CANCELLING"
        runtime |= {"stopping": "JOB_STATE_CANCELLED", "final_error": {"code": 1, "message": "x"}}
        store.put_study(study_id, resource, runtime)
        store.close()
        bring_up(settings)

        done = wait_study(jobs, created.name)
        assert done.state == 7  # CANCELLED
        for trial in done.trials:
            assert jobs.get_custom_job(name=trial.custom_job).state == 7
    finally:
        stop_platform(settings.data_dir)
