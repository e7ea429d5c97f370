"""trainer.model.attention's bucketed attention: the same results and gradients as the per-bucket
slicing it replaced, and as plain attention over each example alone."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from trainer.model.attention import segment_attention

LAYOUTS = [
    ((1, 5),),
    ((3, 7), (1, 9)),
    ((11, 26), (7, 40), (2, 85), (1, 217)),
]
HEADS = [(4, 4), (4, 2), (8, 1)]  # (query heads, key-value heads): MHA, GQA, MQA
HEAD_DIM = 16


def sliced_attention(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, buckets: tuple, scale: float
) -> torch.Tensor:
    """The implementation the split replaced: an index and a slice per bucket."""
    _, heads, _, dim = query.shape
    outputs, start = [], 0
    for n, length in buckets:
        span = slice(start, start + n * length)
        start += n * length
        q, k, v = (
            t[0, :, span].unflatten(1, (n, length)).transpose(0, 1) for t in (query, key, value)
        )
        out = F.scaled_dot_product_attention(
            q, k, v, is_causal=True, scale=scale, enable_gqa=key.shape[1] != heads
        )
        outputs.append(out.transpose(1, 2).reshape(1, n * length, heads, dim))
    return torch.cat(outputs, dim=1)


def llama_layout(tokens: int, heads: int, dtype: torch.dtype) -> torch.Tensor:
    """[1, heads, T, d] as a view of [1, T, heads, d], the layout Llama's projections give."""
    return torch.randn(1, tokens, heads, HEAD_DIM, dtype=dtype).transpose(1, 2)


def forward_backward(attention, inputs: list[torch.Tensor], grad: torch.Tensor) -> list:
    leaves = [t.detach().clone().requires_grad_() for t in inputs]
    out = attention(*leaves)
    out.backward(grad)
    return [out, *(t.grad for t in leaves)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(("heads", "kv_heads"), HEADS)
@pytest.mark.parametrize("buckets", LAYOUTS)
def test_split_path_is_bit_identical_to_per_bucket_slicing(buckets, heads, kv_heads, dtype):
    torch.manual_seed(0)
    tokens = sum(n * length for n, length in buckets)
    inputs = [llama_layout(tokens, h, dtype) for h in (heads, kv_heads, kv_heads)]
    grad = torch.randn(1, tokens, heads, HEAD_DIM, dtype=dtype)
    scale = HEAD_DIM**-0.5

    def ours(q, k, v):
        return segment_attention(None, q, k, v, None, scaling=scale, vtx_buckets=buckets)[0]

    def before(q, k, v):
        return sliced_attention(q, k, v, buckets, scale)

    for got, want in zip(
        forward_backward(ours, inputs, grad), forward_backward(before, inputs, grad), strict=True
    ):
        assert torch.equal(got, want)


def _alone(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    """Plain softmax attention over one example's real tokens: q [heads, L, d] -> [L, heads, d]."""
    group = q.shape[0] // k.shape[0]
    k, v = k.repeat_interleave(group, 0), v.repeat_interleave(group, 0)
    length = q.shape[1]
    future = torch.ones(length, length, dtype=torch.bool).triu(1)
    scores = (q @ k.transpose(1, 2) * scale).masked_fill(future, float("-inf"))
    return (scores.softmax(-1) @ v).transpose(0, 1)


@pytest.mark.parametrize(("heads", "kv_heads"), HEADS)
def test_each_example_gets_attention_over_its_own_tokens_and_their_gradients(heads, kv_heads):
    torch.manual_seed(1)
    buckets = ((3, 7), (2, 12))
    real = [5, 6, 7, 9, 12]  # each example's length; the rest of its bucket slot is padding
    tokens = sum(n * length for n, length in buckets)
    inputs = [llama_layout(tokens, h, torch.float64) for h in (heads, kv_heads, kv_heads)]
    grad = torch.randn(1, tokens, heads, HEAD_DIM, dtype=torch.float64)
    starts = [0, 7, 14, 21, 33]
    for start, length in zip(starts, real, strict=True):  # padding's output gets no gradient
        grad[0, start + length : start + (7 if start < 21 else 12)] = 0
    scale = HEAD_DIM**-0.5

    def ours(q, k, v):
        return segment_attention(None, q, k, v, None, scaling=scale, vtx_buckets=buckets)[0]

    def reference(q, k, v):
        out = torch.zeros(1, tokens, heads, HEAD_DIM, dtype=q.dtype)
        for start, length in zip(starts, real, strict=True):
            span = slice(start, start + length)
            out[0, span] = _alone(q[0, :, span], k[0, :, span], v[0, :, span], scale)
        return out

    got, want = forward_backward(ours, inputs, grad), forward_backward(reference, inputs, grad)
    for start, length in zip(starts, real, strict=True):
        span = slice(start, start + length)
        torch.testing.assert_close(got[0][0, span], want[0][0, span])
        for got_grad, want_grad in zip(got[1:], want[1:], strict=True):
            torch.testing.assert_close(got_grad[0, :, span], want_grad[0, :, span])


def test_buckets_that_do_not_cover_the_row_are_refused():
    q = llama_layout(10, 4, torch.float32)
    k = v = llama_layout(10, 2, torch.float32)
    with pytest.raises(RuntimeError, match="vtx_buckets cover 9 tokens but the batch row has 10"):
        segment_attention(None, q, k, v, None, vtx_buckets=((3, 3),))


def test_bucketed_calls_never_reach_cudnn(monkeypatch: pytest.MonkeyPatch) -> None:
    """cuDNN plans every new shape anew, and bucket shapes change every step (its host time per
    call made a GPU step mostly idle): each bucket's sdpa call runs with that backend off, and the
    caller's setting is back afterwards."""
    import trainer.model.attention as attention

    seen, sdpa = [], F.scaled_dot_product_attention

    def recording(*args, **kwargs):
        seen.append(torch.backends.cuda.cudnn_sdp_enabled())
        return sdpa(*args, **kwargs)

    monkeypatch.setattr(attention.F, "scaled_dot_product_attention", recording)
    q = llama_layout(17, 4, torch.float32)
    k = v = llama_layout(17, 2, torch.float32)
    before = torch.backends.cuda.cudnn_sdp_enabled()
    segment_attention(None, q, k, v, None, vtx_buckets=((2, 3), (1, 11)))
    assert seen == [False, False]
    assert torch.backends.cuda.cudnn_sdp_enabled() == before
