"""`vtx model mirror --stack local`: a tiny model directory into the local platform's models
bucket, then loaded from there by the trainer the way a `vtx local` job's replica loads it (the
replica's environment names the platform's GCS: jobs/local/platform/vertex_env.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

from typer.testing import CliRunner

from jobs.core.stack import StackOutputs
from tests.trainer.conftest import TINY_LLAMA, TOKENIZER
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


def tiny_model(root: Path) -> Path:
    from transformers import AutoConfig, AutoModelForCausalLM

    options = dict(TINY_LLAMA)
    config = AutoConfig.for_model(options.pop("model_type"), **options)
    AutoModelForCausalLM.from_config(config).save_pretrained(root)
    for file in TOKENIZER.iterdir():
        shutil.copy(file, root / file.name)
    return root


def mirror(*args: str) -> str:
    result = CliRunner(env={"COLUMNS": "250"}).invoke(
        app, ["model", "mirror", *args, "--stack", "local"]
    )
    assert result.exit_code == 0, result.output
    return result.output


def test_a_mirrored_model_loads_from_the_local_platforms_models_bucket(
    local_platform: StackOutputs, tmp_path: Path
) -> None:
    source = tiny_model(tmp_path / "tiny-llama")
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
