"""Realistic outputs for the offline engine: what GCP would answer, derived from the inputs.

Each resource type maps to a function of (context, logical name, inputs) returning the id and
the computed outputs (selfLinks, e-mails, resource names, 12-digit project numbers derived
from the project id, so that they are stable across runs). Provider functions (invokes) have
their own table; ``infra.offline.program`` fails a run that calls one not listed here.
"""

from __future__ import annotations

import hashlib
import ipaddress
from collections.abc import Callable
from typing import Any


def project_number(project_id: str) -> str:
    """A stable, realistic-looking (12-digit) project number for a project id."""
    digest = int(hashlib.sha256(project_id.encode()).hexdigest(), 16)
    return str(100_000_000_000 + digest % 900_000_000_000)


def _numeric_id(name: str, digits: int = 19) -> str:
    digest = int(hashlib.sha256(name.encode()).hexdigest(), 16)
    return str(10 ** (digits - 1) + digest % (9 * 10 ** (digits - 1)))


COMPUTE = "https://www.googleapis.com/compute/v1"
AGENT_DOMAINS = {
    "aiplatform.googleapis.com": "gcp-sa-aiplatform",
    "artifactregistry.googleapis.com": "gcp-sa-artifactregistry",
    "secretmanager.googleapis.com": "gcp-sa-secretmanager",
}


class MockContext:
    """What mock outputs are derived from: the stack's project and region."""

    def __init__(self, project: str, region: str) -> None:
        self.project, self.region = project, region
        self.subnets: dict[str, ipaddress.IPv4Network] = {}
        self.addresses_taken: dict[str, int] = {}

    def project_of(self, inputs: dict[str, Any]) -> str:
        return inputs.get("project") or self.project

    def region_of(self, inputs: dict[str, Any]) -> str:
        return inputs.get("region") or self.region


OutputFn = Callable[[MockContext, str, dict[str, Any]], tuple[str, dict[str, Any]]]


def _service(ctx: MockContext, name: str, i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return f"{ctx.project_of(i)}/{i['service']}", {}


def _service_identity(ctx: MockContext, name: str, i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    project = ctx.project_of(i)
    domain = AGENT_DOMAINS.get(i["service"], f"gcp-sa-{i['service'].split('.')[0]}")
    email = f"service-{project_number(project)}@{domain}.iam.gserviceaccount.com"
    return f"projects/{project}/services/{i['service']}", {
        "email": email,
        "member": f"serviceAccount:{email}",
    }


def _account(ctx: MockContext, name: str, i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    project = ctx.project_of(i)
    email = f"{i['accountId']}@{project}.iam.gserviceaccount.com"
    resource_name = f"projects/{project}/serviceAccounts/{email}"
    return resource_name, {
        "email": email,
        "name": resource_name,
        "member": f"serviceAccount:{email}",
        "uniqueId": _numeric_id(email, 21),
    }


# The attribute naming what an IAM member is granted on, most specific first.
IAM_SCOPES = (
    "bucket",
    "topic",
    "secretId",
    "cryptoKeyId",
    "serviceAccountId",
    "subnetwork",
    "repository",
    "name",
    "project",
)


def _iam_member(ctx: MockContext, name: str, i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    scope = next((i[k] for k in IAM_SCOPES if k in i), ctx.project)
    return f"{scope}/{i['role']}/{i['member']}", {"etag": "BwYh" + _numeric_id(name, 8)}


def _custom_role(ctx: MockContext, name: str, i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    role = f"projects/{ctx.project_of(i)}/roles/{i['roleId']}"
    return role, {"name": role, "deleted": False}


def _global(kind: str) -> OutputFn:
    def outputs(ctx: MockContext, name: str, i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        rid = f"projects/{ctx.project_of(i)}/global/{kind}/{i.get('name', name)}"
        return rid, {"selfLink": f"{COMPUTE}/{rid}", "numericId": _numeric_id(rid)}

    return outputs


def _regional(kind: str) -> OutputFn:
    def outputs(ctx: MockContext, name: str, i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        region = ctx.region_of(i)
        rid = f"projects/{ctx.project_of(i)}/regions/{region}/{kind}/{i.get('name', name)}"
        return rid, {
            "selfLink": f"{COMPUTE}/{rid}",
            "region": ctx.region_of(i),
            "numericId": _numeric_id(rid),
        }

    return outputs


def _subnetwork(ctx: MockContext, name: str, i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    rid, out = _regional("subnetworks")(ctx, name, i)
    first = i["ipCidrRange"].split("/")[0].rsplit(".", 1)
    ctx.subnets[rid] = ipaddress.IPv4Network(i["ipCidrRange"])
    return rid, out | {"gatewayAddress": f"{first[0]}.{int(first[1]) + 1}"}


def _address(ctx: MockContext, name: str, i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """An internal address: the subnet's next free host, after the two Google keeps first."""
    rid, out = _regional("addresses")(ctx, name, i)
    subnet = str(i.get("subnetwork", ""))
    network = ctx.subnets.get(subnet.removeprefix(f"{COMPUTE}/"))
    if network is None:
        return rid, out
    index = ctx.addresses_taken.get(subnet, 0)
    ctx.addresses_taken[subnet] = index + 1
    return rid, out | {"address": str(network.network_address + 2 + index)}


def _router_nat(ctx: MockContext, name: str, i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    project, region = ctx.project_of(i), ctx.region_of(i)
    return f"{project}/{region}/{i['router']}/{i['name']}", {"region": region}


def _connection(ctx: MockContext, name: str, i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return f"{i['network']}:{i['service']}", {"peering": "servicenetworking-googleapis-com"}


def _dns_policy(ctx: MockContext, name: str, i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return f"projects/{ctx.project_of(i)}/policies/{i.get('name', name)}", {}


def _managed_zone(ctx: MockContext, name: str, i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return f"projects/{ctx.project_of(i)}/managedZones/{i['name']}", {
        "managedZoneId": _numeric_id(name, 16),
        "nameServers": ["ns-gcp-private.googledomains.com."],
    }


def _record_set(ctx: MockContext, name: str, i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    zone = f"projects/{ctx.project_of(i)}/managedZones/{i['managedZone']}"
    return f"{zone}/rrsets/{i['name']}/{i['type']}", {}


def _shared_vpc(ctx: MockContext, name: str, i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return f"{i['hostProject']}/{i['serviceProject']}", {}


def _bucket(ctx: MockContext, name: str, i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    bucket = i["name"]
    return bucket, {
        "url": f"gs://{bucket}",
        "selfLink": f"https://www.googleapis.com/storage/v1/b/{bucket}",
        "project": ctx.project_of(i),
        "projectNumber": project_number(ctx.project_of(i)),
    }


def _repository(ctx: MockContext, name: str, i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    project, location = ctx.project_of(i), i.get("location", ctx.region)
    rid = f"projects/{project}/locations/{location}/repositories/{i['repositoryId']}"
    return rid, {
        "name": i["repositoryId"],
        "project": project,
        "location": location,
        "registryUri": f"{location}-docker.pkg.dev/{project}/{i['repositoryId']}",
    }


def _quota_preference(ctx: MockContext, name: str, i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    rid = f"{i['parent']}/locations/global/quotaPreferences/{i.get('name', name)}"
    return rid, {"etag": _numeric_id(rid, 10), "reconciling": True}


def _secret(ctx: MockContext, name: str, i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    project = ctx.project_of(i)
    return f"projects/{project}/secrets/{i['secretId']}", {
        "name": f"projects/{project_number(project)}/secrets/{i['secretId']}",
        "project": project,
    }


def _key_ring(ctx: MockContext, name: str, i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return f"projects/{ctx.project_of(i)}/locations/{i['location']}/keyRings/{i['name']}", {}


def _crypto_key(ctx: MockContext, name: str, i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return f"{i['keyRing']}/cryptoKeys/{i['name']}", {"primaries": []}


def _tensorboard(ctx: MockContext, name: str, i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    project, region = ctx.project_of(i), ctx.region_of(i)
    tb = f"projects/{project_number(project)}/locations/{region}/tensorboards/{_numeric_id(name)}"
    return tb, {"name": tb, "region": region, "blobStoragePathPrefix": f"cloud-ai-platform-{name}"}


def _budget(ctx: MockContext, name: str, i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    budget = f"billingAccounts/{i['billingAccount']}/budgets/{_numeric_id(name, 12)}"
    return budget, {"name": budget}


def _monitoring(collection: str) -> OutputFn:
    """A Cloud Monitoring resource: its name is ``projects/P/<collection>/<numeric id>``."""

    def outputs(ctx: MockContext, name: str, i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        resource = f"projects/{ctx.project_of(i)}/{collection}/{_numeric_id(name)}"
        return resource, {"name": resource}

    return outputs


def _log_metric(ctx: MockContext, name: str, i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return i["name"], {}


def _wif_pool(ctx: MockContext, name: str, i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    project = ctx.project_of(i)
    pool = (
        f"projects/{project_number(project)}/locations/global/workloadIdentityPools/"
        f"{i['workloadIdentityPoolId']}"
    )
    return pool, {"name": pool, "state": "ACTIVE"}


def _wif_provider(ctx: MockContext, name: str, i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    pool, _ = _wif_pool(ctx, name, i)
    provider = f"{pool}/providers/{i['workloadIdentityPoolProviderId']}"
    return provider, {"name": provider, "state": "ACTIVE"}


def _topic(ctx: MockContext, name: str, i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return f"projects/{ctx.project_of(i)}/topics/{i['name']}", {}


def _bucket_object(ctx: MockContext, name: str, i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return f"{i['bucket']}-{i['name']}", {
        "selfLink": f"https://www.googleapis.com/storage/v1/b/{i['bucket']}/o/{i['name']}",
        "generation": int(_numeric_id(name, 16)),
        "md5hash": "bW9jaw==",
    }


def _function(ctx: MockContext, name: str, i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    project, location = ctx.project_of(i), i.get("location", ctx.region)
    function = f"projects/{project}/locations/{location}/functions/{i['name']}"
    service = f"projects/{project}/locations/{location}/services/{i['name']}"
    return function, {
        "state": "ACTIVE",
        "url": f"https://{location}-{project}.cloudfunctions.net/{i['name']}",
        "environment": "GEN_2",
        "serviceConfig": {**(i.get("serviceConfig") or {}), "service": service},
    }


RESOURCE_OUTPUTS: dict[str, OutputFn] = {
    "gcp:projects/service:Service": _service,
    "gcp:projects/serviceIdentity:ServiceIdentity": _service_identity,
    "gcp:serviceaccount/account:Account": _account,
    "gcp:projects/iAMMember:IAMMember": _iam_member,
    "gcp:projects/iAMCustomRole:IAMCustomRole": _custom_role,
    "gcp:serviceaccount/iAMMember:IAMMember": _iam_member,
    "gcp:storage/bucketIAMMember:BucketIAMMember": _iam_member,
    "gcp:secretmanager/secretIamMember:SecretIamMember": _iam_member,
    "gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember": _iam_member,
    "gcp:compute/subnetworkIAMMember:SubnetworkIAMMember": _iam_member,
    "gcp:artifactregistry/repositoryIamMember:RepositoryIamMember": _iam_member,
    "gcp:pubsub/topicIAMMember:TopicIAMMember": _iam_member,
    "gcp:cloudrunv2/serviceIamMember:ServiceIamMember": _iam_member,
    "gcp:pubsub/topic:Topic": _topic,
    "gcp:storage/bucketObject:BucketObject": _bucket_object,
    "gcp:cloudfunctionsv2/function:Function": _function,
    "gcp:compute/network:Network": _global("networks"),
    "gcp:compute/firewall:Firewall": _global("firewalls"),
    "gcp:compute/route:Route": _global("routes"),
    "gcp:compute/globalAddress:GlobalAddress": _global("addresses"),
    "gcp:compute/subnetwork:Subnetwork": _subnetwork,
    "gcp:compute/router:Router": _regional("routers"),
    "gcp:compute/routerNat:RouterNat": _router_nat,
    "gcp:compute/networkAttachment:NetworkAttachment": _regional("networkAttachments"),
    "gcp:compute/address:Address": _address,
    "gcp:compute/forwardingRule:ForwardingRule": _regional("forwardingRules"),
    "gcp:compute/sharedVPCServiceProject:SharedVPCServiceProject": _shared_vpc,
    "gcp:servicenetworking/connection:Connection": _connection,
    "gcp:dns/policy:Policy": _dns_policy,
    "gcp:dns/managedZone:ManagedZone": _managed_zone,
    "gcp:dns/recordSet:RecordSet": _record_set,
    "gcp:storage/bucket:Bucket": _bucket,
    "gcp:artifactregistry/repository:Repository": _repository,
    "gcp:cloudquota/sQuotaPreference:SQuotaPreference": _quota_preference,
    "gcp:secretmanager/secret:Secret": _secret,
    "gcp:kms/keyRing:KeyRing": _key_ring,
    "gcp:kms/cryptoKey:CryptoKey": _crypto_key,
    "gcp:vertex/aiTensorboard:AiTensorboard": _tensorboard,
    "gcp:billing/budget:Budget": _budget,
    "gcp:logging/metric:Metric": _log_metric,
    "gcp:monitoring/notificationChannel:NotificationChannel": _monitoring("notificationChannels"),
    "gcp:monitoring/alertPolicy:AlertPolicy": _monitoring("alertPolicies"),
    "gcp:iam/workloadIdentityPool:WorkloadIdentityPool": _wif_pool,
    "gcp:iam/workloadIdentityPoolProvider:WorkloadIdentityPoolProvider": _wif_provider,
}


def _get_project(ctx: MockContext, args: dict[str, Any]) -> dict[str, Any]:
    project = args.get("projectId") or ctx.project
    return {
        "id": f"projects/{project}",
        "projectId": project,
        "number": project_number(project),
        "name": project,
        "labels": {},
    }


def _storage_agent(ctx: MockContext, args: dict[str, Any]) -> dict[str, Any]:
    project = args.get("project") or ctx.project
    email = f"service-{project_number(project)}@gs-project-accounts.iam.gserviceaccount.com"
    member = f"serviceAccount:{email}"
    return {"id": email, "emailAddress": email, "member": member, "project": project}


INVOKE_RESULTS: dict[str, Callable[[MockContext, dict[str, Any]], dict[str, Any]]] = {
    "gcp:organizations/getProject:getProject": _get_project,
    "gcp:storage/getProjectServiceAccount:getProjectServiceAccount": _storage_agent,
}
