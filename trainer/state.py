"""Everything a resumed run needs, as one DCP `Stateful`: model, optimizer, scheduler, data
position, RNG and progress counters.

Per-rank values (data position, RNG) are stored under `rank<N>` keys: DCP deduplicates equal
keys across ranks, which is right for replicated weights and wrong for per-rank state. A
checkpoint therefore resumes only with the world size that wrote it (checked on load).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_state_dict,
    set_state_dict,
)
from torch.distributed.checkpoint.stateful import Stateful

from trainer.checkpoint import rng_state, set_rng_state
from trainer.data import BatchStream


@dataclass
class Progress:
    step: int = 0
    tokens_seen: int = 0
    best_eval_loss: float = float("inf")
    evals_without_improvement: int = 0
    stopped_early: bool = False
    """Early stopping fired: a restart (say, after a failed export) must not train on."""
    last_eval_step: int = 0
    """The SIGTERM save skips its step's eval; the resumed run runs it when this lags."""


class TrainState(Stateful):
    def __init__(
        self,
        model: torch.nn.Module,
        optimizer: torch.optim.Optimizer,
        scheduler: Any,
        stream: BatchStream,
        progress: Progress,
    ) -> None:
        self.model, self.optimizer, self.scheduler = model, optimizer, scheduler
        self.stream, self.progress = stream, progress
        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()
        # Frozen weights (a LoRA base) are rebuilt from their source (pretrained files or the
        # seeded init), so checkpoints hold only what training changes.
        self.options = StateDictOptions(ignore_frozen_params=True)
        # Loading is non-strict only about those frozen weights: DCP itself fails on any
        # trainable key the checkpoint lacks, since the load template lists them all.
        self.load_options = StateDictOptions(ignore_frozen_params=True, strict=False)

    def state_dict(self) -> dict[str, Any]:
        model_sd, optim_sd = get_state_dict(self.model, self.optimizer, options=self.options)
        return {
            "model": model_sd,
            "optimizer": optim_sd,
            "scheduler": self.scheduler.state_dict(),
            "progress": asdict(self.progress),
            "world_size": self.world_size,
            f"rank{self.rank}": {"stream": self.stream.state_dict(), "rng": rng_state()},
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state["world_size"] != self.world_size:
            raise RuntimeError(
                f"checkpoint was written by {state['world_size']} processes, this run has "
                f"{self.world_size}: per-rank data positions cannot be remapped; resume with "
                "the same number of nodes and GPUs or start a new run directory"
            )
        set_state_dict(
            self.model,
            self.optimizer,
            model_state_dict=state["model"],
            optim_state_dict=state["optimizer"],
            options=self.load_options,
        )
        self.scheduler.load_state_dict(state["scheduler"])
        self.progress.__dict__.update(state["progress"])
        mine = state[f"rank{self.rank}"]
        self.stream.load_state_dict(mine["stream"])
        set_rng_state(mine["rng"])
