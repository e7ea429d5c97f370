"""How long a job trains and what the whole run costs, from the trainer's own `--estimate`.

The trainer knows its model, data and FLOPs; the platform knows the job's accelerators and its
price per hour. The platform never imports the trainer (an import-linter contract: it ships
alone in the image), so the estimate runs it in a process, exactly as the job's container would
(`python -m trainer` with the template's args), adds the accelerators and the price it read from
the template and the catalog, and reads back the one JSON object `--estimate --json` prints.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

from jobs.core.catalog import Catalog
from jobs.custom_jobs.facts import JobFacts, PoolFacts

TRAINER_MODULES = ("trainer", "trainer.launch")
"""Commands that run our trainer: `python -m trainer` and its multi-process launcher."""
NOT_TRAINING_ROLES = ("reduction_server",)
TIMEOUT_S = 600.0


class TrainingTimeError(Exception):
    """The estimate cannot be made: what is missing and what to do."""


@dataclass(frozen=True)
class TrainerCall:
    """`python -m trainer ARGS --estimate --json ...` for one job."""

    args: list[str]
    accelerator: str
    accelerator_count: int
    nodes: int

    def argv(self, usd_per_h: float | None, python: str = sys.executable) -> list[str]:
        argv = [python, "-m", "trainer", *self.args, "--estimate", "--json"]
        argv += ["--accelerator", self.accelerator]
        argv += ["--accelerator-count", str(self.accelerator_count), "--nodes", str(self.nodes)]
        if usd_per_h is not None:
            argv += ["--usd-per-hour", f"{usd_per_h:.6f}"]
        return argv


def trainer_call(facts: JobFacts, catalog: Catalog) -> TrainerCall:
    """The trainer command of ``facts``' training pools, or why there is none."""
    pools = [p for p in facts.pools if p.role not in NOT_TRAINING_ROLES]
    if not pools:
        raise TrainingTimeError("the job has no pool that trains")
    chief = pools[0]
    _refuse_tpu(chief, catalog)  # first: a TPU job's command is another trainer's anyway
    args = _trainer_args(chief)
    accelerator, count = _accelerator(chief, catalog)
    return TrainerCall(args, accelerator, count, sum(p.replicas or 1 for p in pools))


def _trainer_args(pool: PoolFacts) -> list[str]:
    values = [value for value, _ in pool.args]
    for i, value in enumerate(values[:-1]):
        if value == "-m" and values[i + 1] in TRAINER_MODULES:
            return values[i + 2 :]
    raise TrainingTimeError(
        f"the {pool.role} pool does not run the trainer (`python -m trainer` or "
        "`python -m trainer.launch`): only the trainer can estimate its own time"
    )


def _refuse_tpu(pool: PoolFacts, catalog: Catalog) -> None:
    machine = catalog.machines.get(pool.machine or "")
    if machine is not None and machine.is_tpu:
        raise TrainingTimeError(
            f"the {pool.role} pool is a TPU ({pool.machine}): vtx does not estimate TPU step "
            "times (its trainer is PyTorch on GPUs; a TPU job runs its own trainer, e.g. "
            "MaxText). accelerators.yaml has the v5e and v6e chips' bf16 peak and HBM, cited, "
            "for your own estimate"
        )


def _accelerator(pool: PoolFacts, catalog: Catalog) -> tuple[str, int]:
    if pool.accelerator:
        return pool.accelerator, pool.accelerator_count or 1
    builtin = catalog.builtin_accelerator(pool.machine)
    if builtin is not None:
        return builtin
    raise TrainingTimeError(
        f"the {pool.role} pool ({pool.machine}) has no GPU, and the estimate's step time is "
        "a GPU's: give it one (e.g. --set pools.chief.machine=g2-standard-8) to see the time"
    )


def run_estimate(
    call: TrainerCall, usd_per_h: float | None, timeout_s: float = TIMEOUT_S
) -> dict[str, Any]:
    """Run the trainer's estimate; its JSON object, or the trainer's own error."""
    try:
        done = subprocess.run(
            call.argv(usd_per_h), capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except subprocess.TimeoutExpired:
        raise TrainingTimeError(
            f"the trainer's estimate did not finish in {timeout_s:.0f} s"
        ) from None
    if done.returncode != 0:
        reason = done.stderr.strip().splitlines()[-1:] or [f"exit {done.returncode}"]
        raise TrainingTimeError(
            f"the trainer's estimate failed: {reason[0].removeprefix('error: ')}"
        )
    try:
        return json.loads(done.stdout)
    except json.JSONDecodeError:
        raise TrainingTimeError(
            f"the trainer's estimate printed no JSON object: {done.stdout[:200]!r}"
        ) from None
