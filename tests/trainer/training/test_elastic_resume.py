"""Resume on another number of processes (a capacity ladder's rung with other GPUs): the same
global batch, every example exactly once per epoch, and the loss curve of an uninterrupted run.

Multi-process runs are real gloo process groups of spawned processes, each training in-process
(`trainer.training.loop.train`) as torchrun's workers would; one-process runs train in this process.
Every run records, per micro-batch, the global batch it took (the stream's position) and the
examples in it, so a whole run (both attempts) can be compared with an uninterrupted one example by
example.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import shutil
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import trainer.data.batches
from jobs.local.plumbing.ports import free_port
from tests.conftest import HANG_S
from tests.trainer.conftest import (
    assert_bit_identical,
    final_weights,
    read_json_lines,
    tiny_config,
    write_small_dataset,
)
from trainer.config.env import VertexEnv
from trainer.config.schema import parse_config
from trainer.data.batches import Batch, BatchStream, Row
from trainer.training.loop import EXIT_PREEMPTED, SIGTERM_AFTER_STEP_ENV, train

pytestmark = pytest.mark.slow  # spawns processes

TIMEOUT_S = HANG_S
STEPS = 14
STOP_AFTER = 5
"""The interrupted attempt stops after this step: mid-epoch (10 steps an epoch, see `_config`),
and the resumed attempt crosses into the second epoch."""
LOSS_RTOL = 1e-4
"""How far a resumed run's loss may stray from the uninterrupted run's once the process count
changed. Not bit-identical: the same gradient is summed in another order (one process
accumulating two micro-batches, or DDP's all-reduce of two ranks' gradients), which moves fp32
results by a few ulps (~1e-7 relative); nine AdamW steps later that stays ~1e-6 (measured: see
trainer/README.md), while one step of training moves the loss by ~1e-2. 1e-4 catches a wrong
batch, a wrong accumulation or a lost optimizer state, none of which stays within 1e-3."""


def _config(data: Path, output_dir: Path, **overrides: Any) -> dict[str, Any]:
    """40 unpacked examples in batches of 2 rows: 20 global batches (10 steps) per epoch."""
    return tiny_config(
        str(data),
        str(output_dir),
        **{
            "data.packing": False,
            "max_steps": STEPS,
            "save_steps": None,
            "async_save": False,
            **overrides,
        },
    )


# ------------------------------------------------------------------ recording what a run saw


def _example_id(example: trainer.data.batches.Example) -> str:
    return hashlib.sha1(json.dumps(example.input_ids).encode()).hexdigest()[:16]


def record_batches(patch: Callable[[Any, str, Any], None]) -> dict[int, list[str]]:
    """Patch the stream so that each micro-batch taken is recorded as {global batch: example
    ids}; `patch(owner, name, value)` sets an attribute (monkeypatch.setattr, or setattr)."""
    seen: dict[int, list[str]] = {}
    last_rows: list[list[Row]] = []
    collate, next_batch = trainer.data.batches.collate, BatchStream.__next__

    def recording_collate(rows: list[Row], pad_id: int, bucket_cost: int) -> Batch:
        last_rows.append(rows)
        return collate(rows, pad_id, bucket_cost)

    def recording_next(stream: BatchStream) -> Batch:
        position = stream.position + stream.rank
        batch = next_batch(stream)
        seen[position] = sorted(_example_id(e) for row in last_rows.pop() for e in row.examples)
        return batch

    patch(trainer.data.batches, "collate", recording_collate)
    patch(BatchStream, "__next__", recording_next)
    return seen


# ------------------------------------------------------------------ runs


def _worker(
    rank: int, world_size: int, port: int, cfg: dict[str, Any], out: str, stop: int
) -> None:
    """One spawned rank: torchrun's environment, its output to files, then `train`."""
    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(world_size),
        TORCHELASTIC_RUN_ID="elastic-test",
    )
    if stop:
        os.environ[SIGTERM_AFTER_STEP_ENV] = str(stop)
    import torch

    torch.set_num_threads(1)  # two ranks on a shared CI machine
    log = open(f"{out}/rank{rank}.log", "w")  # noqa: SIM115 (open for the process's lifetime)
    os.dup2(log.fileno(), sys.stdout.fileno())
    os.dup2(log.fileno(), sys.stderr.fileno())
    seen = record_batches(setattr)
    code = train(parse_config(cfg), VertexEnv.from_environ({}))
    Path(f"{out}/rank{rank}.json").write_text(json.dumps(seen))
    sys.stdout.flush()
    sys.exit(code)


class Attempt:
    """What one attempt of a run did: its exit code, log events (rank 0) and batches."""

    def __init__(self, code: int, events: list[dict[str, Any]], seen: dict[int, list[str]]):
        self.code, self.events, self.seen = code, events, seen

    def losses(self) -> dict[int, float]:
        return {e["step"]: e["loss"] for e in self.events if e.get("message") == "train"}


def run_processes(cfg: dict[str, Any], world_size: int, out: Path, stop: int = 0) -> Attempt:
    out.mkdir(parents=True, exist_ok=True)
    # Ranks fork from a server that imported torch and the trainer once: a fresh interpreter
    # per rank spends seconds on imports; forking this test process would copy its thread
    # pools and process-group leftovers.
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([__name__, "transformers.models.llama.modeling_llama"])
    port = free_port()
    procs = [
        context.Process(target=_worker, args=(rank, world_size, port, cfg, str(out), stop))
        for rank in range(world_size)
    ]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(TIMEOUT_S)
        if proc.exitcode is None:
            proc.kill()
    logs = [(out / f"rank{r}.log").read_text() for r in range(world_size)]
    codes = {proc.exitcode for proc in procs}
    assert len(codes) == 1, f"ranks ended differently: {codes}\n" + logs[0][-3000:]
    seen: dict[int, list[str]] = {}
    for path in out.glob("rank*.json"):  # none when the run stopped on an error
        seen.update({int(k): v for k, v in json.loads(path.read_text()).items()})
    return Attempt(codes.pop(), read_json_lines(logs[0]), seen)


def run_here(
    cfg: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    stop: int = 0,
) -> Attempt:
    """One process, in this one."""
    with monkeypatch.context() as patch:
        seen = record_batches(patch.setattr)
        if stop:
            patch.setenv(SIGTERM_AFTER_STEP_ENV, str(stop))
        capsys.readouterr()
        code = train(parse_config(cfg), VertexEnv.from_environ({}))
        return Attempt(code, read_json_lines(capsys.readouterr().out), seen)


# ------------------------------------------------------------------ checks


def assert_same_examples_once_per_epoch(straight: Attempt, *attempts: Attempt) -> None:
    """The attempts together took every global batch of the uninterrupted run once, with the
    same examples, and each epoch saw each example exactly once."""
    taken = [position for attempt in attempts for position in attempt.seen]
    assert sorted(taken) == sorted(straight.seen), "a global batch was repeated or skipped"
    combined = {p: ids for attempt in attempts for p, ids in attempt.seen.items()}
    assert combined == straight.seen
    all_ids = Counter(i for ids in combined.values() for i in ids)
    assert all_ids == Counter(i for ids in straight.seen.values() for i in ids)
    per_epoch = 20
    for start in range(0, len(combined), per_epoch):
        epoch = [i for p in range(start, start + per_epoch) for i in combined.get(p, [])]
        assert len(epoch) == len(set(epoch)), "an example was seen twice in one epoch"
    assert len(set(all_ids)) == 40, "the 40 examples are distinct"


def assert_loss_continues(straight: Attempt, first: Attempt, resumed: Attempt) -> None:
    expected = straight.losses()
    before, after = first.losses(), resumed.losses()
    # The stopping step is logged before its checkpoint: no step is missing, none repeated.
    assert sorted(before) == list(range(1, STOP_AFTER + 1))
    assert sorted(after) == list(range(STOP_AFTER + 1, STEPS + 1))
    assert all(before[s] == expected[s] for s in before), "the same run up to the stop"
    for step, loss in after.items():
        assert loss == pytest.approx(expected[step], rel=LOSS_RTOL), (step, loss, expected[step])


def assert_losses_close(straight: Attempt, *attempts: Attempt) -> None:
    expected = straight.losses()
    losses = {step: loss for attempt in attempts for step, loss in attempt.losses().items()}
    steps = sorted(step for attempt in attempts for step in attempt.losses())
    assert steps == list(range(1, STEPS + 1)), "a step is missing or logged twice"
    for step, loss in losses.items():
        assert loss == pytest.approx(expected[step], rel=LOSS_RTOL), (step, loss, expected[step])


def _change_line(attempt: Attempt) -> dict[str, Any]:
    (line,) = [e for e in attempt.events if "checkpoint written by" in e.get("message", "")]
    return line


# ------------------------------------------------------------------ tests


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Two processes: an uninterrupted run, and one stopped by SIGTERM after STOP_AFTER."""
    base = tmp_path_factory.mktemp("elastic")
    data = write_small_dataset(base)
    straight = run_processes(_config(data, base / "straight"), 2, base / "straight-logs")
    assert straight.code == 0
    stopped = _config(data, base / "stopped")
    first = run_processes(stopped, 2, base / "stopped-logs", stop=STOP_AFTER)
    assert first.code == EXIT_PREEMPTED
    yield {"data": data, "base": base, "straight": straight, "first": first}


def _copy_of_stopped(runs: dict[str, Any], name: str) -> Path:
    """A copy of the stopped run's outputs (its checkpoint), for one continuation."""
    copy = runs["base"] / name
    shutil.copytree(runs["base"] / "stopped", copy)
    return copy


def test_two_processes_resume_on_two_bit_identical(runs: dict[str, Any]) -> None:
    out = _copy_of_stopped(runs, "two-again")
    resumed = run_processes(_config(runs["data"], out), 2, runs["base"] / "two-again-logs")
    assert resumed.code == 0
    assert_same_examples_once_per_epoch(runs["straight"], runs["first"], resumed)
    assert resumed.losses() == {
        s: loss for s, loss in runs["straight"].losses().items() if s > STOP_AFTER
    }
    assert_bit_identical(
        final_weights(runs["base"] / "straight" / "model"), final_weights(out / "model")
    )
    assert not [e for e in resumed.events if "checkpoint written by" in e.get("message", "")]


def test_two_processes_resume_on_one_with_twice_the_accumulation(
    runs: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _copy_of_stopped(runs, "one")
    resumed = run_here(_config(runs["data"], out), monkeypatch, capsys)
    assert resumed.code == 0
    assert _change_line(resumed)["message"] == (
        f"resumed at step {STOP_AFTER} from a checkpoint written by 2 processes, now 1; "
        "gradient accumulation 1->2 keeps the global batch 4"
    )
    assert_same_examples_once_per_epoch(runs["straight"], runs["first"], resumed)
    assert_loss_continues(runs["straight"], runs["first"], resumed)


def test_one_process_resumes_on_two_with_half_the_accumulation(
    runs: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Configured for one process (accumulation 2, the same global batch of 4 rows as the
    # two-process runs), then continued on two with the config unchanged.
    cfg = _config(runs["data"], tmp_path / "run", gradient_accumulation_steps=2)
    first = run_here(cfg, monkeypatch, capsys, stop=STOP_AFTER)
    assert first.code == EXIT_PREEMPTED
    resumed = run_processes(cfg, 2, tmp_path / "logs")
    assert resumed.code == 0
    assert _change_line(resumed)["message"] == (
        f"resumed at step {STOP_AFTER} from a checkpoint written by 1 process, now 2; "
        "gradient accumulation 2->1 keeps the global batch 4"
    )
    assert_same_examples_once_per_epoch(runs["straight"], first, resumed)
    # The uninterrupted reference is the two-process run: one process accumulating two
    # micro-batches follows it up to the summation order, as the resumed part does.
    assert_losses_close(runs["straight"], first, resumed)


def test_fsdp_shards_written_by_two_processes_load_on_one(
    runs: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """FSDP2 checkpoints hold each rank's shard of the weights and optimizer state: DCP
    re-splits them for one process."""
    cfg = _config(runs["data"], tmp_path / "run", fsdp=True)
    first = run_processes(cfg, 2, tmp_path / "logs", stop=STOP_AFTER)
    assert first.code == EXIT_PREEMPTED
    resumed = run_here(cfg, monkeypatch, capsys)
    assert resumed.code == 0
    assert "now 1; gradient accumulation 1->2" in _change_line(resumed)["message"]
    assert_same_examples_once_per_epoch(runs["straight"], first, resumed)
    # FSDP reduce-scatters where DDP all-reduces: close to the DDP run, from the first step.
    assert_losses_close(runs["straight"], first, resumed)


def test_a_global_batch_the_new_process_count_cannot_keep_is_refused(
    runs: dict[str, Any], tmp_path: Path
) -> None:
    """Accumulation 3 on one process: a global batch of 6 rows, which two processes with 2 rows
    each cannot make. Both stop before training, naming the numbers and the fix."""
    cfg = _config(runs["data"], tmp_path / "run", gradient_accumulation_steps=3, max_steps=2)
    assert train(parse_config(cfg), VertexEnv.from_environ({})) == 0
    refused = run_processes(cfg, 2, tmp_path / "logs")
    assert refused.code == 1 and not refused.seen
    log = (tmp_path / "logs" / "rank0.log").read_text()
    assert (
        "ConfigError: 2 processes cannot keep the global batch of 6 rows that 1 process trained "
        "with (per_device_train_batch_size 2 x gradient_accumulation_steps 3 x 1 process): 6 is "
        "not a multiple of 2 x 2 = 4, so no gradient accumulation keeps it. Resume on a number "
        "of processes that divides 3 (1, 3), or continue with another global batch on purpose "
        "with --set allow_config_change_on_resume=true"
    ) in log
    # Continuing on purpose takes the config's accumulation: another global batch, said so.
    allowed = run_processes({**cfg, "allow_config_change_on_resume": True}, 2, tmp_path / "on")
    assert allowed.code == 0
    assert _change_line(allowed)["message"] == (
        "resumed at step 2 from a checkpoint written by 1 process, now 2; gradient accumulation "
        "3->3 changes the global batch 6->12 (on purpose)"
    )
