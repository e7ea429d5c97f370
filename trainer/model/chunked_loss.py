"""The training loss without the logits: the vocabulary projection and cross-entropy, chunk by
chunk of positions, as Liger Kernel's fused linear cross-entropy does with stock torch ops.

Materialising the logits of every target position is a step's largest memory peak at real
vocabularies: 8,192 positions x 128k entries are 2 GiB in bf16, 4 GiB once upcast to fp32 for the
loss, and as much again for their gradient. Here a custom autograd function takes the final
hidden states at those positions and, for `rows` positions at a time, computes the logits in fp32,
the log-sum-exp, the loss and, in the same pass, the gradients with respect to the hidden states,
the head's weight and its bias; backward only scales them. No [positions, vocabulary] tensor
outlives its chunk. `bench/trainer/loss.py` measures the peak and the time against transformers'
way.

The model is still called as a whole, through its DDP or FSDP wrapper (which sync gradients only
for what runs inside their forward): a forward pre-hook on the output embeddings takes their
input (the hidden states at the kept positions) and hands the head an empty slice instead.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class LogitTransform:
    """What a model applies to `lm_head`'s output before the loss: logits x `scale`, then
    `softcap` x tanh(logits / `softcap`) when set."""

    scale: float = 1.0
    softcap: float | None = None


def _config_value(config: Any, name: str, default: float | None) -> float | None:
    value = getattr(config, name, None)
    return default if value is None else float(value)


def _plain(config: Any) -> LogitTransform:
    return LogitTransform()


def _softcapped(config: Any) -> LogitTransform:
    return LogitTransform(softcap=_config_value(config, "final_logit_softcapping", None))


def _scaled(config: Any) -> LogitTransform:
    return LogitTransform(scale=_config_value(config, "logit_scale", 1.0) or 1.0)


def _divided(config: Any) -> LogitTransform:
    return LogitTransform(scale=1.0 / (_config_value(config, "logits_scaling", 1.0) or 1.0))


MODEL_TYPES: dict[str, Callable[[Any], LogitTransform]] = {
    "llama": _plain,
    "mistral": _plain,
    "mixtral": _plain,
    "qwen2": _plain,
    "qwen2_moe": _plain,
    "qwen3": _plain,
    "qwen3_moe": _plain,
    "phi3": _plain,
    "olmo2": _plain,
    "gemma": _plain,
    "gemma2": _softcapped,
    "gemma3_text": _softcapped,
    "cohere": _scaled,
    "granite": _divided,
}
"""Model types whose causal-LM forward is `lm_head(hidden)` then this transform, read from
transformers' code; tests/trainer/model/test_chunked_loss.py checks each against the model's own
logits. Soft-capping (Gemma 2 and 3: `final_logit_softcapping`) and scaling (Cohere's
`logit_scale`, Granite's `logits_scaling`) are supported, in fp32 inside each chunk, with their
derivative in the gradient. Other types use the materialised path: their forward may change
the hidden states or the logits in ways (MiniCPM scales the hidden states, Falcon-H1 multiplies
the head) that a chunked loss would silently miss."""


# ---------------------------------------------------------------- the loss on tensors


def chunk_rows(vocab_size: int, chunk_mb: float) -> int:
    """Positions per chunk so that a chunk's fp32 logits take about `chunk_mb` MB."""
    return max(1, int(chunk_mb * 1e6) // (4 * vocab_size))


def _compute_dtype(hidden: torch.Tensor) -> torch.dtype:
    """The matmuls' dtype: autocast's, as `lm_head` would run under it, else the input's."""
    device = hidden.device.type
    if torch.is_autocast_enabled(device):
        return torch.get_autocast_dtype(device)
    return hidden.dtype


def _chunk(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    targets: torch.Tensor,
    transform: LogitTransform,
    want_grad: bool,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(summed loss, gradient of that sum with respect to the chunk's raw logits, in the
    matmuls' dtype, or None)."""
    logits = F.linear(hidden, weight, bias).float()
    if transform.scale != 1.0:
        logits.mul_(transform.scale)
    slope = None
    if transform.softcap is not None:
        cap = transform.softcap
        logits.div_(cap).tanh_()
        slope = 1.0 - logits.square() if want_grad else None  # d tanh(x) / dx
        logits.mul_(cap)
    target = logits.gather(1, targets[:, None])
    # The log-sum-exp by hand, in place: torch.logsumexp would allocate a second [rows, V].
    top = logits.amax(dim=-1, keepdim=True)
    exp = logits.sub_(top).exp_()
    total = exp.sum(dim=-1, keepdim=True)
    loss = (top + total.log() - target).sum()
    if not want_grad:
        return loss, None
    grad = exp.div_(total)  # softmax
    grad[torch.arange(len(targets), device=grad.device), targets] -= 1.0
    if slope is not None:
        grad.mul_(slope)
    if transform.scale != 1.0:
        grad.mul_(transform.scale)
    return loss, grad.to(hidden.dtype)


@dataclass
class _Gradients:
    """The forward's gradient accumulators; None where no gradient is wanted (a frozen head:
    no [V, H] accumulator at all)."""

    hidden: torch.Tensor | None
    weight: torch.Tensor | None
    bias: torch.Tensor | None

    @property
    def wanted(self) -> bool:
        return any(g is not None for g in (self.hidden, self.weight, self.bias))

    def add(self, start: int, grad: torch.Tensor, h: torch.Tensor, w: torch.Tensor) -> None:
        """One chunk's share, from the gradient of its logits `grad` [rows, V]."""
        if self.hidden is not None:
            self.hidden[start : start + len(grad)] = grad @ w
        if self.weight is not None:
            if grad.dtype == self.weight.dtype:
                self.weight.addmm_(grad.T, h)
            else:
                # bf16 matmuls: each chunk's product is rounded to bf16 once before the fp32
                # sum (torch's fp32-output bf16 GEMM, `out_dtype=`, exists only on CUDA); the
                # materialised path rounds the whole gradient to bf16 once, no finer.
                self.weight.add_(grad.T @ h)
        if self.bias is not None:
            self.bias += grad.sum(0, dtype=torch.float32)


def _step(
    gradients: _Gradients,
    start: int,
    h: torch.Tensor,
    w: torch.Tensor,
    b: torch.Tensor | None,
    targets: torch.Tensor,
    transform: LogitTransform,
) -> torch.Tensor:
    """One chunk: its summed loss, its gradients added. A function of its own so that the
    chunk's [rows, V] buffer is freed before the next chunk allocates its own."""
    loss, grad = _chunk(h, w, b, targets, transform, gradients.wanted)
    if grad is not None:
        gradients.add(start, grad, h, w)
    return loss


class _LinearCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any,
        hidden: torch.Tensor,
        weight: torch.Tensor,
        bias: torch.Tensor | None,
        targets: torch.Tensor,
        transform: LogitTransform,
        rows: int,
        wanted: tuple[bool, bool, bool],
    ) -> torch.Tensor:
        dtype = _compute_dtype(hidden)
        want_hidden, want_weight, want_bias = wanted
        fp32 = torch.float32
        gradients = _Gradients(
            torch.empty_like(hidden) if want_hidden else None,
            torch.zeros_like(weight, dtype=fp32) if want_weight else None,
            torch.zeros_like(bias, dtype=fp32) if want_bias and bias is not None else None,
        )
        total = torch.zeros((), dtype=fp32, device=hidden.device)
        w = weight.to(dtype)
        b = None if bias is None else bias.to(dtype)
        with torch.autocast(hidden.device.type, enabled=False):
            for start in range(0, hidden.shape[0], rows):
                end = start + rows
                h = hidden[start:end].to(dtype)
                total += _step(gradients, start, h, w, b, targets[start:end], transform)
        ctx.save_for_backward(
            gradients.hidden,
            None if gradients.weight is None else gradients.weight.to(weight.dtype),
            None if gradients.bias is None or bias is None else gradients.bias.to(bias.dtype),
        )
        return total

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        # In place: a second copy of the head's weight gradient would undo half the saving.
        # The loss is backpropagated once per step (no retain_graph), so scaling once is right.
        grads = [None if g is None else g.mul_(grad_output.to(g.dtype)) for g in ctx.saved_tensors]
        return (*grads, None, None, None, None)


def linear_cross_entropy(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    targets: torch.Tensor,
    rows: int,
    transform: LogitTransform = LogitTransform(),
) -> torch.Tensor:
    """sum over positions of cross_entropy(transform(hidden @ weight.T + bias), targets), fp32,
    `rows` positions at a time: hidden [N, H], weight [V, H], bias [V] or None, targets [N]."""
    on = torch.is_grad_enabled()
    wanted = (
        on and hidden.requires_grad,
        on and weight.requires_grad,  # False for a frozen head (LoRA): no [V, H] accumulator
        on and bias is not None and bias.requires_grad,
    )
    return _LinearCrossEntropy.apply(hidden, weight, bias, targets, transform, rows, wanted)


def materialised_cross_entropy(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    targets: torch.Tensor,
    transform: LogitTransform = LogitTransform(),
) -> torch.Tensor:
    """The same loss the way transformers computes it: every logit at once, upcast, then
    cross-entropy. The reference for tests and the benchmark."""
    logits = F.linear(hidden, weight, bias) * transform.scale
    if transform.softcap is not None:
        logits = torch.tanh(logits / transform.softcap) * transform.softcap
    return F.cross_entropy(logits.float(), targets, reduction="sum")


# ---------------------------------------------------------------- the loss of a model


@dataclass
class _Capture:
    """What the head's pre-hook takes from one forward: its input and its parameters as the
    forward saw them. FSDP2 swaps unsharded parameters in for the forward and keeps the root
    module's own (embeddings, final norm, head: `loop.wrap_model` shards each block apart, the
    rest as the root) unsharded after it, so the chunks read whole weights, and their gradients
    join FSDP2's reduction at the end of the backward."""

    armed: bool = False
    hidden: torch.Tensor | None = None
    weight: torch.Tensor | None = None
    bias: torch.Tensor | None = None


_CAPTURES: weakref.WeakKeyDictionary[torch.nn.Module, _Capture] = weakref.WeakKeyDictionary()


def _take_input(
    capture: _Capture, module: torch.nn.Module, args: tuple[torch.Tensor, ...]
) -> tuple[torch.Tensor, ...] | None:
    if not capture.armed:
        return None  # generation, export, the materialised path: the head runs as usual
    (hidden,) = args
    capture.hidden, capture.weight, capture.bias = hidden, module.weight, module.bias
    return (hidden[..., :0, :],)  # the head computes logits for no position


def _capture_for(head: torch.nn.Module) -> _Capture:
    """The head's capture, its hook registered once: a hook added per call would change what
    torch.compile guards on, and recompile every step."""
    capture = _CAPTURES.get(head)
    if capture is None:
        capture = _CAPTURES[head] = _Capture()
        # Outside compiled graphs, so the flag is read at run time, not baked into a graph.
        head.register_forward_pre_hook(torch.compiler.disable(partial(_take_input, capture)))
    return capture


def chunkable_head(model: torch.nn.Module) -> tuple[torch.nn.Linear, LogitTransform] | None:
    """The output embeddings of a model (under DDP, peft, FSDP2 or torch.compile) and the
    transform its forward applies to their output; None when the chunked loss does not apply:
    an unlisted model type, or a head that is not a plain Linear (peft adapters on lm_head)."""
    inner = model.module if isinstance(model, torch.nn.parallel.DistributedDataParallel) else model
    get_head = getattr(inner, "get_output_embeddings", None)  # peft forwards it to the model
    head = get_head() if callable(get_head) else None
    if type(head) is not torch.nn.Linear:
        return None
    config = getattr(inner, "config", None)
    transform = MODEL_TYPES.get(getattr(config, "model_type", ""))
    return (head, transform(config)) if transform else None


def model_loss_sum(
    model: torch.nn.Module,
    inputs: dict[str, Any],
    keep: torch.Tensor,
    targets: torch.Tensor,
    chunk_mb: float,
) -> torch.Tensor | None:
    """The summed cross-entropy of `model(**inputs)` at positions `keep` of its single row,
    chunked; None when the model is not chunkable (see `chunkable_head`)."""
    found = chunkable_head(model)
    if found is None:
        return None
    head, transform = found
    capture = _capture_for(head)
    capture.armed = True
    try:
        model(**inputs, logits_to_keep=keep)
    finally:
        capture.armed = False
    hidden, weight, bias = capture.hidden, capture.weight, capture.bias
    capture.hidden = capture.weight = capture.bias = None
    if hidden is None or weight is None:
        raise RuntimeError(f"{type(model).__name__}'s forward never called its output embeddings")
    rows = chunk_rows(weight.shape[0], chunk_mb)
    return linear_cross_entropy(hidden[0], weight, bias, targets, rows, transform)
