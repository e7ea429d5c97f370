"""The program, run under mocks for dev and prod: the contract with jobs/, least privilege, the
secure defaults, and what differs between the two stacks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.offline.program import (
    DUMMY_SECRET,
    INVOKE_RESULTS,
    OfflineError,
    OfflineRun,
    RecordedResource,
    _config_values,
    render_preview,
    run_offline,
)
from infra.policy.iam import iam_flavour
from jobs.core.stack import StackOutputs

PROJECT_DIR = Path(__file__).resolve().parents[2]
PRIMITIVE_ROLES = {"roles/owner", "roles/editor", "roles/viewer"}


def iam_members(run: OfflineRun) -> list[RecordedResource]:
    return [r for r in run.resources if iam_flavour(r.type) == "member"]


def grants_to(run: OfflineRun, email: str) -> list[tuple[str, str]]:
    """(type, role) of every grant to a service account."""
    member = f"serviceAccount:{email}"
    return sorted(
        (r.type, r.inputs["role"]) for r in iam_members(run) if r.inputs["member"] == member
    )


def platform(run: OfflineRun) -> StackOutputs:
    return StackOutputs.model_validate(run.outputs["platform"])


# --- the contract ---------------------------------------------------------------------------


def test_platform_output_parses_as_stack_outputs(stack_run: OfflineRun) -> None:
    outputs = platform(stack_run)
    assert outputs.environment == stack_run.stack
    assert outputs.vertex_endpoint is None and outputs.gcs_endpoint is None
    assert outputs.project_number.isdigit() and len(outputs.project_number) == 12


def test_outputs_name_the_declared_resources(stack_run: OfflineRun) -> None:
    outputs = platform(stack_run)
    bucket_names = {r.inputs["name"] for r in stack_run.of_type("gcp:storage/bucket:Bucket")}
    assert set(outputs.buckets.model_dump().values()) == bucket_names
    accounts = {
        r.outputs["email"]
        for r in stack_run.of_type("gcp:serviceaccount/account:Account")
        if r.component == "identity"
    }
    assert {
        outputs.trainer_service_account,
        outputs.launcher_service_account,
        outputs.serving_service_account,
    } == accounts
    (repo,) = [
        r
        for r in stack_run.of_type("gcp:artifactregistry/repository:Repository")
        if r.inputs.get("mode") is None  # the stack's own; a closed stack's mirrors beside it
    ]
    assert outputs.artifact_registry == (
        f"europe-west4-docker.pkg.dev/{outputs.project}/{repo.inputs['repositoryId']}"
    )
    secret_ids = {
        r.inputs["secretId"] for r in stack_run.of_type("gcp:secretmanager/secret:Secret")
    }
    assert set(outputs.secrets) == secret_ids
    assert all(
        name == f"projects/{outputs.project_number}/secrets/{sid}"
        for sid, name in outputs.secrets.items()
    )
    assert outputs.tensorboard is not None and outputs.tensorboard.startswith(
        f"projects/{outputs.project_number}/locations/europe-west4/tensorboards/"
    )


def test_dev_uses_peering_by_project_number(dev_run: OfflineRun) -> None:
    outputs = platform(dev_run)
    assert outputs.network == f"projects/{outputs.project_number}/global/networks/acme-vtx-dev-vpc"
    assert outputs.reserved_ip_ranges == ["acme-vtx-dev-vertex-range"]
    assert outputs.network_attachment is None and outputs.kms_key is None
    (address,) = dev_run.of_type("gcp:compute/globalAddress:GlobalAddress")
    assert address.inputs["purpose"] == "VPC_PEERING"
    (peering,) = dev_run.of_type("gcp:servicenetworking/connection:Connection")
    assert peering.inputs["reservedPeeringRanges"] == ["acme-vtx-dev-vertex-range"]


def test_prod_uses_a_psc_interface_attachment_on_the_shared_vpc(prod_run: OfflineRun) -> None:
    outputs = platform(prod_run)
    assert outputs.network is None and outputs.reserved_ip_ranges == []
    assert outputs.network_attachment == (
        "projects/acme-vtx-prod/regions/europe-west4/networkAttachments/acme-vtx-prod-vertex"
    )
    (attachment,) = prod_run.of_type("gcp:compute/networkAttachment:NetworkAttachment")
    psc_subnet = next(
        r for r in prod_run.of_type("gcp:compute/subnetwork:Subnetwork") if r.name == "network-psc"
    )
    assert psc_subnet.inputs["project"] == "acme-net-host-prod"
    assert attachment.inputs["project"] == "acme-vtx-prod"
    assert attachment.inputs["subnetworks"] == [psc_subnet.outputs["selfLink"]]
    # The attachment needs the host grants first (else Vertex cannot use the host subnet).
    for grant in prod_run.of_type("gcp:compute/subnetworkIAMMember:SubnetworkIAMMember"):
        assert prod_run.depends_on(attachment, grant)


# --- least privilege ------------------------------------------------------------------------


def test_no_primitive_roles_no_keys_no_project_wide_storage(stack_run: OfflineRun) -> None:
    roles = {r.inputs["role"] for r in iam_members(stack_run)}
    assert not roles & PRIMITIVE_ROLES
    project_roles = {
        r.inputs["role"] for r in stack_run.of_type("gcp:projects/iAMMember:IAMMember")
    }
    assert not {role for role in project_roles if role.startswith("roles/storage.")}
    assert not stack_run.of_type("gcp:serviceaccount/key:Key")
    assert not [r for r in stack_run.resources if r.type.startswith("gcp:projects/iAMBinding")]
    assert not [r for r in stack_run.resources if r.type.endswith("IAMPolicy")]


def test_trainer_gets_only_bucket_secret_log_and_tensorboard_roles(stack_run: OfflineRun) -> None:
    trainer = platform(stack_run).trainer_service_account
    prefix = stack_run.outputs["platform"]["labels"]["environment"]
    custom_role = f"projects/acme-vtx-{prefix}/roles/acme_vtx_{prefix}_tensorboard_writer"
    assert grants_to(stack_run, trainer) == sorted(
        [
            ("gcp:projects/iAMMember:IAMMember", "roles/logging.logWriter"),
            ("gcp:projects/iAMMember:IAMMember", custom_role),
            ("gcp:storage/bucketIAMMember:BucketIAMMember", "roles/storage.objectViewer"),
            ("gcp:storage/bucketIAMMember:BucketIAMMember", "roles/storage.objectUser"),
            ("gcp:storage/bucketIAMMember:BucketIAMMember", "roles/storage.objectViewer"),
            ("gcp:storage/bucketIAMMember:BucketIAMMember", "roles/storage.objectUser"),
            (
                "gcp:secretmanager/secretIamMember:SecretIamMember",
                "roles/secretmanager.secretAccessor",
            ),
            (
                "gcp:secretmanager/secretIamMember:SecretIamMember",
                "roles/secretmanager.secretAccessor",
            ),
            # Closed egress (prod): pip installs from the stack's PyPI remote, and only there.
            *(
                [
                    (
                        "gcp:artifactregistry/repositoryIamMember:RepositoryIamMember",
                        "roles/artifactregistry.reader",
                    )
                ]
                if platform(stack_run).egress == "none"
                else []
            ),
        ]
    )
    (role,) = [
        r
        for r in stack_run.of_type("gcp:projects/iAMCustomRole:IAMCustomRole")
        if r.component == "identity"
    ]
    assert all(p.startswith("aiplatform.tensorboard") for p in role.inputs["permissions"])


def test_launcher_gets_aiplatform_user_and_acts_as_trainer_and_serving_only(
    stack_run: OfflineRun,
) -> None:
    outputs = platform(stack_run)
    assert grants_to(stack_run, outputs.launcher_service_account) == [
        ("gcp:projects/iAMMember:IAMMember", "roles/aiplatform.user"),
        ("gcp:serviceaccount/iAMMember:IAMMember", "roles/iam.serviceAccountUser"),
        ("gcp:serviceaccount/iAMMember:IAMMember", "roles/iam.serviceAccountUser"),
    ]
    acts_as = sorted(
        r.inputs["serviceAccountId"].rsplit("/", 1)[-1]
        for r in stack_run.of_type("gcp:serviceaccount/iAMMember:IAMMember")
        if r.inputs["role"] == "roles/iam.serviceAccountUser"
        and r.inputs["member"] == f"serviceAccount:{outputs.launcher_service_account}"
    )
    assert acts_as == sorted([outputs.trainer_service_account, outputs.serving_service_account])


def test_serving_reads_the_models_bucket_only_and_writes_logs(stack_run: OfflineRun) -> None:
    outputs = platform(stack_run)
    assert outputs.serving_service_account is not None
    assert grants_to(stack_run, outputs.serving_service_account) == [
        ("gcp:projects/iAMMember:IAMMember", "roles/logging.logWriter"),
        ("gcp:storage/bucketIAMMember:BucketIAMMember", "roles/storage.objectViewer"),
    ]
    member = f"serviceAccount:{outputs.serving_service_account}"
    (reader,) = [
        r
        for r in stack_run.of_type("gcp:storage/bucketIAMMember:BucketIAMMember")
        if r.inputs["member"] == member
    ]
    assert reader.inputs["bucket"] == outputs.buckets.models


def test_ci_federation_is_pinned_to_the_repository_and_binds_the_launcher(
    stack_run: OfflineRun,
) -> None:
    (provider,) = stack_run.of_type(
        "gcp:iam/workloadIdentityPoolProvider:WorkloadIdentityPoolProvider"
    )
    condition = provider.inputs["attributeCondition"]
    assert "assertion.repository == 'acme/vtx'" in condition
    assert ("refs/heads/main" in condition) == (stack_run.stack == "prod")
    (binding,) = [
        r
        for r in stack_run.of_type("gcp:serviceaccount/iAMMember:IAMMember")
        if r.inputs["role"] == "roles/iam.workloadIdentityUser"
    ]
    assert binding.inputs["member"].startswith("principalSet://iam.googleapis.com/projects/")
    assert binding.inputs["serviceAccountId"].endswith(platform(stack_run).launcher_service_account)


def test_service_agent_grants_wait_for_the_api_and_the_service_identity(
    stack_run: OfflineRun,
) -> None:
    outputs = platform(stack_run)
    aiplatform_api = next(
        r
        for r in stack_run.of_type("gcp:projects/service:Service")
        if r.inputs["service"] == "aiplatform.googleapis.com"
    )
    identity = next(
        r
        for r in stack_run.of_type("gcp:projects/serviceIdentity:ServiceIdentity")
        if r.inputs["service"] == "aiplatform.googleapis.com"
    )
    agent_grants = [r for r in iam_members(stack_run) if "@gcp-sa-aiplatform" in r.inputs["member"]]
    assert agent_grants
    for grant in agent_grants:
        assert stack_run.depends_on(grant, aiplatform_api), grant.name
        assert stack_run.depends_on(grant, identity), grant.name
    number = outputs.project_number
    cc_agent = f"serviceAccount:service-{number}@gcp-sa-aiplatform-cc.iam.gserviceaccount.com"
    assert cc_agent in {r.inputs["member"] for r in agent_grants}


# Resource types whose create call goes to an API this stack enables, by that API.
API_OF_TYPE_PREFIX = {
    "gcp:projects/iAMCustomRole:": "iam",
    "gcp:projects/iAMMember:": "cloudresourcemanager",  # project IAM policy reads and writes
    "gcp:serviceaccount/account:": "iam",
    "gcp:iam/": "iam",
    "gcp:compute/": "compute",
    "gcp:servicenetworking/": "servicenetworking",
    "gcp:dns/": "dns",
    "gcp:storage/bucket:": "storage",
    "gcp:kms/": "cloudkms",
    "gcp:secretmanager/": "secretmanager",
    "gcp:artifactregistry/": "artifactregistry",
    "gcp:cloudquota/": "cloudquotas",
    "gcp:vertex/": "aiplatform",
    "gcp:billing/budget:": "billingbudgets",
    "gcp:pubsub/": "pubsub",
    "gcp:cloudfunctionsv2/": "cloudfunctions",
    "gcp:cloudrunv2/": "run",
}


def test_every_resource_waits_for_the_api_that_creates_it(stack_run: OfflineRun) -> None:
    """On a fresh project an API is off until its Service resource exists: anything created
    through it earlier fails with SERVICE_DISABLED (or races it)."""
    apis = {
        r.inputs["service"].split(".")[0]: r
        for r in stack_run.of_type("gcp:projects/service:Service")
    }
    unordered = [
        (resource.name, api)
        for resource in stack_run.resources
        for prefix, api in API_OF_TYPE_PREFIX.items()
        if resource.type.startswith(prefix) and not stack_run.depends_on(resource, apis[api])
    ]
    assert unordered == []


def test_every_vpc_logs_its_dns_queries(stack_run: OfflineRun) -> None:
    """CIS GCP 2.12, in dev too: one DNS server policy with logging on, beside the VPC (in the
    Shared VPC host for prod, which owns the network and its logs)."""
    (vpc,) = stack_run.of_type("gcp:compute/network:Network")
    (policy,) = stack_run.of_type("gcp:dns/policy:Policy")
    assert policy.inputs["enableLogging"] is True
    assert policy.inputs["networks"] == [{"networkUrl": vpc.id}]
    assert policy.inputs["project"] == vpc.inputs["project"]
    assert policy.inputs["name"] == f"acme-vtx-{stack_run.stack}-dns-logging"


def test_psc_interface_gives_the_aiplatform_agent_network_admin(prod_run: OfflineRun) -> None:
    number = platform(prod_run).project_number
    agent = f"serviceAccount:service-{number}@gcp-sa-aiplatform.iam.gserviceaccount.com"
    assert ("gcp:projects/iAMMember:IAMMember", "roles/compute.networkAdmin") in [
        (r.type, r.inputs["role"]) for r in iam_members(prod_run) if r.inputs["member"] == agent
    ]
    host_roles = sorted(
        (r.type.split(":")[-1], r.inputs["role"])
        for r in iam_members(prod_run)
        if r.inputs.get("project") == "acme-net-host-prod"
    )
    assert host_roles == [
        ("IAMMember", "roles/dns.peer"),
        ("SubnetworkIAMMember", "roles/compute.networkUser"),
        ("SubnetworkIAMMember", "roles/compute.networkUser"),
    ]


# --- secure defaults and dev/prod differences -------------------------------------------------


def test_every_bucket_is_private_and_uniform(stack_run: OfflineRun) -> None:
    buckets = stack_run.of_type("gcp:storage/bucket:Bucket")
    assert len(buckets) == 4
    for bucket in buckets:
        assert bucket.inputs["uniformBucketLevelAccess"] is True
        assert bucket.inputs["publicAccessPrevention"] == "enforced"
        assert bucket.inputs["forceDestroy"] is False
        assert bucket.inputs["labels"]["environment"] == stack_run.stack
        versioned = bucket.name in {"storage-checkpoints", "storage-models"}
        assert bucket.inputs["versioning"]["enabled"] is versioned


def test_prod_encrypts_buckets_registry_and_tensorboard_with_its_key(prod_run: OfflineRun) -> None:
    key = platform(prod_run).kms_key
    assert key is not None and key.endswith("/cryptoKeys/acme-vtx-prod-key")
    for bucket in prod_run.of_type("gcp:storage/bucket:Bucket"):
        assert bucket.inputs["encryption"]["defaultKmsKeyName"] == key
    repos = prod_run.of_type("gcp:artifactregistry/repository:Repository")
    assert {r.inputs["kmsKeyName"] for r in repos} == {key}  # the mirrors too
    (repo,) = [r for r in repos if r.inputs.get("mode") is None]
    assert repo.inputs["dockerConfig"]["immutableTags"]
    (board,) = prod_run.of_type("gcp:vertex/aiTensorboard:AiTensorboard")
    assert board.inputs["encryptionSpec"]["kmsKeyName"] == key
    (crypto_key,) = prod_run.of_type("gcp:kms/cryptoKey:CryptoKey")
    assert crypto_key.inputs["rotationPeriod"] == f"{90 * 86400}s"
    key_users = {
        r.inputs["member"].split("@")[1]
        for r in prod_run.of_type("gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember")
    }
    assert key_users == {
        "gs-project-accounts.iam.gserviceaccount.com",
        "gcp-sa-artifactregistry.iam.gserviceaccount.com",
        "gcp-sa-aiplatform.iam.gserviceaccount.com",
        "gcp-sa-pubsub.iam.gserviceaccount.com",  # the team budgets' topics
    }
    for topic in prod_run.of_type("gcp:pubsub/topic:Topic"):
        assert topic.inputs["kmsKeyName"] == key


def test_prod_encrypted_resources_wait_for_their_agents_key_grant(prod_run: OfflineRun) -> None:
    """Creating a resource on a key fails until the service's agent may use the key."""
    grants = {
        r.inputs["member"].split("@")[1].split(".")[0]: r
        for r in prod_run.of_type("gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember")
    }
    users = {
        "gs-project-accounts": prod_run.of_type("gcp:storage/bucket:Bucket"),
        "gcp-sa-artifactregistry": prod_run.of_type("gcp:artifactregistry/repository:Repository"),
        "gcp-sa-aiplatform": prod_run.of_type("gcp:vertex/aiTensorboard:AiTensorboard"),
        "gcp-sa-pubsub": prod_run.of_type("gcp:pubsub/topic:Topic"),
    }
    for agent, resources in users.items():
        assert resources
        for resource in resources:
            assert prod_run.depends_on(resource, grants[agent]), (resource.name, agent)


def test_dev_is_cheaper_than_prod(dev_run: OfflineRun, prod_run: OfflineRun) -> None:
    assert not dev_run.of_type("gcp:kms/cryptoKey:CryptoKey")
    assert not dev_run.of_type("gcp:billing/budget:Budget")
    (budget,) = [
        r for r in prod_run.of_type("gcp:billing/budget:Budget") if r.component == "observability"
    ]
    assert budget.inputs["budgetFilter"]["projects"] == [
        f"projects/{platform(prod_run).project_number}"
    ]
    spend = [(r["thresholdPercent"], r["spendBasis"]) for r in budget.inputs["thresholdRules"]]
    assert ("CURRENT_SPEND" in {s for _, s in spend}) and ((1.0, "FORECASTED_SPEND") in spend)

    def soft_delete_s(run: OfflineRun) -> float:
        bucket = run.of_type("gcp:storage/bucket:Bucket")[0]
        return bucket.inputs["softDeletePolicy"]["retentionDurationSeconds"]

    assert soft_delete_s(dev_run) < soft_delete_s(prod_run)
    training = {
        run.stack: next(
            r
            for r in run.of_type("gcp:compute/subnetwork:Subnetwork")
            if r.name.endswith("training")
        )
        for run in (dev_run, prod_run)
    }
    assert "logConfig" not in training["dev"].inputs
    assert training["prod"].inputs["logConfig"]["flowSampling"] == 0.5
    assert all(s.inputs["privateIpGoogleAccess"] for s in training.values())


def test_apis_stay_enabled_on_destroy_and_follow_the_features(
    dev_run: OfflineRun, prod_run: OfflineRun
) -> None:
    def services(run: OfflineRun) -> set[str]:
        apis = run.of_type("gcp:projects/service:Service")
        assert all(r.inputs["disableOnDestroy"] is False for r in apis)
        return {r.inputs["service"] for r in apis}

    assert services(prod_run) - services(dev_run) == {
        "cloudkms.googleapis.com",
        "billingbudgets.googleapis.com",
        # the team budgets' cancel functions (which share the controller's function services)
        "pubsub.googleapis.com",
        "eventarc.googleapis.com",
    }
    assert "aiplatform.googleapis.com" in services(dev_run)
    controller = {"cloudfunctions", "cloudbuild", "run", "cloudscheduler"}
    assert {f"{api}.googleapis.com" for api in controller} <= services(dev_run)


def test_quota_preferences_follow_the_catalog(prod_run: OfflineRun) -> None:
    preferences = {
        (
            r.inputs["quotaId"],
            r.inputs["quotaConfig"]["preferredValue"],
            r.inputs["dimensions"]["region"],
        )
        for r in prod_run.of_type("gcp:cloudquota/sQuotaPreference:SQuotaPreference")
    }
    assert preferences == {
        ("CustomModelTrainingNvidiaH100GpusPerProjectPerRegion", "16", "europe-west4"),
        ("CustomModelTrainingPreemptibleNvidiaH100GpusPerProjectPerRegion", "32", "europe-west4"),
        ("CustomModelTrainingPreemptibleNvidiaL4GpusPerProjectPerRegion", "8", "europe-west4"),
    }


def test_no_secret_value_reaches_the_stack(stack_run: OfflineRun) -> None:
    assert not [
        r for r in stack_run.resources if r.type.startswith("gcp:secretmanager/secretVersion")
    ]
    dumped = json.dumps([r.inputs for r in stack_run.resources])
    assert "secretData" not in dumped


# --- the offline engine -----------------------------------------------------------------------


def _fingerprint(run: OfflineRun) -> str:
    return json.dumps(
        {
            "resources": [[r.type, r.name, r.inputs, r.component] for r in run.resources],
            "outputs": run.outputs,
        },
        sort_keys=True,
    )


def test_a_stack_run_after_another_equals_a_run_alone(
    dev_run: OfflineRun, prod_run: OfflineRun
) -> None:
    # In this process prod ran after dev (session fixtures); here prod runs alone in a new one.
    code = (
        "import json, sys; from infra.offline.program import run_offline; "
        "r = run_offline('prod'); "
        "sys.stdout.write(json.dumps({'resources': [[x.type, x.name, x.inputs, x.component] "
        "for x in r.resources], 'outputs': r.outputs}, sort_keys=True))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=PROJECT_DIR, capture_output=True, text=True, check=True
    )
    assert _fingerprint(prod_run) == proc.stdout
    assert _fingerprint(run_offline("dev")) == _fingerprint(dev_run)


def test_an_invalid_config_fails_before_any_resource_is_declared(tmp_path: Path) -> None:
    document = yaml.safe_load((PROJECT_DIR / "Pulumi.prod.yaml").read_text())
    document["config"]["vtx:platform"]["cmek"] = False
    document["config"]["vtx:platform"]["quotas"][0]["count"] = -1
    bad = tmp_path / "Pulumi.prod.yaml"
    bad.write_text(yaml.safe_dump(document))
    with pytest.raises(OfflineError) as info:
        run_offline("prod", bad)
    assert info.value.declared == 0
    assert "vtx:platform.quotas[0].count" in str(info.value)


def test_an_unknown_invoke_fails_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(INVOKE_RESULTS, "gcp:organizations/getProject:getProject")
    with pytest.raises(OfflineError, match="unknown invoke 'gcp:organizations/getProject"):
        run_offline("dev")


def test_alternate_config_file_with_many_quotas(tmp_path: Path) -> None:
    document = yaml.safe_load((PROJECT_DIR / "Pulumi.dev.yaml").read_text())
    platform_config: dict[str, Any] = document["config"]["vtx:platform"]
    platform_config["network"] = {
        "mode": "psc-interface",
        "subnet_cidr": "10.40.0.0/20",
        "psc_subnet_cidr": "10.41.0.0/28",
    }
    regions = [f"europe-west{n}" for n in range(1, 11)]
    accelerators = ["NVIDIA_L4", "NVIDIA_TESLA_T4", "NVIDIA_H100_80GB"]
    platform_config["quotas"] = [
        {"accelerator": a, "count": 4, "spot": spot, "region": region}
        for region in regions
        for a in accelerators
        for spot in (True, False)
    ]
    path = tmp_path / "Pulumi.many.yaml"
    path.write_text(yaml.safe_dump(document))
    run = run_offline("many", path)
    assert len(run.of_type("gcp:cloudquota/sQuotaPreference:SQuotaPreference")) == 60
    assert platform(run).network_attachment is not None
    assert not run.of_type("gcp:compute/sharedVPCServiceProject:SharedVPCServiceProject")


def test_preview_groups_resources_by_component(dev_run: OfflineRun) -> None:
    from rich.console import Console

    console = Console(width=160, record=True)
    console.print(render_preview(dev_run))
    text = console.export_text()
    for component in ("apis", "identity", "network", "storage", "registry", "quotas", "secrets"):
        assert f"\n{component} (" in text
    assert "acme-vtx-dev-checkpoints" in text and "publicAccessPrevention=enforced" in text


def test_secure_config_values_are_replaced_by_dummies(tmp_path: Path) -> None:
    ciphertext = "v1:c2VjcmV0LWNpcGhlcnRleHQ="
    values, secret_keys = _config_values(
        {
            "gcp:accessToken": {"secure": ciphertext},
            "vtx:platform": {"environment": "dev", "labels": {"x": {"secure": ciphertext}}},
        }
    )
    assert values["gcp:accessToken"] == DUMMY_SECRET and secret_keys == ["gcp:accessToken"]
    assert json.loads(values["vtx:platform"])["labels"]["x"] == DUMMY_SECRET
    assert ciphertext not in json.dumps(values)
    # And a stack file with a secure value still runs offline.
    document = yaml.safe_load((PROJECT_DIR / "Pulumi.dev.yaml").read_text())
    document["config"]["gcp:accessToken"] = {"secure": ciphertext}
    path = tmp_path / "Pulumi.secure.yaml"
    path.write_text(yaml.safe_dump(document))
    assert platform(run_offline("secure", path)).environment == "dev"
