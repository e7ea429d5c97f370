"""Causal attention over a batch laid out in length buckets (see `trainer.data.batches.collate`).

A batch is one flat row of examples grouped into buckets: bucket b holds `n` examples, each
right-padded to the bucket's length `L`, stored back to back. Every example attends only to
itself: one `scaled_dot_product_attention(is_causal=True)` call per bucket, on a `[n, L]` view of
the row, with no mask. Right padding needs no mask under a causal kernel, since no real token ever
looks ahead at a pad, and pads carry no targets.

Why not transformers' packed-sequence path (position ids restarting at 0, then a block-diagonal
mask): on CPU, and with sdpa on GPU, that mask is dense, so every packed row pays attention over its
full width although each example only needs its own causal block. On the bench model the bucketed
forward+backward is faster than the masked one (measured: bench/RESULTS.md, "Figures from code
comments", Attention). This is what FlashAttention's variable-length kernel does on GPU, built from
stock sdpa calls so it runs on every device.

Every bucket goes to sdpa, however short. An explicit q @ k^T + cached causal mask + softmax
+ @ v path is no faster than sdpa's CPU kernel for any bucket shape tried, and on the tiny
model's batches it made the attention slower (bench.trainer.attention; measured: bench/RESULTS.md,
"Attention on CPU: bucketed sdpa paths" and "Figures from code comments", Attention). Merging
buckets into fewer sdpa calls is not done here either: one call's fixed cost is worth a few
padding slots of a tiny-model step (same place), and `trainer.data.batches.plan_buckets` already
trades calls against padding when it forms the buckets.

cuDNN's attention is left out of sdpa's choice. It builds an execution plan for every new
shape, and bucket shapes change every step: on an H200 each call cost 3.2 ms forward and 4.5 ms
backward of host time for 14 and 42 us of GPU time, so the GPU was busy 8% of a 0.5B step
(measured: bench/RESULTS.md, "The trainer on one GPU", the profile). Flash attention, which sdpa
otherwise picks for these causal, maskless calls, plans nothing per shape; on CPU the choice is
unchanged (cuDNN is a CUDA backend).

Models opt in by name (`use_segment_attention`); transformers then passes each batch's
`vtx_buckets` keyword from the model call down to every attention layer.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from trainer.config.schema import ConfigError

NAME = "vtx_segments"
BACKENDS = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]
"""sdpa's backends for bucketed calls: every one but cuDNN's (see the module's docstring)."""

Buckets = tuple[tuple[int, int], ...]
"""(examples, padded length) per bucket, in the order they are stored in the row."""


def segment_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    vtx_buckets: torch.Tensor | Buckets | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers' attention-function contract: query [1, heads, T, d] and key/value
    [1, kv_heads, T, d] in; [1, T, heads, d] out (no attention weights).

    `vtx_buckets` is the layout, as a tuple or as the flat CPU tensor the trainer passes
    (`Batch.bucket_table`). Under torch.compile the model call's keywords are graph
    inputs: a tuple is guarded on its length and values, so every new bucket count recompiled
    the model until torch.compile gave up and ran eager for good (measured: bench/RESULTS.md,
    "Figures from code comments", Attention), while a tensor is one input whose size is
    symbolic. Read here, outside the graph, it costs a `.tolist()` of a few ints and never
    waits for a GPU."""
    if vtx_buckets is None:
        raise RuntimeError(
            f"{NAME} attention needs the batch's vtx_buckets "
            "(trainer.data.batches.collate lays them out)"
        )
    if isinstance(vtx_buckets, torch.Tensor):
        flat = vtx_buckets.tolist()
        vtx_buckets = tuple(zip(flat[::2], flat[1::2], strict=True))
    _refuse_unsupported(kwargs, max(length for _, length in vtx_buckets))
    _, heads, total, dim = query.shape
    sizes = [n * length for n, length in vtx_buckets]
    if sum(sizes) != total:
        raise RuntimeError(f"vtx_buckets cover {sum(sizes)} tokens but the batch row has {total}")
    gqa = key.shape[1] != heads
    # One split per tensor, not an index and a slice per bucket: autograd turns every slice's
    # gradient into a zero tensor the size of the whole row (filled, copied into, summed), so
    # slicing cost O(buckets x row) per layer; a split's backward is one concatenation. The
    # sdpa calls get the same views, so results are bit-identical on every device. Faster per
    # layer and per step on CPU (bench.trainer.attention; measured: bench/RESULTS.md, "Attention
    # on CPU: bucketed sdpa paths").
    parts = (t.squeeze(0).split(sizes, dim=1) for t in (query, key, value))
    outputs = []
    # The backward pass's sdpa calls take the backend the forward chose.
    with sdpa_kernel(BACKENDS):
        for (n, length), q, k, v in zip(vtx_buckets, *parts, strict=True):
            out = F.scaled_dot_product_attention(
                _per_example(q, n, length), _per_example(k, n, length), _per_example(v, n, length),
                dropout_p=dropout, is_causal=True, scale=scaling, enable_gqa=gqa,
            )  # fmt: skip
            outputs.append(out.transpose(1, 2).reshape(n * length, heads, dim))
    return torch.cat(outputs).unsqueeze(0), None


def _per_example(x: torch.Tensor, n: int, length: int) -> torch.Tensor:
    """[heads, n * length, d] -> [n, heads, length, d], a view."""
    return x.unflatten(1, (n, length)).transpose(0, 1)


def _refuse_unsupported(kwargs: dict[str, Any], longest: int) -> None:
    """Features of some architectures this kernel does not implement: fail, never compute
    something else silently."""
    window = kwargs.get("sliding_window")
    if window is not None and longest > window:
        raise ConfigError(
            f"data.max_seq_length: examples of {longest} tokens exceed the model's sliding "
            f"window ({window}); vtx's attention is full-causal, so keep max_seq_length ≤ {window}"
        )
    for name in ("softcap", "s_aux"):
        if kwargs.get(name) is not None:
            raise ConfigError(
                f"model: this architecture uses attention {name}, which vtx's bucketed "
                "attention does not implement; train it with another trainer"
            )


def no_mask(*args: Any, **kwargs: Any) -> None:
    """The mask builder for this attention: masks are implied by the bucket layout."""
    return None


def use_segment_attention(model: torch.nn.Module) -> None:
    """Switch a transformers model to bucketed attention, or refuse with a clear error."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    # Opaque to torch.compile: a Python loop over buckets would specialise compiled graphs on each
    # batch's layout and recompile every step (measured: bench/RESULTS.md, "Figures from code
    # comments", Attention).
    AttentionInterface.register(NAME, torch.compiler.disable(segment_attention))
    AttentionMaskInterface.register(NAME, no_mask)
    model_type = getattr(model.config, "model_type", type(model).__name__)
    if not model._can_set_attn_implementation():
        raise ConfigError(
            f"model: {model_type} does not use transformers' attention interface, which vtx's "
            "trainer needs to keep packed examples apart; choose a model type that supports "
            "attn_implementation (llama, qwen2, mistral, gemma, phi3, ...)"
        )
    model.set_attn_implementation(NAME)
    if model.config._attn_implementation != NAME:
        raise ConfigError(f"model: {model_type} refused attn_implementation={NAME!r}")
