"""Time the training loop is blocked per checkpoint: synchronous vs asynchronous saves.

The trainer's own `Checkpointer` saves the trainer's own `TrainState` (model, AdamW state,
scheduler, data position, RNG) of a ~26M-parameter Llama (about 0.3 GB per checkpoint with the
optimizer state) to a filesystem throttled to GCS-like speed (default 100 MB/s per stream and
50 ms per object; see bench/trainer/throttled_fs.py). Between checkpoints the loop does real
training steps, which is what an async upload overlaps with: by default 20, enough to outlast one
upload, as in real training where checkpoints are minutes apart and uploads take seconds.
"Blocked" is what `Checkpointer.save` returns: for async, staging to CPU memory plus any wait for
the previous upload.

    python -m bench.trainer.checkpoint [--reps N] [--checkpoints N] [--steps-between N]
        [--mb-per-s X]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import REPO, Section, rotated, summarize, table
from bench.trainer.throttled_fs import configure

MODEL = {
    "model_type": "llama",
    "vocab_size": 1024,
    "hidden_size": 512,
    "intermediate_size": 1376,
    "num_hidden_layers": 8,
    "num_attention_heads": 8,
    "num_key_value_heads": 8,
    "max_position_embeddings": 512,
    "tie_word_embeddings": True,
}


def _config(data: str) -> Any:
    from trainer.config.schema import parse_config

    return parse_config(
        {
            "model": {"config": dict(MODEL), "tokenizer": str(REPO / "trainer/examples/tokenizer")},
            "data": {"path": data, "max_seq_length": 128, "packing": True},
            "per_device_train_batch_size": 1,
            "max_steps": 1000,
            "report_to": [],
        }
    )


def _training_state(cfg: Any) -> tuple[Any, Any, Any, dict[str, Any]]:
    import torch

    from trainer.checkpoint.state import Progress, TrainState
    from trainer.data.batches import BatchStream, build_rows
    from trainer.model.loading import build_model, build_tokenizer
    from trainer.training.loop import build_optimizer, build_scheduler

    tokenizer = build_tokenizer(cfg.model)
    rows, _ = build_rows(cfg, tokenizer)
    stream = BatchStream(rows, cfg.per_device_train_batch_size, cfg.seed)
    model = build_model(cfg.model, cfg.seed)
    optimizer = build_optimizer(model, cfg, torch.device("cpu"))
    scheduler = build_scheduler(optimizer, cfg, cfg.max_steps)
    state = {"train": TrainState(model, optimizer, scheduler, stream, Progress())}
    return model, optimizer, stream, state


def measure(mode: str, cfg: Any, parts: tuple, root: Path, checkpoints: int, between: int):
    """Blocked seconds per checkpoint and the wall seconds of the whole segment."""
    import torch

    from trainer.checkpoint.store import Checkpointer
    from trainer.training.loop import train_step

    model, optimizer, stream, state = parts
    checkpointer = Checkpointer(f"throttled://{root}", keep=2, async_save=mode == "async")
    blocked = []
    start = time.perf_counter()
    for i in range(checkpoints):
        for _ in range(between):
            train_step(model, stream, optimizer, cfg, torch.device("cpu"))
        blocked.append(checkpointer.save(i + 1, state, blocking=mode == "sync"))
    for _ in range(between):  # the steps after the last save overlap its upload too
        train_step(model, stream, optimizer, cfg, torch.device("cpu"))
    tail = time.perf_counter()
    checkpointer.wait()
    return blocked, time.perf_counter() - start, time.perf_counter() - tail


def run(reps: int = 2, checkpoints: int = 3, between: int = 20, mb_per_s: float = 100.0):
    import torch
    import torch.distributed as dist

    from trainer.model.loading import count_parameters

    configure(mb_per_s * 1e6, 0.05)
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    scratch = Path(tempfile.mkdtemp(prefix="vtx-bench-ckpt-"))
    try:
        cfg = _config(str(REPO / "trainer/examples/data/tiny.jsonl"))
        parts = _training_state(cfg)
        train_step_warmup(parts, cfg)
        n_params = count_parameters(parts[0])[0]
        blocked: dict[str, list[float]] = {"sync": [], "async": []}
        walls: dict[str, list[float]] = {"sync": [], "async": []}
        for rep in range(reps):
            for mode in rotated(["sync", "async"], rep):
                root = scratch / f"{mode}-{rep}"
                b, wall, _ = measure(mode, cfg, parts, root, checkpoints, between)
                blocked[mode] += b
                walls[mode].append(wall)
        last = sorted((scratch / "sync-0").glob("step-*"))[-1]
        size_mb = sum(p.stat().st_size for p in last.iterdir()) / 1e6
    finally:
        dist.destroy_process_group()
        shutil.rmtree(scratch, ignore_errors=True)
    stats = {m: summarize(v) for m, v in blocked.items()}
    wall = {m: summarize(v) for m, v in walls.items()}
    ratio = stats["sync"].median / max(stats["async"].median, 1e-9)
    rows = [
        [m, len(blocked[m]), *stats[m].cells("{:.3f}"), *wall[m].cells("{:.1f}")]
        for m in ("sync", "async")
    ]
    body = "\n\n".join(
        [
            f"{n_params / 1e6:.1f}M parameters, {size_mb:.0f} MB of checkpoint data per save, "
            f"writer throttled to {mb_per_s:g} MB/s and 50 ms per object; {checkpoints} "
            f"checkpoints per segment, {between} training steps (batch 1 x 128 tokens) between "
            f"them; {reps} repetitions, modes alternated; torch threads: "
            f"{torch.get_num_threads()}.",
            table(
                [
                    "mode",
                    "checkpoints",
                    "blocked min s",
                    "blocked median s",
                    "blocked max s",
                    "segment min s",
                    "segment median s",
                    "segment max s",
                ],
                rows,
            ),
            f"Blocked time ratio, sync / async (medians): **{ratio:.1f}x**.",
            (
                f"What it means: with synchronous saves every checkpoint stops training for "
                f"{stats['sync'].median:.2f} s (the upload); async saves stop it for "
                f"{stats['async'].median:.2f} s (a copy to CPU memory) and upload while the "
                f"next steps run (a save also waits for the previous upload if the steps "
                f"between two saves are shorter than one upload). At one checkpoint every few "
                f"minutes the difference decides whether frequent checkpoints (and so little "
                f"lost work on preemption) are affordable. Async needs a second copy of the "
                f"state in host memory."
            ),
        ]
    )
    command = (
        f"python -m bench.trainer.checkpoint --reps {reps} --checkpoints {checkpoints} "
        f"--steps-between {between} --mb-per-s {mb_per_s:g}"
    )
    return Section("Checkpoint: loop blocked, sync vs async", command, body, raw=blocked)


def train_step_warmup(parts: tuple, cfg: Any) -> None:
    """One step first: AdamW creates its state lazily, and the first step pays allocations."""
    import torch

    from trainer.training.loop import train_step

    model, optimizer, stream, _ = parts
    train_step(model, stream, optimizer, cfg, torch.device("cpu"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--checkpoints", type=int, default=3)
    parser.add_argument("--steps-between", type=int, default=20)
    parser.add_argument("--mb-per-s", type=float, default=100.0)
    a = parser.parse_args()
    print(run(a.reps, a.checkpoints, a.steps_between, a.mb_per_s).markdown())


if __name__ == "__main__":
    main()
