"""`vtx deploy` and `vtx undeploy` through the CLI's flow: plan, confirm, the SDK calls."""

from __future__ import annotations

import pytest

from jobs.pricing.serving_cost import serving_cost
from jobs.serving.deploy import (
    DeployOptions,
    DeployRefused,
    deploy,
    plan_deploy,
    plan_undeploy,
    undeploy,
)
from tests.jobs.serving.fakes import (
    MODEL,
    NO_WAIT,
    PARENT,
    SERVING_SA,
    FakeClient,
    FakeEndpoints,
    FakeModels,
    endpoint_json,
    make_stack,
    priced_catalog,
    printed,
)
from vtx.commands.deploy import deploy_model, undeploy_models
from vtx.confirm import Ask
from vtx.views.serving import disk_line, price_line, sku_lines


def test_the_plan_names_model_version_endpoint_machine_replicas_split_identity_and_price() -> None:
    stack = make_stack()
    endpoints = FakeEndpoints(stack, **{"7": endpoint_json("7", {"100": 100})})
    code, out = printed(
        lambda console: deploy_model(
            console,
            stack,
            "42@default",
            DeployOptions(machine="g2-standard-8", max_replicas=3, traffic=20, endpoint="7"),
            Ask(dry_run=True),
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
    assert (
        "boot disk $/h unknown: no real SKU wording is known for a deployed model's boot disk"
        in out
    )
    assert "dry run: nothing deployed" in out


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


def test_undeploy_sends_each_step_with_its_split_after_confirmation() -> None:
    stack = make_stack()
    rest = FakeEndpoints(stack, **{"7": endpoint_json("7", {"1": 30, "2": 70})})
    client = FakeClient(rest)
    code, out = printed(
        lambda console: undeploy_models(
            console,
            stack,
            "7",
            "1",
            None,
            Ask(confirm=lambda q: True),
            endpoints=rest,
            client=client,
        )
    )
    assert code == 0, out
    assert "1 42@1 2 (42@1) 100%" in out
    assert client.calls == [("undeploy_model", ("1", {"2": 100}))]
    assert undeploy(stack, plan_undeploy(rest, "7", None), rest, client) == ["1", "2"]


def test_undeploy_finds_the_endpoint_by_its_display_name() -> None:
    # `vtx deploy --endpoint chat` created it by that name: undeploy finds it the same way.
    stack = make_stack()
    rest = FakeEndpoints(stack, **{"7": endpoint_json("7", {"1": 30, "2": 70})})
    assert plan_undeploy(rest, "chat", "1").endpoint.name.endswith("/endpoints/7")
    rest.endpoints["8"] = endpoint_json("8", {"3": 100})
    with pytest.raises(DeployRefused, match=r"2 endpoints have that display name \(7, 8\)"):
        plan_undeploy(rest, "chat", "1")
    with pytest.raises(DeployRefused, match="no endpoint has that display name or id"):
        plan_undeploy(rest, "nobody", "1")


def test_the_serving_price_reads_per_hour_and_month_with_its_table_and_skus() -> None:
    cost = serving_cost(priced_catalog(), "us-central1", "g2-standard-8", "NVIDIA_L4", 1, 2, 5)
    assert price_line(cost) == (
        "$3.00/h at 2 replica(s) ($2,190.00/month), $7.50/h at 5 ($5,475.00/month); "
        "$1.50/h a replica, from serving-test (as of 2026-11-23); excluding boot disks"
    )
    # The boot disk is its own line: unknown, saying why, never a guessed figure.
    assert disk_line(cost) == (
        "unknown: no real SKU wording is known for a deployed model's boot disk, nor which disk "
        "type and size its nodes get (the billing report of an a3-highgpu-1g deployment lists no "
        "disk SKU)"
    )
    assert sku_lines(cost) == [
        'NVIDIA_L4: SKU A001-0000-0042 "Nvidia L4 GPU running in Americas for Prediction", '
        "fetched 2026-11-27T03:00:00Z"
    ]
