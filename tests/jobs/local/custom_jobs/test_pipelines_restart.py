"""Training pipelines across the control plane's life: a crash (kill -9) loses no pipeline (its
job ended while the control plane was down and the pipeline follows it), and `vtx local down`
fails an active pipeline with its job."""

from __future__ import annotations

from pathlib import Path

import psutil

from jobs.local.platform.settings import LocalSettings
from jobs.local.platform.store import Store
from jobs.local.plumbing.ports import free_port
from jobs.local.plumbing.processes import bring_up, start_fresh, stop_platform
from tests.conftest import REPO
from tests.jobs.local.local_helpers import (
    container_pipeline,
    pipelines_client,
    wait_for,
    wait_pipeline,
)

PARENT = "projects/acme-ml-dev/locations/us-central1"
WAIT_FOR_GO = "import pathlib, time\nwhile not pathlib.Path(GO).exists(): time.sleep(0.05)\n"


def _running(pipelines, name: str):
    return wait_for(
        lambda: (
            (p := pipelines.get_training_pipeline(name=name)).state.name == "PIPELINE_STATE_RUNNING"
            and p
        )
    )


def test_a_pipeline_survives_a_crash_and_down_fails_it(gcs_emulator: str, tmp_path: Path) -> None:
    repo = REPO
    settings = LocalSettings(
        data_dir=tmp_path / "platform", cwd=repo, port=free_port(), grace_s=2.0
    )
    state = start_fresh(settings, gcs_endpoint=gcs_emulator)
    try:
        pipelines = pipelines_client(state.vertex_endpoint)
        code = WAIT_FOR_GO.replace("GO", repr(str(tmp_path / "go")))
        created = pipelines.create_training_pipeline(
            parent=PARENT, training_pipeline=container_pipeline("crash", code)
        )
        _running(pipelines, created.name)
        server = psutil.Process(state.server_pid)
        server.kill()  # kill -9, as a crash
        server.wait(timeout=10)
        (tmp_path / "go").write_text("go")  # its job ends while the control plane is down
        bring_up(settings)
        done = wait_pipeline(pipelines, created.name)
        assert done.state.name == "PIPELINE_STATE_SUCCEEDED", done.error

        left = pipelines.create_training_pipeline(
            parent=PARENT,
            training_pipeline=container_pipeline("left", "import time; time.sleep(600)"),
        )
        _running(pipelines, left.name)
    finally:
        stop_platform(settings.data_dir)
    record = Store(settings.data_dir / "jobs.sqlite").get_pipeline(left.name.rsplit("/", 1)[1])
    assert record is not None
    assert record["state"] == "PIPELINE_STATE_FAILED"
    assert "vtx local down" in record["error"]["message"]
