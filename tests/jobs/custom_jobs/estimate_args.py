"""The --set overrides that run the trainer's estimate on the tiny example model, on L4 machines."""

from __future__ import annotations

TINY = ["--set", "args=[--config, trainer/examples/tiny-lora.yaml]"]


ON_L4 = [
    "--set", "pools.chief.machine=g2-standard-8",
    "--set", "pools.workers.machine=g2-standard-8",
]  # fmt: skip
