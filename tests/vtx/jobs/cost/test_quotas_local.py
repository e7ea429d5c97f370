"""The quota preflight end to end through the local platform (`local_platform` fixture): its
Cloud Quotas quotaInfos read and its CustomJobs, driven through the `vtx` CLI. The platform's
capacity model is set for each test and put back after it (the platform is the session's)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from jobs.core.stack import StackOutputs
from jobs.local.plumbing.client import read_capacity, set_capacity
from jobs.vertex.rest import VertexRest
from vtx.cli import app

pytestmark = pytest.mark.slow
runner = CliRunner(env={"COLUMNS": "200"})
PREFIX = "aiplatform.googleapis.com/custom_model_training_"
L4, CPUS = f"{PREFIX}nvidia_l4_gpus", f"{PREFIX}cpus"


def vtx(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


@pytest.fixture
def l4_limit_2(local_platform: StackOutputs) -> Iterator[StackOutputs]:
    """An on-demand L4 quota of 2 in us-central1, the platform's own model back afterwards."""
    endpoint, token = local_platform.vertex_endpoint or "", local_platform.local_token or ""
    before = read_capacity(endpoint, token)["capacity"]
    set_capacity(endpoint, token, {"regions": {"us-central1": {"quotas": {L4: 2}}}})
    try:
        yield local_platform
    finally:
        set_capacity(endpoint, token, before)


def write_template(tmp_path: Path, name: str, pools: dict) -> Path:
    path = tmp_path / f"{name}.yaml"
    document = {
        "name": name,
        "image": "trainer",
        "command": ["python", "-c", "import time; time.sleep(600)"],
        "pools": pools,
        "scheduling": {"timeout": "10m"},
    }
    path.write_text(yaml.safe_dump(document))
    return path


def quota_rows() -> dict[str, dict]:
    code, out = vtx("quota", "--stack", "local", "--format", "json")
    assert code == 0, out
    return {row["metric"]: row for row in json.loads(out)}


def test_launch_on_the_local_platform_refuses_a_job_over_its_quota(
    l4_limit_2: StackOutputs, tmp_path: Path
) -> None:
    rows = quota_rows()
    assert rows[L4]["limit"] == 2 and rows[L4]["quota_id"].startswith("CustomModelTraining")
    assert rows[CPUS]["unlimited"]
    pools = {"chief": {"machine": "g2-standard-8"}, "workers": {"machine": "g2-standard-8"}}
    pools["workers"]["replicas"] = 3
    template = write_template(tmp_path, "l4-four", pools)
    code, out = vtx("launch", str(template), "--stack", "local", "-y")
    assert code == 1, out
    assert "custom_model_training_nvidia_l4_gpus needs 4, over the limit of 2" in out
    assert "raise regions.us-central1.quotas." in out and "vtx local capacity set" in out
    assert "quota preference vtx-nvidia-l4-ondemand-us-central1" in out
    assert "not submitted" in out and "submitted projects/" not in out


def test_vtx_quota_counts_what_a_running_local_job_holds(
    local_platform: StackOutputs, tmp_path: Path
) -> None:
    before = quota_rows().get(CPUS, {}).get("in_use", 0)
    template = write_template(tmp_path, "cpu-holder", {"chief": {"machine": "n1-standard-4"}})
    code, out = vtx("launch", str(template), "--stack", "local", "-y", "--run-id", "holder-1")
    assert code == 0, out
    try:
        assert quota_rows()[CPUS]["in_use"] == before + 4  # n1-standard-4: 4 vCPUs
    finally:
        rest = VertexRest(local_platform)
        rest.cancel(rest.resolve("holder-1").name)
