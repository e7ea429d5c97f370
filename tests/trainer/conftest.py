"""Tiny, fast configurations for trainer tests: a 2-layer, 32-wide Llama on the shipped data."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from transformers import AutoConfig, AutoModelForCausalLM

from trainer.config.env import VertexEnv
from trainer.config.schema import parse_config
from trainer.training.loop import train

EXAMPLES = Path(__file__).resolve().parents[2] / "trainer" / "examples"
TOKENIZER = EXAMPLES / "tokenizer"
DATASET = EXAMPLES / "data" / "tiny.jsonl"

TINY_LLAMA = {
    "model_type": "llama",
    "vocab_size": 1024,
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 256,
    "tie_word_embeddings": True,
}


def save_tiny_model(root: Path) -> Path:
    """TINY_LLAMA randomly initialised and saved as a pretrained model directory (weights,
    config, the shipped tokenizer's files) at ``root``: what `vtx model mirror` copies."""
    options = dict(TINY_LLAMA)
    config = AutoConfig.for_model(options.pop("model_type"), **options)
    AutoModelForCausalLM.from_config(config).save_pretrained(root)
    for file in TOKENIZER.iterdir():
        shutil.copy(file, root / file.name)
    return root


def tiny_config(data_path: str, output_dir: str, **overrides: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "model": {"config": dict(TINY_LLAMA), "tokenizer": str(TOKENIZER)},
        "data": {"path": data_path, "max_seq_length": 128, "packing": True},
        "output_dir": output_dir,
        "learning_rate": 3e-3,
        "warmup_steps": 2,
        "lr_scheduler_type": "cosine",
        "weight_decay": 0.01,
        "per_device_train_batch_size": 2,
        "max_steps": 8,
        "logging_steps": 1,
        "save_steps": 4,
        "save_total_limit": 2,
        "report_to": [],
        "seed": 7,
    }
    for key, value in overrides.items():
        target = cfg
        *parents, leaf = key.split(".")
        for part in parents:
            target = target.setdefault(part, {})
        target[leaf] = value
    return cfg


SMALL_DATASET_ROWS = 40


def write_small_dataset(directory: Path, rows: int = SMALL_DATASET_ROWS) -> Path:
    """The first `rows` shipped rows as `small.jsonl` in `directory`: with the default 40, ~8
    packed rows of 128 tokens, so an epoch is a few steps."""
    lines = DATASET.read_text().splitlines()[:rows]
    path = directory / "small.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def small_dataset(tmp_path: Path) -> Path:
    """The first 40 shipped rows: ~8 packed rows of 128 tokens, so an epoch is a few steps."""
    return write_small_dataset(tmp_path)


@pytest.fixture
def write_config(tmp_path: Path) -> Callable[..., Path]:
    def write(cfg: dict[str, Any], name: str = "config.yaml") -> Path:
        path = tmp_path / name
        path.write_text(yaml.safe_dump(cfg))
        return path

    return write


def read_json_lines(text: str) -> list[dict[str, Any]]:
    out = []
    for line in text.splitlines():
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return out


def run_in_process(cfg: dict[str, Any], environ: dict[str, str] | None = None) -> int:
    """Train in this process (no interpreter start-up: a tiny run takes about a second)."""
    return train(parse_config(cfg), VertexEnv.from_environ(environ or {}))


def final_weights(model_dir: str | Path, name: str = "model.safetensors") -> dict[str, Any]:
    """The exported safetensors file `name` of a run, from a local directory or a gs:// prefix."""
    import fsspec
    from safetensors.torch import load

    with fsspec.open(f"{str(model_dir).rstrip('/')}/{name}", "rb") as f:
        return load(f.read())


def assert_bit_identical(expected: dict[str, Any], actual: dict[str, Any]) -> None:
    """Same parameter names, and every tensor equal bit for bit."""
    import torch

    assert expected.keys() == actual.keys()
    differing = [key for key in expected if not torch.equal(expected[key], actual[key])]
    assert not differing, f"parameters differ from the undisturbed run: {differing}"
