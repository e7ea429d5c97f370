"""Examples in, batches out: read, tokenize, pack, lay out, and stream per rank with a
resumable position.

Each example becomes `input_ids` plus `targets` already shifted inside the example
(`targets[t]` is the token the model must predict after `input_ids[t]`, -100 where there is
nothing to learn). Shifting per example means no loss term ever crosses from one example into the
next, and the loop's loss is a plain cross-entropy over the batch.

A batch is `per_device_train_batch_size` rows. With packing, a row is several whole examples
(truncated to `max_seq_length`) placed by best-fit decreasing; without, one example. In memory a
batch is one flat row of length buckets (`collate`): its examples sorted by length, grouped, and
right-padded to their bucket's longest, so padding is a few percent whatever the batching mode, and
`trainer.model.attention` runs one causal attention call per bucket. On the shipped dataset real
tokens fill nearly every slot packed or grouped by length, and most of them in random unpacked
batches, which HF's default collator pads far more (measured: bench/RESULTS.md, "Figures from
code comments", Data layout); its padding gets worse as batches grow.

Every rank reads the whole file (fine for fine-tuning sets of up to a few GB) and takes every
`world_size`-th batch of epoch plans that depend only on (seed, epoch): the position in the
stream is one integer counted in global batches, which is what makes resume exact, on any number
of processes.
"""

from __future__ import annotations

import bisect
import io
import json
import random
from dataclasses import dataclass, replace
from typing import Any

import torch

from trainer.config.schema import ConfigError, DataConfig, TrainConfig
from trainer.model.attention import Buckets

IGNORE = -100
# HF's group_by_length heuristic: sort by length inside windows of 50 batches, so batches are
# homogeneous but the epoch order stays random.
MEGABATCH_FACTOR = 50
# What one more bucket costs, in padding token slots: an extra attention call per layer, forward
# and backward, against one more token slot through every layer's matrix multiplies. Both grow
# with the layer count, so the trade is set by a layer's width. Measured on 2 CPU cores
# (bench/RESULTS.md, "Figures from code comments", Data layout): at hidden 64 a cost of
# some slots beats none and 8 and 32 are level; from hidden 256 up, 1 or 2 slots beat 32.
# So a bucket is worth ~600k parameter-slots on CPU. A GPU launches calls asynchronously and
# runs a slot through a layer far faster: not measured there, it keeps the 32 slots chosen first.
BUCKET_COST_SLOTS = 32
CPU_BUCKET_COST_PARAMS = 600_000


def bucket_cost_slots(layer_params: float, device_type: str) -> int:
    """The bucket cost `plan_buckets` should use for a model with `layer_params` matrix
    parameters per layer (`trainer.model.loading.layer_params`) on this kind of device."""
    if device_type != "cpu" or layer_params <= 0:
        return BUCKET_COST_SLOTS
    return max(1, min(BUCKET_COST_SLOTS, round(CPU_BUCKET_COST_PARAMS / layer_params)))


@dataclass(frozen=True)
class Example:
    input_ids: list[int]
    targets: list[int]


@dataclass(frozen=True)
class Row:
    """One row of a batch: one example, or several packed ones (at most max_seq_length
    tokens together)."""

    examples: tuple[Example, ...]

    @property
    def n_tokens(self) -> int:
        return sum(len(e.input_ids) for e in self.examples)


@dataclass
class Batch:
    """One flat row `[1, n_slots]` of length buckets (see `collate`)."""

    input_ids: torch.Tensor
    position_ids: torch.Tensor
    """Restart at 0 for every example and count on through its bucket padding."""
    targets: torch.Tensor
    target_index: torch.Tensor
    """Positions with a target: the only ones whose logits are computed."""
    buckets: Buckets
    """(examples, padded length) per bucket, in storage order; `trainer.model.attention` reads
    it."""
    lengths: tuple[int, ...]
    """Each example's real length, in storage order."""
    n_tokens: int
    """Real (non-padding) tokens in the batch."""
    n_slots: int
    """Token slots including padding: n_tokens / n_slots is the padding efficiency."""

    @property
    def n_targets(self) -> int:
        return len(self.target_index)

    @property
    def bucket_table(self) -> torch.Tensor:
        """`buckets` flattened to `[n0, L0, n1, L1, ...]`, on the CPU whatever the device: what
        the model call passes down to `trainer.model.attention` (why a tensor: `segment_attention`).
        One dimension, since torch.compile would tie two equal ones ([2, 2]) together."""
        return torch.tensor([x for bucket in self.buckets for x in bucket], dtype=torch.long)

    def to(self, device: torch.device) -> Batch:
        return replace(
            self,
            input_ids=self.input_ids.to(device),
            position_ids=self.position_ids.to(device),
            targets=self.targets.to(device),
            target_index=self.target_index.to(device),
        )


# ---------------------------------------------------------------- reading


def read_records(path: str, fmt: str = "auto") -> list[dict[str, Any]]:
    """JSONL or Parquet from a local path or any fsspec URL (gs:// through gcsfs)."""
    import fsspec

    if fmt == "auto":
        fmt = "parquet" if path.endswith(".parquet") else "jsonl"
    with fsspec.open(path, "rb") as f:
        data = f.read()
    if fmt == "parquet":
        import pyarrow.parquet as pq

        return pq.read_table(io.BytesIO(data)).to_pylist()
    lines = enumerate(data.decode("utf-8").splitlines(), start=1)
    return [parse_json_line(line, path, line_no) for line_no, line in lines if line.strip()]


def parse_json_line(line: str | bytes, path: str, line_no: int) -> dict[str, Any]:
    """One JSONL record; a ValueError names the file and the line."""
    try:
        record = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}:{line_no}: not valid JSON: {exc}") from None
    if not isinstance(record, dict):
        raise ValueError(
            f"{path}:{line_no}: expected one JSON object per line, got {type(record).__name__}"
        )
    return record


# ---------------------------------------------------------------- tokenizing


def tokenize_record(record: dict[str, Any], tokenizer: Any, cfg: DataConfig) -> Example:
    if cfg.messages_field in record:
        messages = record[cfg.messages_field]
        _check_messages(messages, cfg.messages_field)
        ids, trainable = _tokenize_chat(messages, tokenizer)
    elif cfg.text_field in record:
        text = record[cfg.text_field]
        if not isinstance(text, str):
            raise ValueError(f"`{cfg.text_field}` must be a string, got {type(text).__name__}")
        ids = tokenizer(text, add_special_tokens=True)["input_ids"]
        if tokenizer.eos_token_id is not None:
            ids = [*ids, tokenizer.eos_token_id]
        trainable = [True] * len(ids)
    else:
        raise ValueError(
            f"record has neither `{cfg.messages_field}` nor `{cfg.text_field}` "
            f"(keys: {sorted(record)}); set data.text_field or data.messages_field"
        )
    ids, trainable = ids[: cfg.max_seq_length], trainable[: cfg.max_seq_length]
    # targets[t] = ids[t + 1] when that token is trainable; the last position predicts nothing.
    targets = [ids[t + 1] if trainable[t + 1] else IGNORE for t in range(len(ids) - 1)]
    return Example(input_ids=list(ids), targets=[*targets, IGNORE])


def _check_messages(messages: Any, field: str) -> None:
    """Chat templates index into messages freely: refuse malformed ones with a message here
    rather than a TypeError from inside Jinja."""
    expected = f'`{field}` must be a non-empty list of {{"role": str, "content": str}}'
    if not isinstance(messages, list) or not messages:
        raise ValueError(f"{expected}, got {messages!r:.60}")
    for i, message in enumerate(messages):
        if not (
            isinstance(message, dict)
            and isinstance(message.get("role"), str)
            and isinstance(message.get("content"), str)
        ):
            raise ValueError(f"{expected}; item {i} is {message!r:.60}")


def tokenize_records(
    records: list[dict[str, Any]], tokenizer: Any, cfg: DataConfig, source: str
) -> list[Example]:
    """Tokenize every record; an error names the source and the record's position."""
    examples = []
    for number, record in enumerate(records, start=1):
        try:
            examples.append(tokenize_record(record, tokenizer, cfg))
        except ValueError as exc:
            raise ValueError(f"{source}: record {number}: {exc}") from None
    return examples


def _tokenize_chat(messages: list[dict[str, Any]], tokenizer: Any) -> tuple[list[int], list[bool]]:
    """Token ids and a per-token flag that is True only inside assistant turns.

    Works with any chat template that renders conversations prefix-stably: the assistant span
    of turn i is what `messages[:i+1]` adds to `messages[:i]` rendered with the generation prompt.
    Templates that are not prefix-stable are refused rather than silently mislabelled."""
    full = tokenizer.apply_chat_template(messages, tokenize=False)
    spans = []
    for i, message in enumerate(messages):
        if message.get("role") != "assistant":
            continue
        before = tokenizer.apply_chat_template(
            messages[:i], tokenize=False, add_generation_prompt=True
        )
        through = tokenizer.apply_chat_template(messages[: i + 1], tokenize=False)
        if not (through.startswith(before) and full.startswith(through)):
            raise ValueError(
                "the tokenizer's chat template does not render conversations prefix-stably, so "
                "assistant turns cannot be located; use a `text` field with pre-rendered text"
            )
        spans.append((len(before), len(through)))
    encoded = tokenizer(full, add_special_tokens=False, return_offsets_mapping=True)
    trainable = [any(a <= start < b for a, b in spans) for start, _ in encoded["offset_mapping"]]
    return list(encoded["input_ids"]), trainable


def split_train_eval(
    examples: list[Example], eval_fraction: float, seed: int
) -> tuple[list[Example], list[Example]]:
    if eval_fraction <= 0:
        return examples, []
    order = list(range(len(examples)))
    random.Random(seed).shuffle(order)
    n_eval = max(1, int(len(examples) * eval_fraction))
    eval_ids = set(order[:n_eval])
    train = [e for i, e in enumerate(examples) if i not in eval_ids]
    return train, [e for i, e in enumerate(examples) if i in eval_ids]


# ---------------------------------------------------------------- rows and batches


def single_rows(examples: list[Example]) -> list[Row]:
    return [Row((e,)) for e in examples]


def pack_rows(examples: list[Example], max_seq_length: int) -> list[Row]:
    """Best-fit decreasing bin packing: O(n log n), deterministic, rows ≤ max_seq_length."""
    order = sorted(range(len(examples)), key=lambda i: (-len(examples[i].input_ids), i))
    bins: list[list[int]] = []
    free: list[tuple[int, int]] = []  # sorted (free slots, bin index)
    for i in order:
        size = len(examples[i].input_ids)
        at = bisect.bisect_left(free, (size, -1))
        if at < len(free):
            room, b = free.pop(at)
        else:
            room, b = max_seq_length, len(bins)
            bins.append([])
        bins[b].append(i)
        if room - size > 0:
            bisect.insort(free, (room - size, b))
    return [Row(tuple(examples[i] for i in members)) for members in bins]


def build_rows(cfg: TrainConfig, tokenizer: Any) -> tuple[list[Row], list[Row]]:
    """The training and eval rows of a config: read, tokenized, split, packed (or one each)."""

    def load(key: str, path: str) -> list[Example]:
        # Bad data is a mistake in the config or the file, not a bug: say which key and where.
        try:
            return tokenize_records(read_records(path, cfg.data.format), tokenizer, cfg.data, path)
        except FileNotFoundError:
            raise ConfigError(f"{key}: {path} does not exist") from None
        except ValueError as exc:
            raise ConfigError(f"{key}: {exc}") from None

    examples = load("data.path", cfg.data.path)
    if cfg.data.eval_path:
        train, evals = examples, load("data.eval_path", cfg.data.eval_path)
    else:
        train, evals = split_train_eval(examples, cfg.data.eval_fraction, cfg.seed)
    rows = pack_rows if cfg.data.packing else (lambda ex, _n: single_rows(ex))
    return rows(train, cfg.data.max_seq_length), rows(evals, cfg.data.max_seq_length)


def plan_buckets(lengths: list[int], cost: int = BUCKET_COST_SLOTS) -> list[int]:
    """Split lengths sorted ascending into contiguous buckets minimising padded slots plus `cost`
    per bucket; returns each bucket's size. Exact dynamic programme, O(m^2) in numpy for m examples:
    milliseconds for a batch (measured: bench/RESULTS.md, "Figures from code comments", Data
    layout)."""
    import numpy as np

    m = len(lengths)
    best = np.zeros(m + 1)
    cut = np.zeros(m + 1, dtype=np.int64)
    starts = np.arange(m + 1)
    for j in range(1, m + 1):
        # bucket (i, j] pads j - i examples to lengths[j - 1], the longest in it
        candidates = best[:j] + (j - starts[:j]) * lengths[j - 1] + cost
        cut[j] = int(np.argmin(candidates))
        best[j] = candidates[cut[j]]
    sizes, j = [], m
    while j > 0:
        sizes.append(j - int(cut[j]))
        j = int(cut[j])
    return sizes[::-1]


def collate(rows: list[Row], pad_id: int, bucket_cost: int = BUCKET_COST_SLOTS) -> Batch:
    """Lay the rows' examples out as one flat row of length buckets: sorted by length, grouped
    by `plan_buckets`, each right-padded to its bucket's longest. Padding has IGNORE targets and
    sits after its example, so under causal attention no real token sees it."""
    examples = sorted((e for r in rows for e in r.examples), key=lambda e: len(e.input_ids))
    lengths = [len(e.input_ids) for e in examples]
    ids: list[int] = []
    pos: list[int] = []
    tgt: list[int] = []
    buckets = []
    start = 0
    for size in plan_buckets(lengths, bucket_cost):
        width = lengths[start + size - 1]
        for e in examples[start : start + size]:
            pad = width - len(e.input_ids)
            ids += e.input_ids + [pad_id] * pad
            pos += range(width)
            tgt += e.targets + [IGNORE] * pad
        buckets.append((size, width))
        start += size
    targets = torch.tensor([tgt], dtype=torch.long)
    return Batch(
        input_ids=torch.tensor([ids], dtype=torch.long),
        position_ids=torch.tensor([pos], dtype=torch.long),
        targets=targets,
        target_index=(targets[0] != IGNORE).nonzero().squeeze(1),
        buckets=tuple(buckets),
        lengths=tuple(lengths),
        n_tokens=sum(lengths),
        n_slots=len(ids),
    )


class BatchStream:
    """An endless, resumable stream of this rank's batches, epoch after epoch.

    The epoch plan (which rows form which batch, in which order) is a pure function of
    (seed, epoch), the same whatever the number of processes; the epochs, end to end, are one
    global sequence of batches. The whole position is `batches`, how many of that sequence
    every rank together has taken: rank r of W takes global batches position + r,
    position + r + W, ... So an optimizer step of A micro-batches on W ranks takes the A x W
    consecutive global batches after the position, whatever A and W are, and a checkpoint
    written by N processes resumes on M at the exact batch (`trainer/README.md`, Resume).
    """

    def __init__(
        self,
        rows: list[Row],
        batch_size: int,
        seed: int,
        rank: int = 0,
        world_size: int = 1,
        group_by_length: bool = False,
        pad_id: int = 0,
        bucket_cost: int = BUCKET_COST_SLOTS,
    ) -> None:
        require_full_batch(rows, batch_size, world_size)
        self.rows, self.batch_size, self.seed = rows, batch_size, seed
        self.rank, self.world_size = rank, world_size
        self.group_by_length, self.pad_id = group_by_length, pad_id
        self.bucket_cost = bucket_cost
        self.batches_per_epoch = len(rows) // batch_size
        """Global batches in an epoch: the rows that do not fill a last batch wait for the
        next epoch's shuffle, as with a DataLoader's drop_last."""
        self.position = 0
        """Global batches taken by all ranks together (they step in lockstep)."""
        self._plan_epoch, self._plan = 0, self._epoch_plan(0)

    def state_dict(self) -> dict[str, int]:
        """Global: equal on every rank, and meaningful to any number of processes."""
        return {"batches": self.position}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.position = int(state["batches"])

    def __iter__(self) -> BatchStream:
        return self

    def __next__(self) -> Batch:
        epoch, index = divmod(self.position + self.rank, self.batches_per_epoch)
        if epoch != self._plan_epoch:
            self._plan_epoch, self._plan = epoch, self._epoch_plan(epoch)
        batch = collate([self.rows[i] for i in self._plan[index]], self.pad_id, self.bucket_cost)
        self.position += self.world_size
        return batch

    def _epoch_plan(self, epoch: int) -> list[list[int]]:
        order = list(range(len(self.rows)))
        random.Random(self.seed * 1_000_003 + epoch).shuffle(order)
        if self.group_by_length:
            window = MEGABATCH_FACTOR * self.batch_size
            order = [
                i
                for start in range(0, len(order), window)
                for i in sorted(order[start : start + window], key=lambda j: -self.rows[j].n_tokens)
            ]
        size = self.batch_size
        return [order[b * size : (b + 1) * size] for b in range(self.batches_per_epoch)]


def require_full_batch(rows: list[Row], batch_size: int, world_size: int) -> None:
    if len(rows) < batch_size * world_size:
        raise ConfigError(
            f"per_device_train_batch_size: {len(rows)} rows cannot fill one batch of "
            f"{batch_size} on each of {world_size} ranks; lower it or add data"
        )


def eval_batches(
    rows: list[Row],
    batch_size: int,
    rank: int,
    world_size: int,
    pad_id: int,
    bucket_cost: int = BUCKET_COST_SLOTS,
) -> list[Batch]:
    """This rank's share of the eval rows, in a fixed order; ranks may get unequal shares."""
    mine = rows[rank::world_size]
    return [
        collate(mine[i : i + batch_size], pad_id, bucket_cost)
        for i in range(0, len(mine), batch_size)
    ]
