"""The deliverable: a Hugging Face model directory in `AIP_MODEL_DIR`.

Full fine-tunes: safetensors weights + config + tokenizer, loadable with `from_pretrained`.
LoRA: the adapter (`adapter_model.safetensors` + `adapter_config.json`) + tokenizer at the top,
and with `merge_on_export` the merged full model under `merged/`.
Files are written to a local staging directory, then copied (gs:// through fsspec).
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

from trainer.config.schema import TrainConfig

log = logging.getLogger(__name__)


def unwrap(model: torch.nn.Module) -> torch.nn.Module:
    """The user-level module under DDP (`.module`) or `torch.compile` (`._orig_mod`)."""
    while hasattr(model, "module") or hasattr(model, "_orig_mod"):
        model = getattr(model, "module", None) or model._orig_mod
    return model


def export_model(
    model: torch.nn.Module, tokenizer: Any, cfg: TrainConfig, model_dir: str, rank: int
) -> None:
    """Collective (the full state dict is gathered from every rank); rank 0 writes."""
    # Gathering is needed only for FSDP2's sharded parameters; for DDP it is a cheap copy.
    full = get_model_state_dict(
        model, options=StateDictOptions(full_state_dict=True, cpu_offload=True)
    )
    if rank != 0:
        return
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # stderr bars become noise lines in Cloud Logging
    inner = unwrap(model)
    staging = Path(tempfile.mkdtemp(prefix="vtx-export-"))
    try:
        if cfg.model.lora is not None:
            inner.save_pretrained(str(staging))
            if cfg.model.lora.merge_on_export:
                merged = inner.merge_and_unload()
                merged.save_pretrained(str(staging / "merged"))
                tokenizer.save_pretrained(str(staging / "merged"))
        else:
            inner.save_pretrained(str(staging), state_dict=full)
        tokenizer.save_pretrained(str(staging))
        _publish(staging, model_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    log.info("model exported", extra={"model_dir": model_dir})


def _publish(staging: Path, model_dir: str) -> None:
    import fsspec

    fs, root = fsspec.core.url_to_fs(model_dir)
    root = root.rstrip("/")
    for path in sorted(staging.rglob("*")):
        if path.is_file():
            target = f"{root}/{path.relative_to(staging).as_posix()}"
            fs.makedirs(target.rsplit("/", 1)[0], exist_ok=True)
            fs.put_file(str(path), target)
