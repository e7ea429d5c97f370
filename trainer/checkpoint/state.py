"""Everything a resumed run needs, as one DCP `Stateful`: model, optimizer, scheduler, data
position, RNG and progress counters.

Nothing in it is tied to the number of processes that wrote it, so N processes' checkpoint
loads in M: weights and optimizer state go through DCP, which reshards on load (replicated DDP
tensors are stored once; FSDP2 shards are re-split for the new mesh); the data position is
global (`BatchStream`). The RNG state is per rank, under `rank<R>` keys (DCP deduplicates equal
keys across ranks, which is right for replicated weights and wrong for per-rank state): rank R
takes its own back when the writer had a rank R, else rank 0's. Every rank seeds the same at
start, so that is the state an uninterrupted run's ranks share.
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

from trainer.checkpoint.store import rng_state, set_rng_state
from trainer.data.batches import BatchStream


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
        self.rng_from = self.rank
        """Whose RNG state a load takes: set by `load_from` for the checkpoint at hand."""
        # Frozen weights (a LoRA base) are rebuilt from their source (pretrained files or the
        # seeded init), so checkpoints hold only what training changes.
        self.options = StateDictOptions(ignore_frozen_params=True)
        # Loading is non-strict only about those frozen weights: DCP itself fails on any
        # trainable key the checkpoint lacks, since the load template lists them all.
        self.load_options = StateDictOptions(ignore_frozen_params=True, strict=False)

    def load_from(self, written_by: int) -> None:
        """Prepare to load a checkpoint that `written_by` processes wrote (call before DCP's
        load, which asks `state_dict` which keys to read)."""
        self.rng_from = self.rank if self.rank < written_by else 0

    def state_dict(self) -> dict[str, Any]:
        model_sd, optim_sd = get_state_dict(self.model, self.optimizer, options=self.options)
        return {
            "model": model_sd,
            "optimizer": optim_sd,
            "scheduler": self.scheduler.state_dict(),
            "progress": asdict(self.progress),
            "data": self.stream.state_dict(),
            f"rank{self.rng_from}": {"rng": rng_state()},
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        set_state_dict(
            self.model,
            self.optimizer,
            model_state_dict=state["model"],
            optim_state_dict=state["optimizer"],
            options=self.load_options,
        )
        self.scheduler.load_state_dict(state["scheduler"])
        self.progress.__dict__.update(state["progress"])
        self.stream.load_state_dict(state["data"])
        set_rng_state(state[f"rank{self.rng_from}"]["rng"])
        self.rng_from = self.rank  # saves write this rank's own state
