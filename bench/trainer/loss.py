"""The loss of a training step: chunked (trainer.model.chunked_loss) against transformers' way, at
32k and 128k vocabularies, side by side.

Variants (each measurement a fresh process, the order rotated every repetition):

- `HF: materialised`: what `LlamaForCausalLM` does with `labels`: every kept position's logits
  from `lm_head`, `.float()`, then `cross_entropy`
  (trainer.model.chunked_loss.materialised_cross_entropy, which the tests pin to the model's own
  path).
- `ours: chunked`: `linear_cross_entropy` at the trainer's default `loss_chunk_mb`.
- `ours: chunked 32 MB`: the same with `loss_chunk_mb: 32`, for the time-memory trade.

Each process allocates the final hidden states [positions, hidden] and the head's weight
[vocabulary, hidden] (both requiring grad, as in a full fine-tune), then runs forward+backward of
the loss once for memory and `iters` more times for time. Memory is the kernel's high-water mark
of resident memory (`ru_maxrss`) above the resident memory just before that first run: exact,
no sampling, and it counts every allocation torch makes (tracemalloc sees none of them). It
includes the gradients of the hidden states and of the weight, which both variants produce.
fp32 on CPU, as the trainer runs on CPU (bf16 autocast is for GPUs, where the materialised path
also holds the bf16 logits: the ratio there is lower still).

    python -m bench.trainer.loss [--reps N] [--iters N] [--positions N] [--hidden N]
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from typing import Any

from bench.common import Section, rotated, run_json_child, summarize, table

VOCABS = (32_000, 128_000)
SMALL_CHUNK_MB = 32.0
VARIANTS = ("HF: materialised", "ours: chunked", f"ours: chunked {SMALL_CHUNK_MB:g} MB")
AIM_MEMORY_RATIO = 0.5
"""The aim: the loss's peak memory at a 128k vocabulary at most half of HF's."""


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * resource.getpagesize() / 1e6


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3  # KiB on Linux


def measure(variant: str, vocab: int, positions: int, hidden: int, iters: int) -> dict[str, Any]:
    """One process's figures: peak memory growth of the first forward+backward, and the
    seconds of each of `iters` more."""
    import torch

    from trainer.config.schema import LOSS_CHUNK_MB
    from trainer.model.chunked_loss import (
        chunk_rows,
        linear_cross_entropy,
        materialised_cross_entropy,
    )
    from trainer.training.allocator import retain_freed_memory

    retain_freed_memory()  # as the trainer does: freed memory is reused, not faulted back in
    torch.manual_seed(0)
    h = torch.randn(positions, hidden, requires_grad=True)
    w = (torch.randn(vocab, hidden) * hidden**-0.5).requires_grad_()
    targets = torch.randint(0, vocab, (positions,))
    chunk_mb = SMALL_CHUNK_MB if variant == VARIANTS[2] else LOSS_CHUNK_MB

    def step() -> float:
        h.grad = w.grad = None
        if variant.startswith("HF"):
            loss = materialised_cross_entropy(h, w, None, targets)
        else:
            loss = linear_cross_entropy(h, w, None, targets, chunk_rows(vocab, chunk_mb))
        loss.backward()
        return loss.item()

    before = max(_rss_mb(), _peak_rss_mb())
    start = time.perf_counter()
    loss = step()
    first_s = time.perf_counter() - start
    growth = _peak_rss_mb() - before
    times = []
    for _ in range(iters):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return {"peak_growth_mb": growth, "seconds": times or [first_s], "loss": loss}


def run(
    reps: int = 2,
    iters: int = 1,
    positions: int = 2048,
    hidden: int = 128,
    variants: tuple[str, ...] = VARIANTS,
) -> Section:
    results: dict[tuple[str, int], list[dict[str, Any]]] = {
        (v, n): [] for v in variants for n in VOCABS
    }
    for rep in range(reps):
        for variant, vocab in rotated(list(results), rep):
            args = ["--child", variant, str(vocab), str(positions), str(hidden), str(iters)]
            results[(variant, vocab)].append(run_json_child("bench.trainer.loss", args))
    return _report(results, reps, iters, positions, hidden, variants)


def _report(
    results: dict[tuple[str, int], list[dict[str, Any]]],
    reps: int,
    iters: int,
    positions: int,
    hidden: int,
    variants: tuple[str, ...],
) -> Section:
    from trainer.config.schema import LOSS_CHUNK_MB
    from trainer.model.chunked_loss import chunk_rows

    seconds = {k: summarize([s for r in rs for s in r["seconds"]]) for k, rs in results.items()}
    memory = {k: summarize([r["peak_growth_mb"] for r in rs]) for k, rs in results.items()}
    rows = []
    for vocab in VOCABS:
        hf = (VARIANTS[0], vocab)
        for variant in variants:
            key = (variant, vocab)
            rows.append(
                [
                    f"{vocab // 1000}k",
                    variant,
                    *seconds[key].cells("{:.2f}"),
                    f"{seconds[key].median / seconds[hf].median:.2f}",
                    f"{memory[key].median:,.0f}",
                    f"{memory[key].median / memory[hf].median:.2f}",
                ]
            )
    big = VOCABS[-1]
    ratio = memory[(VARIANTS[1], big)].median / memory[(VARIANTS[0], big)].median
    speed = seconds[(VARIANTS[1], big)].median / seconds[(VARIANTS[0], big)].median
    logits_mb = positions * big * 4 / 1e6
    weight_grad_mb = big * hidden * 4 / 1e6
    body = "\n\n".join(
        [
            f"{reps} repetitions x {len(results)} (variant, vocabulary) pairs, each a fresh "
            f"process, order rotated per repetition; {positions:,} positions with a target, "
            f"hidden size {hidden}, fp32 on CPU. Time: "
            + (
                f"{iters} forward+backward per process after the one measured for memory"
                if iters
                else "the forward+backward measured for memory (one per process)"
            )
            + ". Peak: resident high-water mark above the inputs. The default chunk holds "
            f"{chunk_rows(VOCABS[0], LOSS_CHUNK_MB):,} positions at 32k, "
            f"{chunk_rows(big, LOSS_CHUNK_MB):,} at 128k (`loss_chunk_mb: {LOSS_CHUNK_MB:g}`).",
            table(
                [
                    "vocabulary",
                    "variant",
                    "s min",
                    "median",
                    "max",
                    "time / HF",
                    "peak MB (median)",
                    "peak / HF",
                ],
                rows,
            ),
            (
                f"At 128k, the chunked loss peaks at **{ratio:.2f}x** HF's memory (aim: at most "
                f"{AIM_MEMORY_RATIO}x: {'met' if ratio <= AIM_MEMORY_RATIO else 'not met'}) in "
                f"{speed:.2f}x its time. Beyond what any loss must produce (the head's weight "
                f"gradient, {weight_grad_mb:,.0f} MB here, and the hidden states' gradient), it "
                "keeps one chunk's logits (`loss_chunk_mb`) whatever the batch; HF keeps the "
                f"logits of every position ({logits_mb:,.0f} MB in fp32 here), their "
                "log-softmax and their gradient. On a GPU with bf16 the materialised path also "
                "keeps the bf16 logits, and the gap is wider: at 8,192 positions and a 128k "
                "vocabulary, 2 GiB in bf16 plus 4 GiB upcast plus 4 GiB of gradient, against a "
                "chunk of 256 MB."
            ),
        ]
    )
    raw = {f"{v} @ {n}": rs for (v, n), rs in results.items()}
    return Section(
        "Loss: chunked vs materialised logits",
        f"python -m bench.trainer.loss --reps {reps} --iters {iters} --positions {positions} "
        f"--hidden {hidden}",
        body,
        raw=raw,
    )


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":  # one process, for run_json_child
        variant, vocab, positions, hidden, iters = sys.argv[2], *map(int, sys.argv[3:7])
        result = measure(variant, vocab, positions, hidden, iters)
        sys.stdout.flush()
        print(json.dumps(result))  # the last line: what run_json_child reads
        return
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--iters", type=int, default=1)
    parser.add_argument("--positions", type=int, default=2048)
    parser.add_argument("--hidden", type=int, default=128)
    a = parser.parse_args()
    print(run(a.reps, a.iters, a.positions, a.hidden).markdown())


if __name__ == "__main__":
    main()
