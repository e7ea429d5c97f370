"""`--estimate`: sizes, memory per device and tokens per step, without loading weights.

The model is built on the meta device from its config alone (shapes only; from a gs:// prefix
only config.json is downloaded), so a 70B model is estimated in seconds on a laptop. Memory
model, per device, in bytes:
    weights 4/param (fp32 master copy; bf16 autocast keeps it)
  + grads 4 and AdamW moments 8 per *trainable* param
  (all three divided by the device count under FSDP), plus activations:
    ~34 * hidden bytes per token per layer (Korthikanti et al. 2022, bf16, flash attention),
    ~2 * hidden with gradient checkpointing (only each block's input is kept).
An estimate, not a promise: allocator fragmentation and the logits (vocab * tokens * 4) add more.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from trainer.config import TrainConfig
from trainer.model import build_skeleton, count_parameters

# Memory per device in GiB for Vertex accelerator types (Vertex enum names): the GPUs of
# jobs/catalog/accelerators.yaml (the trainer ships alone; tests/contracts/ pins the copy).
ACCELERATOR_MEMORY_GIB = {
    "NVIDIA_TESLA_T4": 16,
    "NVIDIA_TESLA_V100": 16,
    "NVIDIA_L4": 24,
    "NVIDIA_TESLA_A100": 40,
    "NVIDIA_A100_80GB": 80,
    "NVIDIA_H100_80GB": 80,
    "NVIDIA_H100_MEGA_80GB": 80,
    "NVIDIA_H200_141GB": 141,
    "NVIDIA_B200": 180,
}
GIB = 2**30


def estimate(cfg: TrainConfig, devices: int) -> dict[str, float]:
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
        "tokens_per_optimizer_step": tokens_per_micro * cfg.gradient_accumulation_steps * devices,
    }


def print_estimate(cfg: TrainConfig, accelerator: str, devices: int) -> None:
    numbers = estimate(cfg, devices)
    capacity = ACCELERATOR_MEMORY_GIB.get(accelerator)
    table = Table(title=f"estimate for {devices} x {accelerator}", show_header=False)
    table.add_row("parameters", f"{numbers['parameters']:,.0f}")
    table.add_row("trainable parameters", f"{numbers['trainable_parameters']:,.0f}")
    table.add_row(
        "weights+grads+AdamW per device", f"{numbers['weights_grads_optimizer_gib']:.2f} GiB"
    )
    table.add_row("activations+logits per device", f"{numbers['activations_gib']:.2f} GiB")
    verdict = ""
    if capacity:
        fits = numbers["memory_per_device_gib"] <= 0.9 * capacity
        verdict = f" of {capacity} GiB ({'fits' if fits else 'does NOT fit'})"
    table.add_row("memory per device", f"{numbers['memory_per_device_gib']:.2f} GiB{verdict}")
    table.add_row("tokens per optimizer step (max)", f"{numbers['tokens_per_optimizer_step']:,}")
    Console().print(table)
