"""How long a config's run is, in optimizer steps, read from as little of its data as possible
(for `--estimate`).

`max_steps` says it outright. Otherwise, as the loop counts
(`trainer.training.loop.total_steps`): steps = epochs * global batches per epoch /
(gradient_accumulation_steps * devices), and global batches per epoch = training rows //
per_device_train_batch_size. The rows come from the data:
- examples are counted: Parquet from its footer (one small read); JSONL line by line (a local
  GB in about a second). A remote JSONL over REMOTE_COUNT_MAX_BYTES is not downloaded: its
  count is extrapolated from its first HEAD_BYTES and its size, and said to be.
- without packing a row is an example; with packing, rows per example are measured by
  tokenizing and packing the first SAMPLE_EXAMPLES examples with the run's own tokenizer. When
  those are all the data, the count is the trainer's own (eval split included), exactly.
The same rows give the mean tokens per row, which sets how many tokens a step computes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from trainer.config.schema import ConfigError, TrainConfig
from trainer.data.batches import (
    Example,
    Row,
    pack_rows,
    parse_json_line,
    single_rows,
    split_train_eval,
    tokenize_records,
)
from trainer.model.loading import call_remote, first_line, is_remote, light_tokenizer
from trainer.training.loop import total_steps

SAMPLE_EXAMPLES = 2000
"""Tokenized and packed to measure rows per example: about a second with a fast tokenizer, and
best-fit packing of 2,000 examples leaves its rows within a few percent of the whole set's."""
REMOTE_COUNT_MAX_BYTES = 64 * 2**20
"""A remote JSONL up to this size is read whole to count its lines (seconds in a region)."""
HEAD_BYTES = 4 * 2**20
DATA_READ_TIMEOUT_S = 30.0


class CannotMeasure(Exception):
    """The data cannot be read cheaply here (no credentials, no network): steps are unknown."""


@dataclass(frozen=True)
class DataSize:
    examples: int
    exact: bool
    """False: extrapolated from the file's head."""
    head: list[dict[str, Any]]
    """The first SAMPLE_EXAMPLES records (all of them when there are no more)."""


@dataclass(frozen=True)
class RunLength:
    total_steps: int | None
    """None: unknown (see `basis`)."""
    tokens_per_row: float | None
    """Mean real tokens per training row, measured; None when the data was not read."""
    basis: str
    """How `total_steps` was found, or why it is unknown and what to pass instead."""


def run_length(cfg: TrainConfig, devices: int) -> RunLength:
    try:
        rows, tokens_per_row, how = _training_rows(cfg)
    except CannotMeasure as exc:
        if cfg.max_steps is not None:
            return RunLength(cfg.max_steps, None, f"max_steps (data not read: {exc})")
        return RunLength(None, None, f"unknown: {exc}; pass --set max_steps=N")
    if cfg.max_steps is not None:
        return RunLength(cfg.max_steps, tokens_per_row, "max_steps")
    batches = rows // cfg.per_device_train_batch_size  # global batches per epoch
    if batches < devices:
        raise ConfigError(
            f"per_device_train_batch_size: {rows} rows cannot fill one batch of "
            f"{cfg.per_device_train_batch_size} on each of {devices} devices; lower it or add data"
        )
    basis = f"{cfg.num_train_epochs:g} epochs of {how}"
    return RunLength(total_steps(cfg, batches, devices), tokens_per_row, basis)


def _training_rows(cfg: TrainConfig) -> tuple[int, float, str]:
    """(training rows, mean tokens per row, how they were counted)."""
    data = cfg.data
    size = _measure(data.path, data.format)
    if not size.head:
        raise ConfigError(f"data.path: {data.path} holds no examples")
    try:
        tokenizer = light_tokenizer(cfg.model)
    except ConfigError:
        raise
    except Exception as exc:  # a remote tokenizer out of reach: the estimate goes on without it
        raise CannotMeasure(f"cannot read the tokenizer ({first_line(exc)})") from None
    try:
        examples = tokenize_records(size.head, tokenizer, data, data.path)
    except ValueError as exc:
        raise ConfigError(f"data.path: {exc}") from None
    packed = ", packed" if data.packing else ""
    if size.exact and len(examples) == size.examples:
        if not data.eval_path:
            examples = split_train_eval(examples, data.eval_fraction, cfg.seed)[0]
        rows = _rows(cfg, examples)
        how = f"{len(rows):,} rows (all {size.examples:,} examples read{packed})"
        return len(rows), _mean_tokens(rows), how
    sample = _rows(cfg, examples)
    train_examples = size.examples - _eval_examples(cfg, size.examples)
    rows = round(train_examples * len(sample) / len(examples))
    counted = "counted" if size.exact else f"~, from the first {HEAD_BYTES // 2**20} MiB"
    how = (
        f"~{rows:,} rows ({size.examples:,} examples {counted}; rows per example from the first "
        f"{len(examples):,}{packed})"
    )
    return rows, _mean_tokens(sample), how


def _rows(cfg: TrainConfig, examples: list[Example]) -> list[Row]:
    if cfg.data.packing:
        return pack_rows(examples, cfg.data.max_seq_length)
    return single_rows(examples)


def _mean_tokens(rows: list[Row]) -> float:
    return sum(row.n_tokens for row in rows) / max(len(rows), 1)


def _eval_examples(cfg: TrainConfig, examples: int) -> int:
    """How many examples `split_train_eval` holds out (none with a separate eval file)."""
    if cfg.data.eval_path or cfg.data.eval_fraction <= 0:
        return 0
    return max(1, int(examples * cfg.data.eval_fraction))


# ---------------------------------------------------------------- reading as little as possible


def _measure(path: str, fmt: str) -> DataSize:
    parquet = fmt == "parquet" or (fmt == "auto" and path.endswith(".parquet"))
    measure = _measure_parquet if parquet else _measure_jsonl
    if not is_remote(path):
        return _read(path, lambda: measure(path))
    try:
        return _read(path, lambda: call_remote(lambda: measure(path), DATA_READ_TIMEOUT_S))
    except ConfigError:
        raise
    except Exception as exc:  # no credentials, no network, a timeout: say so, go on without
        raise CannotMeasure(f"cannot read {path} ({first_line(exc)})") from None


def _read(path: str, measure: Callable[[], DataSize]) -> DataSize:
    try:
        return measure()
    except FileNotFoundError:
        raise ConfigError(f"data.path: {path} does not exist") from None
    except ValueError as exc:
        raise ConfigError(f"data.path: {exc}") from None


def _measure_parquet(path: str) -> DataSize:
    import fsspec
    import pyarrow.parquet as pq

    with fsspec.open(path, "rb") as f:
        table = pq.ParquetFile(f)
        examples = table.metadata.num_rows
        batches = table.iter_batches(batch_size=SAMPLE_EXAMPLES)
        head = next(batches).to_pylist() if examples else []
    return DataSize(examples, exact=True, head=head)


def _measure_jsonl(path: str) -> DataSize:
    import fsspec

    fs, root = fsspec.core.url_to_fs(path)
    if is_remote(path) and fs.size(root) > REMOTE_COUNT_MAX_BYTES:
        return _extrapolate_jsonl(path, fs.size(root), fs.cat_file(root, start=0, end=HEAD_BYTES))
    examples, head = 0, []
    with fs.open(root, "rb") as f:
        for line_no, line in enumerate(f, start=1):
            if line.strip():
                examples += 1
                if len(head) < SAMPLE_EXAMPLES:
                    head.append(parse_json_line(line, path, line_no))
    return DataSize(examples, exact=True, head=head)


def _extrapolate_jsonl(path: str, size: int, data: bytes) -> DataSize:
    """Examples in a `size`-byte file whose first bytes are `data`, at the head's bytes per
    line (the last, probably cut, line left out)."""
    lines = data.split(b"\n")[:-1]
    used = sum(len(line) + 1 for line in lines)
    records = [(n, line) for n, line in enumerate(lines, start=1) if line.strip()]
    head = [parse_json_line(line, path, n) for n, line in records[:SAMPLE_EXAMPLES]]
    return DataSize(round(len(records) * size / max(used, 1)), exact=False, head=head)
