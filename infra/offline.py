"""Run the real Pulumi program offline, under Pulumi's unit-test mocks, and record what it declares.

No cloud, no Pulumi CLI: ``infra/__main__.py`` is executed with ``runpy`` against a mock engine
(``pulumi.runtime.set_mocks(..., preview=False)``) and the configuration of the real
``Pulumi.<stack>.yaml`` (secure values replaced with dummies). The mock engine answers resource
registrations with realistic outputs (ids, selfLinks, e-mails, project numbers) and raises on
any provider function (invoke) it does not know, so a new data source cannot slip in unmocked.

Several stacks can run in one process (``vtx review --against prod`` runs dev then prod): each
run resets Pulumi's global settings and root stack, installs fresh mocks and a fresh config,
then re-executes the program module; the tests prove a prod run after a dev run equals a prod
run alone.

Public API (stable: ``infra/review`` and the policy pack use it)::

    run = run_offline("dev")                      # or run_offline("x", config_file=path)
    run.resources   # list[RecordedResource]: type, name, inputs, outputs, parent, component
    run.outputs     # stack outputs, run.outputs["platform"] parses as jobs.stack.StackOutputs
    print(render_preview(run))                    # or: python -m infra.offline dev
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import logging
import runpy
import sys
import threading
import warnings
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infra.config import ConfigError, read_stack_file

logger = logging.getLogger(__name__)
INFRA_DIR = Path(__file__).resolve().parent
PROJECT_DIR = INFRA_DIR.parent
PROGRAM = INFRA_DIR / "__main__.py"
PULUMI_PROJECT = "vtx"
PLATFORM_TYPE = "vtx:platform:Platform"
# Components in the order a reader meets them (the engine registers resources concurrently, so
# registration order is not stable: runs are sorted by component, type and name).
COMPONENT_ORDER = (
    "apis",
    "agents",
    "identity",
    "kms",
    "network",
    "shared-vpc",
    "storage",
    "registry",
    "quotas",
    "secrets",
    "observability",
    "ci",
    "platform",
    "stack",
)
DUMMY_SECRET = "offline-dummy-secret"


class OfflineError(Exception):
    """The program failed under mocks. ``declared`` counts resources registered before that."""

    def __init__(self, message: str, declared: int) -> None:
        super().__init__(message)
        self.declared = declared


class UnknownInvokeError(Exception):
    """The program called a provider function the offline engine has no answer for."""


@dataclass(frozen=True)
class RecordedResource:
    """One resource as the engine saw it. ``inputs``/``outputs`` use the provider's camelCase
    property names (``uniformBucketLevelAccess``), exactly as ``pulumi preview`` would show."""

    type: str
    """Pulumi type token, e.g. ``gcp:storage/bucket:Bucket``."""
    name: str
    """Logical (Pulumi) name."""
    inputs: dict[str, Any]
    outputs: dict[str, Any]
    parent: str | None
    """URN of the parent component (None for the root stack's children)."""
    component: str
    """The logical component it belongs to: ``network``, ``storage``... (``platform`` for
    resources declared by the Platform itself)."""
    urn: str
    id: str | None = None
    custom: bool = True
    dependencies: tuple[str, ...] = ()
    """URNs this resource waits for (``depends_on`` and the resources its inputs came from)."""


@dataclass
class OfflineRun:
    stack: str
    config_file: Path
    resources: list[RecordedResource]
    """Custom (cloud) resources, in registration order; providers and components excluded."""
    outputs: dict[str, Any]
    """Resolved stack outputs; ``outputs["platform"]`` is the StackOutputs contract."""
    components: list[RecordedResource] = field(default_factory=list)
    """The ComponentResources (``vtx:platform:*``), for grouping."""

    def of_type(self, type_token: str) -> list[RecordedResource]:
        return [r for r in self.resources if r.type == type_token]

    def by_component(self) -> dict[str, list[RecordedResource]]:
        grouped: dict[str, list[RecordedResource]] = defaultdict(list)
        for resource in self.resources:
            grouped[resource.component].append(resource)
        return dict(grouped)

    def depends_on(self, resource: RecordedResource, target: RecordedResource) -> bool:
        """Whether ``resource`` waits for ``target``, directly or through other resources."""
        by_urn = {r.urn: r for r in (*self.resources, *self.components)}
        seen, todo = set(), list(resource.dependencies)
        while todo:
            urn = todo.pop()
            if urn == target.urn:
                return True
            if urn not in seen and urn in by_urn:
                seen.add(urn)
                todo.extend(by_urn[urn].dependencies)
        return False

    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = defaultdict(int)
        for resource in self.resources:
            counts[resource.type] += 1
        return dict(sorted(counts.items()))


# --- realistic mock outputs ---------------------------------------------------------------------


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


class _Context:
    """What mock outputs are derived from: the stack's project and region."""

    def __init__(self, project: str, region: str) -> None:
        self.project, self.region = project, region

    def project_of(self, inputs: dict[str, Any]) -> str:
        return inputs.get("project") or self.project

    def region_of(self, inputs: dict[str, Any]) -> str:
        return inputs.get("region") or self.region


OutputFn = Callable[[_Context, str, dict[str, Any]], tuple[str, dict[str, Any]]]


def _service(ctx: _Context, name: str, i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return f"{ctx.project_of(i)}/{i['service']}", {}


def _service_identity(ctx: _Context, name: str, i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    project = ctx.project_of(i)
    domain = AGENT_DOMAINS.get(i["service"], f"gcp-sa-{i['service'].split('.')[0]}")
    email = f"service-{project_number(project)}@{domain}.iam.gserviceaccount.com"
    return f"projects/{project}/services/{i['service']}", {
        "email": email,
        "member": f"serviceAccount:{email}",
    }


def _account(ctx: _Context, name: str, i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
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
    "secretId",
    "cryptoKeyId",
    "serviceAccountId",
    "subnetwork",
    "repository",
    "project",
)


def _iam_member(ctx: _Context, name: str, i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    scope = next((i[k] for k in IAM_SCOPES if k in i), ctx.project)
    return f"{scope}/{i['role']}/{i['member']}", {"etag": "BwYh" + _numeric_id(name, 8)}


def _custom_role(ctx: _Context, name: str, i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    role = f"projects/{ctx.project_of(i)}/roles/{i['roleId']}"
    return role, {"name": role, "deleted": False}


def _global(kind: str) -> OutputFn:
    def outputs(ctx: _Context, name: str, i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        rid = f"projects/{ctx.project_of(i)}/global/{kind}/{i.get('name', name)}"
        return rid, {"selfLink": f"{COMPUTE}/{rid}", "numericId": _numeric_id(rid)}

    return outputs


def _regional(kind: str) -> OutputFn:
    def outputs(ctx: _Context, name: str, i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        region = ctx.region_of(i)
        rid = f"projects/{ctx.project_of(i)}/regions/{region}/{kind}/{i.get('name', name)}"
        return rid, {
            "selfLink": f"{COMPUTE}/{rid}",
            "region": ctx.region_of(i),
            "numericId": _numeric_id(rid),
        }

    return outputs


def _subnetwork(ctx: _Context, name: str, i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    rid, out = _regional("subnetworks")(ctx, name, i)
    first = i["ipCidrRange"].split("/")[0].rsplit(".", 1)
    return rid, out | {"gatewayAddress": f"{first[0]}.{int(first[1]) + 1}"}


def _router_nat(ctx: _Context, name: str, i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    project, region = ctx.project_of(i), ctx.region_of(i)
    return f"{project}/{region}/{i['router']}/{i['name']}", {"region": region}


def _connection(ctx: _Context, name: str, i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return f"{i['network']}:{i['service']}", {"peering": "servicenetworking-googleapis-com"}


def _shared_vpc(ctx: _Context, name: str, i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return f"{i['hostProject']}/{i['serviceProject']}", {}


def _bucket(ctx: _Context, name: str, i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    bucket = i["name"]
    return bucket, {
        "url": f"gs://{bucket}",
        "selfLink": f"https://www.googleapis.com/storage/v1/b/{bucket}",
        "project": ctx.project_of(i),
        "projectNumber": project_number(ctx.project_of(i)),
    }


def _repository(ctx: _Context, name: str, i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    project, location = ctx.project_of(i), i.get("location", ctx.region)
    rid = f"projects/{project}/locations/{location}/repositories/{i['repositoryId']}"
    return rid, {
        "name": i["repositoryId"],
        "project": project,
        "location": location,
        "registryUri": f"{location}-docker.pkg.dev/{project}/{i['repositoryId']}",
    }


def _quota_preference(ctx: _Context, name: str, i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    rid = f"{i['parent']}/locations/global/quotaPreferences/{i.get('name', name)}"
    return rid, {"etag": _numeric_id(rid, 10), "reconciling": True}


def _secret(ctx: _Context, name: str, i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    project = ctx.project_of(i)
    return f"projects/{project}/secrets/{i['secretId']}", {
        "name": f"projects/{project_number(project)}/secrets/{i['secretId']}",
        "project": project,
    }


def _key_ring(ctx: _Context, name: str, i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return f"projects/{ctx.project_of(i)}/locations/{i['location']}/keyRings/{i['name']}", {}


def _crypto_key(ctx: _Context, name: str, i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return f"{i['keyRing']}/cryptoKeys/{i['name']}", {"primaries": []}


def _tensorboard(ctx: _Context, name: str, i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    project, region = ctx.project_of(i), ctx.region_of(i)
    tb = f"projects/{project_number(project)}/locations/{region}/tensorboards/{_numeric_id(name)}"
    return tb, {"name": tb, "region": region, "blobStoragePathPrefix": f"cloud-ai-platform-{name}"}


def _budget(ctx: _Context, name: str, i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    budget = f"billingAccounts/{i['billingAccount']}/budgets/{_numeric_id(name, 12)}"
    return budget, {"name": budget}


def _wif_pool(ctx: _Context, name: str, i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    project = ctx.project_of(i)
    pool = (
        f"projects/{project_number(project)}/locations/global/workloadIdentityPools/"
        f"{i['workloadIdentityPoolId']}"
    )
    return pool, {"name": pool, "state": "ACTIVE"}


def _wif_provider(ctx: _Context, name: str, i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    pool, _ = _wif_pool(ctx, name, i)
    provider = f"{pool}/providers/{i['workloadIdentityPoolProviderId']}"
    return provider, {"name": provider, "state": "ACTIVE"}


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
    "gcp:compute/network:Network": _global("networks"),
    "gcp:compute/firewall:Firewall": _global("firewalls"),
    "gcp:compute/globalAddress:GlobalAddress": _global("addresses"),
    "gcp:compute/subnetwork:Subnetwork": _subnetwork,
    "gcp:compute/router:Router": _regional("routers"),
    "gcp:compute/routerNat:RouterNat": _router_nat,
    "gcp:compute/networkAttachment:NetworkAttachment": _regional("networkAttachments"),
    "gcp:compute/sharedVPCServiceProject:SharedVPCServiceProject": _shared_vpc,
    "gcp:servicenetworking/connection:Connection": _connection,
    "gcp:storage/bucket:Bucket": _bucket,
    "gcp:artifactregistry/repository:Repository": _repository,
    "gcp:cloudquota/sQuotaPreference:SQuotaPreference": _quota_preference,
    "gcp:secretmanager/secret:Secret": _secret,
    "gcp:kms/keyRing:KeyRing": _key_ring,
    "gcp:kms/cryptoKey:CryptoKey": _crypto_key,
    "gcp:vertex/aiTensorboard:AiTensorboard": _tensorboard,
    "gcp:billing/budget:Budget": _budget,
    "gcp:iam/workloadIdentityPool:WorkloadIdentityPool": _wif_pool,
    "gcp:iam/workloadIdentityPoolProvider:WorkloadIdentityPoolProvider": _wif_provider,
}


def _get_project(ctx: _Context, args: dict[str, Any]) -> dict[str, Any]:
    project = args.get("projectId") or ctx.project
    return {
        "id": f"projects/{project}",
        "projectId": project,
        "number": project_number(project),
        "name": project,
        "labels": {},
    }


def _storage_agent(ctx: _Context, args: dict[str, Any]) -> dict[str, Any]:
    project = args.get("project") or ctx.project
    email = f"service-{project_number(project)}@gs-project-accounts.iam.gserviceaccount.com"
    member = f"serviceAccount:{email}"
    return {"id": email, "emailAddress": email, "member": member, "project": project}


INVOKE_RESULTS: dict[str, Callable[[_Context, dict[str, Any]], dict[str, Any]]] = {
    "gcp:organizations/getProject:getProject": _get_project,
    "gcp:storage/getProjectServiceAccount:getProjectServiceAccount": _storage_agent,
}


# --- the mock engine ------------------------------------------------------------------------------

_local = threading.local()


def _make_mocks(ctx: _Context) -> Any:
    import pulumi

    class Mocks(pulumi.runtime.Mocks):
        """Resource outputs from RESOURCE_OUTPUTS; invokes from INVOKE_RESULTS, else an error."""

        def __init__(self) -> None:
            self.errors: list[str] = []

        def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict]:
            outputs_fn = RESOURCE_OUTPUTS.get(args.typ)
            if outputs_fn is None:
                resource_id, computed = f"{args.name}-id", {}
            else:
                resource_id, computed = outputs_fn(ctx, args.name, args.inputs)
            state = {**args.inputs, **computed}
            _local.last = (dict(args.inputs), resource_id, state)
            return resource_id, state

        def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict, list]:
            answer = INVOKE_RESULTS.get(args.token)
            if answer is None:
                message = (
                    f"unknown invoke {args.token!r}: the offline engine has no mock for it; add "
                    f"one to infra/offline.py INVOKE_RESULTS"
                )
                self.errors.append(message)
                raise UnknownInvokeError(message)
            return answer(ctx, args.args), []

    return Mocks()


def _make_monitor(mocks: Any) -> Any:
    from pulumi.runtime.mocks import MockMonitor

    class RecordingMonitor(MockMonitor):
        """Keeps, per URN, what the stock monitor drops: inputs, parent and custom flag."""

        def __init__(self) -> None:
            super().__init__(mocks)
            self.registrations: dict[str, RecordedResource] = {}
            self._lock = threading.Lock()

        def RegisterResource(self, request: Any) -> Any:
            _local.last = None
            response = super().RegisterResource(request)
            if request.type == "pulumi:pulumi:Stack" or _local.last is None:
                return response
            inputs, resource_id, state = _local.last
            record = RecordedResource(
                type=request.type,
                name=request.name,
                inputs=inputs,
                outputs=state,
                parent=request.parent or None,
                component="",
                urn=response.urn,
                id=resource_id if request.custom else None,
                custom=bool(request.custom),
                dependencies=_dependencies(request),
            )
            with self._lock:
                self.registrations[response.urn] = record
            return response

    return RecordingMonitor()


def _dependencies(request: Any) -> tuple[str, ...]:
    urns = set(request.dependencies)
    for deps in request.propertyDependencies.values():
        urns.update(deps.urns)
    return tuple(sorted(urns))


def _config_values(raw: dict[str, Any]) -> tuple[dict[str, str], list[str]]:
    """Pulumi passes config to programs as strings, structured values JSON-encoded; secure
    values become dummies (the real ones never exist offline)."""
    values: dict[str, str] = {}
    secret_keys: list[str] = []

    def scrub(value: Any) -> Any:
        if isinstance(value, dict):
            if set(value) == {"secure"}:
                return DUMMY_SECRET
            return {k: scrub(v) for k, v in value.items()}
        if isinstance(value, list):
            return [scrub(v) for v in value]
        return value

    for key, value in raw.items():
        if isinstance(value, dict) and set(value) == {"secure"}:
            secret_keys.append(key)
        value = scrub(value)
        values[key] = value if isinstance(value, str) else json.dumps(value)
    return values, secret_keys


def _component_of(record: RecordedResource, registrations: dict[str, RecordedResource]) -> str:
    """Name of the Platform's child component above ``record`` ("platform" if none)."""
    below, urn = record, record.parent
    while urn is not None and urn in registrations:
        parent = registrations[urn]
        if parent.type == PLATFORM_TYPE:
            return below.name if not below.custom else "platform"
        below, urn = parent, parent.parent
    return "stack"


def _quiet_exception_handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """A failed run leaves futures whose exception nobody retrieves. asyncio reports them when
    they are garbage-collected, at any later moment, by formatting a traceback; on CPython 3.11
    that formatting calls ast.parse, and doing so from inside another ast.parse (pytest
    rewriting an import) corrupts its depth check ("AST constructor recursion depth
    mismatch"). The run already raised the error: log the leftovers briefly instead."""
    logger.debug("offline run: %s (%r)", context.get("message"), context.get("exception"))


@contextlib.contextmanager
def _own_event_loop() -> Iterator[None]:
    """Run on a fresh event loop (own thread pool, quiet handler), then restore the caller's."""
    previous = asyncio.get_event_loop_policy().get_event_loop()
    loop = asyncio.new_event_loop()
    loop.set_exception_handler(_quiet_exception_handler)
    asyncio.set_event_loop(loop)
    try:
        yield
    finally:
        loop.run_until_complete(loop.shutdown_default_executor())
        asyncio.set_event_loop(previous)
        loop.close()


def run_offline(stack: str, config_file: Path | None = None) -> OfflineRun:
    """Run ``infra/__main__.py`` under mocks with ``Pulumi.<stack>.yaml`` (or ``config_file``).

    Raises :class:`infra.config.ConfigError` when the file is missing or not YAML, and
    :class:`OfflineError` when the program fails (an invalid config: then ``declared == 0``) or
    called an invoke that has no mock.
    """
    import pulumi
    from pulumi.runtime import settings
    from pulumi.runtime.config import set_all_config
    from pulumi.runtime.stack import run_pulumi_func
    from pulumi.runtime.sync_await import _sync_await

    config_file = config_file or PROJECT_DIR / f"Pulumi.{stack}.yaml"
    values, secret_keys = _config_values(read_stack_file(config_file))
    ctx = _Context(values.get("gcp:project", "offline-project"), values.get("gcp:region", ""))
    mocks = _make_mocks(ctx)
    monitor = _make_monitor(mocks)

    def program() -> None:
        runpy.run_path(str(PROGRAM), run_name="__main__")

    def declared() -> int:
        return sum(1 for r in monitor.registrations.values() if r.custom and _is_cloud(r))

    # Everything, from the root stack on, must be created on the run's own event loop.
    with _own_event_loop(), warnings.catch_warnings():
        # pulumi_gcp warns about its own deprecated aliases when the engine loads them.
        warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"pulumi_gcp\.")
        # Fresh globals per run: without the reset, set_mocks keeps the previous run's root
        # stack (bound to the previous monitor) and the second stack's resources would be lost.
        settings.reset_options(project=PULUMI_PROJECT, stack=stack, preview=False)
        set_all_config(values, secret_keys)
        pulumi.runtime.set_mocks(
            mocks, project=PULUMI_PROJECT, stack=stack, preview=False, monitor=monitor
        )
        root = settings.get_root_resource()
        try:
            _sync_await(run_pulumi_func(program))
            outputs = {
                name: _sync_await(pulumi.Output.from_input(value).future())
                for name, value in root.outputs.items()
            }
        except Exception as exc:
            raise OfflineError(f"stack {stack!r} ({config_file}): {exc}", declared()) from exc
    if mocks.errors:
        raise OfflineError("; ".join(mocks.errors), declared())

    by_urn = monitor.registrations
    resolved = sorted(
        (
            RecordedResource(**{**r.__dict__, "component": _component_of(r, by_urn)})
            for r in by_urn.values()
        ),
        key=_sort_key,
    )
    return OfflineRun(
        stack=stack,
        config_file=config_file,
        resources=[r for r in resolved if r.custom and _is_cloud(r)],
        outputs=outputs,
        components=[r for r in resolved if not r.custom],
    )


def _sort_key(record: RecordedResource) -> tuple[int, str, str, str]:
    known = record.component in COMPONENT_ORDER
    rank = COMPONENT_ORDER.index(record.component) if known else len(COMPONENT_ORDER)
    return rank, record.component, record.type, record.name


def _is_cloud(record: RecordedResource) -> bool:
    return not record.type.startswith("pulumi:providers:")


# --- the preview ----------------------------------------------------------------------------------

# The settings worth seeing per type in a preview (dotted paths into the inputs).
KEY_SETTINGS: dict[str, tuple[str, ...]] = {
    "gcp:projects/service:Service": ("service",),
    "gcp:projects/serviceIdentity:ServiceIdentity": ("service",),
    "gcp:serviceaccount/account:Account": ("accountId",),
    "gcp:projects/iAMMember:IAMMember": ("project", "role", "member"),
    "gcp:projects/iAMCustomRole:IAMCustomRole": ("roleId",),
    "gcp:serviceaccount/iAMMember:IAMMember": ("serviceAccountId", "role", "member"),
    "gcp:storage/bucketIAMMember:BucketIAMMember": ("bucket", "role", "member"),
    "gcp:secretmanager/secretIamMember:SecretIamMember": ("secretId", "role", "member"),
    "gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember": ("role", "member"),
    "gcp:compute/subnetworkIAMMember:SubnetworkIAMMember": ("subnetwork", "role", "member"),
    "gcp:artifactregistry/repositoryIamMember:RepositoryIamMember": (
        "repository",
        "role",
        "member",
    ),
    "gcp:compute/network:Network": ("name", "project", "autoCreateSubnetworks"),
    "gcp:compute/subnetwork:Subnetwork": (
        "name",
        "ipCidrRange",
        "privateIpGoogleAccess",
        "logConfig.flowSampling",
    ),
    "gcp:compute/firewall:Firewall": ("name", "priority", "sourceRanges", "allows", "denies"),
    "gcp:compute/router:Router": ("name",),
    "gcp:compute/routerNat:RouterNat": ("name", "sourceSubnetworkIpRangesToNat"),
    "gcp:compute/networkAttachment:NetworkAttachment": ("name", "connectionPreference"),
    "gcp:compute/globalAddress:GlobalAddress": ("name", "purpose", "address", "prefixLength"),
    "gcp:compute/sharedVPCServiceProject:SharedVPCServiceProject": (
        "hostProject",
        "serviceProject",
    ),
    "gcp:servicenetworking/connection:Connection": ("service", "reservedPeeringRanges"),
    "gcp:storage/bucket:Bucket": (
        "name",
        "location",
        "publicAccessPrevention",
        "versioning.enabled",
        "softDeletePolicy.retentionDurationSeconds",
        "encryption.defaultKmsKeyName",
    ),
    "gcp:artifactregistry/repository:Repository": (
        "repositoryId",
        "dockerConfig.immutableTags",
        "vulnerabilityScanningConfig.enablementConfig",
        "kmsKeyName",
    ),
    "gcp:cloudquota/sQuotaPreference:SQuotaPreference": (
        "quotaId",
        "dimensions.region",
        "quotaConfig.preferredValue",
    ),
    "gcp:secretmanager/secret:Secret": ("secretId",),
    "gcp:kms/keyRing:KeyRing": ("name", "location"),
    "gcp:kms/cryptoKey:CryptoKey": ("name", "rotationPeriod"),
    "gcp:vertex/aiTensorboard:AiTensorboard": ("displayName", "encryptionSpec.kmsKeyName"),
    "gcp:billing/budget:Budget": ("displayName", "amount.specifiedAmount.units", "thresholdRules"),
    "gcp:iam/workloadIdentityPool:WorkloadIdentityPool": ("workloadIdentityPoolId",),
    "gcp:iam/workloadIdentityPoolProvider:WorkloadIdentityPoolProvider": ("attributeCondition",),
}


def lookup(inputs: dict[str, Any], path: str) -> Any:
    """Value at a dotted path in a resource's inputs, or None."""
    value: Any = inputs
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


# Display only: keeps a preview readable in 80 columns.
ABBREVIATIONS = (
    ("https://www.googleapis.com/compute/v1/", ""),
    (".iam.gserviceaccount.com", ""),
    ("serviceAccount:", "sa:"),
    ("principalSet://iam.googleapis.com/", "principalSet://"),
)


def _short(value: Any) -> str:
    if isinstance(value, list) and value and isinstance(value[0], dict):
        return ",".join(str(v.get("thresholdPercent") or v.get("protocol") or v) for v in value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # protobuf Struct numbers arrive as floats
    text = value if isinstance(value, str) else json.dumps(value)
    for long, short in ABBREVIATIONS:
        text = text.replace(long, short)
    return text


def settings_line(resource: RecordedResource) -> str:
    parts = []
    for path in KEY_SETTINGS.get(resource.type, ()):
        value = lookup(resource.inputs, path)
        if value is not None:
            parts.append(f"{path.rsplit('.', 1)[-1]}={_short(value)}")
    return " ".join(parts)


def render_preview(run: OfflineRun) -> Any:
    """A rich renderable: resources grouped by component, with their key settings."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    platform = run.outputs.get("platform", {})
    title = Text.assemble(
        ("vtx offline preview ", "bold"),
        (f"stack {run.stack}", "bold cyan"),
        f"  project {platform.get('project')}  region {platform.get('region')}  ",
        (f"{len(run.resources)} resources", "green"),
        "  (Pulumi mocks, nothing was created)",
    )
    tables: list[Any] = [title]
    for component, resources in run.by_component().items():
        table = Table(title=f"{component} ({len(resources)})", title_justify="left", expand=True)
        table.add_column("type", style="cyan", no_wrap=True)
        table.add_column("name", overflow="fold", max_width=28)
        table.add_column("key settings", overflow="fold", ratio=1)
        for resource in resources:
            short_type = resource.type.split(":")[-1]
            table.add_row(short_type, resource.name, settings_line(resource))
        tables.append(table)
    outputs = Table(title="platform output (jobs.stack.StackOutputs)", title_justify="left")
    outputs.add_column("key", style="cyan")
    outputs.add_column("value", overflow="fold")
    for key, value in platform.items():
        outputs.add_row(key, value if isinstance(value, str) else json.dumps(value))
    tables.append(outputs)
    return Group(*tables)


def main(argv: list[str] | None = None) -> int:
    from rich.console import Console

    parser = argparse.ArgumentParser(
        prog="python -m infra.offline",
        description="Offline preview of a vtx stack: the real program under Pulumi mocks.",
    )
    parser.add_argument("stack", help="stack name: reads Pulumi.<stack>.yaml")
    parser.add_argument("--config", type=Path, help="use this Pulumi.<stack>.yaml instead")
    parser.add_argument("--json", action="store_true", help="print the platform output as JSON")
    args = parser.parse_args(argv)
    console = Console()
    try:
        run = run_offline(args.stack, args.config)
    except (ConfigError, OfflineError) as exc:
        console.print(f"[red]error:[/red] {exc}", highlight=False)
        return 1
    if args.json:
        print(json.dumps(run.outputs["platform"], indent=2))
    else:
        console.print(render_preview(run))
    return 0


if __name__ == "__main__":
    sys.exit(main())
