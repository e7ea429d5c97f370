"""Replicas see exactly Vertex's environment: checked from inside real replica processes
submitted through the high-level SDK and the REST client."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jobs.core.stack import StackOutputs
from tests.jobs.local.local_helpers import (
    PARENT,
    client,
    custom_job,
    init_sdk,
    pool,
    replica_output,
    wait_terminal,
)

# Each replica prints its Vertex variables as one JSON line. Workers then drop a marker file;
# the primary waits for every marker before it exits 0, so no replica is stopped early.
PRINT_ENV = """
import json, os, pathlib, sys, time
keys = ["CLUSTER_SPEC", "TF_CONFIG", "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK",
        "AIP_MODEL_DIR", "AIP_CHECKPOINT_DIR", "AIP_TENSORBOARD_LOG_DIR", "CLOUD_ML_JOB_ID",
        "CLOUD_ML_PROJECT_ID", "STORAGE_EMULATOR_HOST", "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT",
        "FROM_TEMPLATE"]
print(json.dumps({k: os.environ.get(k) for k in keys}))
marks = pathlib.Path(os.environ["MARKS"])
task = json.loads(os.environ["CLUSTER_SPEC"])["task"]
if task["type"] != "workerpool0":
    (marks / f"{task['type']}-{task['index']}").write_text("done")
    sys.exit(0)
while len(list(marks.iterdir())) < int(os.environ["WORKERS"]):
    time.sleep(0.05)
"""


@pytest.fixture
def sdk(local_platform: StackOutputs, monkeypatch: pytest.MonkeyPatch):
    """The high-level SDK initialised as a local user would: REST, anonymous, our endpoint."""
    from google.cloud.aiplatform import jobs

    monkeypatch.setattr(jobs, "_JOB_WAIT_TIME", 0.2)  # the SDK polls every 5 s by default
    return init_sdk(local_platform, staging_bucket=f"gs://{local_platform.buckets.staging}")


def _env_of(platform: StackOutputs, job_name: str, replica: str) -> dict:
    lines = replica_output(platform, job_name, replica)
    return json.loads(lines[0])


def test_sdk_custom_job_run_gives_the_primary_vertex_env(
    sdk, local_platform: StackOutputs, tmp_path: Path
) -> None:
    base = "gs://vtx-local-checkpoints/runs/sdk-single"
    env = {"MARKS": str(tmp_path), "WORKERS": "0", "FROM_TEMPLATE": "yes"}
    job = sdk.CustomJob(
        display_name="sdk-single",
        worker_pool_specs=[pool(PRINT_ENV, env=env)],
        base_output_dir=base,
    )
    job.run()  # raises unless the job SUCCEEDED

    seen = _env_of(local_platform, job.resource_name, "workerpool0-0")
    spec = json.loads(seen["CLUSTER_SPEC"])
    assert spec["task"] == {"type": "workerpool0", "index": 0}
    assert list(spec["cluster"]) == ["workerpool0"]
    assert json.loads(spec["job"])["workerPoolSpecs"][0]["containerSpec"]["imageUri"]
    # Single replica: no distributed variables at all.
    for absent in ("TF_CONFIG", "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK"):
        assert seen[absent] is None, absent
    assert seen["AIP_MODEL_DIR"] == f"{base}/model/"
    assert seen["AIP_CHECKPOINT_DIR"] == f"{base}/checkpoints/"
    assert seen["AIP_TENSORBOARD_LOG_DIR"] == f"{base}/logs/"
    assert seen["CLOUD_ML_JOB_ID"] == job.resource_name.rsplit("/", 1)[1]
    assert seen["CLOUD_ML_PROJECT_ID"] == local_platform.project_number
    assert seen["STORAGE_EMULATOR_HOST"] == local_platform.gcs_endpoint
    assert seen["GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT"] == "false"
    assert seen["FROM_TEMPLATE"] == "yes"


def test_multi_replica_job_gives_each_node_its_rank_and_cluster(
    local_platform: StackOutputs, tmp_path: Path
) -> None:
    jobs = client(local_platform.vertex_endpoint)
    env = {"MARKS": str(tmp_path), "WORKERS": "2"}
    created = jobs.create_custom_job(
        parent=PARENT,
        custom_job=custom_job(
            "multi", pool(PRINT_ENV, env=env), pool(PRINT_ENV, replicas=2, env=env)
        ),
    )
    done = wait_terminal(jobs, created.name)
    assert done.state == 4, done.error

    envs = {
        name: _env_of(local_platform, created.name, name)
        for name in ("workerpool0-0", "workerpool1-0", "workerpool1-1")
    }
    cluster = json.loads(envs["workerpool0-0"]["CLUSTER_SPEC"])["cluster"]
    assert len(cluster["workerpool0"]) == 1 and len(cluster["workerpool1"]) == 2
    primary_port = cluster["workerpool0"][0].rsplit(":", 1)[1]
    tf_types = {"workerpool0": "chief", "workerpool1": "worker"}
    for name, seen in envs.items():
        pool_name, index = name.split("-")
        spec = json.loads(seen["CLUSTER_SPEC"])
        assert spec["task"] == {"type": pool_name, "index": int(index)}
        assert spec["cluster"] == cluster
        tf = json.loads(seen["TF_CONFIG"])
        assert tf["task"] == {"type": tf_types[pool_name], "index": int(index)}
        assert tf["cluster"]["chief"] == cluster["workerpool0"]
        assert seen["MASTER_ADDR"] == "127.0.0.1"
        assert seen["MASTER_PORT"] == primary_port
        assert seen["WORLD_SIZE"] == "3"  # nodes, not processes
    assert sorted(e["RANK"] for e in envs.values()) == ["0", "1", "2"]
    assert envs["workerpool0-0"]["RANK"] == "0"


# A TPU host prints its TPU variables; host 0 (the primary) waits for the others' markers.
PRINT_TPU_ENV = """
import json, os, pathlib, sys, time
keys = ["TPU_WORKER_ID", "TPU_WORKER_HOSTNAMES", "CLUSTER_SPEC", "MASTER_ADDR", "WORLD_SIZE",
        "RANK", "TF_CONFIG"]
print(json.dumps({k: os.environ.get(k) for k in keys}))
marks = pathlib.Path(os.environ["MARKS"])
worker = os.environ["TPU_WORKER_ID"]
if worker != "0":
    (marks / worker).write_text("done")
    sys.exit(0)
while len(list(marks.iterdir())) < 1:
    time.sleep(0.05)
"""


def test_a_multi_host_tpu_slice_runs_a_process_per_host_with_its_worker_id(
    local_platform: StackOutputs, tmp_path: Path
) -> None:
    # ct5lp-hightpu-4t with 2x4 is 8 chips on 2 VMs: one replica, which Vertex starts as 2 VMs.
    tpu = pool(PRINT_TPU_ENV, env={"MARKS": str(tmp_path)})
    tpu["machine_spec"] = {"machine_type": "ct5lp-hightpu-4t", "tpu_topology": "2x4"}
    jobs = client(local_platform.vertex_endpoint)
    created = jobs.create_custom_job(parent=PARENT, custom_job=custom_job("tpu-slice", tpu))
    done = wait_terminal(jobs, created.name)
    assert done.state == 4, done.error  # SUCCEEDED, on this machine's CPU

    hosts = [_env_of(local_platform, created.name, f"workerpool0-{i}") for i in (0, 1)]
    cluster = json.loads(hosts[0]["CLUSTER_SPEC"])["cluster"]
    assert list(cluster) == ["workerpool0"] and len(cluster["workerpool0"]) == 2
    for i, seen in enumerate(hosts):
        assert seen["TPU_WORKER_ID"] == str(i)
        assert seen["TPU_WORKER_HOSTNAMES"] == ",".join(cluster["workerpool0"])
        assert json.loads(seen["CLUSTER_SPEC"])["task"] == {"type": "workerpool0", "index": i}
        # One replica, not a chief and workers: no PyTorch or TF variables.
        for absent in ("MASTER_ADDR", "WORLD_SIZE", "RANK", "TF_CONFIG"):
            assert seen[absent] is None, absent
