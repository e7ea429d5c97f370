"""`vtx predict` and `vtx endpoint list|show` over plain REST, against a stand-in for Vertex's
endpoints on 127.0.0.1: instances read as JSON lines or a list, predictions printed as JSON, and
404/400/503 explained in a prediction's words."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer

import pytest

from jobs.core.stack import StackOutputs
from jobs.serving.endpoint_rest import EndpointRest
from jobs.vertex.client import Backoff, VertexError
from tests.conftest import stack_outputs
from tests.jobs.serving.endpoint_fakes import Vertex


@pytest.fixture(scope="module")
def stack() -> Iterator[StackOutputs]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Vertex)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield stack_outputs(vertex_endpoint=f"http://127.0.0.1:{server.server_address[1]}")
    server.shutdown()
    server.server_close()
    thread.join()


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
