"""The trainer's TensorBoard role holds what Google's TensorBoard uploader calls, and
nothing that manages instances or IAM."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from infra.components.access.identity import TENSORBOARD_WRITER_PERMISSIONS
from infra.offline.program import OfflineRun

# TensorboardService methods the uploader calls, with the permission Google's "Vertex AI IAM
# permissions" table gives each (docs/vertex-facts.md, "TensorBoard uploader").
UPLOADER_PERMISSIONS = {
    "get_tensorboard": "aiplatform.tensorboards.get",
    "create_tensorboard_experiment": "aiplatform.tensorboardExperiments.create",
    "get_tensorboard_experiment": "aiplatform.tensorboardExperiments.get",
    "write_tensorboard_experiment_data": "aiplatform.tensorboardExperiments.write",
    "batch_create_tensorboard_runs": "aiplatform.tensorboardRuns.batchCreate",
    "create_tensorboard_run": "aiplatform.tensorboardRuns.create",
    "list_tensorboard_runs": "aiplatform.tensorboardRuns.list",
    "write_tensorboard_run_data": "aiplatform.tensorboardRuns.write",
    "batch_create_tensorboard_time_series": "aiplatform.tensorboardTimeSeries.batchCreate",
    "create_tensorboard_time_series": "aiplatform.tensorboardTimeSeries.create",
    "list_tensorboard_time_series": "aiplatform.tensorboardTimeSeries.list",
}
# A TensorboardService call in the uploader's source: `self._api.batch_create_..._series(`.
_SERVICE_CALL = re.compile(r"\.((?:batch_create|create|get|list|write|update)_tensorboard\w*)\(")


def test_the_role_covers_every_call_of_the_uploader() -> None:
    missing = set(UPLOADER_PERMISSIONS.values()) - set(TENSORBOARD_WRITER_PERMISSIONS)
    assert missing == set()
    assert "aiplatform.tensorboardTimeSeries.batchCreate" in TENSORBOARD_WRITER_PERMISSIONS


def test_the_installed_uploader_calls_nothing_the_table_lacks() -> None:
    """If a new google-cloud-aiplatform uploader calls another method, this names it."""
    spec = importlib.util.find_spec("google.cloud.aiplatform")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("google-cloud-aiplatform is not installed")
    package = Path(next(iter(spec.submodule_search_locations))) / "tensorboard"
    called = {
        method
        for source in ("uploader.py", "uploader_utils.py")
        for method in _SERVICE_CALL.findall((package / source).read_text())
    }
    assert "batch_create_tensorboard_time_series" in called
    assert called - set(UPLOADER_PERMISSIONS) == set()


def test_the_role_cannot_manage_instances_or_iam() -> None:
    assert all(p.startswith("aiplatform.tensorboard") for p in TENSORBOARD_WRITER_PERMISSIONS)
    forbidden = re.compile(r"\.(delete|setIamPolicy|getIamPolicy)$|^aiplatform\.tensorboards\.")
    assert [
        p
        for p in TENSORBOARD_WRITER_PERMISSIONS
        if forbidden.search(p) and p != "aiplatform.tensorboards.get"
    ] == []
    assert len(set(TENSORBOARD_WRITER_PERMISSIONS)) == len(TENSORBOARD_WRITER_PERMISSIONS)


def test_each_stack_declares_the_role_with_the_uploader_permissions(stack_run: OfflineRun) -> None:
    (role,) = [
        r
        for r in stack_run.of_type("gcp:projects/iAMCustomRole:IAMCustomRole")
        if r.component == "identity"
    ]
    assert role.inputs["permissions"] == list(TENSORBOARD_WRITER_PERMISSIONS)
