"""Platform guardrails: every rule passes a compliant resource and reports a violating one."""

from __future__ import annotations

import json
from typing import Any

import pytest

from infra.policy.evaluate import PolicySubject, evaluate, mandatory_violations
from infra.policy.iam import grants_of
from infra.policy.labels import takes_labels
from infra.policy.rules import RULES, UNKNOWN, Rule, RuleContext, StackResource

PROD = RuleContext(environment="prod")
LABELS = {"environment": "prod", "team": "ml-platform"}
SA = "serviceAccount:vtx-trainer@acme.iam.gserviceaccount.com"
DEFAULT_SA = "123456789012-compute@developer.gserviceaccount.com"

GOOD_BUCKET = {
    "name": "acme-prod-data",
    "uniformBucketLevelAccess": True,
    "publicAccessPrevention": "enforced",
    "encryption": {"defaultKmsKeyName": "projects/p/locations/l/keyRings/r/cryptoKeys/k"},
    "labels": LABELS,
}
GOOD_SUBNET = {
    "ipCidrRange": "10.10.0.0/20",
    "privateIpGoogleAccess": True,
    "logConfig": {"aggregationInterval": "INTERVAL_5_SEC", "flowSampling": 0.5},
}
GOOD_REPO = {
    "format": "DOCKER",
    "repositoryId": "trainer",
    "dockerConfig": {"immutableTags": True},
    "labels": LABELS,
}
BUCKET_MEMBER = "gcp:storage/bucketIAMMember:BucketIAMMember"
PROJECT_MEMBER = "gcp:projects/iAMMember:IAMMember"


def rule(name: str) -> Rule:
    return next(r for r in RULES if r.name == name)


def check(name: str, resource_type: str, props: dict[str, Any], ctx: RuleContext = PROD):
    found = rule(name).resource_check
    assert found is not None
    return found(resource_type, props, ctx)


# (rule, type token, compliant inputs, violating inputs, words the violation must contain)
CASES = [
    (
        "bucket-uniform-access",
        "gcp:storage/bucket:Bucket",
        GOOD_BUCKET,
        {**GOOD_BUCKET, "uniformBucketLevelAccess": False},
        "uniformBucketLevelAccess",
    ),
    (
        "bucket-public-access-prevention",
        "gcp:storage/bucket:Bucket",
        GOOD_BUCKET,
        {**GOOD_BUCKET, "publicAccessPrevention": "inherited"},
        "'inherited'",
    ),
    (
        "no-public-principals",
        BUCKET_MEMBER,
        {"bucket": "b", "role": "roles/storage.objectViewer", "member": SA},
        {"bucket": "b", "role": "roles/storage.objectViewer", "member": "allUsers"},
        "allUsers",
    ),
    (
        "no-public-principals",
        "gcp:storage/bucketIAMPolicy:BucketIAMPolicy",
        {"bucket": "b", "policyData": json.dumps({"bindings": []})},
        {
            "bucket": "b",
            "policyData": json.dumps(
                {
                    "bindings": [
                        {"role": "roles/storage.objectViewer", "members": ["allAuthenticatedUsers"]}
                    ]
                }
            ),
        },
        "allAuthenticatedUsers",
    ),
    (
        "no-primitive-roles",
        PROJECT_MEMBER,
        {"project": "p", "role": "roles/logging.logWriter", "member": SA},
        {"project": "p", "role": "roles/editor", "member": SA},
        "roles/editor",
    ),
    (
        "no-primitive-roles",
        "gcp:secretmanager/secretIamBinding:SecretIamBinding",
        {"secretId": "s", "role": "roles/secretmanager.secretAccessor", "members": [SA]},
        {"secretId": "s", "role": "roles/viewer", "members": [SA]},
        "roles/viewer",
    ),
    (
        "no-project-wide-admin",
        BUCKET_MEMBER,
        {"bucket": "b", "role": "roles/storage.admin", "member": SA},
        {"project": "p", "role": "roles/storage.admin", "member": SA},
        "whole project p",
    ),
    (
        "no-project-wide-admin",
        "gcp:serviceaccount/iAMMember:IAMMember",
        {"serviceAccountId": "trainer", "role": "roles/iam.serviceAccountUser", "member": SA},
        {"project": "p", "role": "roles/iam.serviceAccountUser", "member": SA},
        "iam.serviceAccountUser",
    ),
    (
        "no-project-wide-admin",
        PROJECT_MEMBER,
        {"project": "p", "role": "roles/aiplatform.user", "member": SA},
        {"project": "p", "role": "roles/aiplatform.admin", "member": SA},
        "aiplatform.admin",
    ),
    (
        "no-default-compute-identity",
        BUCKET_MEMBER,
        {"bucket": "b", "role": "roles/storage.objectAdmin", "member": SA},
        {
            "bucket": "b",
            "role": "roles/storage.objectAdmin",
            "member": f"serviceAccount:{DEFAULT_SA}",
        },
        "member names the Compute Engine default account",
    ),
    (
        "subnet-private-google-access",
        "gcp:compute/subnetwork:Subnetwork",
        GOOD_SUBNET,
        {**GOOD_SUBNET, "privateIpGoogleAccess": False},
        "privateIpGoogleAccess",
    ),
    (
        "ranges-avoid-vertex-reserved",
        "gcp:compute/subnetwork:Subnetwork",
        GOOD_SUBNET,
        {
            **GOOD_SUBNET,
            "secondaryIpRanges": [{"rangeName": "pods", "ipCidrRange": "172.16.4.0/22"}],
        },
        "secondaryIpRanges[0].ipCidrRange 172.16.4.0/22 overlaps 172.16.0.0/16",
    ),
    (
        "ranges-avoid-vertex-reserved",
        "gcp:compute/globalAddress:GlobalAddress",
        {"purpose": "VPC_PEERING", "address": "10.8.0.0", "prefixLength": 16.0, "labels": LABELS},
        {
            "purpose": "VPC_PEERING",
            "address": "172.16.32.0",
            "prefixLength": 20.0,
            "labels": LABELS,
        },
        "172.16.32.0/20 overlaps",
    ),
    (
        "no-secret-values-in-state",
        "gcp:secretmanager/secret:Secret",
        {"secretId": "hf-token", "replication": {"auto": {}}, "labels": LABELS},
        {"secret": "hf-token", "secretData": "[secret]"},
        "SecretVersion",
    ),
    (
        "labels-present",
        "gcp:storage/bucket:Bucket",
        GOOD_BUCKET,
        {k: v for k, v in GOOD_BUCKET.items() if k != "labels"},
        "no labels",
    ),
    (
        "labels-present",
        "gcp:secretmanager/secret:Secret",
        {"secretId": "s", "labels": LABELS},
        {"secretId": "s", "labels": {"team": "ml-platform"}},
        "lack environment",
    ),
    (
        "kms-key-rotation",
        "gcp:kms/cryptoKey:CryptoKey",
        {"keyRing": "r", "rotationPeriod": "7776000s", "labels": LABELS},
        {"keyRing": "r", "labels": LABELS},
        "rotationPeriod",
    ),
    (
        "prod-subnet-flow-logs",
        "gcp:compute/subnetwork:Subnetwork",
        GOOD_SUBNET,
        {k: v for k, v in GOOD_SUBNET.items() if k != "logConfig"},
        "flow logs are off",
    ),
    (
        "prod-bucket-cmek",
        "gcp:storage/bucket:Bucket",
        GOOD_BUCKET,
        {k: v for k, v in GOOD_BUCKET.items() if k != "encryption"},
        "defaultKmsKeyName",
    ),
    (
        "prod-registry-immutable-tags",
        "gcp:artifactregistry/repository:Repository",
        GOOD_REPO,
        {**GOOD_REPO, "dockerConfig": {"immutableTags": False}},
        "immutableTags",
    ),
]


# Cases whose violating resource is of another type than the compliant one.
BAD_TYPES = {
    ("no-project-wide-admin", "whole project p"): PROJECT_MEMBER,
    ("no-project-wide-admin", "iam.serviceAccountUser"): PROJECT_MEMBER,
    ("no-secret-values-in-state", "SecretVersion"): "gcp:secretmanager/secretVersion:SecretVersion",
}


@pytest.mark.parametrize(
    ("name", "resource_type", "good", "bad", "expected"),
    CASES,
    ids=[f"{c[0]}:{c[1].rsplit(':', 1)[-1]}" for c in CASES],
)
def test_resource_rule_passes_compliant_and_reports_violation(
    name: str, resource_type: str, good: dict, bad: dict, expected: str
) -> None:
    assert check(name, resource_type, good) == []
    bad_type = BAD_TYPES.get((name, expected), resource_type)
    messages = check(name, bad_type, bad)
    assert messages, f"{name} did not report {bad}"
    assert any(expected in m for m in messages), messages


def test_service_account_keys_are_refused_and_accounts_allowed() -> None:
    assert (
        check("no-service-account-keys", "gcp:serviceaccount/account:Account", {"accountId": "t"})
        == []
    )
    assert check("no-service-account-keys", "gcp:serviceaccount/key:Key", {"serviceAccountId": "t"})
    assert check(
        "no-service-account-keys", "gcp:storage/hmacKey:HmacKey", {"serviceAccountEmail": "t"}
    )


def test_proxy_only_subnet_needs_neither_private_access_nor_flow_logs() -> None:
    proxy = {"ipCidrRange": "10.20.0.0/23", "purpose": "REGIONAL_MANAGED_PROXY", "role": "ACTIVE"}
    assert check("subnet-private-google-access", "gcp:compute/subnetwork:Subnetwork", proxy) == []
    assert check("prod-subnet-flow-logs", "gcp:compute/subnetwork:Subnetwork", proxy) == []


def test_unknown_values_from_a_preview_are_not_violations() -> None:
    subnet = {**GOOD_SUBNET, "ipCidrRange": UNKNOWN}
    assert check("ranges-avoid-vertex-reserved", "gcp:compute/subnetwork:Subnetwork", subnet) == []
    bucket = {**GOOD_BUCKET, "labels": UNKNOWN}
    assert check("labels-present", "gcp:storage/bucket:Bucket", bucket) == []


def test_provider_default_labels_count_as_labels() -> None:
    bare = {k: v for k, v in GOOD_BUCKET.items() if k != "labels"}
    ctx = RuleContext(environment="prod", default_labels={"environment": "prod"})
    assert check("labels-present", "gcp:storage/bucket:Bucket", bare, ctx) == []


def test_label_support_is_read_from_the_installed_provider() -> None:
    assert takes_labels("gcp:storage/bucket:Bucket")
    assert takes_labels("gcp:vertex/aiTensorboard:AiTensorboard")
    assert not takes_labels("gcp:compute/subnetwork:Subnetwork")
    assert not takes_labels("gcp:serviceaccount/account:Account")
    assert not takes_labels("vtx:platform:Storage")


def test_grants_are_read_from_member_binding_and_policy_resources() -> None:
    policy = json.dumps({"bindings": [{"role": "roles/a", "members": ["user:x", "group:y"]}]})
    grants = grants_of(
        "gcp:kms/cryptoKeyIAMPolicy:CryptoKeyIAMPolicy", {"cryptoKeyId": "k", "policyData": policy}
    )
    assert [(g.principal, g.role, g.scope) for g in grants] == [
        ("user:x", "roles/a", "k"),
        ("group:y", "roles/a", "k"),
    ]
    assert grants_of("gcp:storage/bucket:Bucket", GOOD_BUCKET) == []


def stack_resources(*types: str, platform: dict | None = None) -> list[StackResource]:
    root = StackResource(
        "pulumi:pulumi:Stack", "vtx-prod", "urn:stack", {"platform": platform or {}}
    )
    return [root, *(StackResource(t, f"r{i}", f"urn:{i}", {}) for i, t in enumerate(types))]


def test_prod_budget_rule_requires_a_budget_resource() -> None:
    budget = rule("prod-budget").stack_check
    assert budget is not None
    assert budget(stack_resources("gcp:billing/budget:Budget"), PROD) == []
    assert budget(stack_resources("gcp:storage/bucket:Bucket"), PROD) == [
        ("the stack declares no billing budget", None)
    ]


def test_jobs_identity_rule_reads_the_platform_output() -> None:
    jobs = rule("jobs-not-default-compute").stack_check
    assert jobs is not None
    good = {"trainer_service_account": "vtx-trainer@acme.iam.gserviceaccount.com"}
    assert jobs(stack_resources(platform=good), PROD) == []
    bad = jobs(stack_resources(platform={"trainer_service_account": DEFAULT_SA}), PROD)
    assert len(bad) == 1 and DEFAULT_SA in bad[0][0]


def test_prod_only_rules_are_skipped_outside_prod_and_applied_in_prod() -> None:
    subjects = [
        PolicySubject(
            "gcp:storage/bucket:Bucket", "data", "urn:b", {**GOOD_BUCKET, "encryption": None}
        ),
        PolicySubject("pulumi:pulumi:Stack", "vtx-dev", "urn:s", {}, {"platform": {}}),
    ]
    dev = {
        v.rule.name: v
        for v in evaluate(subjects, RuleContext(environment="dev", required_labels=()))
    }
    assert dev["prod-bucket-cmek"].status == "skipped"
    assert dev["prod-budget"].status == "skipped"
    assert dev["bucket-uniform-access"].status == "pass"
    prod = {
        v.rule.name: v
        for v in evaluate(subjects, RuleContext(environment="prod", required_labels=()))
    }
    assert prod["prod-bucket-cmek"].status == "fail"
    assert prod["prod-bucket-cmek"].violations[0].resource == "gcp:storage/bucket:Bucket data"
    # "production" is production too (jobs.stack.PROD_ENVIRONMENTS), not a lookalike dev stack
    spelled_out = {
        v.rule.name: v
        for v in evaluate(subjects, RuleContext(environment="production", required_labels=()))
    }
    assert spelled_out["prod-bucket-cmek"].status == "fail"
    assert prod["prod-budget"].status == "fail"
    assert {v.policy for v in mandatory_violations(prod.values())} == {
        "prod-bucket-cmek",
        "prod-budget",
    }


def test_advisory_rules_do_not_count_as_mandatory_violations() -> None:
    bare = {k: v for k, v in GOOD_BUCKET.items() if k != "labels"}
    subjects = [PolicySubject("gcp:storage/bucket:Bucket", "data", "urn:b", bare)]
    verdicts = evaluate(subjects, RuleContext(environment="dev"))
    assert {v.rule.name for v in verdicts if v.status == "fail"} == {"labels-present"}
    assert mandatory_violations(verdicts) == []


def test_every_rule_has_a_test_case() -> None:
    covered = {c[0] for c in CASES} | {
        "no-service-account-keys",
        "prod-budget",
        "jobs-not-default-compute",
    }
    assert covered == {r.name for r in RULES}
