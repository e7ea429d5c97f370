"""The training loop: torch primitives only, one process per device.

    step:  fetch `gradient_accumulation_steps` micro-batches -> all-reduce token counts ->
           forward/backward (loss normalised by the *global* number of target tokens, so every
           token weighs the same whatever the packing, padding or rank) -> clip -> AdamW ->
           all-reduce [loss, stop?, time to save?] -> log / eval / checkpoint

The second all-reduce is what makes preemption collective: SIGTERM reaches one node, every rank
learns of it at the same step, and all of them write the same checkpoint and exit 143 together.
A step is always finished, not abandoned: steps here take seconds, and the checkpoint that
follows must describe a state every rank agrees on. Budget: one step + one blocking save
inside the 30 s a Spot VM gets.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import signal
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.utils._foreach_utils import _get_fused_kernels_supported_devices

from trainer.checkpoint.fingerprint import (
    GLOBAL_BATCH,
    accumulation_for,
    differences,
    mismatch_message,
    processes,
    trajectory,
)
from trainer.checkpoint.state import Progress, TrainState
from trainer.checkpoint.store import FORMAT, Checkpointer, step_dir
from trainer.config.accelerators import peak_flops_per_s
from trainer.config.env import TrackingEnv, VertexEnv
from trainer.config.schema import ConfigError, TrainConfig
from trainer.data.batches import (
    BatchStream,
    bucket_cost_slots,
    build_rows,
    eval_batches,
    require_full_batch,
)
from trainer.model.chunked_loss import model_loss_sum
from trainer.model.export import export_model
from trainer.model.loading import (
    build_model,
    build_tokenizer,
    count_parameters,
    flops_per_token,
    layer_params,
    local_rank_from_env,
)
from trainer.tracking.events import EARLY_STOP_PREFIX, STOP_PREFIX, Event
from trainer.tracking.heartbeat import Heartbeat, Phase, heartbeat_path, interval_from
from trainer.tracking.metrics import Throughput, setup_logging
from trainer.tracking.progress import ProgressBar, choose_output
from trainer.tracking.reporters import build_reporters
from trainer.tracking.trial_metric import has_eval_set
from trainer.training.allocator import retain_freed_memory
from trainer.training.preemption import StopRequest

log = logging.getLogger(__name__)

EXIT_PREEMPTED = 143  # 128 + SIGTERM: what a process killed by SIGTERM reports
# Test/drill hook: rank 0 sends itself SIGTERM right after this optimizer step.
SIGTERM_AFTER_STEP_ENV = "VTX_FAULT_SIGTERM_AFTER_STEP"


@dataclass(frozen=True)
class Outputs:
    checkpoint_dir: str
    model_dir: str
    tensorboard_dir: str | None

    @classmethod
    def resolve(cls, cfg: TrainConfig, env: VertexEnv) -> Outputs:
        base = cfg.output_dir.rstrip("/")
        return cls(
            checkpoint_dir=env.checkpoint_dir or f"{base}/checkpoints",
            model_dir=env.model_dir or f"{base}/model",
            tensorboard_dir=(env.tensorboard_dir or f"{base}/logs")
            if "tensorboard" in cfg.report_to
            else None,
        )


# ------------------------------------------------------------------ setup


def init_distributed() -> None:
    """Join torchrun's process group, or make a group of one so every path is the same."""
    if not dist.is_initialized():
        if "TORCHELASTIC_RUN_ID" in os.environ:
            backend = "cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo"
            dist.init_process_group(backend=backend)
        else:
            dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank_from_env())


def wrap_model(
    model: torch.nn.Module, cfg: TrainConfig, device: torch.device, world_size: int
) -> torch.nn.Module:
    model.to(device)
    if cfg.torch_compile:
        # In place, so parameter names (and checkpoints) stay unchanged; dynamic, because the
        # token count of a batch changes every step.
        model.compile(dynamic=True)
    if cfg.fsdp:
        from torch.distributed.fsdp import fully_shard

        block_names = set(getattr(model, "_no_split_modules", None) or ())
        for module in model.modules():
            if type(module).__name__ in block_names:
                fully_shard(module)
        return fully_shard(model)
    if world_size > 1:
        from torch.nn.parallel import DistributedDataParallel

        return DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None
        )
    return model


def build_optimizer(
    model: torch.nn.Module, cfg: TrainConfig, device: torch.device
) -> torch.optim.Optimizer:
    params = [p for p in model.parameters() if p.requires_grad]
    # No weight decay on biases and norm gains (1-D), as in HF Trainer and nanoGPT.
    groups = [
        {"params": [p for p in params if p.ndim >= 2], "weight_decay": cfg.weight_decay},
        {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(
        [g for g in groups if g["params"]],
        lr=cfg.learning_rate,
        betas=(cfg.adam_beta1, cfg.adam_beta2),
        eps=cfg.adam_epsilon,
        # One kernel for all parameters. torch has it for CPU too, and it is what HF Trainer
        # uses by default: the per-parameter loop costs a few percent of a small model's step
        # (profiled: bench/RESULTS.md, "Figures from code comments", Optimizer and loss).
        fused=device.type in _get_fused_kernels_supported_devices(),
    )


def total_steps(cfg: TrainConfig, batches_per_epoch: int, world_size: int) -> int:
    """`max_steps`, else the epochs' global batches over the batches of one optimizer step:
    the same on any number of processes that keeps the global batch."""
    if cfg.max_steps is not None:
        return cfg.max_steps
    per_step = cfg.gradient_accumulation_steps * world_size
    return max(1, math.floor(cfg.num_train_epochs * batches_per_epoch / per_step))


def build_scheduler(optimizer: torch.optim.Optimizer, cfg: TrainConfig, steps: int) -> Any:
    from transformers import get_scheduler

    warmup = cfg.warmup_steps or math.ceil(cfg.warmup_ratio * steps)
    return get_scheduler(
        cfg.lr_scheduler_type, optimizer, num_warmup_steps=warmup, num_training_steps=steps
    )


# ------------------------------------------------------------------ step


def _autocast(cfg: TrainConfig, device: torch.device) -> contextlib.AbstractContextManager:
    if cfg.bf16 and device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def _sync_gradients(model: torch.nn.Module, last: bool) -> contextlib.AbstractContextManager:
    """Skip the gradient all-reduce on all but the last micro-batch of a step."""
    if hasattr(model, "set_requires_gradient_sync"):  # FSDP2
        model.set_requires_gradient_sync(last)
        return contextlib.nullcontext()
    if hasattr(model, "no_sync") and not last:  # DDP
        return model.no_sync()
    return contextlib.nullcontext()


def loss_sum(model: torch.nn.Module, batch: Any, chunk_mb: float | None) -> torch.Tensor:
    """Summed cross-entropy over the batch's target tokens (targets are pre-shifted). Logits
    are computed only where there is a target: padding, prompts and each example's last token
    never reach the vocabulary projection. With `chunk_mb` (`loss_chunk_mb`), a chunk of about
    that many MB of logits at a time (trainer.model.chunked_loss); None, or a model it does not
    know, materialises them all."""
    inputs = {
        "input_ids": batch.input_ids,
        "position_ids": batch.position_ids,
        "vtx_buckets": batch.bucket_table,
        "use_cache": False,
    }
    targets = batch.targets[0, batch.target_index]
    if chunk_mb is not None:
        loss = model_loss_sum(model, inputs, batch.target_index, targets, chunk_mb)
        if loss is not None:
            return loss
    logits = model(**inputs, logits_to_keep=batch.target_index).logits
    # squeeze, not [0]: indexing's backward fills a zero tensor the size of all the logits (a few
    # percent of a tiny step: bench/RESULTS.md, "Figures from code comments", Optimizer and loss), a
    # squeeze's is a view.
    return F.cross_entropy(logits.squeeze(0).float(), targets, reduction="sum")


def train_step(
    model: torch.nn.Module,
    stream: Iterator,
    optimizer: torch.optim.Optimizer,
    cfg: TrainConfig,
    device: torch.device,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One optimizer step. Returns (summed loss on this rank, grad norm, global counts
    [target tokens, real tokens, token slots])."""
    micro = [next(stream) for _ in range(cfg.gradient_accumulation_steps)]
    counts = (
        torch.tensor([[b.n_targets, b.n_tokens, b.n_slots] for b in micro], dtype=torch.float64)
        .sum(0)
        .to(device)
    )
    _all_reduce(counts)
    # DDP/FSDP average gradients over ranks; scaling by world_size turns that into a sum, and
    # dividing by the global target count makes the result a per-token mean.
    scale = dist.get_world_size() / max(counts[0].item(), 1.0)
    total = torch.zeros((), device=device)
    for i, batch in enumerate(micro):
        batch = batch.to(device)
        with _sync_gradients(model, last=i == len(micro) - 1), _autocast(cfg, device):
            loss = loss_sum(model, batch, cfg.loss_chunk_mb)
        (loss * scale).backward()
        total += loss.detach()
    max_norm = cfg.max_grad_norm if cfg.max_grad_norm > 0 else float("inf")
    # The optimizer's list: walking the module tree for it costs more than the clipping.
    params = [p for group in optimizer.param_groups for p in group["params"]]
    grad_norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
    if hasattr(grad_norm, "full_tensor"):  # DTensor under FSDP2
        grad_norm = grad_norm.full_tensor()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return total, grad_norm, counts


@torch.no_grad()
def evaluate(
    model: torch.nn.Module, batches: list[Any], cfg: TrainConfig, device: torch.device
) -> float:
    model.eval()
    totals = torch.zeros(2, dtype=torch.float64, device=device)
    for batch in batches:
        batch = batch.to(device)
        with _autocast(cfg, device):
            totals[0] += loss_sum(model, batch, cfg.loss_chunk_mb).double()
        totals[1] += batch.n_targets
    model.train()
    dist.all_reduce(totals)
    return (totals[0] / totals[1].clamp(min=1)).item()


# ------------------------------------------------------------------ run


def train(
    cfg: TrainConfig,
    env: VertexEnv,
    stop: StopRequest | None = None,
    tracking: TrackingEnv | None = None,
) -> int:
    """Train (resuming if a committed checkpoint exists), export; return the exit code.

    Pass an already installed `stop` to catch SIGTERMs that arrive during start-up; `tracking`
    defaults to this process's environment."""
    owned = stop is None
    stop = stop or StopRequest().install()
    retain_freed_memory()
    init_distributed()
    rank = dist.get_rank()
    output = choose_output(env.in_job, rank, cfg.disable_tqdm, sys.stdout, sys.stderr)
    setup_logging(rank, human=output.human_logs)
    try:
        tracking = tracking or TrackingEnv.from_environ()
        return Trainer(cfg, env, stop, show_bar=output.bar, tracking=tracking).run()
    finally:
        if owned:
            stop.uninstall()
        dist.destroy_process_group()


@dataclass(frozen=True)
class ResumePlan:
    """What every rank agrees on before building the run (rank 0 decides, from the marker)."""

    step: int | None
    """The committed step to resume from; None: a fresh start."""
    accumulation: int
    """The gradient accumulation this run uses: the config's, or the one that keeps the
    checkpoint's global batch on this run's number of processes."""
    verified: str = ""
    written_by: int = 0
    """Processes that wrote the checkpoint."""
    written_accumulation: int = 0
    written_global_batch: int = 0

    def world_size_change(self, cfg: TrainConfig, world_size: int) -> str | None:
        """The sentence a resume on another number of processes logs; None when unchanged."""
        if self.step is None or self.written_by == world_size:
            return None
        batch = cfg.per_device_train_batch_size * self.accumulation * world_size
        kept = (
            f"keeps the global batch {batch}"
            if batch == self.written_global_batch
            else f"changes the global batch {self.written_global_batch}->{batch} (on purpose)"
        )
        return (
            f"resumed at step {self.step} from a checkpoint written by "
            f"{processes(self.written_by)}, now {world_size}; gradient accumulation "
            f"{self.written_accumulation}->{self.accumulation} {kept}"
        )


@dataclass
class StepDecision:
    """What every rank agrees on after a step (from one all-reduce)."""

    loss: float
    stop: bool
    save_by_time: bool


class Trainer:
    """One process's run: built from the config, resumed, stepped, checkpointed, exported."""

    def __init__(
        self,
        cfg: TrainConfig,
        env: VertexEnv,
        stop: StopRequest,
        show_bar: bool = False,
        tracking: TrackingEnv | None = None,
    ) -> None:
        self.cfg, self.stop, self.show_bar = cfg, stop, show_bar
        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()
        self.device = training_device()
        self.outputs = Outputs.resolve(cfg, env)
        # First, so that a start that takes long (or fails) is seen as starting, not as a hang.
        self.heartbeat = Heartbeat(
            heartbeat_path(self.outputs.checkpoint_dir),
            env.job_id,
            interval_from(os.environ),
            enabled=self.rank == 0,
        )
        try:
            self._build(cfg, tracking)
        except BaseException:
            self.heartbeat.close()
            raise

    def _build(self, cfg: TrainConfig, tracking: TrackingEnv | None) -> None:
        self.checkpointer = Checkpointer(
            self.outputs.checkpoint_dir, cfg.save_total_limit, cfg.async_save
        )
        # Decided before anything is sized: on another number of processes the gradient
        # accumulation changes, and with it the schedule's length.
        self.resume = self._agree_on_resume(self.checkpointer.latest_step())
        self.cfg = cfg = cfg.model_copy(
            update={"gradient_accumulation_steps": self.resume.accumulation}
        )
        self.fingerprint = trajectory(cfg, self.world_size)
        self.checkpointer.fingerprint = self.fingerprint
        local_rank = local_rank_from_env()
        self.tokenizer = build_tokenizer(cfg.model, local_rank)
        train_rows, eval_rows = build_rows(cfg, self.tokenizer)
        # Before the model loads, which can take minutes: a batch that cannot fill fails now.
        require_full_batch(train_rows, cfg.per_device_train_batch_size, self.world_size)
        base = build_model(cfg.model, cfg.seed, local_rank)
        self.n_params, self.n_trainable = count_parameters(base)
        self.flops_per_token = flops_per_token(base, cfg.data.max_seq_length)
        pad = self.tokenizer.pad_token_id
        bucket_cost = bucket_cost_slots(layer_params(base), self.device.type)
        self.stream = BatchStream(
            train_rows, cfg.per_device_train_batch_size, cfg.seed, self.rank,
            self.world_size, cfg.data.group_by_length, pad, bucket_cost,
        )  # fmt: skip
        self.evals = eval_batches(
            eval_rows, cfg.per_device_eval_batch_size, self.rank, self.world_size, pad,
            bucket_cost,
        )  # fmt: skip
        self.model = wrap_model(base, cfg, self.device, self.world_size)
        self.optimizer = build_optimizer(self.model, cfg, self.device)
        self.steps = total_steps(cfg, self.stream.batches_per_epoch, self.world_size)
        self.scheduler = build_scheduler(self.optimizer, cfg, self.steps)
        self.progress = Progress()
        self.state = {
            "train": TrainState(
                self.model, self.optimizer, self.scheduler, self.stream, self.progress
            )
        }
        self.reporters = build_reporters(
            cfg,
            tracking or TrackingEnv(),
            self.rank,
            self.outputs.tensorboard_dir,
            self.outputs.checkpoint_dir,
            self.resume.step,
        )
        self.meter = Throughput()
        self.peak = _peak_flops(self.device)
        self.last_save_s = time.monotonic()
        self.fault_step = os.environ.get(SIGTERM_AFTER_STEP_ENV)

    def run(self) -> int:
        exit_code = 1  # an exception: the reporters finish the run as failed
        try:
            exit_code = self._run()
            return exit_code
        finally:
            self.heartbeat.close(Phase.DONE if exit_code == 0 else None)
            self.reporters.close(exit_code)

    def _run(self) -> int:
        self._resume()
        if _any_rank(self.stop.requested, self.device):
            log.warning(f"{STOP_PREFIX} during start-up: nothing new to save, exiting")
            return EXIT_PREEMPTED
        self.model.train()
        self.bar = ProgressBar(self.show_bar, self.steps, self.progress.step)
        try:
            if self.progress.last_eval_step < self.progress.step:
                # Resumed from a SIGTERM save, which skips the step's eval (30 s budget): run it
                # now, so early stopping sees the eval history of an uninterrupted run.
                self._stop_early_if_no_improvement()
            while self.progress.step < self.steps and not self.progress.stopped_early:
                decision = self._step()
                self.bar.step(decision.loss)
                if decision.stop:
                    # Logged before the save: the resumed run starts after this step, so a
                    # step left unlogged here would be missing from every tracker.
                    self._log()
                    self._save_for_preemption()
                    return EXIT_PREEMPTED
                self._log()
                if self._stop_early_if_no_improvement():
                    break
                if self._save_due(decision):
                    self._save_in_background()
            self.bar.close()  # before the export's log lines: the finished bar stays above them
            self._evaluate_final_model()
            self._finish()
            return 0
        finally:
            self.bar.close()

    # ---------------------------------------------------------------- phases

    def _resume(self) -> None:
        plan = self.resume
        if plan.step is not None:
            self.heartbeat.phase(Phase.RESTORING, plan.step, self.steps)
            started = time.perf_counter()
            self.state["train"].load_from(plan.written_by)
            self.checkpointer.load(plan.step, self.state)
            checkpoint = step_dir(self.outputs.checkpoint_dir, plan.step)
            extra = {**self._at(), "checkpoint": checkpoint, "verified": plan.verified}
            # Measured here: the platform's goodput timeline (jobs/runs/goodput.py) tells the
            # restore from the program's start-up by it.
            extra["restore_s"] = round(time.perf_counter() - started, 3)
            log.info(Event.RESUMED, extra={**extra, "written_by_processes": plan.written_by})
            change = plan.world_size_change(self.cfg, self.world_size)
            if change:
                log.info(change, extra=self._at())
        self.heartbeat.phase(
            Phase.TRAINING, self.progress.step, self.steps, tokens=self.progress.tokens_seen
        )
        log.info(
            Event.TRAINING,
            extra={
                **self._at(),
                "total_steps": self.steps,
                "world_size": self.world_size,
                "gradient_accumulation_steps": self.cfg.gradient_accumulation_steps,
                GLOBAL_BATCH: self.fingerprint[GLOBAL_BATCH],
                "parameters": self.n_params,
                "trainable_parameters": self.n_trainable,
                "batches_per_epoch": self.stream.batches_per_epoch,
            },
        )

    def _agree_on_resume(self, step: int | None) -> ResumePlan:
        """Collective: rank 0 reads the checkpoint's marker and decides; every rank stops
        (ConfigError) on a difference the config does not allow."""
        verdict: list[Any] = [None, None]  # [error, plan]
        if self.rank == 0:
            try:
                verdict[1] = self._resume_plan(step)
            except ConfigError as exc:
                verdict[0] = str(exc)
        dist.broadcast_object_list(verdict, src=0)
        if verdict[0] is not None:
            raise ConfigError(verdict[0])
        return verdict[1]

    def _resume_plan(self, step: int | None) -> ResumePlan:
        cfg = self.cfg
        if step is None:
            return ResumePlan(None, cfg.gradient_accumulation_steps)
        marker = self.checkpointer.marker(step)
        checkpoint = step_dir(self.outputs.checkpoint_dir, step)
        if marker.get("format") != FORMAT:
            raise ConfigError(
                f"the checkpoint of step {step} in {checkpoint} was written by an older trainer, "
                "which kept one data position per process: this trainer cannot place it. Resume "
                "with the trainer image that wrote it, or start a new run (a new output prefix)"
            )
        recorded, written_by = marker["fingerprint"], int(marker["world_size"])
        accumulation = self._accumulation(recorded, written_by)
        current = trajectory(
            cfg.model_copy(update={"gradient_accumulation_steps": accumulation}), self.world_size
        )
        written_batch = int(recorded[GLOBAL_BATCH])
        written_per_device = int(recorded["per_device_train_batch_size"])
        return ResumePlan(
            step,
            accumulation,
            self._verify(step, checkpoint, recorded, current),
            written_by,
            written_accumulation=written_batch // (written_per_device * written_by),
            written_global_batch=written_batch,
        )

    def _verify(
        self, step: int, checkpoint: str, recorded: dict[str, Any], current: dict[str, Any]
    ) -> str:
        """What the resume verified; ConfigError on a difference the config does not allow."""
        diffs = differences(recorded, current)
        if not diffs:
            return f"the {len(recorded)} settings that shape training match"
        if not self.cfg.allow_config_change_on_resume:
            raise ConfigError(mismatch_message(step, checkpoint, diffs))
        log.warning("resuming with changed settings", extra={"changed": diffs})
        return f"settings changed on purpose (allow_config_change_on_resume): {diffs}"

    def _accumulation(self, recorded: dict[str, Any], written_by: int) -> int:
        """The config's gradient accumulation, or, on another number of processes, the one
        that keeps the checkpoint's global batch (a capacity ladder's rung with other GPUs)."""
        cfg = self.cfg
        per_device = cfg.per_device_train_batch_size
        if written_by == self.world_size or recorded["per_device_train_batch_size"] != per_device:
            # Nothing to keep, or a changed per-device batch: the fingerprint names the change.
            return cfg.gradient_accumulation_steps
        try:
            return accumulation_for(
                int(recorded[GLOBAL_BATCH]), per_device, written_by, self.world_size
            )
        except ConfigError:
            if cfg.allow_config_change_on_resume:
                return cfg.gradient_accumulation_steps
            raise

    def _step(self) -> StepDecision:
        loss, self.grad_norm, counts = train_step(
            self.model, self.stream, self.optimizer, self.cfg, self.device
        )
        self.scheduler.step()
        self.progress.step += 1
        n_targets, n_tokens, n_slots = (int(c) for c in counts.tolist())  # one host copy
        self.progress.tokens_seen += n_tokens
        self.heartbeat.stepped(self.progress.step, self.progress.tokens_seen)
        self.checkpointer.poll()
        if self.rank == 0 and self.fault_step == str(self.progress.step):
            os.kill(os.getpid(), signal.SIGTERM)
        minutes = self.cfg.save_every_minutes
        time_due = bool(minutes) and time.monotonic() - self.last_save_s >= 60 * minutes
        # One all-reduce: summed loss, and any rank's SIGTERM; rank 0's clock alone decides
        # time-based saves so that every rank saves at the same step. Checked every step (a
        # SIGTERM may reach any node); with one process the "all-reduce" is a no-op.
        flags = torch.tensor(
            [loss.item(), float(self.stop.requested), float(self.rank == 0 and time_due)],
            dtype=torch.float64,
            device=self.device,
        )
        _all_reduce(flags)
        summed_loss, stop, save_by_time = flags.tolist()
        mean_loss = summed_loss / max(n_targets, 1)
        self.meter.add(n_tokens, n_slots, mean_loss)
        return StepDecision(mean_loss, stop > 0, save_by_time > 0)

    def _save_due(self, decision: StepDecision) -> bool:
        step, every = self.progress.step, self.cfg.save_steps
        if step >= self.steps:
            return False  # the final save follows anyway, blocking
        return decision.save_by_time or (bool(every) and step % every == 0)

    def _save_in_background(self) -> None:
        self.heartbeat.phase(Phase.SAVING)
        blocked_s = self.checkpointer.save(self.progress.step, self.state, blocking=False)
        self.heartbeat.phase(Phase.TRAINING)
        self.last_save_s = time.monotonic()
        log.info(Event.CHECKPOINT_STARTED, extra={**self._at(), "blocked_s": round(blocked_s, 3)})

    def _save_for_preemption(self) -> None:
        log.warning(f"{STOP_PREFIX}: checkpointing and exiting", extra=self._at())
        self.heartbeat.phase(Phase.SAVING)
        blocked_s = self.checkpointer.save(self.progress.step, self.state, blocking=True)
        log.info(Event.CHECKPOINT_SAVED, extra={**self._at(), "blocked_s": round(blocked_s, 3)})
        dist.barrier()  # nobody exits before rank 0 has committed

    def _finish(self) -> None:
        self.heartbeat.phase(Phase.SAVING)
        self.checkpointer.wait()
        if self.progress.step not in self._committed_steps():
            self.checkpointer.save(self.progress.step, self.state, blocking=True)
        self.heartbeat.phase(Phase.EXPORTING)
        export_model(self.model, self.tokenizer, self.cfg, self.outputs.model_dir, self.rank)
        dist.barrier()
        log.info(Event.DONE, extra={**self._at(), "model_dir": self.outputs.model_dir})

    # ---------------------------------------------------------------- helpers

    def _at(self) -> dict[str, int]:
        return {"step": self.progress.step}

    def _log(self) -> None:
        step = self.progress.step
        if step % self.cfg.logging_steps and step != self.steps:
            return
        values = self.meter.report(self.flops_per_token, self.peak, self.world_size)
        values["lr"] = self.scheduler.get_last_lr()[0]
        values["grad_norm"] = float(self.grad_norm)
        self.meter.reset()
        self.bar.tokens_per_s(values["tokens_per_s"])
        # tokens: trained so far, kept in the checkpoint, so each token counts once however
        # often the run was resumed (the platform's tokens per paid dollar).
        rounded = {k: round(v, 6) for k, v in values.items()}
        log.info(Event.TRAIN, extra={"step": step, **rounded, "tokens": self.progress.tokens_seen})
        self.reporters.log(step, values)

    def _stop_early_if_no_improvement(self) -> bool:
        if self._evaluate_and_check_early_stop():
            self.progress.stopped_early = True
            log.info(f"{EARLY_STOP_PREFIX}: eval loss stopped improving", extra=self._at())
        return self.progress.stopped_early

    def _evaluate_and_check_early_stop(self) -> bool:
        cfg, progress = self.cfg, self.progress
        if not cfg.eval_steps or progress.step % cfg.eval_steps:
            return False
        eval_loss = self._evaluate()
        if eval_loss < progress.best_eval_loss - cfg.early_stopping_threshold:
            progress.best_eval_loss, progress.evals_without_improvement = eval_loss, 0
        else:
            progress.evals_without_improvement += 1
        patience = cfg.early_stopping_patience
        return bool(patience) and progress.evals_without_improvement >= patience

    def _evaluate(self) -> float:
        self.heartbeat.phase(Phase.EVALUATING)
        started = time.perf_counter()
        eval_loss = evaluate(self.model, self.evals, self.cfg, self.device)
        self.heartbeat.phase(Phase.TRAINING)
        self.progress.last_eval_step = self.progress.step
        eval_s = round(time.perf_counter() - started, 3)
        extra = {**self._at(), "eval_loss": round(eval_loss, 6), "eval_s": eval_s}
        log.info(Event.EVAL, extra=extra)
        self.reporters.log(self.progress.step, {"eval_loss": eval_loss})
        return eval_loss

    def _evaluate_final_model(self) -> None:
        """With an eval set, the final model is evaluated when its step was not: a tuning
        trial's `eval_loss` is the final model's, and a run with `eval_fraction` but no
        `eval_steps` gets its one eval."""
        if has_eval_set(self.cfg) and self.progress.last_eval_step < self.progress.step:
            self._evaluate()

    def _committed_steps(self) -> list[int]:
        """Collective: committed steps as rank 0 sees them, so every rank takes one branch."""
        found = [self.checkpointer.committed_steps() if self.rank == 0 else None]
        dist.broadcast_object_list(found, src=0)
        return found[0] or []


def training_device() -> torch.device:
    """This process's device: its local GPU when there is one, else the CPU."""
    if torch.cuda.is_available():
        return torch.device("cuda", local_rank_from_env())
    return torch.device("cpu")


def _peak_flops(device: torch.device) -> float | None:
    if device.type != "cuda":
        return None  # no meaningful peak for CPUs: MFU is not reported
    return peak_flops_per_s(torch.cuda.get_device_name(device))


def _any_rank(flag: bool, device: torch.device) -> bool:
    """Collective: True on every rank when `flag` is True on any."""
    value = torch.tensor([float(flag)], device=device)
    _all_reduce(value)
    return bool(value.item() > 0)


def _all_reduce(tensor: torch.Tensor) -> None:
    """Sum over ranks, in place. A world of one skips the collective: the sum is the tensor,
    and a gloo all-reduce still costs a round trip through the process group (2 per step)."""
    if dist.get_world_size() > 1:
        dist.all_reduce(tensor)
