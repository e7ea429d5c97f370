"""Tokenizer and model: pretrained from a directory or gs:// prefix, or randomly initialised.

Remote models are copied once per node into a local cache directory (local rank 0 downloads,
the others wait at a barrier) because `from_pretrained` reads local files only.
"""

from __future__ import annotations

import difflib
import hashlib
import logging
import os
import tempfile
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import torch

from trainer.config.schema import ConfigError, ModelConfig
from trainer.model.attention import use_segment_attention

log = logging.getLogger(__name__)

T = TypeVar("T")

REMOTE_READ_TIMEOUT_S = 10.0
"""How long `--estimate` waits for a remote model's config.json (a few KiB)."""


def is_remote(path: str) -> bool:
    return "://" in path


def localize(path: str, local_rank: int = 0) -> str:
    """A local directory holding `path`'s files; downloads remote prefixes once per node."""
    if not is_remote(path):
        return path
    import fsspec
    import torch.distributed as dist

    digest = hashlib.sha256(path.encode()).hexdigest()[:16]
    target = Path(tempfile.gettempdir()) / "vtx-models" / digest
    if local_rank == 0 and not (target / ".complete").exists():
        fs, root = fsspec.core.url_to_fs(path)
        root = root.rstrip("/")
        for remote in fs.find(root):
            local = target / remote[len(root) :].lstrip("/")
            local.parent.mkdir(parents=True, exist_ok=True)
            fs.get_file(remote, str(local))
        (target / ".complete").touch()
        log.info("copied %s to %s", path, target)
    if dist.is_initialized():
        dist.barrier()
    return str(target)


def _check_local(path: str, key: str) -> None:
    """A missing local directory would reach the Hub client as a repository id (and fail with
    a message about repository names): name the key instead."""
    if not is_remote(path) and not Path(path).is_dir():
        raise ConfigError(
            f"{key}: {path} is not a directory; give a local directory or a gs:// prefix "
            "holding Hugging Face files"
        )


def build_tokenizer(cfg: ModelConfig, local_rank: int = 0) -> Any:
    from transformers import AutoTokenizer

    source = cfg.tokenizer or cfg.name_or_path
    assert source is not None  # guaranteed by ModelConfig validation
    _check_local(source, "model.tokenizer" if cfg.tokenizer else "model.name_or_path")
    tokenizer = AutoTokenizer.from_pretrained(localize(source, local_rank))
    if tokenizer.pad_token_id is None:
        # Padding is never attended to nor learned from (see data.collate), so any id will do.
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def build_model(cfg: ModelConfig, seed: int, local_rank: int = 0) -> torch.nn.Module:
    """The model in fp32 on CPU; the loop moves it and decides precision."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)  # random init (and LoRA init) identical on every rank and restart
    if cfg.config is not None:
        model = _from_config_mapping(cfg.config)
    else:
        assert cfg.name_or_path is not None
        _check_local(cfg.name_or_path, "model.name_or_path")
        model = AutoModelForCausalLM.from_pretrained(
            localize(cfg.name_or_path, local_rank), dtype=torch.float32
        )
        # Where the weights came from, as the config named it (not the local copy): on a stack
        # with no internet, a job's logs show it read a mirror in the models bucket.
        log.info("model loaded", extra={"name_or_path": cfg.name_or_path})
    model.config.use_cache = False  # training never reuses keys and values
    use_segment_attention(model)  # batches are bucketed layouts (trainer.data.batches.collate)
    if cfg.gradient_checkpointing:
        _enable_activation_checkpointing(model)
    if cfg.lora is not None:
        model = _add_lora(model, cfg)
    return model


def _enable_activation_checkpointing(model: torch.nn.Module) -> None:
    """transformers 5 renamed gradient checkpointing (the old name warns, once per rank in every
    job's logs); transformers 4, which pyproject allows, has only the old name."""
    kwargs = {"use_reentrant": False}
    if hasattr(model, "activation_checkpointing_enable"):
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)


def build_skeleton(cfg: ModelConfig) -> torch.nn.Module:
    """The model's shapes on the meta device, from its config alone (LoRA applied): no weight
    is read, and from a gs:// prefix only config.json is downloaded. For `--estimate`."""
    from transformers import AutoConfig, AutoModelForCausalLM

    with torch.device("meta"):
        if cfg.config is not None:
            model = _from_config_mapping(cfg.config)
        else:
            assert cfg.name_or_path is not None  # guaranteed by ModelConfig validation
            _check_local(cfg.name_or_path, "model.name_or_path")
            with tempfile.TemporaryDirectory(prefix="vtx-config-") as scratch:
                hf_config = AutoConfig.from_pretrained(_config_only(cfg.name_or_path, scratch))
            model = AutoModelForCausalLM.from_config(hf_config)
        return _add_lora(model, cfg) if cfg.lora is not None else model


# Files a tokenizer never needs: `light_tokenizer` copies everything else from a gs:// prefix.
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".h5", ".msgpack", ".onnx")


def light_tokenizer(cfg: ModelConfig) -> Any:
    """The config's tokenizer without the model's weights: from a gs:// prefix only its other
    top-level files are copied (tokenizer.json, its config, vocab...), within
    REMOTE_READ_TIMEOUT_S. For `--estimate`, which tokenizes a sample of the data."""
    from transformers import AutoTokenizer

    source = cfg.tokenizer or cfg.name_or_path
    assert source is not None  # guaranteed by ModelConfig validation
    if not is_remote(source):
        _check_local(source, "model.tokenizer" if cfg.tokenizer else "model.name_or_path")
        return AutoTokenizer.from_pretrained(source)
    with tempfile.TemporaryDirectory(prefix="vtx-tokenizer-") as scratch:
        call_remote(lambda: _copy_light_files(source, Path(scratch)))
        return AutoTokenizer.from_pretrained(scratch)


def _copy_light_files(path: str, target: Path) -> None:
    import fsspec

    fs, root = fsspec.core.url_to_fs(path)
    for remote in fs.ls(root, detail=False):
        name = remote.rstrip("/").rsplit("/", 1)[-1]
        if fs.isfile(remote) and not name.endswith(WEIGHT_SUFFIXES):
            fs.get_file(remote, str(target / name))


def _config_only(path: str, scratch: str) -> str:
    """A local directory with `path`'s config.json: `path` itself, or `scratch` holding a copy
    of that one file."""
    if not is_remote(path):
        return path
    remote = path.rstrip("/") + "/config.json"
    (Path(scratch) / "config.json").write_bytes(_read_remote(remote))
    return scratch


def _read_remote(remote: str) -> bytes:
    """One small remote file, or a ConfigError within REMOTE_READ_TIMEOUT_S."""
    import fsspec

    def read() -> bytes:
        with fsspec.open(remote, "rb") as f:
            return f.read()

    try:
        return call_remote(read)
    except FileNotFoundError:
        raise ConfigError(f"model.name_or_path: {remote} does not exist") from None
    except Exception as exc:
        raise ConfigError(
            f"model.name_or_path: cannot read {remote} ({first_line(exc)}). {REMOTE_ADVICE}, "
            "or point model.name_or_path at a local copy of the model's directory"
        ) from None


REMOTE_ADVICE = (
    "Outside Google Cloud, sign in with `gcloud auth application-default login` (the local "
    "platform sets STORAGE_EMULATOR_HOST itself)"
)
"""What to do when a remote store does not answer, for every message that says so."""


def call_remote(read: Callable[[], T], timeout_s: float | None = None) -> T:
    """`read()` (reads from a remote store) within `timeout_s` (default REMOTE_READ_TIMEOUT_S):
    its value, its exception, or a TimeoutError. Without credentials or network, gcsfs looks for
    credentials and retries for about a minute, logging each failure; `--estimate` should say so
    at once instead."""
    timeout_s = REMOTE_READ_TIMEOUT_S if timeout_s is None else timeout_s
    result: dict[str, Any] = {}

    def call() -> None:
        try:
            result["value"] = read()
        except Exception as exc:  # raised below, in the caller's thread
            result["error"] = exc

    # A daemon thread: left behind on a timeout, it does not keep the process alive.
    worker = threading.Thread(target=call, name="vtx-read-remote", daemon=True)
    fs_logger = logging.getLogger("gcsfs")
    level = fs_logger.level
    fs_logger.setLevel(logging.CRITICAL)  # its retry tracebacks: the caller's message says it all
    try:
        worker.start()
        worker.join(timeout_s)
    finally:
        fs_logger.setLevel(level)
    if worker.is_alive():
        raise TimeoutError(f"no answer in {timeout_s:g} s")
    if "error" in result:
        raise result["error"]
    return result["value"]


def first_line(exc: BaseException) -> str:
    """An exception's first line, short enough for a one-line message."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]


def _from_config_mapping(config: dict[str, Any]) -> torch.nn.Module:
    """A randomly initialised model; transformers' refusals become `model.config` errors."""
    from huggingface_hub.errors import StrictDataclassError
    from transformers import CONFIG_MAPPING, AutoConfig, AutoModelForCausalLM

    options = dict(config)
    model_type = options.pop("model_type")
    if model_type not in CONFIG_MAPPING:
        close = difflib.get_close_matches(str(model_type), list(CONFIG_MAPPING), n=3)
        raise ConfigError(
            f"model.config.model_type: {model_type!r} is not a transformers model type; "
            f"e.g. {', '.join(close or ['llama', 'qwen2', 'mistral'])}"
        )
    try:
        hf_config = AutoConfig.for_model(model_type, **options)
        return AutoModelForCausalLM.from_config(hf_config, dtype=torch.float32)
    except (ValueError, TypeError, StrictDataclassError) as exc:
        raise ConfigError(f"model.config: transformers refuses it: {exc}") from None


def _add_lora(model: torch.nn.Module, cfg: ModelConfig) -> torch.nn.Module:
    from peft import LoraConfig, get_peft_model
    from peft.utils.error import NoMatchingPeftModuleError

    assert cfg.lora is not None
    lora = LoraConfig(
        r=cfg.lora.r,
        lora_alpha=cfg.lora.alpha,
        lora_dropout=cfg.lora.dropout,
        target_modules=cfg.lora.target_modules,
        task_type="CAUSAL_LM",
    )
    if cfg.gradient_checkpointing:
        # Frozen embeddings produce outputs without grad; checkpointed blocks then see no input
        # that requires grad and would drop the adapters' gradients.
        model.enable_input_require_grads()
    try:
        with warnings.catch_warnings():
            # peft reads transformers' deprecated `is_gradient_checkpointing`, whose FutureWarning
            # (one per rank, in every LoRA job's logs) is for peft's developers: none of ours.
            warnings.filterwarnings(
                "ignore",
                message="`is_gradient_checkpointing` is deprecated",
                category=FutureWarning,
            )
            return get_peft_model(model, lora)
    except NoMatchingPeftModuleError as exc:
        raise ConfigError(
            f"model.lora.target_modules: {exc} Use module names of this model (e.g. q_proj, "
            "v_proj for Llama) or `all-linear`"
        ) from None


def count_parameters(model: torch.nn.Module) -> tuple[int, int]:
    """(all parameters, trainable parameters)."""
    total = sum(p.numel() for p in model.parameters())
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return total, trainable


def flops_per_token(model: torch.nn.Module, seq_len: int) -> float:
    """Training FLOPs per token: 6N for the matmuls (forward + backward) plus attention
    scores, 12 * layers * hidden * seq_len (PaLM appendix B). Embeddings are excluded from N."""
    hidden = getattr(getattr(model, "config", None), "hidden_size", 0) or 0
    return 6.0 * _non_embedding_params(model) + 12.0 * _layers(model) * hidden * seq_len


def layer_params(model: torch.nn.Module) -> float:
    """Non-embedding parameters per decoder layer: what one token slot costs in each layer
    (`trainer.data.batches.bucket_cost_slots`); 0 when the config does not say how many layers."""
    layers = _layers(model)
    return _non_embedding_params(model) / layers if layers else 0.0


def _layers(model: torch.nn.Module) -> int:
    return getattr(getattr(model, "config", None), "num_hidden_layers", 0) or 0


def _non_embedding_params(model: torch.nn.Module) -> int:
    return sum(p.numel() for name, p in model.named_parameters() if "embed" not in name)


def local_rank_from_env() -> int:
    """torchrun's LOCAL_RANK (0 outside torchrun). Not a Vertex variable: torchrun sets it."""
    return int(os.environ.get("LOCAL_RANK", "0"))
