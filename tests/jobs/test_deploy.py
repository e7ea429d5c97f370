"""jobs/serving/deploy.py and `vtx deploy|undeploy` without a platform: the plan, every refusal, the
serving price (floor, ceiling, unknown), the traffic split Vertex needs, and the SDK calls sent
once (a 503 retried only after checking that nothing landed)."""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any

import pytest
from rich.console import Console

from jobs.core.catalog import PriceTable, load_catalog
from jobs.core.stack import StackOutputs
from jobs.serving.deploy import (
    NEW,
    DeployOptions,
    DeployRefused,
    allocate_traffic,
    deploy,
    plan_deploy,
    plan_undeploy,
    unallocate_traffic,
    undeploy,
)
from jobs.serving.endpoint_rest import EndpointRecord, EndpointRest
from jobs.serving.model_rest import ModelRecord, ModelRest
from jobs.serving.serving_prices import serving_cost
from jobs.vertex.client import Backoff, VertexError
from tests.conftest import stack_outputs
from vtx.commands.deploy import deploy_model, undeploy_models

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


# -- the plan ------------------------------------------------------------------------------------


def test_the_plan_names_model_version_endpoint_machine_replicas_split_identity_and_price() -> None:
    stack = make_stack()
    endpoints = FakeEndpoints(stack, **{"7": endpoint_json("7", {"100": 100})})
    code, out = printed(
        lambda console: deploy_model(
            console,
            stack,
            "42@default",
            DeployOptions(machine="g2-standard-8", max_replicas=3, traffic=20, endpoint="7"),
            dry_run=True,
            models=FakeModels(stack),
            endpoints=endpoints,
        )
    )
    assert code == 0, out
    assert f"model {MODEL} (tiny-chat)" in out
    assert "version 2 (default)" in out
    assert f"endpoint {PARENT}/endpoints/7" in out
    assert "machine g2-standard-8 + 1 x NVIDIA_L4" in out  # the built-in GPU filled in
    assert "replicas min 1, max 3" in out
    assert "traffic after 100 (42@1) 80%, this model 20%" in out
    assert f"service account {SERVING_SA}" in out
    assert "serving $/h unknown: no serving price for g2-standard-8, NVIDIA_L4 in " in out
    assert "dry run: nothing deployed" in out


def test_the_deployed_model_pins_the_version_and_runs_as_the_serving_account() -> None:
    plan = plan_for(DeployOptions(machine="n1-standard-8", accelerator="NVIDIA_TESLA_T4"))
    assert plan.endpoint is None and plan.endpoint_display_name == "tiny-chat"
    assert plan.deployed_model == {
        "model": f"{MODEL}@2",
        "displayName": "tiny-chat",
        "dedicatedResources": {
            "machineSpec": {
                "machineType": "n1-standard-8",
                "acceleratorType": "NVIDIA_TESLA_T4",
                "acceleratorCount": 1,
            },
            "minReplicaCount": 1,
            "maxReplicaCount": 1,
        },
        "serviceAccount": SERVING_SA,
    }
    assert plan.traffic == {NEW: 100}  # a new endpoint: all its traffic


def test_an_endpoint_display_name_no_endpoint_has_creates_one_by_that_name() -> None:
    plan = plan_for(DeployOptions(endpoint="chat-prod"))
    assert plan.endpoint is None and plan.endpoint_display_name == "chat-prod"


# -- refusals ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (
            DeployOptions(machine="n1-standrd-4"),
            "--machine: unknown machine type 'n1-standrd-4' (hint: did you mean n1-standard-4?)",
        ),
        (
            DeployOptions(machine="n1-standard-4", accelerator="NVIDIA_L4"),
            "--accelerator: NVIDIA_L4 cannot be attached to n1-standard-4",
        ),
        (
            DeployOptions(
                machine="n1-standard-4", accelerator="NVIDIA_TESLA_T4", accelerator_count=3
            ),
            "--accelerator-count: 3 x NVIDIA_TESLA_T4 is not a valid count for n1-standard-4",
        ),
        (
            DeployOptions(min_replicas=3, max_replicas=2),
            "--max-replicas 2 is below --min-replicas 3",
        ),
        (DeployOptions(min_replicas=0), "--min-replicas 0: at least 1"),
        (DeployOptions(traffic=101), "--traffic 101: a percentage, 0 to 100"),
        (DeployOptions(traffic=-1), "--traffic -1: a percentage, 0 to 100"),
        (DeployOptions(traffic=50), "the endpoint serves no other model"),
    ],
)
def test_what_vertex_would_refuse_is_refused_before_sending(
    options: DeployOptions, expected: str
) -> None:
    assert expected in refusals(options)


def test_an_accelerator_the_region_lacks_is_refused() -> None:
    stack = make_stack().model_copy(update={"region": "europe-west1"})
    problems = refusals(DeployOptions(machine="a3-highgpu-8g"), stack)
    assert "not offered for training in europe-west1" in problems


def test_a_stack_without_a_serving_account_is_refused_with_what_to_do() -> None:
    problems = refusals(DeployOptions(), make_stack(serving_sa=None))
    assert "exports no serving_service_account" in problems and "pulumi up" in problems


def test_every_problem_is_reported_at_once() -> None:
    stack = make_stack(serving_sa=None)
    problems = refusals(DeployOptions(machine="n9-huge", min_replicas=2, max_replicas=1), stack)
    assert problems.count(" | ") == 2, problems


def test_an_unknown_model_or_endpoint_id_is_refused() -> None:
    stack = make_stack()
    with pytest.raises(DeployRefused) as refused:
        plan_deploy(
            stack,
            "99",
            DeployOptions(endpoint="12345"),
            FakeModels(stack),
            FakeEndpoints(stack),
        )
    text = " | ".join(refused.value.problems)
    assert "model 99: no such model or version" in text
    assert "--endpoint 12345: no such endpoint" in text


# -- prices --------------------------------------------------------------------------------------


def priced_catalog():
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
            "accelerators": {"NVIDIA_L4": {"usd_per_h": 0.5, "basis": "verified"}},
        }
    )
    return cat.model_copy(update={"serving_price_tables": (table,)})


def test_a_deployment_costs_its_replica_price_times_min_and_max_replicas() -> None:
    cost = serving_cost(priced_catalog(), "us-central1", "g2-standard-8", "NVIDIA_L4", 1, 2, 5)
    assert cost.replica_usd_per_h == pytest.approx(1.5)
    assert cost.floor_usd_per_h == pytest.approx(3.0)
    assert cost.ceiling_usd_per_h == pytest.approx(7.5)
    assert cost.reason is None


def test_a_missing_serving_figure_is_unknown_never_zero_nor_the_training_price() -> None:
    cat = priced_catalog()
    # us-central1's training table prices n1-standard-4; serving never borrows it.
    assert cat.price_table("us-central1").machines["n1-standard-4"].usd_per_h
    cost = serving_cost(cat, "us-central1", "n1-standard-4", None, 0, 1, 1)
    assert cost.floor_usd_per_h is None and cost.ceiling_usd_per_h is None
    assert cost.reason == "no serving price for n1-standard-4 in serving-test (as of 2026-11-23)"
    partly = serving_cost(cat, "us-central1", "g2-standard-8", "NVIDIA_L4", 2, 1, 1)
    assert partly.replica_usd_per_h == pytest.approx(2.0)
    no_table = serving_cost(cat, "europe-west4", "g2-standard-8", None, 0, 1, 2)
    assert no_table.floor_usd_per_h is None
    assert no_table.reason == "no serving price table for europe-west4 in jobs/core/catalog/prices/"


def test_every_catalog_region_has_its_own_serving_table_apart_from_training() -> None:
    cat = load_catalog()
    assert sorted(t.region for t in cat.serving_price_tables) == sorted(cat.regions)
    assert all(t.kind == "serving" for t in cat.serving_price_tables)
    assert all(t.kind == "training" for t in cat.price_tables)
    for table in cat.serving_price_tables:
        assert set(table.machines) <= set(cat.machines), table.name
        assert set(table.accelerators) <= set(cat.accelerators), table.name
        assert table.as_of and table.source.startswith("https://"), table.name


# -- traffic -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("split", "percent"),
    [
        ({}, 100),
        ({"1": 100}, 0),
        ({"1": 100}, 30),
        ({"1": 50, "2": 50}, 33),
        ({"1": 1, "2": 99}, 7),
    ],
)
def test_the_split_after_a_deploy_is_the_sdks(split: dict[str, int], percent: int) -> None:
    from google.cloud.aiplatform.models import Endpoint

    assert allocate_traffic(split, percent) == Endpoint._allocate_traffic(split, percent)
    assert sum(allocate_traffic(split, percent).values()) == 100


@pytest.mark.parametrize(
    ("split", "gone"),
    [
        ({"1": 100}, "1"),
        ({"1": 30, "2": 70}, "1"),
        ({"1": 33, "2": 33, "3": 34}, "3"),
        ({"1": 10, "2": 45, "3": 45}, "2"),
    ],
)
def test_the_split_after_an_undeploy_is_the_sdks(split: dict[str, int], gone: str) -> None:
    from google.cloud.aiplatform.models import Endpoint

    sdk = Endpoint._unallocate_traffic(split, gone)
    assert sdk.pop(gone) == 0  # the SDK keeps the undeployed model at 0; vtx leaves it out
    assert unallocate_traffic(split, gone) == sdk


def test_undeploying_all_goes_smallest_share_first_each_step_leaving_100() -> None:
    stack = make_stack()
    rest = FakeEndpoints(stack, **{"7": endpoint_json("7", {"1": 70, "2": 0, "3": 30})})
    plan = plan_undeploy(rest, "7", None)
    assert [(s.deployed_model_id, s.traffic) for s in plan.steps] == [
        ("2", {"1": 70, "3": 30}),
        ("3", {"1": 100}),
        ("1", {}),
    ]


def test_undeploying_the_model_holding_all_traffic_needs_a_split() -> None:
    stack = make_stack()
    rest = FakeEndpoints(stack, **{"7": endpoint_json("7", {"1": 100, "2": 0})})
    with pytest.raises(DeployRefused, match=r"say where it goes, e\.g\. --traffic 2=100"):
        plan_undeploy(rest, "7", "1")
    assert plan_undeploy(rest, "7", "1", {"2": 100}).steps[0].traffic == {"2": 100}
    with pytest.raises(DeployRefused, match="add up to 60"):
        plan_undeploy(rest, "7", "1", {"2": 60})
    with pytest.raises(DeployRefused, match="has no deployed model 9"):
        plan_undeploy(rest, "7", "9")


# -- sending -------------------------------------------------------------------------------------


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


def test_deploy_creates_the_endpoint_then_deploys_with_the_planned_split() -> None:
    stack = make_stack()
    rest = FakeEndpoints(stack)
    plan = plan_deploy(stack, "42", DeployOptions(), FakeModels(stack), rest)
    client = FakeClient(rest)
    deployed = deploy(stack, plan, rest, client=client, backoff=NO_WAIT)
    assert (deployed.endpoint, deployed.deployed_model_id) == (f"{PARENT}/endpoints/8", "556")
    (_, endpoint), (_, request) = client.calls
    assert endpoint.display_name == "tiny-chat" and dict(endpoint.labels) == {"vtx-run-id": "r1"}
    assert request.endpoint == f"{PARENT}/endpoints/8"
    assert dict(request.traffic_split) == {"0": 100}
    assert request.deployed_model.model == f"{MODEL}@2"
    assert request.deployed_model.service_account == SERVING_SA


@pytest.mark.parametrize(("lands", "sends", "deployed_id"), [(True, 1, "555"), (False, 2, "556")])
def test_a_503_on_deploy_is_retried_only_when_nothing_landed(
    lands: bool, sends: int, deployed_id: str
) -> None:
    stack = make_stack()
    rest = FakeEndpoints(stack, **{"8": endpoint_json("8", {})})
    plan = plan_deploy(stack, "42", DeployOptions(endpoint="8"), FakeModels(stack), rest)
    client = FakeClient(rest, unavailable=True, lands=lands)
    deployed = deploy(stack, plan, rest, client=client, backoff=NO_WAIT)
    assert deployed.deployed_model_id == deployed_id
    assert [c[0] for c in client.calls] == ["deploy_model"] * sends


def test_a_refused_deploy_is_explained_in_a_deployments_words() -> None:
    from google.api_core import exceptions

    stack = make_stack()
    rest = FakeEndpoints(stack, **{"8": endpoint_json("8", {})})
    plan = plan_deploy(stack, "42", DeployOptions(endpoint="8"), FakeModels(stack), rest)

    class Refusing:
        def deploy_model(self, request: Any, retry: Any) -> None:
            raise exceptions.PermissionDenied("iam.serviceAccounts.actAs denied")

    with pytest.raises(VertexError, match=f"roles/iam.serviceAccountUser on {SERVING_SA}"):
        deploy(stack, plan, rest, client=Refusing(), backoff=NO_WAIT)


def test_undeploy_sends_each_step_with_its_split_after_confirmation() -> None:
    stack = make_stack()
    rest = FakeEndpoints(stack, **{"7": endpoint_json("7", {"1": 30, "2": 70})})
    client = FakeClient(rest)
    code, out = printed(
        lambda console: undeploy_models(
            console, stack, "7", "1", confirm=lambda q: True, endpoints=rest, client=client
        )
    )
    assert code == 0, out
    assert "1 42@1 2 (42@1) 100%" in out
    assert client.calls == [("undeploy_model", ("1", {"2": 100}))]
    assert undeploy(stack, plan_undeploy(rest, "7", None), rest, client) == ["1", "2"]
