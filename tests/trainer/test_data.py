from __future__ import annotations

import itertools
import json

import pytest
import torch

from tests.trainer.conftest import DATASET, TINY_LLAMA, TOKENIZER
from trainer.config import DataConfig
from trainer.data import (
    IGNORE,
    BatchStream,
    Example,
    pack_rows,
    read_records,
    single_rows,
    tokenize_record,
    tokenize_records,
)


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


def test_packing_fits_rows_restarts_positions_and_keeps_every_token(tokenizer):
    cfg = DataConfig(path="x", max_seq_length=128)
    examples = [tokenize_record(r, tokenizer, cfg) for r in read_records(str(DATASET))]
    rows = pack_rows(examples, 128)
    assert all(len(r.input_ids) <= 128 for r in rows)
    assert sum(len(r.input_ids) for r in rows) == sum(len(e.input_ids) for e in examples)
    starts = sum(r.position_ids.count(0) for r in rows)
    assert starts == len(examples)
    # Packing wastes far fewer slots than one padded example per row.
    packed_fill = sum(len(r.input_ids) for r in rows) / (128 * len(rows))
    padded_fill = sum(len(e.input_ids) for e in examples) / (
        max(len(e.input_ids) for e in examples) * len(examples)
    )
    assert packed_fill > 0.9 > padded_fill


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


def test_ranks_get_disjoint_equal_shares_and_epochs_reshuffle():
    rows = _rows(12)
    shares = [BatchStream(rows, batch_size=2, seed=1, rank=r, world_size=2) for r in range(2)]
    assert shares[0].batches_per_epoch == shares[1].batches_per_epoch == 3
    seen = [{i for batch in s._plan for i in batch} for s in shares]
    assert not seen[0] & seen[1]
    first_epoch = list(shares[0]._plan)
    for _ in range(3):
        next(shares[0])
    next(shares[0])
    assert shares[0].epoch == 1 and shares[0]._plan != first_epoch


def test_packed_rows_give_the_same_logits_as_separate_sequences(tokenizer):
    from transformers import AutoConfig, AutoModelForCausalLM

    torch.manual_seed(0)
    options = dict(TINY_LLAMA)
    model = AutoModelForCausalLM.from_config(
        AutoConfig.for_model(options.pop("model_type"), **options)
    ).eval()
    cfg = DataConfig(path="x", max_seq_length=128)
    examples = [tokenize_record(r, tokenizer, cfg) for r in read_records(str(DATASET))[:6]]
    assert sum(len(e.input_ids) for e in examples[:3]) <= 128, "three examples should fit one row"
    (row,) = pack_rows(examples[:3], 128)
    with torch.no_grad():
        packed = model(
            input_ids=torch.tensor([row.input_ids]),
            position_ids=torch.tensor([row.position_ids]),
            use_cache=False,
        ).logits[0]
        offset = 0
        # Rows place examples longest first; walk the row by its position restarts.
        starts = [i for i, p in enumerate(row.position_ids) if p == 0] + [len(row.input_ids)]
        for a, b in itertools.pairwise(starts):
            alone = model(input_ids=torch.tensor([row.input_ids[a:b]]), use_cache=False).logits[0]
            torch.testing.assert_close(packed[a:b], alone, rtol=1e-5, atol=1e-5)
            offset += b - a
    assert offset == len(row.input_ids)


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
