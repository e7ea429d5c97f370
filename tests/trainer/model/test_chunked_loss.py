"""The chunked loss (trainer.model.chunked_loss) against the materialised logits it replaces: the
same loss and the same gradients, on raw tensors and through tiny models built in-process, under
LoRA, DDP (two gloo processes) and FSDP2, and one training step through the loop either way."""

from __future__ import annotations

import multiprocessing
import os
import random
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist

from jobs.local.plumbing.ports import free_port
from tests.trainer.conftest import TINY_LLAMA, TOKENIZER, tiny_config
from trainer.config.schema import ModelConfig, parse_config
from trainer.data.batches import IGNORE, Example, Row, collate
from trainer.model.chunked_loss import (
    MODEL_TYPES,
    LogitTransform,
    chunk_rows,
    chunkable_head,
    linear_cross_entropy,
    materialised_cross_entropy,
)
from trainer.model.loading import build_model
from trainer.training.loop import loss_sum, train_step

VOCAB = TINY_LLAMA["vocab_size"]
FIVE_ROWS_MB = 5 * 4 * VOCAB / 1e6
"""A chunk budget of five positions at the tiny vocabulary: a batch spans several chunks and a
ragged last one."""
TOLERANCE = 1e-5
"""Largest difference allowed, relative to the tensor's largest entry: fp32 sums of a few hundred
terms taken in another order differ by a few ulps (~1e-7); a missed term, a wrong scale or a
gradient counted twice is off by 1e-2 or more."""
FLOOR = 1e-8
"""Below this a gradient is rounding noise (an MoE router's, whose top-1 choice has none)."""


def assert_near(got: torch.Tensor, want: torch.Tensor, name: str = "") -> None:
    error = (got - want).abs().max().item()
    scale = want.abs().max().item()
    assert error <= TOLERANCE * scale + FLOOR, (
        f"{name}: off by {error:.3g} at a scale of {scale:.3g}"
    )


@pytest.fixture(autouse=True)
def _one_process_group():
    """FSDP2 and the loop's collectives need a process group; a group of one, as the trainer
    makes outside torchrun."""
    if not dist.is_initialized():
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def random_batch(seed: int, examples: int = 6) -> Any:
    """Examples of 5-40 tokens whose first few tokens have no target (a prompt)."""
    rng = random.Random(seed)
    rows = []
    for _ in range(examples):
        n = rng.randint(5, 40)
        ids = [rng.randrange(VOCAB) for _ in range(n)]
        prompt = rng.randint(0, n // 2)
        targets = [IGNORE] * prompt + ids[prompt + 1 :] + [IGNORE]
        rows.append(Row((Example(ids, targets[:n]),)))
    return collate(rows, pad_id=0)


def tiny_model(model_type: str = "llama", lora: dict | None = None, **config: Any) -> Any:
    options = {**TINY_LLAMA, "model_type": model_type, **config}
    return build_model(ModelConfig(config=options, tokenizer=str(TOKENIZER), lora=lora), seed=3)


def loss_and_grads(model: Any, batch: Any, chunk_mb: float | None) -> tuple[float, dict]:
    model.zero_grad(set_to_none=True)
    loss = loss_sum(model, batch, chunk_mb)
    (loss * 0.37).backward()  # a loss scale, as the loop's 1/targets, reaches every gradient
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return loss.item(), grads


def assert_same_loss_and_grads(model: Any, batch: Any) -> dict:
    plain_loss, plain = loss_and_grads(model, batch, None)
    chunked_loss, chunked = loss_and_grads(model, batch, FIVE_ROWS_MB)
    assert chunked_loss == pytest.approx(plain_loss, rel=1e-6)
    assert chunked.keys() == plain.keys()
    for name in plain:
        assert_near(chunked[name], plain[name], name)
    return chunked


# ---------------------------------------------------------------- on tensors


@pytest.mark.parametrize(
    "transform",
    [LogitTransform(), LogitTransform(scale=0.5), LogitTransform(softcap=2.0)],
    ids=["plain", "scaled", "softcapped"],
)
@pytest.mark.parametrize("rows", [1, 7, 64])
@pytest.mark.parametrize("bias", [False, True])
def test_loss_and_gradients_match_materialised_logits(transform, rows, bias):
    torch.manual_seed(rows)
    hidden = torch.randn(64, 24, requires_grad=True)
    weight = torch.randn(300, 24, requires_grad=True)
    bias_ = torch.randn(300, requires_grad=True) if bias else None
    targets = torch.randint(0, 300, (64,))
    inputs = [hidden, weight] + ([bias_] if bias else [])
    expected = materialised_cross_entropy(hidden, weight, bias_, targets, transform)
    expected_grads = torch.autograd.grad(expected * 3.0, inputs)
    loss = linear_cross_entropy(hidden, weight, bias_, targets, rows, transform)
    grads = torch.autograd.grad(loss * 3.0, inputs)
    assert loss.dtype == torch.float32
    assert_near(loss, expected)
    for got, want in zip(grads, expected_grads, strict=True):
        assert_near(got, want)


def test_a_frozen_head_gets_no_gradient_and_no_accumulator():
    hidden = torch.randn(10, 8, requires_grad=True)
    weight = torch.randn(50, 8)  # requires_grad False, as under LoRA
    targets = torch.randint(0, 50, (10,))
    loss = linear_cross_entropy(hidden, weight, None, targets, 3)
    loss.backward()
    expected = torch.autograd.grad(
        materialised_cross_entropy(hidden, weight, None, targets), hidden
    )
    assert_near(hidden.grad, expected[0])
    assert weight.grad is None


def test_without_grad_mode_only_the_loss_is_computed():
    hidden = torch.randn(10, 8, requires_grad=True)
    weight = torch.randn(50, 8, requires_grad=True)
    targets = torch.randint(0, 50, (10,))
    with torch.no_grad():
        loss = linear_cross_entropy(hidden, weight, None, targets, 3)
    assert not loss.requires_grad
    assert_near(loss, materialised_cross_entropy(hidden, weight, None, targets))


def test_under_bf16_autocast_the_matmuls_run_in_bf16_as_the_heads_would():
    """The trainer's GPU path (bf16 autocast); CPU autocast runs the same code."""
    torch.manual_seed(0)
    hidden = torch.randn(40, 32, requires_grad=True)
    weight = (torch.randn(200, 32) * 0.2).requires_grad_()
    targets = torch.randint(0, 200, (40,))
    results = []
    for chunked in (False, True):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            if chunked:
                loss = linear_cross_entropy(hidden, weight, None, targets, 16)
            else:
                loss = materialised_cross_entropy(hidden, weight, None, targets)
        results.append((loss, *torch.autograd.grad(loss, [hidden, weight])))
    for got, want in zip(results[1], results[0], strict=True):
        assert got.dtype == want.dtype
        error = (got - want).abs().max().item()
        assert error <= 1e-2 * want.abs().max().item()  # bf16 keeps 8 bits: ~4e-3 relative


def test_chunk_rows_follow_the_memory_budget():
    assert chunk_rows(128_000, 256) == 500  # 500 rows x 128k x 4 bytes = 256 MB
    assert chunk_rows(32_000, 256) == 2_000
    assert chunk_rows(128_000, 0.001) == 1  # never zero


# ---------------------------------------------------------------- through models


def test_tied_embeddings_get_both_gradients():
    model = tiny_model()  # TINY_LLAMA ties the head to the input embeddings
    assert model.lm_head.weight is model.model.embed_tokens.weight
    grads = assert_same_loss_and_grads(model, random_batch(0))
    assert "model.embed_tokens.weight" in grads


def test_untied_head_gets_its_gradient():
    model = tiny_model(tie_word_embeddings=False)
    grads = assert_same_loss_and_grads(model, random_batch(1))
    assert {"lm_head.weight", "model.embed_tokens.weight"} <= grads.keys()


def test_lora_keeps_the_head_frozen_and_adapters_get_the_same_gradients():
    model = tiny_model(lora={"r": 4})
    grads = assert_same_loss_and_grads(model, random_batch(2))
    assert grads and all("lora_" in name for name in grads)


def test_an_adapted_head_uses_the_materialised_path():
    """peft wraps a targeted lm_head: its output is no longer `hidden @ weight.T`."""
    model = tiny_model(
        lora={"r": 4, "target_modules": ["q_proj", "lm_head"]}, tie_word_embeddings=False
    )
    assert chunkable_head(model) is None
    assert_same_loss_and_grads(model, random_batch(3))


def test_an_unknown_model_type_uses_the_materialised_path():
    model = tiny_model()
    model.config.model_type = "minicpm"  # scales its hidden states before the head
    assert chunkable_head(model) is None


TRANSFORMS = {
    # Small caps and large scales, so that a wrong transform moves the loss of a random init.
    "gemma2": {"final_logit_softcapping": 0.1, "attn_logit_softcapping": None, "head_dim": 8},
    "gemma3_text": {"final_logit_softcapping": 0.1, "head_dim": 8},
    "gemma": {"head_dim": 8},
    "cohere": {"logit_scale": 8.0},
    "granite": {"logits_scaling": 0.125},
    "phi3": {"pad_token_id": 0},
    "mixtral": {"num_local_experts": 2, "num_experts_per_tok": 1},
    "qwen2_moe": {"num_experts": 2, "num_experts_per_tok": 1, "moe_intermediate_size": 16},
    "qwen3_moe": {"num_experts": 2, "num_experts_per_tok": 1, "moe_intermediate_size": 16},
}


@pytest.mark.parametrize("model_type", sorted(MODEL_TYPES))
def test_every_listed_model_type_matches_its_own_logits(model_type):
    model = tiny_model(model_type, **TRANSFORMS.get(model_type, {}))
    assert chunkable_head(model) is not None
    assert_same_loss_and_grads(model, random_batch(4))


def test_fsdp2_parameters_get_the_same_gradients():
    from torch.distributed.fsdp import fully_shard

    sharded = tiny_model(tie_word_embeddings=False)
    reference = tiny_model(tie_word_embeddings=False)
    for layer in sharded.model.layers:
        fully_shard(layer)
    fully_shard(sharded)
    batch = random_batch(5)
    expected_loss, expected = loss_and_grads(reference, batch, None)
    loss, grads = loss_and_grads(sharded, batch, FIVE_ROWS_MB)
    assert loss == pytest.approx(expected_loss, rel=1e-6)
    assert grads.keys() == expected.keys()
    for name, grad in grads.items():
        assert_near(grad.full_tensor(), expected[name], name)


def test_a_training_step_through_the_loop_gives_the_same_loss_and_gradient_norm(tmp_path):
    results = {}
    for chunk_mb in (None, FIVE_ROWS_MB):
        cfg = parse_config(
            tiny_config(
                "x.jsonl", str(tmp_path), loss_chunk_mb=chunk_mb, gradient_accumulation_steps=2
            )
        )
        model = build_model(cfg.model, cfg.seed)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
        stream = iter([random_batch(6), random_batch(7)])
        loss, grad_norm, _ = train_step(model, stream, optimizer, cfg, torch.device("cpu"))
        results[chunk_mb] = (loss.item(), grad_norm.item())
    assert results[FIVE_ROWS_MB] == pytest.approx(results[None], rel=1e-6)


def test_the_default_config_chunks_and_null_materialises(tmp_path):
    assert parse_config(tiny_config("x.jsonl", str(tmp_path))).loss_chunk_mb == 256.0
    cfg = tiny_config("x.jsonl", str(tmp_path), loss_chunk_mb=None)
    assert parse_config(cfg).loss_chunk_mb is None


# ---------------------------------------------------------------- DDP, two processes


def _ddp_worker(rank: int, port: int, out: str) -> None:
    """One rank: its own batch through DDP with the chunked loss; the gradients DDP leaves must
    be the mean of both ranks' materialised-path gradients, which each rank computes alone."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    try:
        from torch.nn.parallel import DistributedDataParallel

        ddp = DistributedDataParallel(tiny_model())
        loss_sum(ddp, random_batch(10 + rank), FIVE_ROWS_MB).backward()
        reference = tiny_model()
        for seed in (10, 11):
            (loss_sum(reference, random_batch(seed), None) / 2).backward()
        expected = dict(reference.named_parameters())
        for name, param in ddp.module.named_parameters():
            assert_near(param.grad, expected[name].grad, name)
        Path(out, f"rank{rank}.ok").touch()
    finally:
        dist.destroy_process_group()


@pytest.mark.slow  # spawns processes
def test_ddp_averages_the_chunked_gradients_of_two_processes(tmp_path):
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([__name__, "transformers.models.llama.modeling_llama"])
    port = free_port()
    procs = [context.Process(target=_ddp_worker, args=(r, port, str(tmp_path))) for r in (0, 1)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(120)
        if proc.exitcode is None:
            proc.kill()
    assert [proc.exitcode for proc in procs] == [0, 0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rank0.ok", "rank1.ok"]
