"""Drill: the local control plane is SIGKILLed twice while a real training job runs, and
brought back each time the way a user would: `vtx local up` again. Twice, not more: the first
crash hits the platform as `up` started it, the second one a control plane that a recovery
started (and that re-attached the replicas); a third would repeat the second.

Everything goes through the user's commands: `vtx local up` starts the platform (its own GCS
emulator), `kill -9` hits the control plane's pid as `vtx local status --json` reports it, and
`vtx local up` recovers it; `vtx local down` ends the drill. Jobs are submitted through the
real aiplatform_v1 REST client between crashes: a training job (the trainer, reading data from
and checkpointing to the emulated GCS), quick jobs and a failing one. Crash times are seeded.
After every recovery each job submitted so far must still be listed, the emulator the replicas
write to must be the same process, and in the end every job reaches the terminal state its code
deserves; the training job's model is in its output directory.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from drill_support import REPO, drill_config, write_small_dataset

from jobs.local.platform.state import LOCAL_BUCKETS
from jobs.local.plumbing.ports import free_port
from tests.conftest import HANG_S
from tests.jobs.local.local_helpers import PARENT, client, custom_job, wait_terminal

SEED = 31337
LABELS = {"drill": "control-plane"}
CRASHES = 2
RUNNING, SUCCEEDED, FAILED = 3, 4, 5


def _pool(argv: list[str]) -> dict[str, Any]:
    """One replica running `argv` (a whole command, not only Python code as `pool` builds), on
    one thread: torch's threads spinning on a shared 2-core machine train many times slower."""
    return {
        "machine_spec": {"machine_type": "n1-standard-4"},
        "replica_count": 1,
        "container_spec": {
            "image_uri": "local/drill:1",
            "command": argv,
            "env": [{"name": "OMP_NUM_THREADS", "value": "1"}],
        },
    }


def _listed(jobs: Any) -> set[str]:
    pager = jobs.list_custom_jobs(
        request={"parent": PARENT, "filter": 'labels.drill="control-plane"'}
    )
    return {j.name for j in pager}


def vtx_local(data_dir: Path, *args: str) -> str:
    """`vtx local ARGS --data-dir D`, run from the checkout as a user would; its output."""
    vtx = Path(sys.executable).with_name("vtx")
    done = subprocess.run(
        [str(vtx), "local", *args, "--data-dir", str(data_dir)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=HANG_S,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    return done.stdout + done.stderr


def status(data_dir: Path) -> dict[str, Any]:
    return json.loads(vtx_local(data_dir, "status", "--json"))


@pytest.mark.slow(cost_s=45)
def test_control_plane_crashes_lose_no_job_and_jobs_finish(tmp_path: Path):
    import gcsfs

    rng = random.Random(SEED)
    data_dir = tmp_path / "platform"
    ports = ["--port", str(free_port()), "--gcs-port", str(free_port()), "--grace-s", "5"]
    vtx_local(data_dir, "up", *ports)
    try:
        info = status(data_dir)
        gcs_pid = info["gcs_pid"]
        fs = gcsfs.GCSFileSystem(token="anon", endpoint_url=info["gcs_endpoint"])
        dataset = write_small_dataset(tmp_path)
        data_uri = f"gs://{LOCAL_BUCKETS.data}/drills/control-plane/small.jsonl"
        fs.put_file(str(dataset), data_uri.removeprefix("gs://"))
        config = tmp_path / "train.yaml"
        config.write_text(yaml.safe_dump(drill_config(data_uri, str(tmp_path / "unused"))))
        base = f"gs://{LOCAL_BUCKETS.checkpoints}/runs/drill-control-plane"

        jobs = client(info["vertex_endpoint"])
        submitted: dict[str, int] = {}  # name -> the terminal state it must reach

        def submit(name: str, argv: list[str], expected: int, base: str | None = None) -> str:
            job = jobs.create_custom_job(
                parent=PARENT, custom_job=custom_job(name, _pool(argv), labels=LABELS, base=base)
            )
            submitted[job.name] = expected
            return job.name

        train = submit(
            "drill-train", ["python", "-m", "trainer", "--config", str(config)], SUCCEEDED, base
        )
        train_state_at_crash = []
        for crash in range(CRASHES):
            submit(f"quick-{crash}", ["python", "-c", f"print('quick {crash}')"], SUCCEEDED)
            submit(f"broken-{crash}", ["python", "-c", "raise SystemExit(3)"], FAILED)
            time.sleep(rng.uniform(0.5, 4.0))
            train_state_at_crash.append(jobs.get_custom_job(name=train).state)
            killed = info["server_pid"]
            os.kill(killed, signal.SIGKILL)  # kill -9
            time.sleep(rng.uniform(0.0, 2.0))  # replicas keep running (and may end) meanwhile
            said = vtx_local(data_dir, "up", *ports)
            assert "control plane had stopped" in " ".join(said.split()), said
            info = status(data_dir)  # the pid the next crash hits, as a user would read it
            assert info["server_pid"] != killed, info
            assert info["gcs_pid"] == gcs_pid, "the emulator was restarted"
            assert _listed(jobs) == set(submitted), f"after crash {crash}"

        assert RUNNING in train_state_at_crash, "no crash hit the training job while it ran"
        outcomes = {name: wait_terminal(jobs, name) for name in submitted}
        wrong = {n: j.state for n, j in outcomes.items() if j.state != submitted[n]}
        assert not wrong, {n: (s, outcomes[n].error.message) for n, s in wrong.items()}
        assert _listed(jobs) == set(submitted)
        fs.invalidate_cache()
        assert fs.exists(f"{base.removeprefix('gs://')}/model/model.safetensors"), train
    finally:
        vtx_local(data_dir, "down")
