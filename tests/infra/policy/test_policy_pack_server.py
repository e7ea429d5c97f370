"""The pack as Pulumi runs it: `infra/policy/__main__.py` serves the Analyzer gRPC protocol.

The Pulumi CLI starts the pack, reads the port it prints, then calls Analyze per resource. This
test does the same with the real generated gRPC stubs, on 127.0.0.1, and stops the server after.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from google.protobuf import empty_pb2, struct_pb2
from pulumi.runtime.proto import analyzer_pb2, analyzer_pb2_grpc

from tests.conftest import HANG_S

PACK = Path(__file__).resolve().parents[3] / "infra" / "policy" / "__main__.py"


@pytest.fixture(scope="module")
def analyzer() -> Iterator[analyzer_pb2_grpc.AnalyzerStub]:
    # The engine passes the stack's config to the pack in PULUMI_CONFIG; this one says prod.
    env = {
        **os.environ,
        "PULUMI_CONFIG": json.dumps({"vtx:platform": json.dumps({"environment": "prod"})}),
    }
    proc = subprocess.Popen(
        [sys.executable, str(PACK)], stdout=subprocess.PIPE, env=env, cwd=PACK.parent
    )
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            grpc.channel_ready_future(channel).result(timeout=HANG_S)
            yield analyzer_pb2_grpc.AnalyzerStub(channel)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def analyze(stub: analyzer_pb2_grpc.AnalyzerStub, resource_type: str, props: dict):
    properties = struct_pb2.Struct()
    properties.update(props)
    request = analyzer_pb2.AnalyzeRequest(
        type=resource_type,
        properties=properties,
        urn=f"urn:pulumi:prod::vtx::{resource_type}::r",
        name="r",
    )
    return stub.Analyze(request)


def test_pack_announces_every_policy(analyzer) -> None:
    info = analyzer.GetAnalyzerInfo(empty_pb2.Empty())
    assert info.name == "vtx-guardrails"
    names = {p.name for p in info.policies}
    assert {"bucket-uniform-access", "no-public-principals", "prod-budget"} <= names


def test_pack_refuses_an_unprotected_bucket_on_prod(analyzer) -> None:
    response = analyze(
        analyzer,
        "gcp:storage/bucket:Bucket",
        {"name": "b", "uniformBucketLevelAccess": False, "labels": {"environment": "prod"}},
    )
    found = {d.policyName for d in response.diagnostics}
    assert found == {
        "bucket-uniform-access",
        "bucket-public-access-prevention",
        "prod-bucket-cmek",
    }
    mandatory = analyzer_pb2.EnforcementLevel.Value("MANDATORY")
    assert all(d.enforcementLevel == mandatory for d in response.diagnostics)


def test_pack_passes_a_compliant_bucket(analyzer) -> None:
    response = analyze(
        analyzer,
        "gcp:storage/bucket:Bucket",
        {
            "name": "b",
            "uniformBucketLevelAccess": True,
            "publicAccessPrevention": "enforced",
            "encryption": {"defaultKmsKeyName": "projects/p/locations/l/keyRings/r/cryptoKeys/k"},
            "labels": {"environment": "prod"},
        },
    )
    assert list(response.diagnostics) == []


def test_pack_refuses_ssh_from_the_internet_and_passes_ssh_through_iap(analyzer) -> None:
    firewall = {
        "direction": "INGRESS",
        "allows": [{"protocol": "tcp", "ports": ["22"]}],
        "sourceRanges": ["0.0.0.0/0"],
    }
    response = analyze(analyzer, "gcp:compute/firewall:Firewall", firewall)
    assert {d.policyName for d in response.diagnostics} == {"no-internet-ingress"}
    iap = {**firewall, "sourceRanges": ["35.235.240.0/20"]}
    assert list(analyze(analyzer, "gcp:compute/firewall:Firewall", iap).diagnostics) == []
