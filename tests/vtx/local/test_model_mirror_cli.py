"""`vtx model mirror --stack local`: a tiny model directory into the local platform's models
bucket, then loaded from there by the trainer the way a `vtx local` job's replica loads it (the
replica's environment names the platform's GCS: jobs/local/platform/vertex_env.py), and trained
from there by a job `vtx launch` submits: a closed stack's normal path, mirror then gs://."""

from __future__ import annotations

import json
import os
import subprocess
import sys
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

REPO = Path(__file__).resolve().parents[3]
LOAD = """
import sys
from trainer.config.schema import ModelConfig
from trainer.model.loading import build_model, build_tokenizer
cfg = ModelConfig(name_or_path=sys.argv[1])
model, tokenizer = build_model(cfg, seed=0), build_tokenizer(cfg)
print(type(model).__name__, model.config.num_hidden_layers, len(tokenizer))
"""


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


def test_a_mirrored_model_loads_from_the_local_platforms_models_bucket(
    local_platform: StackOutputs, tmp_path: Path
) -> None:
    source = save_tiny_model(tmp_path / "tiny-llama")
    # A name of its own: the trainer caches a gs:// prefix by its URI.
    target = f"gs://{local_platform.buckets.models}/tiny-{uuid.uuid4().hex[:8]}"
    first = mirror(str(source), "--to", target)
    assert "uploaded  model.safetensors" in first
    assert f"in a trainer config: model.name_or_path: {target}" in first
    again = mirror(str(source), "--to", target)
    assert "(0 uploaded," in again and "unchanged model.safetensors" in again
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "STORAGE_EMULATOR_HOST": local_platform.gcs_endpoint or "",
        "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false",
    }
    loaded = subprocess.run(
        [sys.executable, "-c", LOAD, target],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
        check=False,
    )
    assert loaded.returncode == 0, loaded.stderr[-2000:]
    assert loaded.stdout.split()[:2] == ["LlamaForCausalLM", "2"]


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
    source = save_tiny_model(tmp_path / "tiny-llama")
    target = f"gs://{local_platform.buckets.models}/tiny-{uuid.uuid4().hex[:8]}"
    mirror(str(source), "--to", target)
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
    assert [line["step"] for line in lines if line.get("message") == "done"] == [3]
