"""Fakes of the model and endpoint services and a stack with a serving account, shared by the
deploy tests here and the CLI's in tests/vtx."""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any

import pytest
from rich.console import Console

from jobs.core.catalog import Catalog, PriceTable, load_catalog
from jobs.core.stack import StackOutputs
from jobs.serving.deploy import (
    DeployOptions,
    DeployRefused,
    plan_deploy,
)
from jobs.serving.endpoint_rest import EndpointRecord, EndpointRest
from jobs.serving.model_rest import ModelRecord, ModelRest
from jobs.vertex.errors import VertexError
from jobs.vertex.retry import Backoff
from tests.conftest import stack_outputs

NO_WAIT = Backoff(initial_s=0.0, maximum_s=0.0, deadline_s=5.0)


PARENT = "projects/acme-ml-dev/locations/us-central1"


MODEL = f"{PARENT}/models/42"


SERVING_SA = "serving@acme-ml-dev.iam.gserviceaccount.com"


def make_stack(serving_sa: str | None = SERVING_SA) -> StackOutputs:
    return stack_outputs(serving_service_account=serving_sa)


def endpoint_json(endpoint_id: str, traffic: dict[str, int], name: str = "chat") -> dict:
    return {
        "name": f"{PARENT}/endpoints/{endpoint_id}",
        "displayName": name,
        "deployedModels": [
            {
                "id": d,
                "model": MODEL,
                "modelVersionId": "1",
                "dedicatedResources": {
                    "machineSpec": {"machineType": "n1-standard-4"},
                    "minReplicaCount": 1,
                },
            }
            for d in traffic
        ],
        "trafficSplit": traffic,
    }


class FakeModels(ModelRest):
    def get_model(self, ref: str) -> ModelRecord:
        if ref.split("@")[0] not in ("42", MODEL):
            raise VertexError("not found: model", 404)
        return ModelRecord.from_rest(
            {
                "name": MODEL,
                "versionId": "2",
                "versionAliases": ["default"],
                "displayName": "tiny-chat",
                "labels": {"vtx-run-id": "r1"},
            }
        )


class FakeEndpoints(EndpointRest):
    """The endpoints a test sets in ``self.endpoints`` (REST JSON by id)."""

    def __init__(self, stack: StackOutputs, **endpoints: dict) -> None:
        super().__init__(stack, session=object())
        self.endpoints = dict(endpoints)

    def get_endpoint(self, ref: str) -> EndpointRecord:
        endpoint_id = ref.rsplit("/", 1)[-1]
        if endpoint_id not in self.endpoints:
            raise VertexError("not found: endpoint", 404)
        return EndpointRecord.from_rest(self.endpoints[endpoint_id])

    def list_endpoints(self, filter: str = "") -> list[EndpointRecord]:
        return [EndpointRecord.from_rest(e) for e in self.endpoints.values()]


def plan_for(options: DeployOptions, stack: StackOutputs | None = None, **endpoints: dict):
    stack = stack or make_stack()
    return plan_deploy(stack, "42", options, FakeModels(stack), FakeEndpoints(stack, **endpoints))


def refusals(options: DeployOptions, stack: StackOutputs | None = None, **endpoints: dict) -> str:
    with pytest.raises(DeployRefused) as refused:
        plan_for(options, stack, **endpoints)
    return " | ".join(refused.value.problems)


def printed(run: Any) -> tuple[int, str]:
    out = Console(width=250, record=True, file=io.StringIO())
    code = run(out)
    return code, " ".join(out.export_text().replace("│", " ").split())


@dataclass
class Operation:
    answer: Any

    def result(self, timeout: float) -> Any:
        return self.answer


class FakeClient:
    """EndpointServiceClient: records each call; ``unavailable`` answers 503 to the first
    deploy (after the deployment landed when ``lands``)."""

    def __init__(self, rest: FakeEndpoints, unavailable: bool = False, lands: bool = False):
        self.rest, self.unavailable, self.lands = rest, unavailable, lands
        self.calls: list[tuple[str, Any]] = []

    def create_endpoint(self, parent: str, endpoint: Any, retry: Any) -> Operation:
        assert retry is None
        self.calls.append(("create_endpoint", endpoint))
        self.rest.endpoints["8"] = endpoint_json("8", {}, endpoint.display_name)
        return Operation(type("Endpoint", (), {"name": f"{parent}/endpoints/8"}))

    def deploy_model(self, request: Any, retry: Any) -> Operation:
        from google.api_core import exceptions

        assert retry is None  # a blind retry would deploy a second replica set
        self.calls.append(("deploy_model", request))
        if self.unavailable and len([c for c in self.calls if c[0] == "deploy_model"]) == 1:
            if self.lands:
                self.rest.endpoints["8"]["deployedModels"].append({"id": "555", "model": MODEL})
            raise exceptions.ServiceUnavailable("backend unavailable")
        deployed = type("Deployed", (), {"id": "556"})
        return Operation(type("Response", (), {"deployed_model": deployed}))

    def undeploy_model(self, endpoint: str, deployed_model_id: str, traffic_split: dict, retry):
        self.calls.append(("undeploy_model", (deployed_model_id, dict(traffic_split))))
        return Operation(None)


def priced_catalog() -> Catalog:
    """The catalog with one us-central1 serving table: g2-standard-8 and NVIDIA_L4 priced, the
    GPU's figure with the SKU a refreshed table names."""
    cat = load_catalog()
    table = PriceTable.model_validate(
        {
            "name": "serving-test",
            "kind": "serving",
            "region": "us-central1",
            "currency": "USD",
            "as_of": "2026-11-23",
            "source": "https://example.invalid/pricing",
            "machines": {"g2-standard-8": {"usd_per_h": 1.0, "basis": "verified"}},
            "accelerators": {
                "NVIDIA_L4": {
                    "usd_per_h": 0.5,
                    "basis": "catalog",
                    "sku": "A001-0000-0042",
                    "sku_description": "Nvidia L4 GPU running in Americas for Prediction",
                    "fetched_at": "2026-11-27T03:00:00Z",
                }
            },
        }
    )
    return cat.model_copy(update={"serving_price_tables": (table,)})
