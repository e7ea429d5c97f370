"""Bucketed causal attention on CPU (trainer.model.attention): the shipped path against the ones
tried, side by side, alone and inside a whole training step.

Variants (alternated in one process, the order rotated every repetition):

- `ours: one split`: `trainer.model.attention.segment_attention` as shipped: the row's query, key
  and value split once into buckets, one `scaled_dot_product_attention(is_causal=True)` call per
  bucket.
- `before: slice per bucket`: the previous implementation, kept here to measure against:
  `query[0, :, span]` per bucket. Its forward is the same; its backward is not, since autograd
  turns every slice's gradient into a zero tensor as large as the whole row (fill, copy, add),
  three tensors per bucket per layer.
- `matmul ≤ 256`: a plain matmul path below a size: for buckets of at most 256
  tokens, q @ kᵀ (grouped query heads share their key-value head without a copy) + a cached
  -inf upper triangle, softmax, @ v; sdpa above. Tried and left out (see the tables).

Merging buckets into fewer calls is not a variant: one sdpa call's fixed cost (~0.07 ms
forward+backward at head_dim 16 on one core, measured on a bucket of one 8-token example) is
worth about 5 padding slots of a tiny-model step, and `trainer.data.batches.plan_buckets` already
trades calls against padding when it forms buckets; buckets of equal length never occur in its
plans.

Sizes:
- tiny: tiny.yaml's Llama (hidden 64, 4 heads, 2 key-value heads, head_dim 16, 2 layers),
  batches of 8 packed rows of 256 tokens from `bench.trainer.trainer_vs_hf`'s data (log-normal
  lengths, median ~60).
- large: attention alone at hidden 1024's shape (16 heads, 8 key-value heads, head_dim 64),
  2 packed rows of 2048; the whole step at hidden 512 (8 heads, 4 key-value heads, head_dim 64,
  intermediate 1536, 2 layers), 2 packed rows of 1024. Examples' median length is ~23% of the
  row, as in `bench.trainer.scaling`.

Figures: forward+backward of one layer's attention (random query/key/value in the layout
Llama's projections give, over a few collated layouts), and whole training steps (forward,
summed cross-entropy over the target tokens, backward, fused AdamW), in ms, min/median/max over
repetitions of wall time, with the median of process CPU time beside it (at `--threads 1` it
is the work itself, which other processes on the machine barely change; at 2 threads it also
counts threads spinning while they wait for each other). Speed-ups compare medians and, where
other work disturbs the machine in bursts, minima (the least disturbed repetitions). fp32, as
the trainer runs on CPU. Everything runs in one child process: it swaps transformers' attention
registration between variants and sets the trainer's malloc thresholds, neither of which should
outlive it.

    python -m bench.trainer.attention [--reps N] [--steps N] [--tiny-only] [--threads N]
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.common import Section, load_average, rotated, run_json_child, summarize, table
from bench.trainer.trainer_vs_hf import TINY, make_dataset, model_config

if TYPE_CHECKING:
    import torch

    from trainer.data.batches import Batch

OURS, SLICED, MATMUL = "ours: one split", "before: slice per bucket", "matmul ≤ 256"
VARIANTS = (OURS, SLICED, MATMUL)
MATMUL_MAX_LENGTH = 256


@dataclass(frozen=True)
class Size:
    name: str
    hidden: int
    heads: int
    kv_heads: int
    intermediate: int
    layers: int
    seq: int
    rows: int
    """Packed rows of `seq` tokens per batch."""
    layouts: int
    """Distinct collated batches, cycled through, so no one layout decides."""

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    def model(self) -> dict[str, Any]:
        config = dict(model_config())
        config.update(
            hidden_size=self.hidden,
            num_attention_heads=self.heads,
            num_key_value_heads=self.kv_heads,
            intermediate_size=self.intermediate,
            num_hidden_layers=self.layers,
            max_position_embeddings=self.seq,
        )
        return config


TINY_SIZE = Size("tiny (hidden 64, rows 8 x 256)", 64, 4, 2, 128, 2, 256, 8, layouts=4)
LARGE_ATTENTION = Size("hidden 1024 shape, rows 2 x 2048", 1024, 16, 8, 2816, 8, 2048, 2, 2)
LARGE_STEP = Size("hidden 512, 2 layers, rows 2 x 1024", 512, 8, 4, 1536, 2, 1024, 2, 2)
LARGE_STEPS = 1
"""Timed steps per turn at LARGE_STEP, whatever --steps says: one takes seconds on 2 cores."""


# ---------------------------------------------------------------- the variants


def sliced_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    vtx_buckets: tuple[tuple[int, int], ...] = (),
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """trainer.model.attention.segment_attention before the split: an index and a slice per
    bucket."""
    import torch
    import torch.nn.functional as F

    _, heads, _, dim = query.shape
    outputs, start = [], 0
    for n, length in vtx_buckets:
        span = slice(start, start + n * length)
        start += n * length
        q, k, v = (
            t[0, :, span].unflatten(1, (n, length)).transpose(0, 1) for t in (query, key, value)
        )
        out = F.scaled_dot_product_attention(
            q, k, v, dropout_p=dropout, is_causal=True, scale=scaling,
            enable_gqa=key.shape[1] != heads,
        )  # fmt: skip
        outputs.append(out.transpose(1, 2).reshape(1, n * length, heads, dim))
    return torch.cat(outputs, dim=1), None


@functools.lru_cache(maxsize=64)
def _causal_mask(length: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    import torch

    return torch.full((length, length), -math.inf, dtype=dtype, device=device).triu(1)


def _matmul_causal(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    """q [n, heads, L, d], k/v [n, kv_heads, L, d] -> [n, heads, L, d]: the query heads of a
    group stacked along L, so each group's key-value head is used as is."""
    n, heads, length, dim = q.shape
    kv_heads = k.shape[1]
    group = heads // kv_heads
    q = q.reshape(n * kv_heads, group * length, dim)
    k = k.reshape(n * kv_heads, length, dim)
    scores = (q @ k.transpose(1, 2)).view(n * kv_heads, group, length, length)
    scores = scores * scale + _causal_mask(length, q.dtype, q.device)
    weights = scores.softmax(-1).view(n * kv_heads, group * length, length)
    return (weights @ v.reshape(n * kv_heads, length, dim)).view(n, heads, length, dim)


def matmul_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    vtx_buckets: tuple[tuple[int, int], ...] = (),
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """The shipped split, with explicit matmuls for buckets of at most MATMUL_MAX_LENGTH."""
    import torch
    import torch.nn.functional as F

    _, heads, _, dim = query.shape
    scale = scaling if scaling is not None else dim**-0.5
    sizes = [n * length for n, length in vtx_buckets]
    parts = (t.squeeze(0).split(sizes, dim=1) for t in (query, key, value))
    outputs = []
    for (n, length), *qkv in zip(vtx_buckets, *parts, strict=True):
        q, k, v = (t.unflatten(1, (n, length)).transpose(0, 1) for t in qkv)
        if length <= MATMUL_MAX_LENGTH:
            out = _matmul_causal(q, k, v, scale)
        else:
            out = F.scaled_dot_product_attention(
                q, k, v, is_causal=True, scale=scale, enable_gqa=key.shape[1] != heads
            )
        outputs.append(out.transpose(1, 2).reshape(n * length, heads, dim))
    return torch.cat(outputs).unsqueeze(0), None


def attention_function(variant: str) -> Callable[..., tuple[torch.Tensor, None]]:
    from trainer.model.attention import segment_attention

    return {OURS: segment_attention, SLICED: sliced_attention, MATMUL: matmul_attention}[variant]


# ---------------------------------------------------------------- data


def batches(size: Size, count: int, workdir: Path) -> list[Batch]:
    """`count` collated batches of `size.rows` packed rows from the bench's synthetic data."""
    import random

    from trainer.config.schema import DataConfig, ModelConfig
    from trainer.data.batches import collate, pack_rows, read_records, tokenize_records
    from trainer.model.loading import build_tokenizer

    median_words = 45.0 * size.seq / 256  # median ~23% of the row, as bench.trainer.scaling
    # twice the tokens the batches need: packing leaves the last rows part-empty
    records = max(400, int(2 * count * size.rows * size.seq / (1.33 * median_words)))
    path = make_dataset(workdir / f"data-{size.seq}.jsonl", records, 0, median_words)
    tokenizer = build_tokenizer(
        ModelConfig(config={"model_type": "llama"}, tokenizer=str(TINY / "tokenizer"))
    )
    cfg = DataConfig(path=str(path), max_seq_length=size.seq)
    examples = tokenize_records(read_records(str(path)), tokenizer, cfg, str(path))
    rows = pack_rows(examples, size.seq)
    random.Random(0).shuffle(rows)
    return [collate(rows[i * size.rows : (i + 1) * size.rows], 0) for i in range(count)]


# ---------------------------------------------------------------- measuring

Times = dict[str, dict[str, list[float]]]
"""variant -> {"wall": [ms per repetition], "cpu": [ms per repetition]}"""


class Clock:
    """Wall and process CPU ms since it started. CPU time is less disturbed by other work on
    the machine; at one thread it is the work itself."""

    def __init__(self) -> None:
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def record(self, into: dict[str, list[float]], per: int) -> None:
        into["wall"].append((time.perf_counter() - self.wall) * 1e3 / per)
        into["cpu"].append((time.process_time() - self.cpu) * 1e3 / per)


def _empty() -> Times:
    return {v: {"wall": [], "cpu": []} for v in VARIANTS}


def _attention_inputs(size: Size, batch: Batch) -> tuple[torch.Tensor, ...]:
    """Query, key, value in the layout Llama's projections give ([1, heads, T, d] views of a
    [1, T, heads, d] tensor), and an output gradient."""
    import torch

    def projected(heads: int) -> torch.Tensor:
        return torch.randn(1, batch.n_slots, heads, size.head_dim).transpose(1, 2).requires_grad_()

    grad = torch.randn(1, batch.n_slots, size.heads, size.head_dim)
    return projected(size.heads), projected(size.kv_heads), projected(size.kv_heads), grad


def _attention_pass(variant: str, size: Size, layouts: list[Batch], inputs: list[Any]) -> None:
    """One layer's attention forward+backward on every layout."""
    attention = attention_function(variant)
    for batch, (q, k, v, grad) in zip(layouts, inputs, strict=True):
        out, _ = attention(
            None, q, k, v, None, scaling=size.head_dim**-0.5, vtx_buckets=batch.buckets
        )
        out.backward(grad)
        q.grad = k.grad = v.grad = None


def measure_attention(size: Size, layouts: list[Batch], reps: int) -> Times:
    """ms per layout of one layer's attention forward+backward."""
    inputs = [_attention_inputs(size, b) for b in layouts]
    for variant in VARIANTS:  # warm-up: first calls allocate and pick kernels
        _attention_pass(variant, size, layouts, inputs)
    times = _empty()
    for rep in range(reps):
        for variant in rotated(VARIANTS, rep):
            clock = Clock()
            _attention_pass(variant, size, layouts, inputs)
            clock.record(times[variant], len(layouts))
    return times


def _step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, batch: Batch) -> None:
    import torch.nn.functional as F

    logits = model(
        input_ids=batch.input_ids,
        position_ids=batch.position_ids,
        vtx_buckets=batch.buckets,
        logits_to_keep=batch.target_index,
    ).logits
    loss = F.cross_entropy(logits[0], batch.targets[0, batch.target_index], reduction="sum")
    (loss / batch.n_targets).backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def measure_steps(size: Size, layouts: list[Batch], reps: int, steps: int) -> Times:
    """ms of each training step, each variant `steps` steps a turn, after one untimed step
    each."""
    import torch
    from transformers import AttentionInterface

    from trainer.config.schema import ModelConfig
    from trainer.model.attention import NAME
    from trainer.model.loading import build_model

    model = build_model(ModelConfig(config=size.model(), tokenizer=str(TINY / "tokenizer")), 0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)

    def use(variant: str) -> None:
        # transformers looks the attention function up by name at every forward
        AttentionInterface.register(NAME, torch.compiler.disable(attention_function(variant)))

    for variant in VARIANTS:
        use(variant)
        _step(model, optimizer, layouts[-1])
    times = _empty()
    for rep in range(reps):
        for variant in rotated(VARIANTS, rep):
            use(variant)
            for i in range(steps):  # each step a sample: bursts of other work hit few
                clock = Clock()
                _step(model, optimizer, layouts[i % len(layouts)])
                clock.record(times[variant], 1)
    return times


def child(reps: int, steps: int, large: bool, threads: int | None) -> dict[str, Any]:
    """Every measurement, in this (child) process."""
    import torch

    from trainer.training.allocator import retain_freed_memory

    retain_freed_memory()  # as the trainer does
    if threads:
        torch.set_num_threads(threads)
    torch.manual_seed(0)
    alone = (TINY_SIZE, LARGE_ATTENTION) if large else (TINY_SIZE,)
    whole = (TINY_SIZE, LARGE_STEP) if large else (TINY_SIZE,)
    with tempfile.TemporaryDirectory() as tmp:
        layouts = {s: batches(s, s.layouts, Path(tmp)) for s in {*alone, *whole}}
    return {
        "threads": torch.get_num_threads(),
        "buckets": {s.name: [len(b.buckets) for b in layouts[s]] for s in layouts},
        "attention": {s.name: measure_attention(s, layouts[s], reps) for s in alone},
        "step": {
            s.name: measure_steps(s, layouts[s], reps, LARGE_STEPS if s == LARGE_STEP else steps)
            for s in whole
        },
    }


# ---------------------------------------------------------------- report

HEADER = [
    "size",
    "variant",
    "wall min ms",
    "wall median ms",
    "wall max ms",
    "CPU median ms",
    "speed-up vs before: wall median",
    "wall min",
    "CPU median",
]


def _speed_up(before: dict[str, list[float]], measured: dict[str, list[float]]) -> list[float]:
    """before / variant: wall medians, wall minima, CPU medians."""
    return [
        statistics.median(before["wall"]) / statistics.median(measured["wall"]),
        min(before["wall"]) / min(measured["wall"]),
        statistics.median(before["cpu"]) / statistics.median(measured["cpu"]),
    ]


def _rows(times: dict[str, Times]) -> list[list[str]]:
    rows = []
    for size, by_variant in times.items():
        for variant, measured in by_variant.items():
            ratios = _speed_up(by_variant[SLICED], measured)
            rows.append(
                [
                    size,
                    variant,
                    *summarize(measured["wall"]).cells("{:.2f}"),
                    f"{statistics.median(measured['cpu']):.2f}",
                    *(f"{r:.2f}x" for r in ratios),
                ]
            )
    return rows


def _verdict(raw: dict[str, Any]) -> str:
    """What the figures say, from their medians: the paragraph follows the measurement."""
    alone, step = raw["attention"][TINY_SIZE.name], raw["step"][TINY_SIZE.name]
    split, split_step = (
        _speed_up(alone[SLICED], alone[OURS])[0],
        _speed_up(step[SLICED], step[OURS])[0],
    )
    matmul = _speed_up(alone[OURS], alone[MATMUL])[0]
    return (
        "Splitting the row once instead of slicing it per bucket leaves the sdpa calls as they "
        "were (bit-identical results and gradients: tests/trainer/model/test_attention_paths.py) "
        "and removes the zero-filled, row-sized gradient autograd built for every slice: on the "
        f"tiny model the attention runs {split:.2f}x as fast and a whole step {split_step:.2f}x "
        "(wall medians; the attention is a fraction of a step). The explicit-matmul path for "
        f"buckets of at most {MATMUL_MAX_LENGTH} tokens runs at {matmul:.2f}x the split's speed "
        "on the tiny model; it writes and reads whole score and probability matrices in both "
        "passes, where sdpa's kernel works block by block, and calls more operators per bucket."
    )


def run(reps: int = 5, steps: int = 5, large: bool = True, threads: int | None = None) -> Section:
    load_before, started = load_average()[0], time.perf_counter()
    raw = run_json_child(
        "bench.trainer.attention", ["--child", json.dumps([reps, steps, large, threads])]
    )
    load_after = load_average()[0]
    body = "\n\n".join(
        [
            f"{reps} repetitions, variants alternated in one process ({raw['threads']} torch "
            f"threads, fp32); training steps timed one by one, {steps} per turn on the tiny "
            f"model, {LARGE_STEPS} at the large size. Load average {load_before:.1f} -> "
            f"{load_after:.1f} on {os.cpu_count()} cores; {time.perf_counter() - started:.0f} s. "
            "Buckets per batch: "
            + ", ".join(f"{name}: {counts}" for name, counts in raw["buckets"].items())
            + ".",
            "**One layer's attention, forward+backward** (ms per batch)",
            table(HEADER, _rows(raw["attention"])),
            "**Whole training step** (forward, loss, backward, AdamW; ms per step)",
            table(HEADER, _rows(raw["step"])),
            _verdict(raw),
        ]
    )
    command = _command(reps, steps, large, threads)
    return Section("Attention on CPU: bucketed sdpa paths", command, body, raw)


def _command(reps: int, steps: int, large: bool, threads: int | None) -> str:
    command = f"python -m bench.trainer.attention --reps {reps} --steps {steps}"
    command += "" if large else " --tiny-only"
    return command + (f" --threads {threads}" if threads else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--tiny-only", action="store_true", help="skip the large sizes")
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(*json.loads(args.child))))
        return
    section = run(args.reps, args.steps, not args.tiny_only, args.threads)
    print(section.markdown())


if __name__ == "__main__":
    main()
