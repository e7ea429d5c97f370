"""`vtx predict` and `vtx endpoint list|show` over plain REST, against a stand-in for Vertex's
endpoints on 127.0.0.1: instances read as JSON lines or a list, predictions printed as JSON, and
404/400/503 explained in a prediction's words."""

from __future__ import annotations

import pytest

from jobs.core.stack import StackOutputs
from jobs.serving.endpoint_rest import EndpointRest
from jobs.vertex.errors import VertexError
from jobs.vertex.retry import Backoff


@pytest.mark.parametrize(
    ("endpoint", "instance", "expected"),
    [
        ("8", "hi", "endpoint projects/acme-ml-dev/locations/us-central1/endpoints/8 not found"),
        ("7", "bad", "the model refused the instances (HTTP 400): instances[0]: a prompt string"),
        ("7", "busy", "endpoints/7 is unavailable (HTTP 503)"),
    ],
)
def test_a_failed_prediction_is_explained(
    endpoint_stack: StackOutputs, endpoint: str, instance: str, expected: str
) -> None:
    rest = EndpointRest(endpoint_stack, backoff=Backoff(0.0, 0.0, 2.0, 0.0))
    with pytest.raises(VertexError) as failed:
        rest.predict(endpoint, [instance])
    assert expected in str(failed.value)
