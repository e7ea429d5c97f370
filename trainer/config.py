"""The training configuration: one YAML file, Hugging Face `TrainingArguments` names.

Top-level keys are the familiar hyperparameters (`learning_rate`, `max_steps`, `save_steps`...);
`model:` and `data:` hold what to train on. Unknown keys are errors that name the key path and
suggest the closest known key, because a misspelt `warmup_step` silently ignored costs a run.
Relative paths in the file resolve against the file's directory, so an example config works
from any working directory; paths given with `--set` resolve against the working directory.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

# Keys holding file locations, resolved against the config file's directory when relative.
PATH_KEYS = (
    ("data", "path"),
    ("data", "eval_path"),
    ("model", "name_or_path"),
    ("model", "tokenizer"),
    ("output_dir",),
)


class ConfigError(ValueError):
    """A configuration problem a user can fix; the message says where and what to write."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LoraConfig(_Strict):
    """LoRA adapters via peft; the base model is frozen."""

    r: int = Field(8, gt=0, description="Adapter rank.")
    alpha: int = Field(16, gt=0, description="Scaling numerator: updates are scaled by alpha/r.")
    dropout: float = Field(0.0, ge=0.0, lt=1.0)
    target_modules: list[str] | Literal["all-linear"] = Field(
        "all-linear", description="Module names to adapt, or every linear layer but the head."
    )
    merge_on_export: bool = Field(
        False, description="Also export the base model with the adapter merged in."
    )


class ModelConfig(_Strict):
    """Which model to train: pretrained weights, or a `config:` for a random initialisation."""

    name_or_path: str | None = Field(
        None, description="Local directory or gs:// prefix holding a Hugging Face model."
    )
    config: dict[str, Any] | None = Field(
        None, description="A transformers config (with `model_type`) for random init."
    )
    tokenizer: str | None = Field(None, description="Tokenizer location; default name_or_path.")
    lora: LoraConfig | None = None
    gradient_checkpointing: bool = False

    @model_validator(mode="after")
    def _one_source(self) -> ModelConfig:
        if (self.name_or_path is None) == (self.config is None):
            raise ValueError(
                "set exactly one of `name_or_path` (pretrained) or `config` (random init)"
            )
        if self.config is not None and "model_type" not in self.config:
            raise ValueError("`config` needs a `model_type`, e.g. `model_type: llama`")
        if self.tokenizer is None and self.name_or_path is None:
            raise ValueError(
                "a `config:` model needs `tokenizer:` (a directory with tokenizer.json)"
            )
        return self


class DataConfig(_Strict):
    """Where the examples are and how they become batches."""

    path: str = Field(description="JSONL or Parquet file, local or gs://.")
    eval_path: str | None = Field(None, description="Separate eval file; else eval_fraction.")
    format: Literal["auto", "jsonl", "parquet"] = "auto"
    text_field: str = "text"
    messages_field: str = Field("messages", description="Chat rows: list of {role, content}.")
    eval_fraction: float = Field(0.0, ge=0.0, lt=1.0)
    max_seq_length: int = Field(1024, gt=1)
    packing: bool = Field(True, description="Several whole examples per row of max_seq_length.")
    group_by_length: bool = Field(
        False, description="Batch examples of similar lengths (without packing)."
    )

    @model_validator(mode="after")
    def _one_batching(self) -> DataConfig:
        if self.packing and self.group_by_length:
            raise ValueError("choose `packing: true` or `group_by_length: true`, not both")
        return self


class TrainConfig(_Strict):
    """Everything `python -m trainer` needs. Field names follow HF TrainingArguments."""

    model: ModelConfig
    data: DataConfig
    output_dir: str = Field("outputs", description="Used where AIP_* directories are not set.")
    run_name: str | None = None

    learning_rate: float = Field(5e-5, gt=0)
    weight_decay: float = Field(0.0, ge=0)
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    adam_epsilon: float = 1e-8
    max_grad_norm: float = Field(1.0, ge=0, description="0 disables clipping.")
    lr_scheduler_type: Literal["linear", "cosine", "constant", "constant_with_warmup"] = "linear"
    warmup_ratio: float = Field(0.0, ge=0, lt=1)
    warmup_steps: int = Field(0, ge=0, description="Wins over warmup_ratio when > 0.")

    per_device_train_batch_size: int = Field(8, gt=0)
    per_device_eval_batch_size: int = Field(8, gt=0)
    gradient_accumulation_steps: int = Field(1, gt=0)
    num_train_epochs: float = Field(1.0, gt=0)
    max_steps: int = Field(-1, description="Optimizer steps; > 0 overrides num_train_epochs.")
    seed: int = 42

    bf16: bool = Field(False, description="bf16 autocast on GPU (ignored on CPU).")
    fp16: bool = False
    torch_compile: bool = False
    fsdp: bool = Field(False, description="Shard a full fine-tune with FSDP2 instead of DDP.")

    logging_steps: int = Field(10, gt=0)
    eval_steps: int | None = Field(None, gt=0)
    save_steps: int | None = Field(500, gt=0)
    save_every_minutes: float | None = Field(None, gt=0)
    save_total_limit: int | None = Field(2, gt=0)
    async_save: bool = Field(True, description="Write checkpoints in the background.")
    early_stopping_patience: int | None = Field(
        None, gt=0, description="Evals without improvement."
    )
    early_stopping_threshold: float = Field(0.0, ge=0)
    report_to: list[Literal["tensorboard"]] = Field(["tensorboard"], description="[] disables.")

    @model_validator(mode="after")
    def _consistent(self) -> TrainConfig:
        if self.fp16:
            raise ValueError("fp16 is not supported (no loss scaling here); use `bf16: true`")
        if self.early_stopping_patience and not self.eval_steps:
            raise ValueError("early_stopping_patience needs `eval_steps`")
        if self.eval_steps and not (self.data.eval_fraction or self.data.eval_path):
            raise ValueError("eval_steps needs data.eval_fraction > 0 or data.eval_path")
        if self.model.lora is not None and self.fsdp:
            raise ValueError("fsdp is for full fine-tunes; LoRA runs use DDP (set `fsdp: false`)")
        return self


def load_config(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> TrainConfig:
    """Read a YAML config, apply `key.path=value` overrides, validate."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: cannot read config: {exc}") from exc
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level, got {type(raw).__name__}")
    _resolve_paths(raw, path.resolve().parent)
    for item in overrides:
        _apply_override(raw, item)
    return parse_config(raw, source=str(path))


def parse_config(raw: dict[str, Any], source: str = "<config>") -> TrainConfig:
    try:
        return TrainConfig.model_validate(raw)
    except ValidationError as exc:
        lines = [_describe(err) for err in exc.errors()]
        raise ConfigError(f"{source}: invalid config:\n  " + "\n  ".join(lines)) from None


def _describe(err: Any) -> str:
    loc = ".".join(str(part) for part in err["loc"]) or "(top level)"
    if err["type"] != "extra_forbidden":
        return f"{loc}: {err['msg']}"
    parent_model = _model_at(err["loc"][:-1])
    known = sorted(parent_model.model_fields) if parent_model else []
    hint = difflib.get_close_matches(str(err["loc"][-1]), known, n=1)
    if hint:
        return f"{loc}: unknown key; did you mean `{hint[0]}`?"
    return f"{loc}: unknown key (known here: {', '.join(known)})"


def _model_at(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    model: type[BaseModel] = TrainConfig
    for part in loc:
        field = model.model_fields.get(str(part))
        annotation = getattr(field, "annotation", None)
        candidates = [annotation, *getattr(annotation, "__args__", ())]
        nested = [c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)]
        if not nested:
            return None
        model = nested[0]
    return model


def _resolve_paths(raw: dict[str, Any], base: Path) -> None:
    for keys in PATH_KEYS:
        parent = raw
        for key in keys[:-1]:
            parent = parent.get(key) if isinstance(parent, dict) else None
        if isinstance(parent, dict) and isinstance(parent.get(keys[-1]), str):
            parent[keys[-1]] = _resolve(parent[keys[-1]], base)


def _resolve(value: str, base: Path) -> str:
    if "://" in value or Path(value).is_absolute():
        return value
    return str((base / value).resolve())


def _apply_override(raw: dict[str, Any], item: str) -> None:
    key, sep, text = item.partition("=")
    if not sep or not key:
        raise ConfigError(
            f"--set {item!r}: expected KEY.PATH=VALUE, e.g. --set data.path=gs://b/x.jsonl"
        )
    parts = key.split(".")
    target = raw
    for part in parts[:-1]:
        child = target.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"--set {item!r}: `{part}` is not a mapping in the config")
        target = child
    try:
        value = yaml.safe_load(text) if text else ""
    except yaml.YAMLError as exc:
        problem = str(exc).splitlines()[0]
        raise ConfigError(
            f"--set {item!r}: the value is not valid YAML ({problem}); quote text values, "
            "e.g. --set 'data.path=\"x[1].jsonl\"'"
        ) from None
    if tuple(parts) in PATH_KEYS and isinstance(value, str):
        value = _resolve(value, Path.cwd())
    target[parts[-1]] = value
