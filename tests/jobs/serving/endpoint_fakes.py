"""A fake endpoint REST API served on 127.0.0.1, for the endpoint client's tests and the CLI's."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import ThreadingHTTPServer

import pytest

from jobs.core.stack import StackOutputs
from tests.conftest import stack_outputs
from tests.json_handler import JsonHandler, serving

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


TWINS = [{"name": f"{PARENT}/endpoints/{i}", "displayName": "twin"} for i in (8, 9)]
"""Two endpoints sharing a display name."""


class Vertex(JsonHandler):
    """Endpoint 7 answers; a prompt "bad" gets the container's 400, "busy" a 503. The list
    ignores its filter (the client filters again)."""

    seen: list[dict] = []

    def do_GET(self) -> None:
        if self.path == f"/v1/{PARENT}/endpoints/7":
            self.answer(200, ENDPOINT)
        elif self.path.startswith(f"/v1/{PARENT}/endpoints?"):
            self.answer(200, {"endpoints": [ENDPOINT, *TWINS]})
        else:
            self.answer(404, {"error": {"code": 404, "message": "Endpoint not found."}})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        Vertex.seen.append(body)
        if self.path != f"/v1/{PARENT}/endpoints/7:predict":
            self.answer(404, {"error": {"code": 404, "message": "Endpoint not found."}})
        elif "bad" in body["instances"]:
            self.answer(400, {"error": {"message": "instances[0]: a prompt string"}})
        elif "busy" in body["instances"]:
            self.answer(503, {"error": {"message": "no replica ready"}})
        else:
            predictions = [{"generated_text": f"echo {i}"} for i in body["instances"]]
            self.answer(200, {"predictions": predictions, "deployedModelId": "555"})


@pytest.fixture(scope="module")
def endpoint_stack() -> Iterator[StackOutputs]:
    with serving(ThreadingHTTPServer(("127.0.0.1", 0), Vertex)) as server:
        yield stack_outputs(vertex_endpoint=f"http://127.0.0.1:{server.server_address[1]}")
