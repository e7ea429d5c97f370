"""GPU facts the trainer needs: dense bf16 peak FLOP/s (for MFU and `--estimate`'s step time)
and memory per device (for `--estimate`'s verdict). No torch: `trainer.config.arguments` checks
`--accelerator` against this table before torch loads.

`ACCELERATORS` is a copy of the GPUs of jobs/core/catalog/accelerators.yaml (the trainer ships alone
and imports nothing of ours): tests/contracts/test_trainer_copies.py fails when a catalog GPU is
missing here, or its memory differs. Prices are not copied: they stay on the platform's side
(`vtx cost`), and reach `--estimate` as `--usd-per-hour`.
"""

from __future__ import annotations

from dataclasses import dataclass

# Dense bf16 peak FLOP/s per device, from the vendors' datasheets (no sparsity; SXM parts where
# there are two, which is what Vertex attaches). T4 and V100 have no bf16: their fp16
# tensor-core peak is listed, the ceiling of what they can do.
PEAK_FLOPS_PER_S = {
    "B200": 2250e12,
    "H200": 989e12,
    "H100": 989e12,
    "A100": 312e12,
    "L4": 121e12,
    "V100": 125e12,
    "T4": 65e12,
}
DEFAULT_MFU = 0.35
"""`--estimate`'s assumed fraction of the peak: dense-transformer fine-tunes with bf16 and fused
kernels commonly reach 30-45% on A100/H100; small models and LoRA reach less. Stated in every
estimate, and overridden with `--mfu`."""


@dataclass(frozen=True)
class Accelerator:
    memory_gib: int
    chip: str
    """Key of PEAK_FLOPS_PER_S."""

    @property
    def peak_flops_per_s(self) -> float:
        return PEAK_FLOPS_PER_S[self.chip]


# Vertex accelerator types (the `machineSpec.acceleratorType` enum names).
ACCELERATORS = {
    "NVIDIA_TESLA_T4": Accelerator(16, "T4"),
    "NVIDIA_TESLA_V100": Accelerator(16, "V100"),
    "NVIDIA_L4": Accelerator(24, "L4"),
    "NVIDIA_TESLA_A100": Accelerator(40, "A100"),
    "NVIDIA_A100_80GB": Accelerator(80, "A100"),
    "NVIDIA_H100_80GB": Accelerator(80, "H100"),
    "NVIDIA_H100_MEGA_80GB": Accelerator(80, "H100"),
    "NVIDIA_H200_141GB": Accelerator(141, "H200"),
    "NVIDIA_B200": Accelerator(180, "B200"),
}


def peak_flops_per_s(device_name: str) -> float | None:
    """Peak for a CUDA device name such as 'NVIDIA H100 80GB HBM3'; None when unknown (CPU)."""
    for key in sorted(PEAK_FLOPS_PER_S, key=len, reverse=True):
        if key in device_name.upper():
            return PEAK_FLOPS_PER_S[key]
    return None
