"""`vtx predict` and `vtx endpoint` over the endpoint REST client."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from jobs.core.stack import StackOutputs
from jobs.core.user_io import MAX_JSON_DEPTH
from jobs.serving.endpoint_rest import PREDICT_REQUEST_MAX_BYTES
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


@pytest.mark.timeout(60)  # a FIFO with no writer blocked open() before the regular-file check
def test_instances_that_are_not_a_regular_file_are_one_line(
    stack_file: Path, tmp_path: Path
) -> None:
    fifo = tmp_path / "in.jsonl"
    os.mkfifo(fifo)
    for path, kind in ((fifo, "a FIFO (named pipe)"), (Path("/dev/zero"), "a character device")):
        if not path.exists():
            continue
        code, out = vtx("predict", "7", "--instances", str(path), "--stack-file", str(stack_file))
        assert code == 2, out
        assert out.startswith(f"error: --instances {path} is {kind}, not a regular file; "), out
        assert "or pass - and pipe it in" in out


def test_instances_on_stdin_are_read_up_to_one_request(stack_file: Path) -> None:
    too_many = '"x"\n' * (PREDICT_REQUEST_MAX_BYTES // 4 + 1)
    code, out = vtx(
        "predict", "7", "--instances", "-", "--stack-file", str(stack_file), stdin=too_many
    )
    assert code == 2, out
    assert f"stdin holds more than {PREDICT_REQUEST_MAX_BYTES:,} bytes" in out


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 10_000], ids=["past the limit", "10,000"])
def test_json_nested_too_deep_is_one_line(stack_file: Path, tmp_path: Path, depth: int) -> None:
    deep = "[" * depth + "]" * depth
    instances = tmp_path / "in.json"
    instances.write_text(f"[{deep}]")
    code, out = vtx("predict", "7", "--instances", str(instances), "--stack-file", str(stack_file))
    assert code == 2, out
    assert f"not a JSON list: JSON nested more than {MAX_JSON_DEPTH} levels deep" in out
    instances.write_text('"hello"\n')
    code, out = vtx(
        "predict",
        "7",
        "--instances",
        str(instances),
        "--parameters",
        deep,
        "--stack-file",
        str(stack_file),
    )
    assert code == 2, out
    assert out.startswith(f"error: --parameters: JSON nested more than {MAX_JSON_DEPTH} levels")


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
    code, out = vtx("endpoint", "show", "chat", "--stack-file", str(stack_file))
    assert code == 0 and "/endpoints/7 (chat)" in " ".join(out.split()), out
