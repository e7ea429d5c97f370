"""`vtx model mirror --stack local`: a tiny model directory into the local platform's models
bucket (a second mirror uploads nothing), then loaded from there and trained by a job `vtx
launch` submits, whose replica finds the platform's GCS in its environment
(jobs/local/platform/vertex_env.py): a closed stack's normal path, mirror then gs://."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from jobs.core.stack import StackOutputs
from jobs.local.plumbing.client import read_logs
from tests.trainer.conftest import save_tiny_model
from vtx.cli import app


def job_lines(stack: StackOutputs, run_id: str) -> list[dict[str, Any]]:
    """Every JSON line the run's replicas wrote, page after page."""
    endpoint, token = stack.vertex_endpoint or "", stack.local_token or ""
    lines, cursor = [], 0
    while page := read_logs(endpoint, token, run_id=run_id, cursor=cursor):
        if not page["entries"]:
            return lines
        cursor = page["cursor"]
        for entry in page["entries"]:
            try:
                line = json.loads(entry["message"])
            except ValueError:
                continue
            if isinstance(line, dict):
                lines.append(line)
    return lines


def mirror(*args: str) -> str:
    result = CliRunner(env={"COLUMNS": "250"}).invoke(
        app, ["model", "mirror", *args, "--stack", "local"]
    )
    assert result.exit_code == 0, result.output
    return result.output


def test_the_default_destination_is_the_models_bucket_and_errors_are_one_line(
    local_platform: StackOutputs, tmp_path: Path
) -> None:
    source = tmp_path / "w"
    source.mkdir()
    (source / "config.json").write_text("{}")
    output = mirror(str(source))
    assert f"to gs://{local_platform.buckets.models}/w (1 uploaded" in output
    result = CliRunner(env={"HF_HUB_CACHE": str(tmp_path / "hub")}).invoke(
        app, ["model", "mirror", "acme/not-cached", "--stack", "local"]
    )
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "huggingface-cli download acme/not-cached" in " ".join(result.output.split())


@pytest.mark.slow
def test_a_job_trains_the_mirrored_model_reading_its_weights_from_gs(
    local_platform: StackOutputs, tmp_path: Path
) -> None:
    # The job's replica loads the mirror as every `vtx local` replica would: the proof that it
    # loads from the bucket, with no loader process of its own (a trainer start).
    source = save_tiny_model(tmp_path / "tiny-llama")
    # A name of its own: the trainer caches a gs:// prefix by its URI.
    target = f"gs://{local_platform.buckets.models}/tiny-{uuid.uuid4().hex[:8]}"
    first = mirror(str(source), "--to", target)
    assert "uploaded  model.safetensors" in first
    assert f"in a trainer config: model.name_or_path: {target}" in first
    again = mirror(str(source), "--to", target)
    assert "(0 uploaded," in again and "unchanged model.safetensors" in again
    run_id = f"mirrored-{uuid.uuid4().hex[:6]}"
    # The tiny example, its random init swapped for the mirror (tokenizer included).
    command = ["python", "-m", "trainer", "--config", "trainer/examples/tiny.yaml"]
    for override in ("model.config=null", "model.tokenizer=null",
                     f"model.name_or_path={target}", "max_steps=3", "logging_steps=1",
                     "eval_steps=3", "save_steps=3"):  # fmt: skip
        command += ["--set", override]
    template = tmp_path / "mirrored.yaml"
    template.write_text(
        yaml.safe_dump(
            {
                "name": "mirrored",
                "image": "trainer",
                "command": command,
                "pools": {"chief": {"machine": "n1-standard-4"}},
                "scheduling": {"timeout": "10m"},
            }
        )
    )
    result = CliRunner(env={"COLUMNS": "200"}).invoke(
        app,
        ["launch", str(template), "--stack", "local", "-y", "--follow", "--poll-s", "0.5",
         "--run-id", run_id],
    )  # fmt: skip
    assert result.exit_code == 0, result.output[-3000:]
    assert "JOB_STATE_SUCCEEDED" in result.output
    lines = job_lines(local_platform, run_id)
    loaded = [line for line in lines if line.get("message") == "model loaded"]
    assert [line["name_or_path"] for line in loaded] == [target], lines[:20]
    copied = [line for line in lines if line.get("message", "").startswith(f"copied {target} ")]
    assert copied, lines[:20]  # the bytes themselves came from the bucket, not a local cache
    (done,) = [line for line in lines if line.get("message") == "done"]
    assert done["step"] == 3
    # What it trained and exported is the mirrored model (not tiny.yaml's, 64 wide): its class,
    # its two layers, its width.
    config = json.loads(blob(local_platform, f"{done['model_dir']}config.json"))
    shape = (config["architectures"], config["num_hidden_layers"], config["hidden_size"])
    assert shape == (["LlamaForCausalLM"], 2, 32)


def blob(stack: StackOutputs, uri: str) -> bytes:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    bucket, name = uri.removeprefix("gs://").split("/", 1)
    client = storage.Client(
        project=stack.project,
        credentials=AnonymousCredentials(),
        client_options={"api_endpoint": stack.gcs_endpoint},
    )
    return client.bucket(bucket).blob(name).download_as_bytes()
