"""What every drill shares: a tiny training run, ways to run it, and how to compare outcomes.

The drills judge "nothing was lost" by the strongest test available on CPU: the final weights
of a disturbed run are bit-identical to those of an undisturbed run of the same config.
The model is a 2-layer, 32-wide Llama on the first 40 shipped chat rows (about 4 packed batches
per epoch), so a 24-step run crosses several epoch boundaries and takes about a second.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

# The same tiny model, data and tokenizer as the trainer's own tests (TOKENIZER re-exported).
from tests.trainer.conftest import DATASET, tiny_config
from tests.trainer.conftest import TOKENIZER as TOKENIZER

REPO = Path(__file__).resolve().parents[2]

DRILL_ROWS = 40


def write_small_dataset(directory: Path) -> Path:
    """The first DRILL_ROWS shipped rows as a JSONL file in `directory`."""
    rows = DATASET.read_text().splitlines()[:DRILL_ROWS]
    path = directory / "small.jsonl"
    path.write_text("\n".join(rows) + "\n")
    return path


def drill_config(data_path: str, output_dir: str, **overrides: Any) -> dict[str, Any]:
    """The trainer tests' tiny config, run longer (24 steps cross several epochs), quietly and
    with its own seed; dotted keys in `overrides` reach nested ones."""
    drill = {"max_steps": 24, "logging_steps": 100, "seed": 11}
    return tiny_config(data_path, output_dir, **{**drill, **overrides})


def run_in_process(cfg: dict[str, Any], environ: dict[str, str] | None = None) -> int:
    """Train in this process (no interpreter start-up: a tiny run takes about a second)."""
    from trainer.config import parse_config
    from trainer.env import VertexEnv
    from trainer.loop import train

    return train(parse_config(cfg), VertexEnv.from_environ(environ or {}))


def final_weights(model_dir: str) -> dict[str, Any]:
    """The exported safetensors of a run, from a local directory or a gs:// prefix."""
    import fsspec
    from safetensors.torch import load

    with fsspec.open(f"{model_dir.rstrip('/')}/model.safetensors", "rb") as f:
        return load(f.read())


def assert_bit_identical(expected: dict[str, Any], actual: dict[str, Any]) -> None:
    import torch

    assert expected.keys() == actual.keys()
    differing = [key for key in expected if not torch.equal(expected[key], actual[key])]
    assert not differing, f"parameters differ from the undisturbed run: {differing}"


def committed_steps(checkpoint_dir: Path) -> list[int]:
    """Steps with a commit marker in a local checkpoint directory, ascending."""
    from trainer.checkpoint import MARKER, STEP_PREFIX

    return sorted(
        int(p.parent.name.removeprefix(STEP_PREFIX)) for p in checkpoint_dir.glob(f"*/{MARKER}")
    )


def json_logs(text: str) -> list[dict[str, Any]]:
    """The trainer's one-line JSON log records in `text` (other lines are skipped)."""
    records = []
    for line in io.StringIO(text):
        if line.startswith("{"):
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return records


def resumed_from(log_text: str) -> int | None:
    """The step a run resumed from, read from its `resumed` log record; None if it did not."""
    for record in json_logs(log_text):
        if record.get("message") == "resumed":
            return int(record["step"])
    return None


def checkpoint_tensors(step_dir: Path, scratch: Path) -> dict[str, Any]:
    """Model and optimizer tensors of one local DCP checkpoint, by flattened key.

    Per-rank entries (data position, RNG) are left out: the data position is checked through
    the resume step and the final weights, and nothing in training draws from them by chance."""
    import torch
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

    target = scratch / f"{step_dir.name}.pt"
    dcp_to_torch_save(str(step_dir), str(target))
    state = torch.load(target, weights_only=False)["train"]
    flat: dict[str, Any] = {}

    def walk(prefix: str, node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                walk(f"{prefix}.{key}", value)
        elif isinstance(node, torch.Tensor):
            flat[prefix] = node

    walk("model", state["model"])
    walk("optimizer", state["optimizer"])
    if not any(key.startswith("optimizer.") for key in flat):
        raise AssertionError(f"{step_dir}: no optimizer tensors found; the layout changed")
    return flat
