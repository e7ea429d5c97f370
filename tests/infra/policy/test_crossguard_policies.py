"""The CrossGuard wrappers: same rules, fed the way the Pulumi engine feeds a policy pack.

The PolicyPack constructor starts a gRPC server, so these tests call the policies' validate
callbacks with hand-built ResourceValidationArgs / StackValidationArgs instead."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pulumi_policy import (
    EnforcementLevel,
    PolicyResource,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.policy import _NotApplicableError
from pulumi_policy.proxy import unknown_checking_proxy

from infra.policy.policies import (
    POLICIES,
    context,
    stack_config_egress,
    stack_config_environment,
)
from infra.policy.rules import RULES
from infra.policy.values import UNKNOWN


def policy(name: str):
    return next(p for p in POLICIES if p.name == name)


def run_resource_policy(name: str, resource_type: str, props: dict[str, Any], config=None):
    reported: list[str] = []
    args = ResourceValidationArgs(
        resource_type,
        unknown_checking_proxy(props),
        urn=f"urn:pulumi:prod::vtx::{resource_type}::r",
        name="r",
        opts=None,
        provider=None,
        config=config or {"environment": "prod"},
    )
    found = policy(name)
    assert isinstance(found, ResourceValidationPolicy)
    found.validate(args, lambda message, urn: reported.append(message))
    return reported


def test_policies_mirror_the_rules_with_their_enforcement_levels() -> None:
    assert [p.name for p in POLICIES] == [r.name for r in RULES]
    levels = {p.name: p.enforcement_level for p in POLICIES}
    assert levels["bucket-uniform-access"] is EnforcementLevel.MANDATORY
    assert levels["labels-present"] is EnforcementLevel.ADVISORY
    assert isinstance(policy("prod-budget"), StackValidationPolicy)


def test_resource_policy_reports_the_violation_with_its_fix() -> None:
    bucket = {"uniformBucketLevelAccess": False, "publicAccessPrevention": "enforced"}
    reported = run_resource_policy("bucket-uniform-access", "gcp:storage/bucket:Bucket", bucket)
    assert len(reported) == 1
    assert reported[0].startswith("r: uniformBucketLevelAccess is not true")
    assert "Fix: set uniform_bucket_level_access=True" in reported[0]


def test_unknown_preview_values_do_not_stop_a_rule_that_scans_every_property() -> None:
    member = {"bucket": UNKNOWN, "role": "roles/storage.objectAdmin", "member": UNKNOWN}
    reported = run_resource_policy(
        "no-default-compute-identity", "gcp:storage/bucketIAMMember:BucketIAMMember", member
    )
    assert reported == []


def test_nested_inputs_reach_the_rules_through_the_engine_proxy() -> None:
    vm = {
        "networkInterfaces": [{"subnetwork": "s", "accessConfigs": [{"networkTier": "PREMIUM"}]}],
        "serviceAccount": {"email": UNKNOWN, "scopes": ["cloud-platform"]},
    }
    reported = run_resource_policy("instance-no-external-ip", "gcp:compute/instance:Instance", vm)
    assert len(reported) == 1
    assert reported[0].startswith("r: networkInterfaces[0].accessConfigs gives the VM a public IP")
    assert "Fix: drop access_configs" in reported[0]
    assert (
        run_resource_policy(
            "instance-not-default-service-account", "gcp:compute/instance:Instance", vm
        )
        == []
    )


def test_stack_policy_reports_the_offending_resource() -> None:
    role = PolicyResource(
        "gcp:projects/iAMCustomRole:IAMCustomRole",
        {"project": "p", "roleId": "minter", "permissions": ["iam.serviceAccounts.getAccessToken"]},
        "urn:role",
        "minter",
        None,
        None,
        None,
        [],
        {},
    )
    grant = PolicyResource(
        "gcp:projects/iAMMember:IAMMember",
        {"project": "p", "role": "projects/p/roles/minter", "member": "user:a@acme.com"},
        "urn:grant",
        "grant",
        None,
        None,
        None,
        [],
        {},
    )
    reported: list[tuple[str, str | None]] = []
    found = policy("no-project-wide-escalating-custom-roles")
    args = StackValidationArgs([role, grant], {"environment": "dev"})
    found.validate(args, lambda message, urn: reported.append((message, urn)))
    assert [urn for _, urn in reported] == ["urn:grant"]
    assert "iam.serviceAccounts.getAccessToken" in reported[0][0]


def test_prod_only_policy_is_not_applicable_on_dev() -> None:
    with pytest.raises(_NotApplicableError) as raised:
        run_resource_policy(
            "prod-bucket-cmek", "gcp:storage/bucket:Bucket", {}, config={"environment": "dev"}
        )
    assert raised.value.reason == "prod only; this stack is dev"


def test_stack_policy_sees_every_resource() -> None:
    def resource(resource_type: str) -> PolicyResource:
        return PolicyResource(
            resource_type, {}, f"urn:{resource_type}", "r", None, None, None, [], {}
        )

    reported: list[str] = []
    found = policy("prod-budget")
    args = StackValidationArgs([resource("gcp:storage/bucket:Bucket")], {"environment": "prod"})
    found.validate(args, lambda message, urn: reported.append(message))
    assert reported and "no billing budget" in reported[0]
    reported.clear()
    args = StackValidationArgs([resource("gcp:billing/budget:Budget")], {"environment": "prod"})
    found.validate(args, lambda message, urn: reported.append(message))
    assert reported == []


def test_dns_logging_policy_names_the_network_and_waits_for_ids_unknown_at_preview() -> None:
    def resource(resource_type: str, name: str, props: dict[str, Any]) -> PolicyResource:
        proxied = unknown_checking_proxy(props)
        return PolicyResource(resource_type, proxied, f"urn:{name}", name, None, None, None, [], {})

    network = resource("gcp:compute/network:Network", "vpc", {"name": "vpc", "selfLink": UNKNOWN})
    found = policy("network-dns-logging")
    reported: list[tuple[str, str | None]] = []
    found.validate(
        StackValidationArgs([network], {"environment": "dev"}),
        lambda message, urn: reported.append((message, urn)),
    )
    assert [urn for _, urn in reported] == ["urn:vpc"]
    assert "Fix: declare gcp.dns.Policy(enable_logging=True" in reported[0][0]
    reported.clear()
    logging = resource(
        "gcp:dns/policy:Policy",
        "dns",
        {"enableLogging": True, "networks": [{"networkUrl": UNKNOWN}]},
    )
    found.validate(
        StackValidationArgs([network, logging], {"environment": "dev"}),
        lambda message, urn: reported.append((message, urn)),
    )
    assert reported == []


def test_environment_comes_from_policy_config_then_stack_config_then_stack_name() -> None:
    stack_config = {
        "PULUMI_CONFIG": json.dumps({"vtx:platform": json.dumps({"environment": "prod"})})
    }
    assert stack_config_environment(stack_config) == "prod"
    assert stack_config_environment({"PULUMI_STACK": "acme/dev"}) == "dev"
    assert stack_config_environment({}) is None
    assert context({"environment": "staging"}, environ=stack_config).environment == "staging"
    assert context({}, environ=stack_config).environment == "prod"


def test_egress_comes_from_policy_config_then_stack_config() -> None:
    def config(network: dict[str, str]) -> dict[str, str]:
        platform = {"environment": "prod", "network": network}
        return {"PULUMI_CONFIG": json.dumps({"vtx:platform": json.dumps(platform)})}

    closed = config({"mode": "peering", "egress": "none"})
    assert stack_config_egress(closed) == "none"
    # The program's default: a stack that does not say is open (Cloud NAT).
    assert stack_config_egress(config({"mode": "peering"})) == "nat"
    assert stack_config_egress({}) is None
    assert context({}, environ=closed).egress == "none"
    assert context({"egress": "nat"}, environ=closed).egress == "nat"


def test_required_labels_are_configurable() -> None:
    assert context({"required_labels": ["team", "cost-center"]}, environ={}).required_labels == (
        "team",
        "cost-center",
    )
