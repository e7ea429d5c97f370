"""`--estimate`: memory per device, step time, total steps, hours and cost, without loading
weights or training.

Memory. The model is built on the meta device from its config alone (shapes only; from a gs://
prefix only config.json is downloaded), so a 70B model is estimated in seconds on a laptop.
Per device, in bytes:
    weights 4/param (fp32 master copy; bf16 autocast keeps it)
  + grads 4 and AdamW moments 8 per *trainable* param
  (all three divided by the device count under FSDP), plus activations:
    ~34 * hidden bytes per token per layer (Korthikanti et al. 2022, bf16, flash attention),
    ~2 * hidden with gradient checkpointing (only each block's input is kept).
An estimate, not a promise: allocator fragmentation and the logits (vocab * tokens * 4) add more.

Time. A step computes tokens * flops_per_token, the trainer's own count (`flops_per_token`: 6N
plus attention, the count behind the `mfu` the trainer logs), at an assumed fraction of the
devices' dense bf16 peak (`trainer.config.accelerators`):
    step_time_s = tokens_per_optimizer_step * flops_per_token / (devices * peak * mfu)
`--mfu` is the assumption (default `trainer.config.accelerators.DEFAULT_MFU`, always printed): a
short run on the target GPU logs the `mfu` it reaches; pass that for a second estimate. Tokens per
step are measured on the data (mean tokens per row), or the maximum when the data cannot be read.
Hours count training steps only: not start-up, the model download, evals or blocking saves.

Steps: `trainer.training.sizing`. Cost: hours * `--usd-per-hour`, the whole job's price per hour
(the trainer knows no prices: they stay on the platform's side, `vtx cost`).

`--json` prints one JSON object on stdout, null where a figure is unknown (`notes` say why):
    accelerator                     Vertex type, "<CUDA name> (this machine)", or null
    accelerator_count               devices per node
    nodes                           machines
    devices                         accelerator_count * nodes
    parameters                      all parameters (LoRA adapters included)
    trainable_parameters            those that get gradients and AdamW state
    weights_grads_optimizer_gib     GiB per device
    activations_gib                 GiB per device, logits included
    memory_per_device_gib           the sum
    accelerator_memory_gib          capacity per device
    fits                            memory_per_device_gib <= 90% of the capacity
    tokens_per_optimizer_step_max   full rows of max_seq_length
    tokens_per_optimizer_step       expected: the data's measured tokens per row (else the max)
    flops_per_token                 training FLOPs per token (the trainer's count)
    peak_flops_per_s                dense bf16, per device
    mfu                             the assumed fraction of the peak
    step_time_s                     seconds per optimizer step
    total_steps                     optimizer steps of the run
    total_steps_basis               how they were counted, or why unknown and what to pass
    hours                           total_steps * step_time_s, in hours
    usd_per_hour                    as passed
    cost_usd                        hours * usd_per_hour
    notes                           what was assumed, and what to pass for a missing figure
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from trainer.config.accelerators import ACCELERATORS, peak_flops_per_s
from trainer.config.schema import TrainConfig
from trainer.model.loading import build_skeleton, count_parameters, flops_per_token
from trainer.training.sizing import run_length

FITS_FRACTION = 0.9  # headroom for the allocator's fragmentation and the CUDA context
GIB = 2**30


@dataclass(frozen=True)
class Hardware:
    name: str | None
    """A Vertex accelerator type, a local CUDA device's name, or None: none named."""
    per_node: int
    nodes: int
    memory_gib: float | None
    peak_flops_per_s: float | None
    """Dense bf16, per device."""

    @property
    def devices(self) -> int:
        return self.per_node * self.nodes


def hardware(accelerator: str | None, per_node: int | None, nodes: int) -> Hardware:
    """The named Vertex accelerator, else this machine's GPUs, else none."""
    if accelerator is not None:
        spec = ACCELERATORS[accelerator]  # arguments.py accepts only these names
        return Hardware(accelerator, per_node or 1, nodes, spec.memory_gib, spec.peak_flops_per_s)
    import torch

    if not torch.cuda.is_available():
        return Hardware(None, per_node or 1, nodes, None, None)
    name = torch.cuda.get_device_name(0)
    memory_gib = torch.cuda.get_device_properties(0).total_memory / GIB
    count = per_node or torch.cuda.device_count()
    return Hardware(f"{name} (this machine)", count, nodes, memory_gib, peak_flops_per_s(name))


def estimate(cfg: TrainConfig, devices: int) -> dict[str, float]:
    """Sizes, memory per device and the most tokens a step can hold (full rows)."""
    model = build_skeleton(cfg.model)
    total, trainable = count_parameters(model)
    config = model.config
    shard = devices if cfg.fsdp else 1
    states = (4 * total + 12 * trainable) / shard
    per_token_layer = (2 if cfg.model.gradient_checkpointing else 34) * config.hidden_size
    tokens_per_micro = cfg.per_device_train_batch_size * cfg.data.max_seq_length
    activations = per_token_layer * config.num_hidden_layers * tokens_per_micro
    logits = 4 * config.vocab_size * tokens_per_micro
    return {
        "parameters": total,
        "trainable_parameters": trainable,
        "weights_grads_optimizer_gib": states / GIB,
        "activations_gib": (activations + logits) / GIB,
        "memory_per_device_gib": (states + activations + logits) / GIB,
        "tokens_per_optimizer_step_max": tokens_per_micro
        * cfg.gradient_accumulation_steps
        * devices,
        "flops_per_token": flops_per_token(model, cfg.data.max_seq_length),
    }


def report(
    cfg: TrainConfig, hw: Hardware, mfu: float, usd_per_hour: float | None
) -> dict[str, Any]:
    """Everything `--estimate` says, under the keys the module docstring lists."""
    out: dict[str, Any] = {
        "accelerator": hw.name,
        "accelerator_count": hw.per_node,
        "nodes": hw.nodes,
        "devices": hw.devices,
        **estimate(cfg, hw.devices),
    }
    capacity = hw.memory_gib
    out["accelerator_memory_gib"] = capacity
    out["fits"] = (
        None if capacity is None else out["memory_per_device_gib"] <= FITS_FRACTION * capacity
    )
    length = run_length(cfg, hw.devices)
    rows_per_step = cfg.per_device_train_batch_size * cfg.gradient_accumulation_steps * hw.devices
    tokens = out["tokens_per_optimizer_step_max"]
    if length.tokens_per_row is not None:
        tokens = length.tokens_per_row * rows_per_step
    out["tokens_per_optimizer_step"] = round(tokens)
    out["peak_flops_per_s"] = hw.peak_flops_per_s
    out["mfu"] = mfu
    step_s = None
    if hw.peak_flops_per_s:
        step_s = tokens * out["flops_per_token"] / (hw.devices * hw.peak_flops_per_s * mfu)
    out["step_time_s"] = step_s
    out["total_steps"] = length.total_steps
    out["total_steps_basis"] = length.basis
    hours = (
        None if step_s is None or length.total_steps is None else step_s * length.total_steps / 3600
    )
    out["hours"] = hours
    out["usd_per_hour"] = usd_per_hour
    out["cost_usd"] = None if hours is None or usd_per_hour is None else hours * usd_per_hour
    out["notes"] = _notes(out, hw, length.tokens_per_row is not None)
    return out


def _notes(out: dict[str, Any], hw: Hardware, measured: bool) -> list[str]:
    notes = [
        f"assumes MFU {out['mfu']:.0%} of the dense bf16 peak (--mfu overrides; a run logs the "
        "`mfu` it reaches); hours count training steps only (not start-up, evals or saves)"
    ]
    if hw.name is None:
        notes.append(
            "no GPU here: pass --accelerator TYPE [--accelerator-count N] for step time and "
            f"cost; TYPE is one of {', '.join(ACCELERATORS)}"
        )
    elif hw.peak_flops_per_s is None:
        notes.append(f"no bf16 peak known for {hw.name}: pass --accelerator TYPE")
    if not measured:
        notes.append("tokens per step assume full rows (the data was not read)")
    if out["total_steps"] is None:
        notes.append(f"total steps {out['total_steps_basis']}")
    if out["hours"] is not None and out["usd_per_hour"] is None:
        notes.append(
            "pass --usd-per-hour PRICE (the job's price per hour, from `vtx cost`) for the cost"
        )
    return notes


def print_report(numbers: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(numbers))
        return
    console = Console()
    console.print(_table(numbers))
    for note in numbers["notes"]:
        console.print(f"note: {escape(note)}", style="dim")


def _table(n: dict[str, Any]) -> Table:
    what = f"{n['devices']} x {n['accelerator']}" if n["accelerator"] else "no accelerator named"
    table = Table(title=escape(f"estimate for {what}"), show_header=False)
    table.add_row("parameters", f"{n['parameters']:,.0f}")
    table.add_row("trainable parameters", f"{n['trainable_parameters']:,.0f}")
    table.add_row("weights+grads+AdamW per device", f"{n['weights_grads_optimizer_gib']:.2f} GiB")
    table.add_row("activations+logits per device", f"{n['activations_gib']:.2f} GiB")
    verdict = ""
    if n["fits"] is not None:
        fits = "fits" if n["fits"] else "does NOT fit"
        verdict = f" of {n['accelerator_memory_gib']:.0f} GiB ({fits})"
    table.add_row("memory per device", f"{n['memory_per_device_gib']:.2f} GiB{verdict}")
    table.add_row(
        "tokens per optimizer step",
        f"{n['tokens_per_optimizer_step']:,} (max {n['tokens_per_optimizer_step_max']:,})",
    )
    table.add_row("training FLOPs per token", f"{n['flops_per_token']:.3g}")
    table.add_row("step time", _step_time(n))
    table.add_row("total steps", _or_unknown(n["total_steps"], "{:,}"))
    table.add_row("  counted from", escape(n["total_steps_basis"]))
    table.add_row("training time", "unknown" if n["hours"] is None else _duration(n["hours"]))
    price = n["usd_per_hour"]
    cost = _or_unknown(n["cost_usd"], "${:,.2f}")
    table.add_row("cost", cost + (f" at ${price:,.2f}/h" if price is not None else ""))
    return table


def _step_time(n: dict[str, Any]) -> str:
    if n["step_time_s"] is None:
        return "unknown"
    peak_tflops = n["peak_flops_per_s"] / 1e12
    return (
        f"{n['step_time_s']:.3g} s at MFU {n['mfu']:.0%} of {n['devices']} x "
        f"{peak_tflops:,.0f} TFLOP/s"
    )


def _duration(hours: float) -> str:
    if hours >= 1:
        return f"{hours:,.1f} h"
    return f"{hours * 60:.0f} min" if hours * 60 >= 1 else "under a minute"


def _or_unknown(value: float | None, fmt: str) -> str:
    return "unknown" if value is None else fmt.format(value)
