"""A model the trainer exported (trainer.model.export), loaded for generation.

Three layouts, tried in this order under the storage URI:
- `merged/` (LoRA with `merge_on_export`): the merged full model, loaded alone;
- `adapter_config.json` (LoRA): the base model named by `base_model_name_or_path` (or by
  `VTX_BASE_MODEL`), with the adapter applied by peft, left unmerged so that its outputs are
  exactly peft's;
- `config.json`: a full fine-tune.
A gs:// URI is copied to a local directory first (`trainer.model.loading.localize`: transformers
reads local files only), and only the merged copy when there is one.

A request's instances are generated as padded batches (`plan_batches`, within
`trainer.serving.env.BatchLimits`): left padding, so that every prompt ends where generation
starts, and an attention mask, from which transformers derives each row's position ids. Greedy
texts equal the one-at-a-time ones (tested in fp32 on the trainer's Llama, full and LoRA); a
model whose forward takes no `position_ids` would see its padded rows' positions shifted.
"""

from __future__ import annotations

import json
import logging
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fsspec

from trainer.model.loading import is_remote, localize
from trainer.serving.env import BatchLimits
from trainer.serving.request import GenerationOptions, RequestError

log = logging.getLogger(__name__)


class ModelLoadError(RuntimeError):
    """The storage URI holds no model this server can load; the message says what to do."""


@dataclass(frozen=True)
class Layout:
    kind: str
    """`merged`, `adapter` or `full`."""
    path: str
    """Where the weights to load are: the URI itself, or its `merged/` folder."""


def find_layout(storage_uri: str) -> Layout:
    """Which of the trainer's export layouts `storage_uri` holds."""
    fs, root = fsspec.core.url_to_fs(storage_uri)
    root = root.rstrip("/")
    uri = storage_uri.rstrip("/")
    if fs.exists(f"{root}/merged/config.json"):
        return Layout("merged", f"{uri}/merged")
    if fs.exists(f"{root}/adapter_config.json"):
        return Layout("adapter", uri)
    if fs.exists(f"{root}/config.json"):
        return Layout("full", uri)
    raise ModelLoadError(
        f"{storage_uri} holds no model exported by the trainer: expected config.json (a full "
        "model), adapter_config.json (a LoRA adapter) or merged/config.json; point the Model's "
        "artifactUri at the run's model/ prefix"
    )


class ServedModel:
    """Tokenizer and model on the best device here; `generate_all` takes a request's prompts."""

    def __init__(
        self, model: Any, tokenizer: Any, layout: Layout, limits: BatchLimits = BatchLimits()
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.layout = layout
        self.limits = limits
        # One generation at a time: concurrent ones would each hold their activations (and
        # CUDA memory) for no gain in throughput on one device.
        self._lock = threading.Lock()

    @classmethod
    def load(
        cls, storage_uri: str, base_model: str | None = None, limits: BatchLimits = BatchLimits()
    ) -> ServedModel:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # stderr bars become noise lines in Cloud Logging
        layout = find_layout(storage_uri)
        local = localize(layout.path)
        device = "cuda" if torch.cuda.is_available() else "cpu"
        dtype = torch.bfloat16 if device == "cuda" and torch.cuda.is_bf16_supported() else None
        options = {"dtype": dtype or torch.float32}
        if layout.kind == "adapter":
            from peft import PeftModel

            base = AutoModelForCausalLM.from_pretrained(
                localize(_base_model(Path(local), base_model)), **options
            )
            with warnings.catch_warnings():
                # peft reads transformers' deprecated `is_gradient_checkpointing` (see
                # trainer.model.loading._add_lora): a warning for peft's developers, not a
                # deployment's.
                warnings.filterwarnings(
                    "ignore",
                    message="`is_gradient_checkpointing` is deprecated",
                    category=FutureWarning,
                )
                model = PeftModel.from_pretrained(base, local)
        else:
            model = AutoModelForCausalLM.from_pretrained(local, **options)
        model.to(device).eval()
        # The trainer exports with use_cache off (training never reuses keys and values);
        # generation does, token after token.
        model.config.use_cache = True
        tokenizer = AutoTokenizer.from_pretrained(local)
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        log.info(
            "model loaded",
            extra={"layout": layout.kind, "storage_uri": storage_uri, "device": device},
        )
        return cls(model, tokenizer, layout, limits)

    def generate(self, prompt: str, options: GenerationOptions) -> str:
        """The text generated after `prompt` (the prompt itself left out): a batch of one."""
        return self.generate_all([prompt], options)[0]

    def generate_all(self, prompts: list[str], options: GenerationOptions) -> list[str]:
        """The text generated after each prompt, in the prompts' order; greedy when
        `options.temperature` is 0. Every prompt is checked before any is generated: a
        RequestError names the first that does not fit (`instances[i]`)."""
        ids = self.tokenizer(prompts)["input_ids"]
        self._check_positions(ids, options.max_new_tokens)
        texts = [""] * len(prompts)
        for batch in plan_batches([len(row) for row in ids], options.max_new_tokens, self.limits):
            generated = self._generate_padded([ids[i] for i in batch], options)
            for index, text in zip(batch, generated, strict=True):
                texts[index] = text
        return texts

    def _check_positions(self, ids: list[list[int]], max_new_tokens: int) -> None:
        limit = getattr(self.model.config, "max_position_embeddings", None)
        if limit is None:
            return
        for index, row in enumerate(ids):
            if len(row) + max_new_tokens > limit:
                raise RequestError(
                    f"instances[{index}]: {len(row)} prompt tokens + max_new_tokens "
                    f"{max_new_tokens} exceed the model's {limit} positions; shorten the "
                    "prompt or lower parameters.max_new_tokens"
                )

    def _generate_padded(self, ids: list[list[int]], options: GenerationOptions) -> list[str]:
        """One `model.generate` call over `ids`, padded to the longest on the left: a decoder
        generates after a row's last token."""
        import torch

        padded = self.tokenizer.pad({"input_ids": ids}, padding_side="left", return_tensors="pt")
        inputs = padded.to(self.model.device)
        sampling: dict[str, Any] = {"do_sample": False}
        if options.temperature > 0:
            sampling = {"do_sample": True, "temperature": options.temperature}
            sampling["top_p"] = options.top_p
        with self._lock, torch.inference_mode():
            output = self.model.generate(
                **inputs,
                max_new_tokens=options.max_new_tokens,
                pad_token_id=self.tokenizer.pad_token_id,
                **sampling,
            )
        # Rows that stop early are padded up to the longest: the padding is a special token,
        # skipped like the EOS before it.
        new = output[:, inputs["input_ids"].shape[1] :]
        return self.tokenizer.batch_decode(new, skip_special_tokens=True)


def plan_batches(lengths: list[int], max_new_tokens: int, limits: BatchLimits) -> list[list[int]]:
    """The indices of `lengths` (prompt tokens) as batches within `limits`: sorted by length, so
    that a batch's prompts pad to similar widths, each batch holding at most
    `limits.max_instances` and `limits.max_tokens` padded positions (instances x (longest
    prompt + max_new_tokens)). A prompt over the budget on its own is a batch alone."""
    batches: list[list[int]] = []
    for index in sorted(range(len(lengths)), key=lengths.__getitem__):
        batch = batches[-1] if batches else []
        # Sorted: this prompt is the longest of the batch once in it.
        positions = (len(batch) + 1) * (lengths[index] + max_new_tokens)
        if batch and len(batch) < limits.max_instances and positions <= limits.max_tokens:
            batch.append(index)
        else:
            batches.append([index])
    return batches


def _base_model(adapter_dir: Path, override: str | None) -> str:
    """The adapter's base model: `override` (VTX_BASE_MODEL), else what peft recorded."""
    if override:
        return override
    config = json.loads((adapter_dir / "adapter_config.json").read_text())
    base = config.get("base_model_name_or_path")
    if not base:
        raise ModelLoadError(
            "adapter_config.json names no base model (the base was built from a config, not "
            "loaded): export with model.lora.merge_on_export: true, or set VTX_BASE_MODEL to "
            "the base model's directory or gs:// prefix"
        )
    if not is_remote(base) and not Path(base).is_dir():
        raise ModelLoadError(
            f"adapter_config.json names the base model {base}, which is not a directory here: "
            "set VTX_BASE_MODEL to the base model's gs:// prefix (or local directory), or "
            "export with model.lora.merge_on_export: true"
        )
    return base
