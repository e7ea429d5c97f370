"""`vtx predict` and `vtx endpoint list|show` over plain REST, against a stand-in for Vertex's
endpoints on 127.0.0.1: instances read as JSON lines or a list, predictions printed as JSON, and
404/400/503 explained in a prediction's words."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from typer.testing import CliRunner

from jobs.core.stack import StackOutputs
from jobs.serving.endpoint_rest import EndpointRest
from jobs.vertex.client import Backoff, VertexError
from tests.conftest import stack_outputs
from vtx.cli import app
from vtx.commands.deploy import read_instances

PARENT = "projects/acme-ml-dev/locations/us-central1"
ENDPOINT = {
    "name": f"{PARENT}/endpoints/7",
    "displayName": "chat",
    "deployedModels": [
        {
            "id": "555",
            "model": f"{PARENT}/models/42",
            "modelVersionId": "2",
            "dedicatedResources": {
                "machineSpec": {
                    "machineType": "g2-standard-8",
                    "acceleratorType": "NVIDIA_L4",
                    "acceleratorCount": 1,
                },
                "minReplicaCount": 1,
                "maxReplicaCount": 3,
            },
            "serviceAccount": "serving@acme-ml-dev.iam.gserviceaccount.com",
        }
    ],
    "trafficSplit": {"555": 100},
}
runner = CliRunner(env={"COLUMNS": "250"})


class Vertex(BaseHTTPRequestHandler):
    """Endpoint 7 answers; a prompt "bad" gets the container's 400, "busy" a 503."""

    seen: list[dict] = []

    def log_message(self, *args: object) -> None:
        pass

    def _answer(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path == f"/v1/{PARENT}/endpoints/7":
            self._answer(200, ENDPOINT)
        elif self.path.startswith(f"/v1/{PARENT}/endpoints?"):
            self._answer(200, {"endpoints": [ENDPOINT]})
        else:
            self._answer(404, {"error": {"code": 404, "message": "Endpoint not found."}})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        Vertex.seen.append(body)
        if self.path != f"/v1/{PARENT}/endpoints/7:predict":
            self._answer(404, {"error": {"code": 404, "message": "Endpoint not found."}})
        elif "bad" in body["instances"]:
            self._answer(400, {"error": {"message": "instances[0]: a prompt string"}})
        elif "busy" in body["instances"]:
            self._answer(503, {"error": {"message": "no replica ready"}})
        else:
            predictions = [{"generated_text": f"echo {i}"} for i in body["instances"]]
            self._answer(200, {"predictions": predictions, "deployedModelId": "555"})


@pytest.fixture(scope="module")
def stack() -> Iterator[StackOutputs]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Vertex)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield stack_outputs(vertex_endpoint=f"http://127.0.0.1:{server.server_address[1]}")
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.fixture
def stack_file(stack: StackOutputs, tmp_path: Path) -> Path:
    path = tmp_path / "stack.json"
    path.write_text(stack.model_dump_json())
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


@pytest.mark.parametrize(
    ("endpoint", "instance", "expected"),
    [
        ("8", "hi", "endpoint projects/acme-ml-dev/locations/us-central1/endpoints/8 not found"),
        ("7", "bad", "the model refused the instances (HTTP 400): instances[0]: a prompt string"),
        ("7", "busy", "endpoints/7 is unavailable (HTTP 503)"),
    ],
)
def test_a_failed_prediction_is_explained(
    stack: StackOutputs, endpoint: str, instance: str, expected: str
) -> None:
    rest = EndpointRest(stack, backoff=Backoff(0.0, 0.0, 2.0, 0.0))
    with pytest.raises(VertexError) as failed:
        rest.predict(endpoint, [instance])
    assert expected in str(failed.value)


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
