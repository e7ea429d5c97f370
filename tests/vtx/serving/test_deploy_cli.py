"""`vtx model upload` -> `vtx deploy` -> `vtx predict` -> `vtx undeploy` against the local
platform: a run whose program copies the trainer's export of a tiny model into AIP_MODEL_DIR is
registered, served by the project's own serving entry point (`python -m trainer.serve`, the
default image's command), asked for text, and taken down again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from jobs.core.stack import StackOutputs
from jobs.serving.endpoint_rest import EndpointRest
from tests.trainer.conftest import run_in_process, tiny_config, write_small_dataset
from tests.trainer.serving.test_serve import PROMPT, reference_text
from tests.vtx.serving.test_model_upload_cli import launch, wait_ended
from vtx.cli import app

runner = CliRunner(env={"COLUMNS": "250"})
COPIES_THE_EXPORT = """
import os, pathlib, fsspec
src, d = pathlib.Path({src!r}), os.environ["AIP_MODEL_DIR"]
for p in sorted(src.rglob("*")):
    if p.is_file():
        with fsspec.open(d + p.relative_to(src).as_posix(), "wb") as f:
            f.write(p.read_bytes())
"""


def vtx(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, " ".join(result.output.replace("│", " ").split())


@pytest.fixture
def stack(local_platform: StackOutputs) -> StackOutputs:
    """`--stack local`: the local platform exports a serving account as a stack does."""
    assert local_platform.serving_service_account is not None
    return local_platform


@pytest.fixture
def exported(tmp_path: Path) -> Path:
    """The trainer's export of a tiny model (2 steps), on local disk."""
    data = str(write_small_dataset(tmp_path))
    assert (
        run_in_process(tiny_config(data, str(tmp_path / "run"), max_steps=2, save_steps=None)) == 0
    )
    return tmp_path / "run" / "model"


def test_a_registered_model_is_deployed_predicts_its_text_and_is_undeployed(
    stack: StackOutputs, exported: Path, tmp_path: Path
) -> None:
    launch(tmp_path, "deploy-tiny", COPIES_THE_EXPORT.format(src=str(exported)))
    wait_ended(stack, "deploy-tiny")
    code, out = vtx("model", "upload", "deploy-tiny", "--stack", "local", "-y")
    assert code == 0, out
    model_id = out.split("model projects/")[1].split()[0].rsplit("/", 1)[-1]

    code, out = vtx(
        "deploy", f"{model_id}@default", "--stack", "local", "-y", "--max-replicas", "2"
    )
    assert code == 0, out
    assert "replicas min 1, max 2" in out and "traffic after this model 100%" in out
    assert f"service account {stack.serving_service_account}" in out
    assert "serving $/h unknown: no serving price for n1-standard-4" in out
    endpoint = out.split("endpoint projects/")[1].split()[0].rsplit("/", 1)[-1]
    deployed_id = out.split("deployed model id: ")[1].split()[0]
    served = EndpointRest(stack).get_endpoint(endpoint)
    assert [d.id for d in served.deployed] == [deployed_id]
    assert served.deployed[0].service_account == stack.serving_service_account

    code, out = vtx("endpoint", "show", endpoint, "--stack", "local")
    assert code == 0 and f"{deployed_id} {model_id}@1 n1-standard-4 1-2" in out, out
    code, out = vtx(  # found again by its display name (the model's), reused with a new split
        "deploy",
        model_id,
        "--stack",
        "local",
        "--endpoint",
        served.display_name,
        "--traffic",
        "30",
        "--dry-run",
    )
    assert code == 0, out
    assert f"endpoint {served.name}" in out
    assert f"traffic after {deployed_id} ({model_id}@1) 70%, this model 30%" in out

    instances = tmp_path / "instances.jsonl"
    instances.write_text(json.dumps(PROMPT) + "\n")
    result = runner.invoke(
        app,
        [
            "predict",
            endpoint,
            "--instances",
            str(instances),
            "--stack",
            "local",
            "--parameters",
            '{"max_new_tokens": 8}',
        ],
    )
    assert result.exit_code == 0, result.output
    expected = reference_text(exported, "full", 8)
    assert expected and json.loads(result.output) == [{"generated_text": expected}]

    code, out = vtx("undeploy", endpoint, deployed_id, "--stack", "local", "-y")
    assert code == 0, out
    assert f"undeployed {deployed_id}" in out
    assert not EndpointRest(stack).get_endpoint(endpoint).deployed
    code, out = vtx("predict", endpoint, "--instances", str(instances), "--stack", "local")
    assert code == 1 and "no prediction" in out
