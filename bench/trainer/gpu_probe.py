"""Where a step of our trainer goes on a GPU, and the aims `bench.trainer.gpu` had no time left for.

`bench.trainer.gpu`'s first run on an H200 measured our 0.5B full fine-tune at 4% MFU, half HF
Trainer's tokens/s, and ran out of its lease before the 128k loss and the SIGTERM drill. This
script is the short follow-up a lease's remaining minutes allow, each part in a fresh process,
results written after every part:

1. `profile`: our 0.5B step under torch.profiler (steps 3-4 of 5): the ops that take the GPU's
   time and the host's, the kernels launched per step, and how much of the step the GPU was busy.
2. `drill`: `bench.trainer.gpu`'s SIGTERM-and-resume drill (and the undisturbed run made twice).
3. `loss`: the loss alone at a 128k vocabulary under bf16 autocast (the 1.5B model's head,
   8,192 positions): peak GPU memory and time, chunked against materialised logits.
4. `variants`: our 0.5B step with the materialised loss, and with fewer attention buckets, each
   beside the default, so the profile's suspects are confirmed or cleared by a time.

    python -m bench.trainer.gpu_probe [--dry-run] [--output DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.common import REPO, run_json_child
from bench.trainer import gpu
from bench.trainer import trainer_vs_hf as tvh

PROFILE_STEPS = 5
LOSS_POSITIONS = 8192
VARIANTS = {"default": {}, "materialised loss": {"loss_chunk_mb": None}, "bucket cost 512": {}}


def _workload(dry_run: bool, data: str, steps: int) -> tvh.Workload:
    scale = gpu.DRY if dry_run else gpu.FULL
    work = gpu.make_workload(scale, "0.5B full", data)
    return replace(work, steps=steps, warmup=min(work.warmup, steps - 2))


def _train_timed(work: tvh.Workload, overrides: dict[str, Any], on_step: Any = None) -> list[float]:
    """Our trainer over `work`; each step's wall seconds (from the loop's "train" lines)."""
    import logging

    from trainer.config.env import VertexEnv
    from trainer.config.schema import parse_config
    from trainer.training import loop

    timer = tvh.StepTimer()

    class StepEnds(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            message = record.getMessage()
            if message == "training":
                timer.begin()
            elif message == "train":
                timer.step_end()
                if on_step is not None:
                    on_step()

    logging.getLogger("trainer.training.loop").addHandler(StepEnds())
    loop.Trainer._finish = lambda self: None  # type: ignore[method-assign]
    with tempfile.TemporaryDirectory() as out:
        cfg = parse_config(tvh._our_config(gpu.OURS, work, out) | overrides)
        assert loop.train(cfg, VertexEnv.from_environ({})) == 0
    return timer.durations


def profile_child(dry_run: bool, data: str) -> dict[str, Any]:
    import torch
    from torch.profiler import ProfilerActivity, profile

    cuda = torch.cuda.is_available()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    work = _workload(dry_run, data, PROFILE_STEPS)
    prof = profile(activities=activities)
    ended = 0

    def on_step() -> None:  # steps 1-2 warm up (kernel selection, the allocator), 3-4 recorded
        nonlocal ended
        ended += 1
        if ended == 2:
            prof.start()
        elif ended == 4:
            if cuda:
                torch.cuda.synchronize()
            prof.stop()

    durations = _train_timed(work, {}, on_step=on_step)
    events = prof.key_averages()
    device_key = "self_device_time_total" if cuda else "self_cpu_time_total"
    kernels = [e for e in prof.events() if cuda and e.device_type.name == "CUDA"]
    busy_us = sum(e.device_time_total for e in kernels) if cuda else 0.0
    recorded_s = sum(durations[2:4])
    return {
        "step_s": durations,
        "by_device": events.table(sort_by=device_key, row_limit=25, max_name_column_width=60),
        "by_host": events.table(
            sort_by="self_cpu_time_total", row_limit=25, max_name_column_width=60
        ),
        "kernels_per_step": len(kernels) / 2,
        "device_busy_fraction": busy_us / 1e6 / recorded_s if cuda and recorded_s else None,
    }


def variant_child(dry_run: bool, data: str, name: str) -> dict[str, Any]:
    from trainer.data import batches

    if name == "bucket cost 512":
        batches.BUCKET_COST_SLOTS = 512  # read when the trainer plans its buckets
    work = _workload(dry_run, data, 8)
    durations = _train_timed(work, VARIANTS[name])
    timed = durations[3:]
    return {"step_s": durations, "median_step_s": sorted(timed)[len(timed) // 2]}


def loss_child(dry_run: bool) -> dict[str, Any]:
    """Peak memory above the inputs, and seconds, of one forward+backward of the loss."""
    import torch

    from trainer.config.schema import LOSS_CHUNK_MB
    from trainer.model.chunked_loss import chunk_rows

    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    model = gpu.TOY if dry_run else gpu.QWEN_15B_128K
    vocab, hidden = model["vocab_size"], model["hidden_size"]
    positions = 256 if dry_run else LOSS_POSITIONS
    out: dict[str, Any] = {"vocab": vocab, "hidden": hidden, "positions": positions}
    for name in ("materialised", "chunked"):
        torch.manual_seed(0)
        h = torch.randn(positions, hidden, device=device, requires_grad=True)
        w = (torch.randn(vocab, hidden, device=device) * 0.02).requires_grad_()
        t = torch.randint(0, vocab, (positions,), device=device)
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
        _loss_once(name, h, w, t, chunk_rows(vocab, LOSS_CHUNK_MB))
        peak = (torch.cuda.max_memory_allocated() - base) / 1e6 if cuda else None
        start = time.perf_counter()
        for _ in range(3):
            _loss_once(name, h, w, t, chunk_rows(vocab, LOSS_CHUNK_MB))
        if cuda:
            torch.cuda.synchronize()
        out[name] = {"peak_mb": peak, "s": (time.perf_counter() - start) / 3}
    return out


def _loss_once(name: str, h: Any, w: Any, t: Any, rows: int) -> None:
    """Forward+backward of the loss under bf16 autocast on a GPU (fp32 on CPU)."""
    import torch

    from trainer.model.chunked_loss import linear_cross_entropy, materialised_cross_entropy

    with torch.autocast(h.device.type, dtype=torch.bfloat16, enabled=h.is_cuda):
        if name == "chunked":
            loss = linear_cross_entropy(h, w, None, t, rows)
        else:
            loss = materialised_cross_entropy(h, w, None, t)
    loss.backward()
    h.grad = w.grad = None


def child(kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    dry, data = payload["dry_run"], payload.get("data", "")
    if kind == "profile":
        return profile_child(dry, data)
    if kind == "variant":
        return variant_child(dry, data, payload["name"])
    if kind == "loss":
        return loss_child(dry)
    if kind == "drill":
        with tempfile.TemporaryDirectory() as root:
            return gpu.drill_child(gpu.DRY if dry else gpu.FULL, data, root)
    raise ValueError(f"unknown child {kind!r}")


def run(output: Path, dry_run: bool) -> dict[str, Any]:
    output.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {}
    scale = gpu.DRY if dry_run else gpu.FULL
    with tempfile.TemporaryDirectory() as tmp:
        data = str(
            tvh.make_dataset(Path(tmp) / "d.jsonl", scale.records, median_words=scale.median_words)
        )
        parts = [("profile", {}), ("drill", {}), ("loss", {})]
        parts += [(f"variant: {name}", {"name": name}) for name in VARIANTS]
        for key, extra in parts:
            kind = key.split(":")[0]
            body = json.dumps({"dry_run": dry_run, "data": data, **extra})
            try:
                results[key] = run_json_child(
                    "bench.trainer.gpu_probe", ["--child", kind, body], 600
                )
            except (RuntimeError, OSError, ValueError) as e:
                results[key] = {"error": str(e)[-3000:]}
            (output / "probe.json").write_text(json.dumps(results, indent=1, default=str))
            print(f"bench.trainer.gpu_probe: {key} done", file=sys.stderr, flush=True)
    return results


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        result = child(sys.argv[2], json.loads(sys.argv[3]))
        sys.stdout.flush()
        print(json.dumps(result, default=str))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="on CPU at toy sizes")
    parser.add_argument("--output", type=Path, default=Path(os.environ.get("OUT", REPO / "build")))
    a = parser.parse_args()
    run(a.output, a.dry_run)


if __name__ == "__main__":
    main()
