"""Private endpoints on a stack with ``private_serving`` (jobs/serving/endpoint_access.py): a new
endpoint is made private the stack's way, existing endpoints of the other kind and a second
model on a peering endpoint are refused before sending, and `vtx deploy` / `vtx endpoint show`
say where the VPC calls the model."""

from __future__ import annotations

import pytest

from jobs.serving.deploy import DeployOptions, deploy, plan_deploy
from jobs.serving.endpoint_access import consumer_hint, consumer_name, reach_lines
from tests.jobs.serving.fakes import (
    NO_WAIT,
    FakeClient,
    FakeEndpoints,
    FakeModels,
    endpoint_json,
    make_stack,
    plan_for,
    refusals,
)
from tests.jobs.serving.private_stacks import NETWORK, private_stack

ATTACHMENT = "projects/abc-tp/regions/us-central1/serviceAttachments/sa-8"


def peering_endpoint(endpoint_id: str, traffic: dict[str, int]) -> dict:
    return endpoint_json(endpoint_id, traffic) | {"network": NETWORK}


def psc_endpoint(endpoint_id: str, traffic: dict[str, int], attachment: str | None = None) -> dict:
    config = {"enablePrivateServiceConnect": True, "projectAllowlist": ["acme-ml-dev"]}
    if attachment:
        config["serviceAttachment"] = attachment
    return endpoint_json(endpoint_id, traffic) | {"privateServiceConnectConfig": config}


@pytest.mark.parametrize(
    ("kind", "fields"),
    [
        ("peering", {"network": NETWORK}),
        (
            "psc",
            {
                "privateServiceConnectConfig": {
                    "enablePrivateServiceConnect": True,
                    "projectAllowlist": ["acme-ml-dev"],
                }
            },
        ),
    ],
)
def test_a_private_stack_creates_its_endpoints_private_through_the_sdk(
    kind: str, fields: dict
) -> None:
    stack = private_stack(kind)
    rest = FakeEndpoints(stack)
    plan = plan_deploy(stack, "42", DeployOptions(), FakeModels(stack), rest)
    assert plan.endpoint_fields == fields
    client = FakeClient(rest)
    deploy(stack, plan, rest, client=client, backoff=NO_WAIT)
    (_, endpoint), _ = client.calls
    if kind == "peering":
        assert endpoint.network == NETWORK
    else:
        config = endpoint.private_service_connect_config
        assert config.enable_private_service_connect
        assert list(config.project_allowlist) == ["acme-ml-dev"]


def test_a_public_stack_creates_public_endpoints() -> None:
    assert plan_for(DeployOptions()).endpoint_fields == {}
    assert plan_for(DeployOptions()).access == "public"


@pytest.mark.parametrize(
    ("kind", "existing", "expected"),
    [
        ("peering", endpoint_json("7", {}), "endpoint 7 is public, and stack acme-ml-dev"),
        ("psc", peering_endpoint("7", {}), "is private (VPC peering), and stack"),
        ("peering", psc_endpoint("7", {}), "serves models private (VPC peering) only"),
        ("peering", peering_endpoint("7", {"5": 100}), "serves one model and it has one (5)"),
    ],
)
def test_an_endpoint_of_the_wrong_kind_or_a_second_peering_model_is_refused(
    kind: str, existing: dict, expected: str
) -> None:
    problems = refusals(DeployOptions(endpoint="7"), private_stack(kind), **{"7": existing})
    assert expected in problems


def test_an_empty_private_endpoint_of_the_stacks_kind_is_reused() -> None:
    plan = plan_for(
        DeployOptions(endpoint="7"), private_stack("peering"), **{"7": peering_endpoint("7", {})}
    )
    assert plan.endpoint is not None and plan.access == "private (VPC peering)"


def test_a_psc_endpoint_without_a_consumer_gets_the_stack_entry_to_add() -> None:
    stack = private_stack("psc")
    endpoint = psc_endpoint("8", {"5": 100}, ATTACHMENT) | {"displayName": "Tiny Chat v2"}
    hint = consumer_hint(stack, endpoint)
    assert hint is not None
    assert "vtx:platform.serving.psc_consumers" in hint
    assert f"- name: tiny-chat-v2\n    service_attachment: {ATTACHMENT}" in hint
    assert reach_lines(stack, endpoint) == [hint]


def test_a_psc_endpoint_with_a_consumer_is_reached_at_its_address() -> None:
    stack = private_stack("psc", {"chat": "10.10.0.9"})
    endpoint = psc_endpoint("8", {"5": 100}, ATTACHMENT)
    assert reach_lines(stack, endpoint) == [
        f"from inside the VPC: PSC endpoint chat at 10.10.0.9 -> {ATTACHMENT}"
    ]


def test_a_psc_endpoint_before_any_deploy_has_no_attachment_yet() -> None:
    assert reach_lines(private_stack("psc"), psc_endpoint("8", {})) == []


@pytest.mark.parametrize(
    ("display", "name"),
    [
        ("chat", "chat"),
        ("Tiny Chat v2", "tiny-chat-v2"),
        ("7b", "endpoint-7b"),
        ("a" * 80, "a" * 52),
    ],
)
def test_a_consumer_name_is_the_display_name_as_a_resource_name(display: str, name: str) -> None:
    assert consumer_name(display) == name


def test_the_stack_output_parses_and_defaults_to_public() -> None:
    assert make_stack().private_serving is None
    assert private_stack("peering").private_serving.network == NETWORK  # type: ignore[union-attr]
