"""`vtx predict` and `vtx endpoint` over the endpoint REST client."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from jobs.core.stack import StackOutputs
from tests.jobs.serving.endpoint_fakes import Vertex
from vtx.cli import app
from vtx.commands.deploy import read_instances

runner = CliRunner(env={"COLUMNS": "250"})


@pytest.fixture
def stack_file(endpoint_stack: StackOutputs, tmp_path: Path) -> Path:
    path = tmp_path / "endpoint_stack.json"
    path.write_text(endpoint_stack.model_dump_json())
    return path


def vtx(*args: str, stdin: str | None = None) -> tuple[int, str]:
    result = runner.invoke(app, list(args), input=stdin)
    return result.exit_code, result.output


def test_instances_are_json_lines_or_one_json_list() -> None:
    assert read_instances('"a"\n\n{"prompt": "b"}\n', "f") == ["a", {"prompt": "b"}]
    assert read_instances('[\n "a",\n {"prompt": "b"}\n]', "f") == ["a", {"prompt": "b"}]
    with pytest.raises(ValueError, match="f line 2: not JSON"):
        read_instances('"a"\nhello\n', "f")
    with pytest.raises(ValueError, match="no instances"):
        read_instances("\n", "f")


def test_predict_prints_the_predictions_as_json(stack_file: Path, tmp_path: Path) -> None:
    instances = tmp_path / "in.jsonl"
    instances.write_text('"hello"\n"world"\n')
    code, out = vtx(
        "predict",
        "7",
        "--instances",
        str(instances),
        "--parameters",
        '{"max_new_tokens": 8}',
        "--stack-file",
        str(stack_file),
    )
    assert code == 0, out
    assert json.loads(out) == [{"generated_text": "echo hello"}, {"generated_text": "echo world"}]
    assert Vertex.seen[-1] == {"instances": ["hello", "world"], "parameters": {"max_new_tokens": 8}}


def test_predict_reads_stdin(stack_file: Path) -> None:
    code, out = vtx(
        "predict", "7", "--instances", "-", "--stack-file", str(stack_file), stdin='["from stdin"]'
    )
    assert code == 0, out
    assert json.loads(out) == [{"generated_text": "echo from stdin"}]


def test_predict_finds_an_endpoint_by_its_display_name(stack_file: Path) -> None:
    # `vtx deploy --endpoint chat` created it by that name: predict finds it the same way.
    args = ("--instances", "-", "--stack-file", str(stack_file))
    code, out = vtx("predict", "chat", *args, stdin='["by name"]')
    assert code == 0, out
    assert json.loads(out) == [{"generated_text": "echo by name"}]
    code, out = vtx("predict", "twin", *args, stdin='["x"]')
    assert code == 1
    assert "2 endpoints have that display name (8, 9): name one by id" in out
    code, out = vtx("predict", "nobody", *args, stdin='["x"]')
    assert code == 1 and "no endpoint has that display name or id" in out


def test_endpoint_list_and_show_name_what_is_deployed(stack_file: Path) -> None:
    code, out = vtx("endpoint", "list", "--stack-file", str(stack_file))
    assert code == 0, out
    assert "555 (42@2)" in out and "555 100%" in out
    code, out = vtx("endpoint", "show", "7", "--stack-file", str(stack_file))
    assert code == 0, out
    text = " ".join(out.replace("│", " ").split())
    assert "555 42@2 g2-standard-8 + 1 x NVIDIA_L4 1-3" in text
    assert "serving@acme-ml-dev.iam.gserviceaccount.com 100%" in text
    code, out = vtx("endpoint", "show", "9", "--stack-file", str(stack_file))
    assert code == 1 and "not found" in out
