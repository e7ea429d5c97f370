"""The training configuration: one YAML file, Hugging Face `TrainingArguments` names.

Top-level keys are the familiar hyperparameters (`learning_rate`, `max_steps`, `save_steps`...);
`model:` and `data:` hold what to train on. Unknown keys are errors that name the key path and
suggest the closest known key, because a misspelt `warmup_step` silently ignored costs a run.
Relative paths in the file resolve against the file's directory, so an example config works
from any working directory; paths given with `--set` resolve against the working directory
(trainer/config/loading.py reads the file, trainer/config/safe_yaml.py its YAML).
"""

from __future__ import annotations

import difflib
import math
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo


class ConfigError(ValueError):
    """A configuration problem a user can fix; the message says where and what to write."""


class _Strict(BaseModel):
    # allow_inf_nan: YAML's `.inf`, `.nan` and `1.0e+400`, and text such as `1e400` that pydantic
    # reads as a float, are infinite or NaN; every bound below lets infinity through (inf > 0),
    # and training turns them into NaN losses or runs that never end.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class LoraConfig(_Strict):
    """LoRA adapters via peft; the base model is frozen."""

    r: int = Field(8, ge=1, description="Adapter rank.")
    alpha: int = Field(16, ge=1, description="Scaling numerator: updates are scaled by alpha/r.")
    dropout: float = Field(0.0, ge=0.0, lt=1.0, examples=[0.05])
    target_modules: list[str] | Literal["all-linear"] = Field(
        "all-linear", description="Module names to adapt, or every linear layer but the head."
    )
    merge_on_export: bool = Field(
        False, description="Also export the base model with the adapter merged in."
    )


class KeyedValueError(ValueError):
    """A check failure inside a mapping field; ``key`` is the path below the field."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


# Sizes of a transformers config that build tensors or loops, so each must be a whole number
# >= 1. transformers accepts 0 and negatives and then fails deep in torch ("negative
# dimension", ZeroDivisionError, a C++ size overflow) or builds a model with no layers.
MODEL_SIZES = (
    "vocab_size",
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "max_position_embeddings",
    "n_embd",
    "n_layer",
    "n_head",
    "n_positions",
    "d_model",
)
MAX_DIMENSION = 2**24
"""16.7M: above any real vocabulary (~262k), width (~25k), or context (10M tokens)."""
MAX_PARAMETERS = 2 * 10**12
"""~2 trillion: beyond the largest published models; a random init this big is a typo."""
ROPE_TYPES: dict[str, tuple[str, ...]] = {
    "default": (),
    "linear": ("factor",),
    "dynamic": ("factor",),
    "yarn": ("factor",),
    "longrope": ("short_factor", "long_factor"),
    "llama3": ("factor", "low_freq_factor", "high_freq_factor"),
    "proportional": (),
}
"""transformers' RoPE types (ROPE_INIT_FUNCTIONS plus "default") and the keys each needs
besides those transformers fills in (rope_theta, original_max_position_embeddings). For a
missing or junk value transformers only logs a warning, then fails in model init with a
KeyError or TypeError, or trains with a broken position encoding. A test pins this table to
transformers'."""
_ROPE_POSITIVE = ("low_freq_factor", "high_freq_factor", "rope_theta", "attention_factor")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def check_model_config(config: dict[str, Any]) -> None:
    """Sizes, integer ranges and RoPE settings of a `model.config`, before transformers and
    torch see them; raises KeyedValueError naming the key."""
    for key in MODEL_SIZES:
        value = config.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise KeyedValueError(key, f"{value!r} must be a whole number >= 1")
        if value > MAX_DIMENSION:
            raise KeyedValueError(
                key, f"{value:,} is beyond any model trained here (at most {MAX_DIMENSION:,})"
            )
    parameters = _rough_parameters(config)
    if parameters > MAX_PARAMETERS:
        raise KeyedValueError(
            "",
            f"about {parameters:.1e} parameters, beyond any model trained here (at most "
            f"{MAX_PARAMETERS:.0e}): check hidden_size, intermediate_size, num_hidden_layers "
            "and vocab_size",
        )
    for key in ("rope_scaling", "rope_parameters"):
        _check_rope(config.get(key), key)
    todo: list[tuple[str, Any]] = [("", config)]
    # torch sizes and ids are int64: a larger integer anywhere is a typo; an infinite or NaN
    # epsilon, scale or dropout turns every loss into NaN.
    while todo:
        path, node = todo.pop()
        if isinstance(node, dict):
            todo += [(f"{path}.{k}".lstrip("."), v) for k, v in node.items()]
        elif isinstance(node, list):
            todo += [(f"{path}[{i}]", v) for i, v in enumerate(node)]
        elif isinstance(node, int) and not -(2**63) <= node < 2**63:
            raise KeyedValueError(path, f"{node} is beyond a 64-bit integer")
        elif isinstance(node, float) and not math.isfinite(node):
            raise KeyedValueError(path, f"{node} must be a finite number")


def _rough_parameters(config: dict[str, Any]) -> int:
    """Embeddings plus per layer 4 h^2 (attention) and 3 h i (a gated MLP) per expert."""

    def first(*keys: str, default: int = 0) -> int:
        for key in keys:
            value = config.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
        return default

    hidden = first("hidden_size", "n_embd", "d_model")
    layers = first("num_hidden_layers", "n_layer", "num_layers")
    inner = first("intermediate_size", "n_inner", "ffn_dim", default=4 * hidden)
    experts = first("num_local_experts", "num_experts", default=1)
    return first("vocab_size") * hidden + layers * (4 * hidden**2 + 3 * hidden * inner * experts)


def _check_rope(rope: Any, key: str) -> None:
    example = "{rope_type: linear, factor: 2.0}"
    if rope is None or rope == {}:
        return
    if not isinstance(rope, dict):
        raise KeyedValueError(key, f"must be a mapping such as {example}, got {rope!r:.60}")
    rope_type = rope.get("rope_type", rope.get("type"))
    if rope_type is None:
        if all(isinstance(v, dict | None) for v in rope.values()):  # per layer type (Gemma 3)
            for layer, params in rope.items():
                _check_rope(params, f"{key}.{layer}")
            return
        raise KeyedValueError(key, f"needs rope_type: one of {', '.join(ROPE_TYPES)}")
    if rope_type not in ROPE_TYPES:
        raise KeyedValueError(
            f"{key}.rope_type",
            f"{rope_type!r:.60} is not a RoPE type of transformers: one of {', '.join(ROPE_TYPES)}",
        )
    for name in ROPE_TYPES[rope_type]:
        if name not in rope:
            raise KeyedValueError(key, f"rope_type {rope_type} needs `{name}`, e.g. {example}")
    factor = rope.get("factor")
    if "factor" in rope and not (_is_number(factor) and factor >= 1):
        raise KeyedValueError(
            f"{key}.factor", f"{factor!r:.60} must be a number >= 1 (how much the context grows)"
        )
    for name in _ROPE_POSITIVE:
        value = rope.get(name)
        if name in rope and not (_is_number(value) and value > 0):
            raise KeyedValueError(f"{key}.{name}", f"{value!r:.60} must be a positive number")
    for name in ("short_factor", "long_factor"):
        value = rope.get(name)
        if name in rope and not (
            isinstance(value, list) and value and all(_is_number(v) for v in value)
        ):
            raise KeyedValueError(f"{key}.{name}", "must be a list of numbers")


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

    @field_validator("config")
    @classmethod
    def _sane(cls, config: dict[str, Any] | None) -> dict[str, Any] | None:
        if config is not None:
            check_model_config(config)
        return config

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
    eval_fraction: float = Field(0.0, ge=0.0, lt=1.0, examples=[0.05])
    max_seq_length: int = Field(1024, ge=2, le=MAX_DIMENSION)
    packing: bool = Field(True, description="Several whole examples per row of max_seq_length.")
    group_by_length: bool = Field(
        False, description="Batch examples of similar lengths (without packing)."
    )

    @model_validator(mode="after")
    def _one_batching(self) -> DataConfig:
        if self.packing and self.group_by_length:
            raise ValueError("choose `packing: true` or `group_by_length: true`, not both")
        return self


LOSS_CHUNK_MB = 256.0
"""fp32 logits per chunk of the loss: 512 positions at a 128k vocabulary, 2,048 at 32k. Smaller
saves little more (the head's fp32 weight gradient, vocabulary x hidden, is the floor) and costs
time: each chunk adds its share of that gradient into one accumulator, a read and a write of
vocabulary x hidden x 4 bytes, and a GPU needs a few hundred positions per chunk for that
traffic to hide behind the matmuls (H100 and L4 do ~300 bf16 FLOPs per byte of memory traffic).
bench/trainer/loss.py measures the peak and the time on CPU."""


class TrainConfig(_Strict):
    """Everything `python -m trainer` needs. Field names follow HF TrainingArguments."""

    model: ModelConfig
    data: DataConfig
    output_dir: str = Field("outputs", description="Used where AIP_* directories are not set.")
    run_name: str | None = None

    # Each number's range is declared here, once, on its key: `_describe` words a value outside
    # it (or inf, NaN) as "KEY: VALUE must be ... (write e.g. KEY=EXAMPLE)", the example being
    # the key's `examples`, else its default.
    learning_rate: float = Field(5e-5, gt=0)
    weight_decay: float = Field(0.0, ge=0, examples=[0.01])
    # torch's AdamW refuses betas outside [0, 1); an epsilon of 0 divides by zero where a
    # gradient's second moment is 0 (a frozen or unused embedding row).
    adam_beta1: float = Field(0.9, ge=0, lt=1)
    adam_beta2: float = Field(0.999, ge=0, lt=1)
    adam_epsilon: float = Field(1e-8, gt=0)
    max_grad_norm: float = Field(1.0, ge=0, description="0 disables clipping.")
    lr_scheduler_type: Literal["linear", "cosine", "constant", "constant_with_warmup"] = "linear"
    warmup_ratio: float = Field(0.0, ge=0, lt=1, examples=[0.03])
    warmup_steps: int = Field(
        0, ge=0, examples=[100], description="Wins over warmup_ratio when > 0."
    )

    per_device_train_batch_size: int = Field(8, ge=1)
    per_device_eval_batch_size: int = Field(8, ge=1)
    gradient_accumulation_steps: int = Field(1, ge=1)
    num_train_epochs: float = Field(1.0, gt=0)
    max_steps: int | None = Field(
        None,
        ge=1,
        examples=[100],
        description="Optimizer steps; null (the default) counts them from num_train_epochs.",
    )
    seed: int = Field(42, ge=0, le=2**32 - 1)  # what HF's set_seed (numpy) takes

    bf16: bool = Field(False, description="bf16 autocast on GPU (ignored on CPU).")
    fp16: bool = False
    torch_compile: bool = False
    fsdp: bool = Field(False, description="Shard a full fine-tune with FSDP2 instead of DDP.")
    loss_chunk_mb: float | None = Field(
        LOSS_CHUNK_MB,
        gt=0,
        description="The loss projects and scores this many MB of fp32 logits at a time "
        "(trainer.model.chunked_loss), never all of them; null: all at once, as transformers does.",
    )

    logging_steps: int = Field(10, ge=1)
    eval_steps: int | None = Field(None, ge=1, examples=[100])
    save_steps: int | None = Field(500, ge=1)
    save_every_minutes: float | None = Field(None, gt=0, examples=[30])
    save_total_limit: int | None = Field(2, ge=1)
    async_save: bool = Field(True, description="Write checkpoints in the background.")
    early_stopping_patience: int | None = Field(
        None, ge=1, examples=[3], description="Evals without improvement."
    )
    early_stopping_threshold: float = Field(0.0, ge=0, examples=[0.01])
    report_to: list[Literal["tensorboard", "wandb"]] = Field(
        ["tensorboard"], description="Trackers: tensorboard, wandb; [] disables."
    )
    wandb_project: str | None = Field(
        None, description="W&B project; default $WANDB_PROJECT, else vtx."
    )
    wandb_entity: str | None = Field(None, description="W&B entity; default $WANDB_ENTITY.")
    hypertune_metric: str | None = Field(
        None,
        description="The metric a tuning trial reports when the platform names none "
        "(CLOUD_ML_HP_METRIC_TAG wins); default eval_loss with an eval set, else train_loss.",
    )
    disable_tqdm: bool = Field(
        False, description="No progress bar on a terminal (jobs and pipes never get one)."
    )
    allow_config_change_on_resume: bool = Field(
        False,
        description="Resume from checkpoints trained with other settings (named in the logs).",
    )

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


def parse_config(raw: dict[str, Any], source: str = "<config>") -> TrainConfig:
    """The validated config, or ConfigError: one line naming the key when one thing is wrong,
    else a line per mistake."""
    try:
        return TrainConfig.model_validate(raw)
    except ValidationError as exc:
        lines = [_describe(err) for err in exc.errors()]
        if len(lines) == 1:
            raise ConfigError(f"{source}: {lines[0]}") from None
        raise ConfigError(f"{source}: invalid config:\n  " + "\n  ".join(lines)) from None


# pydantic's errors for a value that is not a number, not finite, or outside its key's range.
_NUMBER_ERRORS = frozenset(
    {
        "greater_than",
        "greater_than_equal",
        "less_than",
        "less_than_equal",
        "finite_number",
        "int_from_float",
        "int_parsing",
        "int_type",
        "float_parsing",
        "float_type",
    }
)


def _describe(err: Any) -> str:
    loc = ".".join(str(part) for part in err["loc"]) or "(top level)"
    error = (err.get("ctx") or {}).get("error")
    if isinstance(error, KeyedValueError):
        return f"{loc}.{error.key}: {error}" if error.key else f"{loc}: {error}"
    parent_model = _model_at(err["loc"][:-1])
    field = None
    if parent_model is not None and err["loc"]:
        field = parent_model.model_fields.get(str(err["loc"][-1]))
    if err["type"] in _NUMBER_ERRORS and field is not None:
        return f"{loc}: {_shown(err['input'])} {_number_rule(loc, field)}"
    if err["type"] != "extra_forbidden":
        return f"{loc}: {err['msg']}"
    known = sorted(parent_model.model_fields) if parent_model else []
    hint = difflib.get_close_matches(str(err["loc"][-1]), known, n=1)
    if hint:
        return f"{loc}: unknown key; did you mean `{hint[0]}`?"
    return f"{loc}: unknown key (known here: {', '.join(known)})"


def _number_rule(key: str, field: FieldInfo) -> str:
    """What a numeric key takes, from its declaration: "must be a whole number >= 1 (write
    e.g. max_steps=100)", "must be a finite number in [0, 1) (...)"."""
    args = getattr(field.annotation, "__args__", (field.annotation,))
    bounds = {
        name: getattr(item, name)
        for item in field.metadata
        for name in _BOUNDS
        if getattr(item, name, None) is not None
    }
    rule = "a whole number" if int in args else "a finite number"
    low = [name for name in ("gt", "ge") if name in bounds]
    high = [name for name in ("lt", "le") if name in bounds]
    if low and high:
        lo, hi = low[0], high[0]
        rule += f" in {_BOUNDS[lo]}{bounds[lo]}, {bounds[hi]}{_BOUNDS[hi]}"
    for name in low if not high else high if not low else []:
        rule += f" {_OPERATORS[name]} {bounds[name]}"
    if type(None) in args:
        rule += " or null"
    example = (field.examples or [field.default])[0]
    if not _is_number(example):
        return f"must be {rule}"
    return f"must be {rule} (write e.g. {key}={example})"


_BOUNDS = {"gt": "(", "ge": "[", "lt": ")", "le": "]"}
_OPERATORS = {"gt": ">", "ge": ">=", "lt": "<", "le": "<="}


def _shown(value: Any) -> str:
    """A value as the user wrote it: numbers plain (-1, inf), anything else quoted."""
    return str(value) if _is_number(value) or isinstance(value, float) else f"{value!r:.60}"


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
