"""Drill: fuzzed inputs get clean errors, never a traceback.

Three doors users push garbage through: job templates (`vtx validate FILE`), stack configs
(`Pulumi.<stack>.yaml`, read and validated before any resource exists) and dataset lines
(read and tokenized by the trainer). Hypothesis mutates the real shipped files (so most
examples get deep into validation instead of failing at the first key) and also throws raw
text at each. Seeded (`derandomize`): CI sees the same examples every run.

"Clean" means the error type each door promises: a `vtx` exit code of 0/1/2 with no
traceback; `infra.config.ConfigError`; `ValueError` from the data functions.
"""

from __future__ import annotations

import copy
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from drill_support import DATASET, REPO, TOKENIZER
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

FUZZ = settings(
    max_examples=80,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
TEMPLATE = yaml.safe_load((REPO / "jobs" / "templates" / "smoke-cpu.yaml").read_text())
STACK_FILE = yaml.safe_load((REPO / "Pulumi.dev.yaml").read_text())

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
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


documents_or_text = st.one_of(
    mutated(TEMPLATE).map(_dump), values.map(_dump), st.text(max_size=200)
)


@FUZZ
@given(text=documents_or_text)
def test_vtx_validate_answers_fuzzed_templates_without_a_traceback(text: str) -> None:
    from typer.testing import CliRunner

    from jobs.cli import app

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "job.yaml"
        path.write_text(text)
        result = CliRunner().invoke(app, ["validate", str(path)])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception  # hypothesis shows the input that got a traceback
    assert result.exit_code in (0, 1, 2), result.output
    assert "Traceback" not in result.output


@FUZZ
@given(text=st.one_of(mutated(STACK_FILE).map(_dump), values.map(_dump), st.text(max_size=200)))
def test_fuzzed_stack_configs_raise_config_error_only(text: str) -> None:
    from infra.config import ConfigError, load_stack_config, read_stack_file

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "Pulumi.fuzz.yaml"
        path.write_text(text)
        try:
            load_stack_config(read_stack_file(path), str(path))
        except ConfigError as exc:
            assert str(exc) or exc.problems  # the message is the point


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    from trainer.config import ModelConfig
    from trainer.model import build_tokenizer

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
    from trainer.config import DataConfig
    from trainer.data import read_records, tokenize_record

    cfg = DataConfig(path="fuzz.jsonl", max_seq_length=64)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fuzz.jsonl"
        path.write_text("\n".join(batch) + "\n")
        try:
            for record in read_records(str(path)):
                tokenize_record(record, tokenizer, cfg)
        except ValueError as exc:
            assert str(exc)  # a message the user can act on
