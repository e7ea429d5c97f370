"""Further regions (``vtx:platform.capacity_regions``), run under mocks from the test stacks in
tests/infra/stacks/: what each region gets in either network mode, and the ``regions`` export
that jobs.core.stack.StackOutputs.in_region reads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.offline.program import OfflineRun, RecordedResource, run_offline
from infra.policy.evaluate import PolicySubject, evaluate
from infra.policy.rule_types import RuleContext
from jobs.core.stack import RegionOutputs, StackOutputs

STACKS = Path(__file__).resolve().parents[1] / "stacks"
FURTHER = ("us-east4", "us-west1")
HOST = "acme-net-host-prod"


@pytest.fixture(scope="module")
def psc_run() -> OfflineRun:
    return run_offline("ladder-psc", STACKS / "Pulumi.ladder-psc.yaml")


@pytest.fixture(scope="module")
def peering_run() -> OfflineRun:
    return run_offline("ladder-peering", STACKS / "Pulumi.ladder-peering.yaml")


def platform(run: OfflineRun) -> StackOutputs:
    return StackOutputs.model_validate(run.outputs["platform"])


def named(run: OfflineRun, type_token: str, name: str) -> RecordedResource:
    (found,) = [r for r in run.of_type(type_token) if r.name == name]
    return found


# --- the export ------------------------------------------------------------------------------


def test_in_region_gives_the_regional_attachment_and_key(psc_run: OfflineRun) -> None:
    outputs = platform(psc_run)
    assert outputs.job_regions == ["europe-west4", *FURTHER]
    # Every field of the contract is exported, none beside them (RegionOutputs forbids extras).
    exported = psc_run.outputs["platform"]["regions"]
    assert all(set(entry) == set(RegionOutputs.model_fields) for entry in exported.values())
    for region in FURTHER:
        attachment = named(
            psc_run,
            "gcp:compute/networkAttachment:NetworkAttachment",
            f"network-attachment-{region}",
        )
        key = named(psc_run, "gcp:kms/cryptoKey:CryptoKey", f"kms-{region}-key")
        there = outputs.in_region(region)
        assert there.region == region
        assert (
            there.network_attachment
            == attachment.id
            == (
                f"projects/acme-vtx-prod/regions/{region}/networkAttachments/acme-vtx-prod-vertex-{region}"
            )
        )
        assert there.kms_key == key.id
        assert f"/locations/{region}/" in there.kms_key
        # One TensorBoard per stack: a job elsewhere runs without one.
        assert there.tensorboard is None
        assert there.buckets == outputs.buckets
    # The stack's own region is unchanged.
    assert outputs.in_region("europe-west4") == outputs
    assert "/europe-west4/" in (outputs.network_attachment or "")


def test_peering_exports_the_region_with_its_key_and_no_attachment(peering_run: OfflineRun) -> None:
    there = platform(peering_run).in_region("us-east4")
    assert there.network_attachment is None and there.tensorboard is None
    # The peered network is global: the job in us-east4 names the same one.
    assert there.network == platform(peering_run).network is not None
    assert there.kms_key is not None and "/locations/us-east4/" in there.kms_key


def test_without_capacity_regions_the_output_has_no_regions_key() -> None:
    for stack in ("dev", "prod"):
        assert "regions" not in run_offline(stack).outputs["platform"]


def test_a_region_with_nothing_regional_is_still_exported(tmp_path: Path) -> None:
    """Peering without CMEK: nothing is declared there, but the entry says jobs may run there."""
    document = yaml.safe_load((STACKS / "Pulumi.ladder-peering.yaml").read_text())
    document["config"]["vtx:platform"]["cmek"] = False
    path = tmp_path / "Pulumi.plain.yaml"
    path.write_text(yaml.safe_dump(document))
    run = run_offline("plain", path)
    assert run.outputs["platform"]["regions"] == {
        "us-east4": {"network_attachment": None, "kms_key": None, "tensorboard": None}
    }
    assert platform(run).in_region("us-east4").region == "us-east4"
    assert not run.of_type("gcp:kms/keyRing:KeyRing")


# --- what each further region gets -----------------------------------------------------------


def test_psc_region_gets_subnet_attachment_and_nat_like_the_main_region(
    psc_run: OfflineRun,
) -> None:
    main_psc = named(psc_run, "gcp:compute/subnetwork:Subnetwork", "network-psc")
    for region, cidr in zip(FURTHER, ("10.31.0.16/28", "10.31.0.32/28"), strict=True):
        subnet = named(psc_run, "gcp:compute/subnetwork:Subnetwork", f"network-psc-{region}")
        assert subnet.inputs["project"] == HOST and subnet.inputs["region"] == region
        assert subnet.inputs["ipCidrRange"] == cidr
        assert subnet.inputs["name"] == f"acme-vtx-prod-psc-{region}"
        # The same flow-log and private-access treatment as the main PSC subnet.
        assert subnet.inputs["logConfig"] == main_psc.inputs["logConfig"]
        assert subnet.inputs["privateIpGoogleAccess"] is True
        attachment = named(
            psc_run,
            "gcp:compute/networkAttachment:NetworkAttachment",
            f"network-attachment-{region}",
        )
        assert attachment.inputs["project"] == "acme-vtx-prod"
        assert attachment.inputs["region"] == region
        assert attachment.inputs["subnetworks"] == [subnet.outputs["selfLink"]]
        assert attachment.inputs["connectionPreference"] == "ACCEPT_AUTOMATIC"
        router = named(psc_run, "gcp:compute/router:Router", f"network-router-{region}")
        nat = named(psc_run, "gcp:compute/routerNat:RouterNat", f"network-nat-{region}")
        assert router.inputs["project"] == nat.inputs["project"] == HOST
        assert router.inputs["region"] == nat.inputs["region"] == region
        assert nat.inputs["router"] == router.inputs["name"]
    allow = named(psc_run, "gcp:compute/firewall:Firewall", "network-allow-internal")
    assert {"10.31.0.16/28", "10.31.0.32/28"} <= set(allow.inputs["sourceRanges"])


def test_psc_region_subnet_is_shared_with_the_agent_before_its_attachment(
    psc_run: OfflineRun,
) -> None:
    grants = psc_run.of_type("gcp:compute/subnetworkIAMMember:SubnetworkIAMMember")
    for region in FURTHER:
        (grant,) = [
            g
            for g in grants
            if g.inputs["region"] == region
            and g.inputs["subnetwork"] == f"acme-vtx-prod-psc-{region}"
        ]
        assert grant.inputs["project"] == HOST
        assert grant.inputs["role"] == "roles/compute.networkUser"
        assert "@gcp-sa-aiplatform.iam" in grant.inputs["member"]
        attachment = named(
            psc_run,
            "gcp:compute/networkAttachment:NetworkAttachment",
            f"network-attachment-{region}",
        )
        for any_grant in grants:
            assert psc_run.depends_on(attachment, any_grant), any_grant.name
    # The stack's own subnets keep their grants (and their names) first.
    assert {g.inputs["region"] for g in grants} == {"europe-west4", *FURTHER}


def test_peering_declares_nothing_network_side_in_further_regions(peering_run: OfflineRun) -> None:
    dev = run_offline("dev")
    network_types = (
        "gcp:compute/subnetwork:Subnetwork",
        "gcp:compute/router:Router",
        "gcp:compute/routerNat:RouterNat",
        "gcp:compute/networkAttachment:NetworkAttachment",
        "gcp:compute/firewall:Firewall",
        "gcp:compute/globalAddress:GlobalAddress",
    )
    for type_token in network_types:
        assert [r.inputs for r in peering_run.of_type(type_token)] == [
            r.inputs for r in dev.of_type(type_token)
        ], type_token


@pytest.mark.parametrize("stack", ["psc", "peering"])
def test_each_further_region_gets_a_key_like_the_main_one(
    stack: str, request: pytest.FixtureRequest
) -> None:
    run: OfflineRun = request.getfixturevalue(f"{stack}_run")
    main = named(run, "gcp:kms/cryptoKey:CryptoKey", "kms-key")
    regions = FURTHER if stack == "psc" else ("us-east4",)
    for region in regions:
        ring = named(run, "gcp:kms/keyRing:KeyRing", f"kms-{region}-ring")
        assert ring.inputs["location"] == region
        key = named(run, "gcp:kms/cryptoKey:CryptoKey", f"kms-{region}-key")
        assert key.inputs["rotationPeriod"] == main.inputs["rotationPeriod"]
        assert key.inputs["purpose"] == "ENCRYPT_DECRYPT"
        assert key.inputs["labels"] == main.inputs["labels"]
        grants = [
            g
            for g in run.of_type("gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember")
            if g.inputs["cryptoKeyId"] == key.id
        ]
        # Only Vertex encrypts there: buckets and the registry keep the main key.
        assert [g.inputs["member"].split("@")[1] for g in grants] == [
            "gcp-sa-aiplatform.iam.gserviceaccount.com"
        ]
        assert grants[0].inputs["role"] == "roles/cloudkms.cryptoKeyEncrypterDecrypter"
        identity = next(
            r
            for r in run.of_type("gcp:projects/serviceIdentity:ServiceIdentity")
            if r.inputs["service"] == "aiplatform.googleapis.com"
        )
        assert run.depends_on(grants[0], identity)
    # No second TensorBoard: one instance per stack.
    assert len(run.of_type("gcp:vertex/aiTensorboard:AiTensorboard")) == 1


def test_a_further_regions_quota_is_requested_there(psc_run: OfflineRun) -> None:
    (preference,) = [
        r
        for r in psc_run.of_type("gcp:cloudquota/sQuotaPreference:SQuotaPreference")
        if r.inputs["dimensions"]["region"] == "us-east4"
    ]
    assert preference.inputs["quotaId"] == (
        "CustomModelTrainingPreemptibleNvidiaL4GpusPerProjectPerRegion"
    )
    assert preference.inputs["name"] == "vtx-nvidia-l4-spot-us-east4"


# --- guardrails ------------------------------------------------------------------------------


def _subjects(run: OfflineRun) -> list[PolicySubject]:
    return [PolicySubject(r.type, r.name, r.urn, r.inputs, r.outputs) for r in run.resources]


@pytest.mark.parametrize("stack", ["psc", "peering"])
def test_further_regions_raise_no_policy_finding(
    stack: str, request: pytest.FixtureRequest
) -> None:
    run: OfflineRun = request.getfixturevalue(f"{stack}_run")
    environment = run.outputs["platform"]["environment"]
    verdicts = evaluate(_subjects(run), RuleContext(environment=environment))
    findings: list[Any] = [(v.rule.name, x.message) for v in verdicts for x in v.violations]
    assert findings == []


API_OF_TYPE_PREFIX = {
    "gcp:compute/": "compute",
    "gcp:kms/": "cloudkms",
}


@pytest.mark.parametrize("stack", ["psc", "peering"])
def test_regional_resources_wait_for_their_api(stack: str, request: pytest.FixtureRequest) -> None:
    run: OfflineRun = request.getfixturevalue(f"{stack}_run")
    apis = {
        r.inputs["service"].split(".")[0]: r for r in run.of_type("gcp:projects/service:Service")
    }
    regional = [
        r
        for r in run.resources
        if any(region in r.name for region in FURTHER) and r.type.startswith("gcp:")
    ]
    assert regional
    unordered = [
        r.name
        for r in regional
        for prefix, api in API_OF_TYPE_PREFIX.items()
        if r.type.startswith(prefix) and not run.depends_on(r, apis[api])
    ]
    assert unordered == []


def test_preview_lists_the_regional_keys_after_the_main_one(psc_run: OfflineRun) -> None:
    components = list(psc_run.by_component())
    start = components.index("kms")
    assert components[start : start + 4] == ["kms", "kms-us-east4", "kms-us-west1", "network"]
