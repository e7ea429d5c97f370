"""`vtx model upload|list|show` against the local platform: runs whose one-line programs write
a model (or nothing) into AIP_MODEL_DIR on the emulator, then registered, versioned, listed, and
refused with messages that say why."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from jobs.core.contract import LABEL_RUN_ID, LABEL_TEMPLATE
from jobs.core.stack import StackOutputs
from jobs.serving.model_rest import ModelRest
from jobs.serving.model_upload import model_layout
from jobs.vertex.rest import VertexRest
from tests.conftest import HANG_S
from vtx.cli import app

runner = CliRunner(env={"COLUMNS": "250"})

WRITES_A_LORA = """
import os, fsspec
d = os.environ["AIP_MODEL_DIR"]
for name in ("adapter_config.json", "merged/config.json", "tokenizer.json"):
    with fsspec.open(d + name, "w") as f:
        f.write("{}")
"""


def vtx(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, " ".join(result.output.replace("│", " ").split())


def launch(tmp_path: Path, run_id: str, code: str) -> None:
    template = tmp_path / f"{run_id}.yaml"
    template.write_text(
        yaml.safe_dump(
            {
                "name": "tiny-export",
                "image": "trainer",
                "command": ["python", "-c", code],
                "pools": {"chief": {"machine": "n1-standard-4"}},
                "scheduling": {"timeout": "10m"},
            }
        )
    )
    code_, out = vtx("launch", str(template), "--stack", "local", "-y", "--run-id", run_id)
    assert code_ == 0, out


def wait_ended(platform: StackOutputs, *run_ids: str) -> None:
    rest = VertexRest(platform)
    deadline = time.monotonic() + HANG_S  # only catches a hang
    while not all((jobs := rest.list(r)) and jobs[0].terminal for r in run_ids):
        assert time.monotonic() < deadline, "the runs never ended"
        time.sleep(0.3)


@pytest.fixture(scope="module")
def runs(local_platform: StackOutputs, tmp_path_factory: pytest.TempPathFactory) -> StackOutputs:
    tmp_path = tmp_path_factory.mktemp("model-runs")
    launch(tmp_path, "export-ok", WRITES_A_LORA)
    launch(tmp_path, "export-none", "print('trained, exported nothing')")
    launch(tmp_path, "export-fails", "raise SystemExit(3)")
    wait_ended(local_platform, "export-ok", "export-none", "export-fails")
    return local_platform


def test_upload_registers_the_runs_model_then_a_version_under_it(runs: StackOutputs) -> None:
    code, out = vtx("model", "upload", "export-ok", "--stack", "local", "-y", "--alias=candidate")
    assert code == 0, out
    folder = "gs://vtx-local-checkpoints/runs/export-ok/model/"
    assert f"{folder} (merged model)" in out  # the plan names the layout it found
    assert "version: 1" in out
    name = out.split("model projects/")[1].split()[0]
    model = ModelRest(runs).get_model(f"projects/{name}")
    assert model.artifact_uri == folder
    assert model.image == f"{runs.artifact_registry}/serve:latest"
    assert model.labels[LABEL_RUN_ID] == "export-ok"
    assert model.labels[LABEL_TEMPLATE] == "tiny-export"
    assert model.display_name == "tiny-export"
    assert sorted(model.aliases) == ["candidate", "default"]
    spec = model.rest["containerSpec"]
    assert (spec["predictRoute"], spec["healthRoute"], spec["ports"]) == (
        "/predict",
        "/health",
        [{"containerPort": 8080}],
    )

    model_id = model.model_id
    code, out = vtx(
        "model", "upload", "export-ok", "--stack", "local", "-y",
        "--parent-model", model_id, "--image", "serve:v2",
    )  # fmt: skip
    assert code == 0, out
    assert "version: 2" in out
    code, out = vtx("model", "show", model_id, "--stack", "local")
    assert code == 0, out
    assert f"{runs.artifact_registry}/serve:v2" in out  # the default version is the new one
    assert f"{model_id} 1 candidate tiny-export export-ok" in out
    assert f"{model_id} 2 default tiny-export export-ok" in out
    code, out = vtx("model", "list", "--stack", "local", "--filter", f"model={model_id}")
    assert code == 0 and f"{model_id} 2 default" in out


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["no-such-run"], "run 'no-such-run' not found in projects/vtx-local/locations/"),
        (["export-fails"], "run export-fails is FAILED (its newest attempt"),
        (["export-none"], "no model under gs://vtx-local-checkpoints/runs/export-none/model/"),
        (["export-ok", "--alias", "1st"], "--alias '1st' is not a valid alias"),
        (["export-ok", "--alias", "x", "--alias", "x"], "--alias x named more than once"),
        (["export-ok", "--parent-model", "404"], "--parent-model 404: no such model"),
    ],
)
def test_upload_refusals_say_why_and_upload_nothing(
    runs: StackOutputs, args: list[str], said: str
) -> None:
    before = len(ModelRest(runs).list_models())
    code, out = vtx("model", "upload", *args, "--stack", "local", "-y")
    assert code == 1
    assert said in out
    assert "not uploaded" in out
    assert len(ModelRest(runs).list_models()) == before


def test_model_layout_is_the_one_the_server_would_load() -> None:
    root = "runs/r/model"
    assert model_layout([f"{root}/config.json"], root) == "full"
    assert model_layout([f"{root}/adapter_config.json"], root) == "adapter"
    assert model_layout([f"{root}/adapter_config.json", f"{root}/merged/config.json"], root) == (
        "merged"
    )
    assert model_layout([f"{root}/checkpoints/config.json", f"{root}x/config.json"], root) is None


def test_launch_follow_upload_model_registers_the_model_when_the_run_succeeds(
    runs: StackOutputs, tmp_path: Path
) -> None:
    template = tmp_path / "launched.yaml"
    template.write_text(
        yaml.safe_dump(
            {
                "name": "tiny-launched",
                "image": "trainer",
                "command": ["python", "-c", WRITES_A_LORA],
                "pools": {"chief": {"machine": "n1-standard-4"}},
                "scheduling": {"timeout": "10m"},
            }
        )
    )
    args = [str(template), "--stack", "local", "-y", "--run-id", "launched-upload"]
    code, out = vtx("launch", *args, "--upload-model")
    assert code == 2 and "--upload-model needs --follow" in out
    code, out = vtx("launch", *args, "--follow", "--poll-s", "0.2", "--upload-model")
    assert code == 0, out
    assert "JOB_STATE_SUCCEEDED" in out and "version: 1" in out
    [model] = ModelRest(runs).list_models(f'labels.{LABEL_RUN_ID}="launched-upload"')
    assert model.artifact_uri == "gs://vtx-local-checkpoints/runs/launched-upload/model/"
