"""jobs/serving/deploy.py and `vtx deploy|undeploy` without a platform: the plan, every refusal, the
serving price (floor, ceiling, unknown), the traffic split Vertex needs, and the SDK calls sent
once (a 503 retried only after checking that nothing landed)."""

from __future__ import annotations

from typing import Any

import pytest

from jobs.core.catalog import load_catalog
from jobs.pricing.serving_cost import serving_cost
from jobs.serving.deploy import (
    NEW,
    DeployOptions,
    DeployRefused,
    allocate_traffic,
    deploy,
    plan_deploy,
    plan_undeploy,
    unallocate_traffic,
)
from jobs.vertex.errors import VertexError
from tests.jobs.serving.fakes import (
    MODEL,
    NO_WAIT,
    SERVING_SA,
    FakeEndpoints,
    FakeModels,
    endpoint_json,
    make_stack,
    plan_for,
    priced_catalog,
    refusals,
)


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
    assert "not offered for serving in europe-west1" in problems


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


def test_a_deployment_costs_its_replica_price_times_min_and_max_replicas() -> None:
    cost = serving_cost(priced_catalog(), "us-central1", "g2-standard-8", "NVIDIA_L4", 1, 2, 5)
    assert cost.replica_usd_per_h == pytest.approx(1.5)
    assert cost.floor_usd_per_h == pytest.approx(3.0)
    assert cost.ceiling_usd_per_h == pytest.approx(7.5)
    assert cost.floor_usd_per_month == pytest.approx(3.0 * 730)  # the pricing calculator's month
    assert cost.ceiling_usd_per_month == pytest.approx(7.5 * 730)
    assert cost.reason is None
    # A refreshed table names the SKU behind a figure; the machine's figure here has none.
    assert cost.skus == [
        (
            "NVIDIA_L4",
            "A001-0000-0042",
            "Nvidia L4 GPU running in Americas for Prediction",
            "2026-11-27T03:00:00Z",
        )
    ]


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


@pytest.mark.parametrize("machine", ["n1-standard-2", "e2-standard-2", "e2-highcpu-8"])
def test_serving_machines_training_lacks_are_deployed_on(machine: str) -> None:
    assert plan_for(DeployOptions(machine=machine)).machine == {"machineType": machine}


def test_a_training_only_machine_is_refused_for_serving() -> None:
    # n1-standard-64 trains, but Google's prediction page lists N1 up to 32 vCPUs.
    assert "unknown machine type 'n1-standard-64'" in refusals(
        DeployOptions(machine="n1-standard-64")
    )
