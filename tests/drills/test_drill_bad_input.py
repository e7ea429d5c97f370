"""Drill: fuzzed inputs get clean errors, fast, never a traceback.

Four doors users push garbage through: job files (`vtx validate FILE`, and `vtx render` for
what validate accepts), stack configs (`Pulumi.<stack>.yaml`, read and validated before any
resource exists), trainer configs (`python -m trainer --config`) and dataset lines (read and
tokenized by the trainer). Hypothesis mutates the real shipped files (so most examples get deep
into validation instead of failing at the first key), throws raw text at each, and, for the
three YAML doors, the shapes a YAML reader chokes on: bytes that are not UTF-8 (stray bytes,
UTF-16, binary), nesting thousands of levels deep (flow and block), files around and far
beyond the size limit, long lists, and integers beyond int32/int64/64 bits. Seeded
(`derandomize`): CI sees the same examples every run.

"Clean" means the error type each door promises: a `vtx` exit code of 0/1/2 with no
traceback; `infra.config.ConfigError`; `trainer.config.schema.ConfigError`; `ValueError` from the
data functions. And one promise between two commands: whatever `vtx validate --stack-file S`
accepts, `vtx render --stack-file S` renders through the real aiplatform types.
"""

from __future__ import annotations

import copy
import functools
import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from drill_support import DATASET, REPO, TOKENIZER
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tests.conftest import TEST_DATA

FUZZ = settings(
    max_examples=80,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
YAML_FUZZ = settings(FUZZ, max_examples=200)
"""The YAML doors answer in milliseconds: more examples, so every hostile shape comes up often."""
TEMPLATE = yaml.safe_load((REPO / "jobs" / "templates" / "smoke-cpu.yaml").read_text())
GCLOUD_SPEC = {
    "workerPoolSpecs": [
        {
            "machineSpec": {"machineType": "n1-standard-4"},
            "replicaCount": 1,
            "diskSpec": {"bootDiskType": "pd-ssd", "bootDiskSizeGb": 100},
            "containerSpec": {"imageUri": "trainer", "args": ["--config", "c.yaml"]},
        },
        {
            "machineSpec": {"machineType": "n1-standard-4"},
            "replicaCount": "2",
            "containerSpec": {"imageUri": "trainer", "env": [{"name": "A", "value": "1"}]},
        },
    ],
    "scheduling": {"strategy": "SPOT", "timeout": "3600s"},
}
STACK_FILE = yaml.safe_load((REPO / "Pulumi.dev.yaml").read_text())
TRAINER_CONFIG = yaml.safe_load((REPO / "trainer" / "examples" / "tiny.yaml").read_text())
STACK_JSON = TEST_DATA / "stack-dev.json"

# Where int32 (acceleratorCount, bootDiskSizeGb), int64 (replicaCount) and 64 bits end.
EDGE_INTEGERS = [2**31 - 1, 2**31, 2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63), -(2**63) - 1]
big_integers = st.one_of(
    st.sampled_from([*EDGE_INTEGERS, 10**23, -(10**23)]),
    st.integers(min_value=2**31 - 2, max_value=2**80),
    st.integers(min_value=-(2**80), max_value=-(2**31) + 2),
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    big_integers,
    big_integers.map(str),  # int64 travels as a JSON string in REST form
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.sampled_from(["", "0", "-1", "1e9", "spot", "n1-standard-4", "NVIDIA_L4", "10.0.0.0/8"]),
)
values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=12,
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key path in a YAML document (mapping keys and list indexes)."""
    found = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, child in node.items():
            found += _paths(child, (*prefix, key))
    elif isinstance(node, list):
        for index, child in enumerate(node):
            found += _paths(child, (*prefix, index))
    return found


@st.composite
def mutated(draw: st.DrawFn, document: Any) -> Any:
    """`document` with 1-3 edits: replace a value, delete a key, or add an unknown key."""
    doc = copy.deepcopy(document)
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(doc)
        if not paths:
            return draw(values)
        path = draw(st.sampled_from(paths))
        parent = doc
        for part in path[:-1]:
            parent = parent[part]
        action = draw(st.sampled_from(["replace", "delete", "add"]))
        if action == "replace":
            parent[path[-1]] = draw(values)
        elif action == "delete" and isinstance(parent, dict):
            del parent[path[-1]]
        elif isinstance(parent, dict):
            parent[draw(st.text(min_size=1, max_size=12))] = draw(values)
    return doc


def _dump(document: Any) -> str:
    return yaml.safe_dump(document, allow_unicode=True)


# ---- shapes a YAML reader chokes on --------------------------------------------------------

PLACEHOLDER = "VTX-FUZZ-PLACEHOLDER"
NOT_UTF8 = [
    b"\xff",  # never valid in UTF-8
    b"\x80",  # a continuation byte with nothing before it
    b"\xc3\x28",  # a two-byte sequence cut short
    b"\xed\xa0\x80",  # an encoded surrogate
    b"\xc0\xaf",  # an overlong '/'
    b"\xf8\x88\x80\x80\x80",  # a five-byte form
]
LIMIT = 256 * 1024  # jobs.core.safe_yaml.MAX_BYTES (the drill keeps its own number on purpose)


@st.composite
def with_placeholder(draw: st.DrawFn, document: Any) -> str:
    """`document`, mutated, with one value (or the whole) replaced by PLACEHOLDER, as YAML."""
    doc = draw(mutated(document))
    paths = _paths(doc)
    if not paths:
        return PLACEHOLDER
    path = draw(st.sampled_from(paths))
    parent = doc
    for part in path[:-1]:
        parent = parent[part]
    parent[path[-1]] = PLACEHOLDER
    return _dump(doc)


def _deep(depth: int, style: str) -> str:
    if style == "flow list":
        return "[" * depth + "]" * depth
    if style == "flow mapping":
        return "{a: " * depth + "1" + "}" * depth
    # Block style: each level one deeper; indentation costs depth^2 bytes, so it stays small.
    return "\n" + "".join(f"{'  ' * (i + 1)}k:\n" for i in range(min(depth, 300)))


@st.composite
def hostile_bytes(draw: st.DrawFn, document: Any) -> bytes:
    """A mutated `document` in one of the shapes that break naive readers."""
    shape = draw(st.sampled_from(["not UTF-8", "UTF-16", "binary", "deep", "huge", "integer"]))
    event(f"hostile shape: {shape}")  # --hypothesis-show-statistics counts them
    text = draw(with_placeholder(document))
    if shape == "not UTF-8":
        data = text.replace(PLACEHOLDER, "x").encode()
        at = draw(st.integers(0, len(data)))
        return data[:at] + draw(st.sampled_from(NOT_UTF8)) + data[at:]
    if shape == "UTF-16":
        return text.replace(PLACEHOLDER, "x").encode(draw(st.sampled_from(["utf-16", "utf-32"])))
    if shape == "binary":
        return draw(st.binary(min_size=1, max_size=4096))
    if shape == "deep":
        depth = draw(st.sampled_from([31, 32, 33, 100, 1000, 5000, 20_000]))
        style = draw(st.sampled_from(["flow list", "flow mapping", "block"]))
        replacement = _deep(depth, style)
        if style == "block" and not text.startswith(PLACEHOLDER):
            replacement = "[" * depth + "]" * depth  # a block value needs its own line
        return text.replace(PLACEHOLDER, replacement).encode()
    if shape == "huge":
        kind = draw(st.sampled_from(["padding", "long list"]))
        if kind == "padding":
            size = draw(st.sampled_from([LIMIT - 200, LIMIT + 1, 4 * LIMIT, 20_000_000]))
            return text.replace(PLACEHOLDER, "x").encode() + b"\n#" + b"x" * size
        items = draw(st.sampled_from([1_000, 19_000, 21_000, 100_000, 200_000]))
        return text.replace(PLACEHOLDER, "[" + ", ".join(["a"] * items) + "]").encode()
    # Integers at and beyond int32/int64/64 bits, plain or quoted, up to 5,000 digits (more
    # than Python converts to text by default).
    literal = draw(st.one_of(big_integers.map(str), st.sampled_from(["9" * 30, "9" * 5000])))
    if draw(st.booleans()):
        literal = f'"{literal}"'
    return text.replace(PLACEHOLDER, literal).encode()


def _yaml_door(document: Any) -> st.SearchStrategy[bytes]:
    """What each YAML door is fed: mutated shipped files, random documents, random text, and
    the hostile shapes above."""
    ordinary = st.one_of(
        mutated(document).map(_dump).map(str.encode),
        values.map(_dump).map(str.encode),
        st.text(max_size=200).map(str.encode),
    )
    return st.one_of(ordinary, hostile_bytes(document))  # half of the examples are hostile


@pytest.fixture(scope="module", autouse=True)
def _one_click_tree() -> Iterator[None]:
    """Typer's CliRunner builds the whole click command tree from the app's signatures on every
    invoke (about 0.1 of each call's 0.12 CPU-seconds here; hundreds of calls per test). The
    `vtx` console script builds it once per process, so building it once is the product's path;
    the commands the tree dispatches to are vtx's own, unchanged."""
    import typer.main
    import typer.testing

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(typer.testing, "_get_command", functools.cache(typer.main.get_command))
        yield


def _vtx(*args: str) -> Any:
    from typer.testing import CliRunner

    from vtx.cli import app

    result = CliRunner().invoke(app, list(args))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception  # hypothesis shows the input that got a traceback
    assert result.exit_code in (0, 1, 2), result.output
    assert "Traceback" not in result.output
    return result


@YAML_FUZZ
@given(data=st.one_of(_yaml_door(TEMPLATE), _yaml_door(GCLOUD_SPEC)))
def test_vtx_validate_answers_fuzzed_job_files_without_a_traceback(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "job.yaml"
        path.write_bytes(data)
        _vtx("validate", str(path))


@st.composite
def plausible_template(draw: st.DrawFn) -> bytes:
    """The smoke template with the fields a user edits set to values that often pass (so the
    render half of the promise is exercised), integers up to and beyond the API's types."""
    doc = copy.deepcopy(TEMPLATE)
    pool = doc["pools"]["workers"]
    pool["replicas"] = draw(st.integers(1, 8) | big_integers | st.sampled_from(EDGE_INTEGERS))
    if draw(st.booleans()):
        pool["boot_disk"] = {"size_gb": draw(st.integers(100, 64000) | big_integers)}
    names = st.from_regex(r"[A-Z][A-Z0-9_]{0,10}", fullmatch=True)
    doc["env"] = draw(st.dictionaries(names, st.text(max_size=20), max_size=3))
    doc["args"] = draw(st.lists(st.text(max_size=20), max_size=5))
    doc["scheduling"]["timeout"] = draw(
        st.sampled_from(["1h", "90m", "7d", "8d", "0s", 3600, 0.5, "1e3"])
        | st.floats(allow_nan=True, allow_infinity=True)
    )
    label = st.from_regex(r"[a-z][a-z0-9_-]{0,10}", fullmatch=True)
    doc["labels"] = draw(st.dictionaries(label, label, max_size=3))
    return _dump(doc).encode()


@YAML_FUZZ
@given(
    data=st.one_of(
        plausible_template(),
        mutated(TEMPLATE).map(_dump).map(str.encode),
        hostile_bytes(TEMPLATE),
    )
)
def test_what_vtx_validate_accepts_vtx_render_renders(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "job.yaml"
        path.write_bytes(data)
        validated = _vtx("validate", str(path), "--stack-file", str(STACK_JSON))
        if validated.exit_code != 0:
            return
        rendered = _vtx("render", str(path), "--stack-file", str(STACK_JSON), "--format", "json")
        assert rendered.exit_code == 0, (validated.output, rendered.output)


@YAML_FUZZ
@given(data=_yaml_door(STACK_FILE))
def test_fuzzed_stack_configs_raise_config_error_only(data: bytes) -> None:
    from infra.config import ConfigError, load_stack_config, read_stack_file

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "Pulumi.fuzz.yaml"
        path.write_bytes(data)
        try:
            load_stack_config(read_stack_file(path), str(path))
        except ConfigError as exc:
            assert str(exc) or exc.problems  # the message is the point


@YAML_FUZZ
@given(data=_yaml_door(TRAINER_CONFIG))
def test_fuzzed_trainer_configs_raise_config_error_only(data: bytes) -> None:
    from trainer.config.loading import load_config
    from trainer.config.schema import ConfigError

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "train.yaml"
        path.write_bytes(data)
        try:
            load_config(path)
        except ConfigError as exc:
            assert str(exc)  # the message is the point


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    from trainer.config.schema import ModelConfig
    from trainer.model.loading import build_tokenizer

    return build_tokenizer(ModelConfig(config={"model_type": "llama"}, tokenizer=str(TOKENIZER)))


SHIPPED_ROW = json.loads(DATASET.read_text().splitlines()[0])
messages = st.lists(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "assistant", "system", "tool", ""]), "content": values}
    )
    | values,
    max_size=4,
)
records = st.one_of(
    mutated(SHIPPED_ROW),
    st.fixed_dictionaries({"messages": messages}),
    st.fixed_dictionaries({"text": values}),
    values,
)
lines = st.one_of(records.map(lambda r: json.dumps(r, allow_nan=True)), st.text(max_size=80))


@FUZZ
@given(batch=st.lists(lines, min_size=1, max_size=4))
def test_fuzzed_dataset_lines_raise_value_error_only(batch: list[str], tokenizer: Any) -> None:
    from trainer.config.schema import DataConfig
    from trainer.data.batches import read_records, tokenize_record

    cfg = DataConfig(path="fuzz.jsonl", max_seq_length=64)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fuzz.jsonl"
        path.write_text("\n".join(batch) + "\n")
        try:
            for record in read_records(str(path)):
                tokenize_record(record, tokenizer, cfg)
        except ValueError as exc:
            assert str(exc)  # a message the user can act on
