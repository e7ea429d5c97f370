"""A fake Cloud Quotas API and CustomJob list, and a QuotaReader over them: the preflight tests
here and the CLI's in tests/vtx read it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest
import requests

from jobs.core.stack import StackOutputs, load_stack_file
from jobs.quota.cloud_quotas import (
    QuotaReader,
)
from tests.conftest import TEST_DATA
from tests.json_handler import JsonHandler, serving

DATA = TEST_DATA


QUOTA_INFOS = json.loads((DATA / "cloudquotas-aiplatform.json").read_text())["quotaInfos"]


PREFIX = "aiplatform.googleapis.com/custom_model_training_"


L4 = f"{PREFIX}nvidia_l4_gpus"


L4_SPOT = f"{PREFIX}preemptible_nvidia_l4_gpus"


PAGE = 2


def rest_job(state: str, replicas: int, strategy: str | None = None) -> dict:
    """A CustomJob as Vertex lists it: chief g2-standard-8 (1 x L4) plus ``replicas`` workers."""
    machine = {
        "machineType": "g2-standard-8",
        "acceleratorType": "NVIDIA_L4",
        "acceleratorCount": 1,
    }
    spec: dict = {
        "workerPoolSpecs": [
            {"machineSpec": machine, "replicaCount": "1"},
            {"machineSpec": machine, "replicaCount": str(replicas)},
        ]
    }
    if strategy:
        spec["scheduling"] = {"strategy": strategy}
    return {"name": f"projects/1/locations/us-central1/customJobs/{state}", "state": state,
            "displayName": "other", "jobSpec": spec}  # fmt: skip


@dataclass
class FakeGoogle:
    """What the server serves and what it was asked."""

    url: str = ""
    infos: list[dict] = field(default_factory=lambda: QUOTA_INFOS)
    jobs: dict[str, list[dict]] = field(default_factory=dict)
    """Region -> CustomJobs listed there."""
    status: int = 200
    raw: bytes | None = None
    """An answer that is not JSON (a proxy's page)."""
    requests: list[tuple[str, dict, str]] = field(default_factory=list)
    """(path, query, Authorization header) of each request."""


def handler(fake: FakeGoogle) -> type[BaseHTTPRequestHandler]:
    class Handler(JsonHandler):
        def do_GET(self) -> None:
            url = urlparse(self.path)
            query = {k: v[0] for k, v in parse_qs(url.query).items()}
            fake.requests.append((url.path, query, self.headers.get("Authorization", "")))
            if fake.status != 200:
                return self._send(fake.status, {"error": {"message": "caller lacks permission"}})
            parts = url.path.split("/")
            if url.path.endswith("/services/aiplatform.googleapis.com/quotaInfos"):
                start = int(query.get("pageToken", 0))
                body: dict = {"quotaInfos": fake.infos[start : start + PAGE]}
                if start + PAGE < len(fake.infos):
                    body["nextPageToken"] = str(start + PAGE)
                return self._send(200, body)
            if url.path.endswith("/customJobs"):
                return self._send(200, {"customJobs": fake.jobs.get(parts[5], [])})
            return self._send(404, {"error": {"message": f"no route {url.path}"}})

        def _send(self, status: int, body: dict) -> None:
            self.answer(status, fake.raw if fake.raw is not None else body)

    return Handler


def reader(stack: StackOutputs, fake: FakeGoogle) -> QuotaReader:
    return QuotaReader(stack, session=requests.Session(), endpoint=fake.url)


@pytest.fixture
def google() -> Iterator[FakeGoogle]:
    fake = FakeGoogle()
    with serving(ThreadingHTTPServer(("127.0.0.1", 0), handler(fake))) as server:
        fake.url = f"http://127.0.0.1:{server.server_address[1]}"
        yield fake


@pytest.fixture
def quota_stack() -> StackOutputs:
    return load_stack_file(DATA / "stack-dev.json")
