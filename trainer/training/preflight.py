"""Checks a training process makes before it loads the tokenizer, the data and the model: that
every location it was given can be used, and that the data and the model fit this machine.

The config's own checks (`trainer.config.schema`) read no file and reach no store; these do, each
failure one ConfigError naming the key (or the `AIP_*` variable) and what to write instead:
- outputs: a local directory is created and a probe file written and removed in it (otherwise a
  read-only or impossible `output_dir` fails only when the first checkpoint is written); a gs://
  prefix is listed.
- data: a gs:// file exists and is a file; every data file fits the host memory
  (`DATA_MEMORY_PER_BYTE`), since every process reads its whole file.
- model: the weights, gradients and AdamW state `--estimate` counts for its shapes fit the GPU
  (or, without one, the host), and the fp32 copy each process builds first fits the host: a
  size typo in `model.config` otherwise ends in an allocation error, or the kernel's OOM killer.
  Only those exact counts are compared, not the activations, which are an estimate.
A remote store gets `REMOTE_READ_TIMEOUT_S` per call: gcsfs alone retries an unreachable one
for about 40 s, then prints a traceback.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from trainer.checkpoint.fingerprint import processes
from trainer.config.env import VertexEnv
from trainer.config.schema import ConfigError, TrainConfig
from trainer.model.loading import (
    REMOTE_ADVICE,
    call_remote,
    first_line,
    is_remote,
    local_rank_from_env,
)
from trainer.training.estimate import GIB, estimate
from trainer.training.loop import Outputs

T = TypeVar("T")

DATA_MEMORY_PER_BYTE = 16
"""Peak bytes of host memory per byte of a JSONL data file while `build_rows` reads, tokenizes
and packs it: 14 measured with tracemalloc on the shipped dataset. Parquet is compressed and
expands more, so for it the bound refuses only files that certainly cannot fit."""
CGROUP_MEMORY_MAX = Path("/sys/fs/cgroup/memory.max")
"""A container's memory limit (cgroup v2), when lower than the machine's memory."""


def preflight(cfg: TrainConfig, env: VertexEnv) -> None:
    """Every check of the module docstring, cheapest first; ConfigError on the first failure."""
    local, world = _processes()
    _check_outputs(cfg, env)
    _check_data(cfg, local)
    _check_model_memory(cfg, local, world)


def _processes() -> tuple[int, int]:
    """(processes on this node, processes in the run), as torchrun sets them; (1, 1) alone."""
    if "TORCHELASTIC_RUN_ID" not in os.environ:
        return 1, 1
    return int(os.environ.get("LOCAL_WORLD_SIZE", "1")), int(os.environ.get("WORLD_SIZE", "1"))


def host_memory_bytes() -> int:
    """This machine's memory, or its container's limit when lower."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    try:
        limit = CGROUP_MEMORY_MAX.read_text().strip()
    except OSError:
        return total
    return min(total, int(limit)) if limit.isdigit() else total


# ---------------------------------------------------------------- outputs


def _check_outputs(cfg: TrainConfig, env: VertexEnv) -> None:
    outputs = Outputs.resolve(cfg, env)
    places = {
        outputs.checkpoint_dir: "AIP_CHECKPOINT_DIR" if env.checkpoint_dir else "output_dir",
        outputs.model_dir: "AIP_MODEL_DIR" if env.model_dir else "output_dir",
    }
    if outputs.tensorboard_dir is not None:
        places[outputs.tensorboard_dir] = (
            "AIP_TENSORBOARD_LOG_DIR" if env.tensorboard_dir else "output_dir"
        )
    for directory, key in places.items():
        if is_remote(directory):
            _reach(key, directory, _list_prefix)
        else:
            _check_writable(key, directory)


def _check_writable(key: str, directory: str) -> None:
    path = Path(directory)
    probe = path / f".vtx-write-probe-{os.getpid()}"
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise ConfigError(
            f"{key}: cannot write in {directory} ({exc.strerror or exc}); give a directory "
            "this process can create and write"
        ) from None


def _list_prefix(fs: Any, root: str) -> None:
    # Nothing written there yet is fine: the bucket answered, which is what is checked.
    with contextlib.suppress(FileNotFoundError):
        fs.ls(root)


# ---------------------------------------------------------------- data


def _check_data(cfg: TrainConfig, local: int) -> None:
    budget = host_memory_bytes() // (DATA_MEMORY_PER_BYTE * local)
    for key, path in (("data.path", cfg.data.path), ("data.eval_path", cfg.data.eval_path)):
        if path is None:
            continue
        size = _reach(key, path, _file_size) if is_remote(path) else os.stat(path).st_size
        if size > budget:
            raise ConfigError(
                f"{key}: {path} holds {size / GIB:,.2f} GiB, read whole by each of this "
                f"node's {processes(local)} at about {DATA_MEMORY_PER_BYTE} bytes of memory per "
                f"byte: {host_memory_bytes() / GIB:,.1f} GiB of memory allows files of up to "
                f"{budget / GIB:,.2f} GiB; split the data or use a machine with more memory"
            )


def _file_size(fs: Any, root: str) -> int:
    info = fs.info(root)
    if info.get("type") == "directory":
        raise IsADirectoryError("a folder; give one JSONL or Parquet file")
    return int(info.get("size") or 0)


# ---------------------------------------------------------------- remote stores


def _reach(key: str, uri: str, call: Callable[[Any, str], T]) -> T:
    """`call(filesystem, path)` for `uri` within REMOTE_READ_TIMEOUT_S, or a ConfigError."""
    import fsspec

    def run() -> T:
        fs, root = fsspec.core.url_to_fs(uri)  # in the time limit: it may look for credentials
        return call(fs, root)

    try:
        return call_remote(run)
    except FileNotFoundError:
        raise ConfigError(f"{key}: {uri} does not exist") from None
    except IsADirectoryError as exc:
        raise ConfigError(f"{key}: {uri} is {exc}") from None
    except Exception as exc:
        raise ConfigError(
            f"{key}: cannot reach {uri} ({first_line(exc)}); check the bucket's name and the "
            f"network. {REMOTE_ADVICE}"
        ) from None


# ---------------------------------------------------------------- model


def _check_model_memory(cfg: TrainConfig, local: int, world: int) -> None:
    import torch

    numbers = estimate(cfg, world)  # from shapes on the meta device: nothing is allocated
    states = numbers["weights_grads_optimizer_gib"] * GIB
    what = "weights, gradients and AdamW state"
    host = host_memory_bytes()
    per_node = f" x {local} processes" if local > 1 else ""
    if torch.cuda.is_available():
        device = torch.cuda.get_device_properties(local_rank_from_env())
        _refuse_if_over(cfg, numbers, states, what, device.total_memory, f"of one {device.name}")
        weights = (
            4 * numbers["parameters"] * local
        )  # each process builds the fp32 model on the host
        _refuse_if_over(cfg, numbers, weights, f"fp32 weights{per_node}", host, "of host memory")
    else:
        _refuse_if_over(cfg, numbers, states * local, what + per_node, host, "of host memory")


def _refuse_if_over(
    cfg: TrainConfig, numbers: dict[str, float], need: float, what: str, have: float, where: str
) -> None:
    if need <= have:
        return
    if cfg.model.config is not None:
        key = "model.config"
        fix = "lower hidden_size, intermediate_size, num_hidden_layers or vocab_size"
    else:
        key = "model.name_or_path"
        fix = "use a machine with more memory, more GPUs with fsdp: true, or model.lora"
    raise ConfigError(
        f"{key}: about {numbers['parameters']:.2g} parameters need {need / GIB:,.1f} GiB of "
        f"{what} (as --estimate counts them), more than the {have / GIB:,.1f} GiB {where}: {fix}"
    )
