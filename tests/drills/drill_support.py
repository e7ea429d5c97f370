"""What every drill shares: a tiny training run, ways to run it, and how to compare outcomes.

The drills judge "nothing was lost" by the strongest test available on CPU: the final weights
of a disturbed run are bit-identical to those of an undisturbed run of the same config.
The model is a 2-layer, 32-wide Llama on the first 40 shipped chat rows (about 4 packed batches
per epoch), so a 24-step run crosses several epoch boundaries and takes about a second.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

# The same tiny model, data, tokenizer and helpers as the trainer's own tests (re-exported).
from tests.trainer.conftest import DATASET as DATASET
from tests.trainer.conftest import TOKENIZER as TOKENIZER
from tests.trainer.conftest import assert_bit_identical as assert_bit_identical
from tests.trainer.conftest import final_weights as final_weights
from tests.trainer.conftest import read_json_lines as read_json_lines
from tests.trainer.conftest import run_in_process as run_in_process
from tests.trainer.conftest import tiny_config
from tests.trainer.conftest import write_small_dataset as write_small_dataset

REPO = Path(__file__).resolve().parents[2]


def drill_config(data_path: str, output_dir: str, **overrides: Any) -> dict[str, Any]:
    """The trainer tests' tiny config, run longer (24 steps cross several epochs), quietly and
    with its own seed; dotted keys in `overrides` reach nested ones."""
    drill = {"max_steps": 24, "logging_steps": 100, "seed": 11}
    return tiny_config(data_path, output_dir, **{**drill, **overrides})


def committed_steps(checkpoint_dir: Path) -> list[int]:
    """Steps with a commit marker in a local checkpoint directory, ascending."""
    from trainer.checkpoint.store import MARKER, STEP_PREFIX

    return sorted(
        int(p.parent.name.removeprefix(STEP_PREFIX)) for p in checkpoint_dir.glob(f"*/{MARKER}")
    )


def resumed_from(log_text: str) -> int | None:
    """The step a run resumed from, read from its `resumed` log record; None if it did not."""
    for record in read_json_lines(log_text):
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
