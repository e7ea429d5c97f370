from __future__ import annotations

import itertools
import json

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.trainer.conftest import DATASET, TINY_LLAMA, TOKENIZER
from trainer.config.schema import DataConfig
from trainer.data.batches import (
    BUCKET_COST_SLOTS,
    IGNORE,
    BatchStream,
    Example,
    bucket_cost_slots,
    collate,
    pack_rows,
    plan_buckets,
    read_records,
    single_rows,
    tokenize_record,
    tokenize_records,
)
from trainer.model.attention import use_segment_attention
from trainer.model.loading import layer_params


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(TOKENIZER))


def _learned_text(example: Example, tokenizer) -> str:
    return tokenizer.decode([t for t in example.targets if t != IGNORE])


def test_chat_labels_cover_only_assistant_turns(tokenizer):
    record = {
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "What is 2 plus 2?"},
            {"role": "assistant", "content": "2 plus 2 is 4."},
            {"role": "user", "content": "And 3 plus 3?"},
            {"role": "assistant", "content": "6."},
        ]
    }
    example = tokenize_record(record, tokenizer, DataConfig(path="x"))
    assert _learned_text(example, tokenizer) == "2 plus 2 is 4.<|end|>6.<|end|>"
    full = tokenizer.decode(example.input_ids)
    assert "What is 2 plus 2?" in full and "Be brief." in full


def test_text_rows_learn_every_token_and_stop_with_eos(tokenizer):
    example = tokenize_record({"text": "apple river"}, tokenizer, DataConfig(path="x"))
    assert example.targets[:-1] == example.input_ids[1:]
    assert example.input_ids[-1] == tokenizer.eos_token_id and example.targets[-1] == IGNORE


def test_missing_fields_name_the_fix(tokenizer):
    with pytest.raises(ValueError, match=r"set data\.text_field or data\.messages_field"):
        tokenize_record({"prompt": "x"}, tokenizer, DataConfig(path="x"))


def test_parquet_and_jsonl_read_the_same_records(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    records = read_records(str(DATASET))[:5]
    pq.write_table(pa.Table.from_pylist(records), tmp_path / "d.parquet")
    assert read_records(str(tmp_path / "d.parquet")) == records


def test_packing_fits_rows_and_keeps_every_example(tokenizer):
    cfg = DataConfig(path="x", max_seq_length=128)
    examples = [tokenize_record(r, tokenizer, cfg) for r in read_records(str(DATASET))]
    rows = pack_rows(examples, 128)
    assert all(r.n_tokens <= 128 for r in rows)
    assert sorted(id(e) for r in rows for e in r.examples) == sorted(id(e) for e in examples)
    # Packing wastes far fewer slots than one padded example per row.
    packed_fill = sum(r.n_tokens for r in rows) / (128 * len(rows))
    padded_fill = sum(len(e.input_ids) for e in examples) / (
        max(len(e.input_ids) for e in examples) * len(examples)
    )
    assert packed_fill > 0.9 > padded_fill


def _example(length: int, first: int = 1) -> Example:
    ids = list(range(first, first + length))
    return Example(ids, [*ids[1:], IGNORE])


def test_collate_lays_examples_out_in_buckets_with_ignored_padding():
    lengths = [5, 60, 7, 58, 6, 200]
    batch = collate(single_rows([_example(n) for n in lengths]), pad_id=0)
    assert batch.lengths == tuple(sorted(lengths))
    assert sum(n * width for n, width in batch.buckets) == batch.n_slots == batch.input_ids.shape[1]
    assert sum(n for n, _ in batch.buckets) == len(lengths) and batch.n_tokens == sum(lengths)
    # Far fewer slots than padding every example to the longest, as a padding collator does.
    assert batch.n_slots < 0.5 * max(lengths) * len(lengths)
    ids, pos, tgt = (t[0].tolist() for t in (batch.input_ids, batch.position_ids, batch.targets))
    examples = iter(batch.lengths)
    start = 0
    for n, width in batch.buckets:
        for _ in range(n):
            real = next(examples)
            assert pos[start : start + width] == list(range(width))
            assert ids[start : start + real] == list(range(1, real + 1))
            assert tgt[start + real - 1 : start + width] == [IGNORE] * (width - real + 1)
            start += width
    assert batch.target_index.tolist() == [i for i, t in enumerate(tgt) if t != IGNORE]
    assert batch.n_targets == sum(n - 1 for n in lengths)


def test_a_wider_layer_buys_less_padding_on_cpu_and_gpus_keep_the_first_choice():
    # CPU: a bucket is worth ~600k parameter-slots (the measurements beside the constant).
    assert bucket_cost_slots(37_000, "cpu") == 16  # the CPU bench model (hidden 64)
    assert bucket_cost_slots(786_000, "cpu") == 1  # hidden 256: every distinct length its own
    assert bucket_cost_slots(5_000, "cpu") == BUCKET_COST_SLOTS  # capped
    assert bucket_cost_slots(218e6, "cuda") == BUCKET_COST_SLOTS  # not measured on a GPU
    assert bucket_cost_slots(0, "cpu") == BUCKET_COST_SLOTS  # layers unknown
    lengths = [5, 60, 7, 58, 6, 200, 61]
    cheap = collate(single_rows([_example(n) for n in lengths]), pad_id=0, bucket_cost=1)
    dear = collate(single_rows([_example(n) for n in lengths]), pad_id=0, bucket_cost=32)
    assert cheap.n_tokens == dear.n_tokens and cheap.n_slots < dear.n_slots
    assert len(cheap.buckets) > len(dear.buckets)


def test_layer_params_counts_a_decoder_layer_without_the_embeddings():
    from transformers import AutoConfig, AutoModelForCausalLM

    options = dict(TINY_LLAMA)
    model = AutoModelForCausalLM.from_config(
        AutoConfig.for_model(options.pop("model_type"), **options)
    )
    layer = sum(p.numel() for p in model.model.layers[0].parameters())
    final_norm = model.model.norm.weight.numel()
    assert layer_params(model) == (2 * layer + final_norm) / 2  # two layers, tied head


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 64), min_size=1, max_size=9), st.integers(0, 100))
def test_bucket_plan_is_the_cheapest_split(lengths, cost):
    lengths = sorted(lengths)

    def price(sizes: list[int]) -> int:
        ends = list(itertools.accumulate(sizes))
        return sum(n * lengths[end - 1] + cost for n, end in zip(sizes, ends, strict=True))

    def splits(m: int):  # every composition of m into contiguous bucket sizes
        for cuts in itertools.product([False, True], repeat=m - 1):
            sizes, run = [], 1
            for cut in cuts:
                if cut:
                    sizes.append(run)
                    run = 0
                run += 1
            yield [*sizes, run]

    plan = plan_buckets(lengths, cost)
    assert sum(plan) == len(lengths)
    assert price(plan) == min(price(s) for s in splits(len(lengths)))


def _rows(n: int):
    return single_rows(
        [Example(list(range(1, 2 + i % 5)), [IGNORE] * (1 + i % 5)) for i in range(n)]
    )


@pytest.mark.parametrize("consumed", [3, 5, 11])  # mid-epoch, at the boundary, two epochs in
def test_stream_resumes_at_the_exact_batch_across_epochs(consumed):
    rows = _rows(10)  # batch 2 -> 5 batches per epoch
    stream = BatchStream(rows, batch_size=2, seed=3)
    for _ in range(consumed):
        next(stream)
    state = json.loads(json.dumps(stream.state_dict()))
    expected = [next(stream) for _ in range(7)]
    resumed = BatchStream(rows, batch_size=2, seed=3)
    resumed.load_state_dict(state)
    for want, got in zip(expected, (next(resumed) for _ in range(7)), strict=True):
        assert torch.equal(want.input_ids, got.input_ids)


def _numbered_rows(n: int):
    """Rows of one one-token example each, numbered by that token: a batch names its rows."""
    return single_rows([Example([100 + i], [IGNORE]) for i in range(n)])


def _numbers(batch) -> list[int]:
    return sorted(t - 100 for t in batch.input_ids[0].tolist())


def test_ranks_get_disjoint_equal_shares_and_epochs_reshuffle():
    rows = _numbered_rows(12)
    shares = [BatchStream(rows, batch_size=2, seed=1, rank=r, world_size=2) for r in range(2)]
    assert shares[0].batches_per_epoch == 6  # global: the same on any number of ranks
    first = [{i for _ in range(3) for i in _numbers(next(s))} for s in shares]
    assert not first[0] & first[1] and first[0] | first[1] == set(range(12))
    assert all(s.state_dict() == {"batches": 6} for s in shares)
    second_epoch = {i for _ in range(3) for i in _numbers(next(shares[0]))}
    assert second_epoch != first[0]


def _take(world_size: int, start: int, rounds: int) -> tuple[list[list[int]], int]:
    """`rounds` batches from each of `world_size` ranks that start at global batch `start`,
    in global order (round i of rank r is global batch start + i * world_size + r)."""
    streams = [
        BatchStream(_numbered_rows(10), 2, seed=5, rank=r, world_size=world_size)
        for r in range(world_size)
    ]
    for stream in streams:
        stream.load_state_dict({"batches": start})
    taken = [_numbers(next(s)) for _ in range(rounds) for s in streams]
    return taken, streams[0].state_dict()["batches"]


@pytest.mark.parametrize(("written_by", "resumed_on"), [(2, 1), (1, 2), (2, 3), (3, 2)])
@pytest.mark.parametrize("steps_before", [1, 3])  # inside the first epoch; into the second
def test_any_number_of_ranks_continues_the_global_order_where_another_stopped(
    written_by, resumed_on, steps_before
):
    """N ranks take some steps of a global batch of 6 micro-batches, M ranks continue from the
    position they saved: together they take exactly what one rank would have, in its order,
    every row once per epoch (5 batches of 2 rows an epoch, so steps straddle epochs)."""
    steps = 5  # 30 micro-batches: 6 epochs
    one_rank, _ = _take(1, 0, steps * 6)
    before, position = _take(written_by, 0, steps_before * 6 // written_by)
    assert position == steps_before * 6
    after, _ = _take(resumed_on, position, (steps - steps_before) * 6 // resumed_on)
    assert before + after == one_rank
    for epoch in range(6):
        rows = [i for batch in one_rank[epoch * 5 : (epoch + 1) * 5] for i in batch]
        assert sorted(rows) == list(range(10))


def test_a_bucketed_batch_gives_each_example_its_logits_alone(tokenizer):
    from transformers import AutoConfig, AutoModelForCausalLM

    torch.manual_seed(0)
    options = dict(TINY_LLAMA)
    model = AutoModelForCausalLM.from_config(
        AutoConfig.for_model(options.pop("model_type"), **options)
    ).eval()
    cfg = DataConfig(path="x", max_seq_length=128)
    examples = [tokenize_record(r, tokenizer, cfg) for r in read_records(str(DATASET))[:9]]
    rows = pack_rows(examples, 128)
    batch = collate(rows, pad_id=tokenizer.pad_token_id)
    assert len(batch.buckets) > 1, "the test should cover several buckets"
    with torch.no_grad():
        alone = {  # plain sdpa, one example at a time: the reference
            tuple(e.input_ids): model(input_ids=torch.tensor([e.input_ids])).logits[0]
            for e in examples
        }
        use_segment_attention(model)
        bucketed = model(
            input_ids=batch.input_ids,
            position_ids=batch.position_ids,
            vtx_buckets=batch.buckets,
        ).logits[0]
    ids = batch.input_ids[0].tolist()
    lengths, start, seen = iter(batch.lengths), 0, 0
    for n, width in batch.buckets:
        for _ in range(n):
            real = next(lengths)
            want = alone[tuple(ids[start : start + real])]
            torch.testing.assert_close(bucketed[start : start + real], want, rtol=1e-5, atol=1e-5)
            start, seen = start + width, seen + 1
    assert seen == len(examples)


def test_a_line_that_is_not_an_object_is_refused_with_its_line_number(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"text": "fine"}\n\nnull\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:3: expected one JSON object per line"):
        read_records(str(path))


@pytest.mark.parametrize(
    ("record", "problem"),
    [
        ({"messages": None}, "non-empty list"),
        ({"messages": [{"role": "user", "content": ["x"]}]}, "item 0"),
        ({"text": []}, "must be a string"),
    ],
)
def test_malformed_records_name_the_record_and_the_field(tokenizer, record, problem):
    records = [{"text": "fine"}, record]
    with pytest.raises(ValueError, match=rf"data.jsonl: record 2: .*{problem}"):
        tokenize_records(records, tokenizer, DataConfig(path="x"), "data.jsonl")
