"""Build the review report: the sections a platform reviewer reads before ``pulumi up``.

Every section is derived from the resources' inputs (what will be asked of GCP), never from
mock outputs, so a report built offline and one built from a real preview agree. Secret values
never enter the report: secrets are listed by name and resource inputs are not copied wholesale.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from infra.policy.evaluate import PolicySubject, Verdict, evaluate
from infra.policy.iam import custom_role_ref, grants_of
from infra.policy.rule_types import RuleContext
from infra.policy.values import UNKNOWN, known
from infra.review.diagram import display_name, mermaid
from infra.review.egress_paths import dns_answers, egress_paths, package_sources
from infra.review.rows import COMPUTED, HourlyCost, IamRow, PolicyRow, TypeCount, shown
from infra.review.sources import ReviewResource, ReviewSource
from jobs.core.stack import LABEL_TEAM, PersistentResourceOutputs, WarmPool

PERSISTENT_RESOURCE = "gcp:vertex/aiPersistentResource:AiPersistentResource"
WarmPricer = Callable[[PersistentResourceOutputs], HourlyCost]
"""Prices a persistent resource per hour (vtx passes jobs.pricing.warm_pools's)."""


@dataclass
class Report:
    stack: str
    environment: str | None
    origin: str
    resources: list[dict[str, str]]
    counts: list[TypeCount]
    network: dict[str, Any]
    iam: list[IamRow]
    buckets: list[dict[str, Any]]
    quotas: list[dict[str, Any]]
    secrets: list[dict[str, Any]]
    teams: list[dict[str, Any]]
    policy: list[PolicyRow]
    diagram: str
    platform: Mapping[str, Any] = field(default_factory=dict)
    controller: list[dict[str, Any]] = field(default_factory=list)
    alerts: list[dict[str, Any]] = field(default_factory=list)
    warm_pools: list[dict[str, Any]] = field(default_factory=list)

    @property
    def mandatory_failures(self) -> int:
        return sum(len(p.violations) for p in self.policy if p.mandatory and p.status == "fail")


def _of_type(resources: Sequence[ReviewResource], *types: str) -> list[ReviewResource]:
    return [r for r in resources if r.type in types]


def _cloud(resources: Sequence[ReviewResource]) -> list[ReviewResource]:
    return [r for r in resources if r.custom and not r.type.startswith("pulumi:")]


def counts(resources: Sequence[ReviewResource]) -> list[TypeCount]:
    tally = Counter((r.component, r.type) for r in _cloud(resources))
    return [TypeCount(c, t, n) for (c, t), n in sorted(tally.items())]


def _serving_access(platform: Mapping[str, Any]) -> str:
    """How deployed models are reached (the stack's ``private_serving`` export)."""
    private = platform.get("private_serving")
    if not isinstance(private, Mapping):
        return "public endpoints"
    if private.get("kind") == "peering":
        return f"private endpoints over the VPC peering ({shown(private.get('network'))})"
    allowed = ", ".join(shown(p) for p in private.get("project_allowlist") or []) or "-"
    return f"private endpoints over Private Service Connect (forwarding rules from {allowed})"


def _psc_consumers(resources: Sequence[ReviewResource]) -> list[dict[str, str]]:
    """Each PSC endpoint in the VPC: its forwarding rule, internal address and target (the
    address and its rule share a name, infra.components.network.network)."""
    addresses = {
        r.inputs.get("name"): r.outputs.get("address")
        for r in _of_type(resources, "gcp:compute/address:Address")
    }
    return [
        {
            "name": display_name(rule),
            "address": shown(addresses.get(rule.inputs.get("name"))),
            "target": shown(rule.inputs.get("target")),
        }
        for rule in _of_type(resources, "gcp:compute/forwardingRule:ForwardingRule")
    ]


def network_section(resources: Sequence[ReviewResource], platform: Mapping[str, Any]) -> dict:
    attachments = _of_type(resources, "gcp:compute/networkAttachment:NetworkAttachment")
    peerings = _of_type(resources, "gcp:servicenetworking/connection:Connection")
    mode = "psc-interface" if attachments else "peering" if peerings else "none"
    subnets = [
        {
            "name": display_name(r),
            "cidr": shown(r.inputs.get("ipCidrRange")),
            "purpose": shown(r.inputs.get("purpose") or "PRIVATE"),
            "private_google_access": shown(r.inputs.get("privateIpGoogleAccess") is True),
            "flow_logs": shown(isinstance(r.inputs.get("logConfig"), Mapping)),
        }
        for r in _of_type(resources, "gcp:compute/subnetwork:Subnetwork")
    ]
    ranges = [
        {
            "name": display_name(r),
            "cidr": f"{shown(r.inputs.get('address'))}/{shown(r.inputs.get('prefixLength'))}",
            "purpose": shown(r.inputs.get("purpose")),
        }
        for r in _of_type(resources, "gcp:compute/globalAddress:GlobalAddress")
    ]
    nats = [
        {
            "name": display_name(r),
            "ip_allocation": shown(r.inputs.get("natIpAllocateOption")),
            "ranges": shown(r.inputs.get("sourceSubnetworkIpRangesToNat")),
        }
        for r in _of_type(resources, "gcp:compute/routerNat:RouterNat")
    ]
    firewalls = [
        {
            "name": display_name(r),
            "direction": shown(r.inputs.get("direction") or "INGRESS"),
            "action": "deny" if r.inputs.get("denies") else "allow",
            "sources": ", ".join(shown(s) for s in r.inputs.get("sourceRanges") or []) or "-",
            "destinations": ", ".join(shown(d) for d in r.inputs.get("destinationRanges") or [])
            or "-",
            "priority": shown(r.inputs.get("priority")),
        }
        for r in _of_type(resources, "gcp:compute/firewall:Firewall")
    ]
    egress = stack_egress(platform)
    return {
        "mode": mode,
        "egress": shown(egress),
        "networks": [display_name(r) for r in _of_type(resources, "gcp:compute/network:Network")],
        "subnets": subnets,
        "nat": nats,
        "attachment": [
            {
                "name": display_name(r),
                "connection_preference": shown(r.inputs.get("connectionPreference")),
                "exported_as": shown(_exported_attachment(r, platform)),
            }
            for r in attachments
        ],
        "peering_ranges": ranges,
        "firewall": firewalls,
        "egress_paths": egress_paths(resources),
        "dns": dns_answers(resources),
        "package_sources": package_sources(platform, egress),
        "serving": _serving_access(platform),
        "psc_consumers": _psc_consumers(resources),
        "shared_vpc_host": shown(
            next(
                (
                    r.inputs.get("hostProject")
                    for r in _of_type(
                        resources, "gcp:compute/sharedVPCServiceProject:SharedVPCServiceProject"
                    )
                ),
                None,
            )
        ),
    }


def _exported_attachment(resource: ReviewResource, platform: Mapping[str, Any]) -> object:
    """Where the output names an attachment: a further region's under ``regions`` (capacity
    ladders), the stack's own region's at the top."""
    further = (platform.get("regions") or {}).get(resource.inputs.get("region"))
    if isinstance(further, Mapping):
        return further.get("network_attachment")
    return platform.get("network_attachment")


def iam_matrix(resources: Sequence[ReviewResource]) -> list[IamRow]:
    rows = {
        IamRow(
            principal=shown(grant.principal),
            role=shown(grant.role),
            resource_kind="project" if grant.project_wide else grant.scope_kind,
            resource=shown(grant.scope),
            project_wide=grant.project_wide,
            declared_by=r.name,
        )
        for r in resources
        for grant in grants_of(r.type, r.inputs)
    }
    return sorted(rows, key=lambda row: (row.principal, row.role, row.resource))


def _days(seconds: object) -> str:
    try:
        return f"{float(str(seconds).rstrip('s')) / 86400:g} d"
    except ValueError:
        return shown(seconds)


def _lifecycle(rules: object) -> str:
    if not isinstance(rules, Sequence):
        return "-"
    parts = []
    for rule in rules:
        if not isinstance(rule, Mapping):
            continue
        action = (rule.get("action") or {}).get("type", "?")
        condition = ", ".join(f"{k}={shown(v)}" for k, v in (rule.get("condition") or {}).items())
        parts.append(f"{action} if {condition}" if condition else str(action))
    return "; ".join(parts) or "-"


def buckets_section(resources: Sequence[ReviewResource]) -> list[dict[str, Any]]:
    rows = []
    for r in _of_type(resources, "gcp:storage/bucket:Bucket"):
        i = r.inputs
        soft_delete = (i.get("softDeletePolicy") or {}).get("retentionDurationSeconds")
        retention = (i.get("retentionPolicy") or {}).get("retentionPeriod")
        rows.append(
            {
                "name": shown(i.get("name") or r.name),
                "location": shown(i.get("location")),
                "uniform_access": shown(i.get("uniformBucketLevelAccess") is True),
                "public_access_prevention": shown(i.get("publicAccessPrevention")),
                "versioning": shown((i.get("versioning") or {}).get("enabled") is True),
                "soft_delete": _days(soft_delete) if soft_delete is not None else "-",
                "retention": _days(retention) if retention is not None else "-",
                "lifecycle": _lifecycle(i.get("lifecycleRules")),
                "cmek": shown((i.get("encryption") or {}).get("defaultKmsKeyName")),
            }
        )
    return rows


def quotas_section(resources: Sequence[ReviewResource]) -> list[dict[str, Any]]:
    return [
        {
            "name": r.name,
            "service": shown(r.inputs.get("service")),
            "quota_id": shown(r.inputs.get("quotaId")),
            "region": shown((r.inputs.get("dimensions") or {}).get("region")),
            "preferred_value": shown((r.inputs.get("quotaConfig") or {}).get("preferredValue")),
        }
        for r in _of_type(resources, "gcp:cloudquota/sQuotaPreference:SQuotaPreference")
    ]


def secrets_section(resources: Sequence[ReviewResource]) -> list[dict[str, Any]]:
    """Secret names and where they replicate; values are never read, even if a version exists."""
    versions = Counter(
        shown(r.inputs.get("secret"))
        for r in _of_type(resources, "gcp:secretmanager/secretVersion:SecretVersion")
    )
    rows = []
    for r in _of_type(resources, "gcp:secretmanager/secret:Secret"):
        replication = r.inputs.get("replication") or {}
        if isinstance(replication.get("userManaged"), Mapping):
            replicas = replication["userManaged"].get("replicas") or []
            where = ", ".join(shown(rep.get("location")) for rep in replicas)
        else:
            where = "automatic"
        secret_id = shown(r.inputs.get("secretId") or r.name)
        rows.append(
            {
                "secret_id": secret_id,
                "replication": where,
                "versions_in_state": versions.get(secret_id, 0),
            }
        )
    return rows


def _team_of(resource: ReviewResource) -> object:
    labels = resource.inputs.get("labels")
    return labels.get(LABEL_TEAM) if isinstance(labels, Mapping) else None


def _role_permissions(resources: Sequence[ReviewResource], account: object) -> list[str]:
    """What the account may do: each role granted to it, a custom role with its permissions."""
    declared = {
        shown(r.inputs.get("roleId")): r.inputs.get("permissions") or []
        for r in _of_type(resources, "gcp:projects/iAMCustomRole:IAMCustomRole")
    }
    held = []
    for r in resources:
        for grant in grants_of(r.type, r.inputs):
            if grant.principal != f"serviceAccount:{shown(account)}":
                continue
            ref = custom_role_ref(shown(grant.role))
            if ref is not None and ref[2] in declared:
                permissions = ", ".join(shown(p) for p in declared[ref[2]])
                held.append(f"{grant.role} ({permissions})")
            else:
                held.append(shown(grant.role))
    return sorted(held) or ["-"]


def teams_section(resources: Sequence[ReviewResource]) -> list[dict[str, Any]]:
    """Per team budget, the chain that stops its jobs: the budget (amount, thresholds, the label
    it counts) -> the topic its updates go to -> the function the topic triggers -> what the
    function's account may do. A team without a cancel function shows "-" past its budget."""
    topics = {_team_of(r): r for r in _of_type(resources, "gcp:pubsub/topic:Topic")}
    functions = {
        _team_of(r): r for r in _of_type(resources, "gcp:cloudfunctionsv2/function:Function")
    }
    rows = []
    for budget in _of_type(resources, "gcp:billing/budget:Budget"):
        labels = (budget.inputs.get("budgetFilter") or {}).get("labels") or {}
        if not isinstance(labels, Mapping) or LABEL_TEAM not in labels:
            continue
        team = labels[LABEL_TEAM]
        amount = (budget.inputs.get("amount") or {}).get("specifiedAmount") or {}
        thresholds = [r.get("thresholdPercent") for r in budget.inputs.get("thresholdRules") or []]
        topic, function = topics.get(team), functions.get(team)
        service = (function.inputs.get("serviceConfig") or {}) if function else {}
        env = service.get("environmentVariables") or {}
        account = service.get("serviceAccountEmail")
        rows.append(
            {
                "team": shown(team),
                "budget": f"{shown(amount.get('units'))} {shown(amount.get('currencyCode'))}/month",
                "thresholds": ", ".join(shown(t) for t in thresholds) or "-",
                "label_filter": ", ".join(f"{k}={shown(v)}" for k, v in labels.items()),
                "topic": shown(topic.inputs.get("name")) if topic else "-",
                "topic_cmek": shown(topic.inputs.get("kmsKeyName")) if topic else "-",
                "function": shown(function.inputs.get("name")) if function else "-",
                "cancel_at": shown(env.get("VTX_CANCEL_AT")) if function else "-",
                "regions": shown(env.get("VTX_REGIONS")) if function else "-",
                "runs_as": shown(account) if function else "-",
                "permissions": _role_permissions(resources, account) if function else ["-"],
            }
        )
    return sorted(rows, key=lambda row: row["team"])


def controller_section(resources: Sequence[ReviewResource]) -> list[dict[str, Any]]:
    """The stack's controller: what calls it and how often, the account it runs as and all
    that account may do (its roles, whom it may act as, which objects it may touch)."""
    schedules = {
        shown((r.inputs.get("httpTarget") or {}).get("uri")): r
        for r in _of_type(resources, "gcp:cloudscheduler/job:Job")
    }
    rows = []
    for function in _of_type(resources, "gcp:cloudfunctionsv2/function:Function"):
        if (function.inputs.get("buildConfig") or {}).get("entryPoint") != "controller_pass":
            continue
        account = (function.inputs.get("serviceConfig") or {}).get("serviceAccountEmail")
        job = schedules.get(shown(function.outputs.get("url")))
        target = (job.inputs.get("httpTarget") or {}) if job else {}
        conditions = [
            shown((r.inputs.get("condition") or {}).get("expression"))
            for r in _of_type(resources, "gcp:storage/bucketIAMMember:BucketIAMMember")
            if r.inputs.get("member") == f"serviceAccount:{shown(account)}"
        ]
        rows.append(
            {
                "function": shown(function.inputs.get("name")),
                "schedule": shown(job.inputs.get("schedule")) if job else "-",
                "called_by": shown((target.get("oidcToken") or {}).get("serviceAccountEmail")),
                "runs_as": shown(account),
                "permissions": _role_permissions(resources, account),
                "objects": conditions or ["-"],
            }
        )
    return rows


USER_METRIC = re.compile(r'metric\.type="logging\.googleapis\.com/user/([^"]+)"')


def _fires_when(condition: Mapping[str, Any]) -> str:
    """A condition as its name, with the log-based metric it watches."""
    watched = condition.get("conditionThreshold") or condition.get("conditionAbsent") or {}
    metric = USER_METRIC.search(shown(watched.get("filter")))
    said = shown(condition.get("displayName"))
    return f"{said} ({metric.group(1)})" if metric else said


def alerts_section(resources: Sequence[ReviewResource]) -> list[dict[str, Any]]:
    """The stack's alert policies: what fires them, who hears (an e-mail channel the stack
    makes is shown as its address, another channel by its name)."""
    addresses = {
        shown(r.outputs.get("name")): "email "
        + shown((r.inputs.get("labels") or {}).get("email_address"))
        for r in _of_type(resources, "gcp:monitoring/notificationChannel:NotificationChannel")
    }
    rows = [
        {
            "alert": shown(policy.inputs.get("displayName")),
            "fires_when": [_fires_when(c) for c in policy.inputs.get("conditions") or []],
            "notifies": [
                addresses.get(shown(c), shown(c))
                for c in policy.inputs.get("notificationChannels") or []
            ]
            or ["no one (incidents only)"],
        }
        for policy in _of_type(resources, "gcp:monitoring/alertPolicy:AlertPolicy")
    ]
    return sorted(rows, key=lambda row: row["alert"])


def _warm_pool(pool: Mapping[str, Any]) -> WarmPool:
    """A resource pool's inputs (Pulumi's wire names) as the stack contract's WarmPool."""
    machine = pool.get("machineSpec") or {}
    disk = pool.get("diskSpec") or {}
    scaling = pool.get("autoscalingSpec") or {}
    return WarmPool.model_validate(
        {
            "id": pool.get("id"),
            "machine_type": machine.get("machineType"),
            "accelerator_type": machine.get("acceleratorType"),
            "accelerator_count": machine.get("acceleratorCount") or 0,
            "boot_disk_type": disk.get("bootDiskType") or "pd-ssd",
            "boot_disk_size_gb": disk.get("bootDiskSizeGb") or 100,
            "replica_count": pool.get("replicaCount") or 1,
            "max_replica_count": scaling.get("maxReplicaCount"),
        }
    )


def _has_unknown(value: object) -> bool:
    """Whether the engine left any part of ``value`` to be known at apply."""
    if isinstance(value, Mapping):
        return any(_has_unknown(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_unknown(v) for v in value)
    return value == UNKNOWN


def _warm_network(inputs: Mapping[str, Any]) -> str:
    psc = inputs.get("pscInterfaceConfig")
    if isinstance(psc, Mapping) and psc.get("networkAttachment"):
        return f"PSC interface ({shown(psc['networkAttachment'])})"
    if inputs.get("network"):
        return f"peered VPC ({shown(inputs['network'])})"
    return "none"


def _warm_resource(
    resource: ReviewResource, labels: Mapping[str, Any]
) -> PersistentResourceOutputs | None:
    """The resource as the stack contract reads it; None while a preview cannot see its region
    or pools (computed inputs), or when they are not a resource's."""
    inputs = resource.inputs
    if _has_unknown([inputs.get("location"), inputs.get("resourcePools")]):
        return None
    try:
        return PersistentResourceOutputs(
            name=str(inputs.get("name") or resource.name),
            region=str(inputs.get("location")),
            pools=[_warm_pool(p) for p in inputs.get("resourcePools") or []],
            labels={str(k): str(v) for k, v in labels.items()},
        )
    except ValueError:  # pydantic's ValidationError: a pool that is not one
        return None


def warm_pools_section(
    resources: Sequence[ReviewResource], price: WarmPricer | None
) -> list[dict[str, Any]]:
    """Each persistent resource: where it runs, its pools, the labels it is billed under and its
    price per hour, which it costs busy or idle. A pool a preview cannot see yet (a computed
    input) shows as computed, and the price as unknown."""
    rows = []
    for r in _of_type(resources, PERSISTENT_RESOURCE):
        inputs = r.inputs
        labels = inputs.get("labels") if isinstance(inputs.get("labels"), Mapping) else {}
        warm = _warm_resource(r, labels)
        pools = warm.pools if warm else []
        cost = price(warm) if warm is not None and price is not None else None
        rows.append(
            {
                "resource": shown(inputs.get("name") or r.name),
                "region": shown(inputs.get("location")),
                "network": _warm_network(inputs),
                "cmek": shown((inputs.get("encryptionSpec") or {}).get("kmsKeyName")),
                "labels": ", ".join(f"{k}={shown(v)}" for k, v in sorted(labels.items())) or "-",
                "pools": [f"{p.id}: {p.summary}" for p in pools] or [COMPUTED],
                "team": labels.get(LABEL_TEAM),
                "usd_per_h": cost.usd_per_h if cost else None,
                "max_usd_per_h": cost.max_usd_per_h if cost else None,
                "usd_per_month": cost.usd_per_month if cost else None,
                "per_hour": cost.text if cost else "not priced" if warm else "unknown (computed)",
            }
        )
    return rows


def _month(usd: float | None) -> str:
    return "unknown" if usd is None else f"${usd:,.0f}/month"


def with_warm_pools(
    teams: list[dict[str, Any]], warm: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Each team's budget row with the persistent resources billed to it (their ``vtx-team``
    label, which the budget filters on): their hours count in its budget busy or idle, so a
    month of their floor is spent before any job runs."""
    rows = []
    for team in teams:
        mine = [w for w in warm if w["team"] == team["team"]]
        months = [w["usd_per_month"] for w in mine]
        total = None if None in months else sum(m for m in months if m is not None)
        rows.append(
            team
            | {
                "warm_pools": [f"{w['resource']}: {w['per_hour']}" for w in mine] or ["-"],
                "warm_usd_per_month": total if mine else 0.0,
                "warm_month": _month(total) if mine else "-",
            }
        )
    return rows


def policy_section(verdicts: Sequence[Verdict]) -> list[PolicyRow]:
    return [
        PolicyRow(
            policy=v.rule.name,
            status=v.status,
            mandatory=v.rule.mandatory,
            description=v.rule.description,
            violations=[
                f"{violation.resource or 'stack'}: {violation.message}"
                for violation in v.violations
            ],
            note=v.note,
        )
        for v in verdicts
    ]


def policy_subjects(resources: Sequence[ReviewResource]) -> list[PolicySubject]:
    return [PolicySubject(r.type, r.name, r.urn, r.inputs, r.outputs) for r in resources]


def stack_egress(platform: Mapping[str, Any]) -> str | None:
    """The stack's ``network.egress`` as its output says it (absent: nat); None when the output
    is not known (a preview before the first apply)."""
    if not platform:
        return None
    egress = platform.get("egress")
    return str(egress) if known(egress) and egress else "nat"


def build_report(source: ReviewSource, price: WarmPricer | None = None) -> Report:
    """The report of ``source``; ``price`` prices its persistent resources (without it their
    $/h reads "not priced")."""
    resources = source.resources
    ctx = RuleContext(environment=source.environment, egress=stack_egress(source.platform))
    verdicts = evaluate(policy_subjects(resources), ctx)
    iam = iam_matrix(resources)
    warm = warm_pools_section(resources, price)
    return Report(
        stack=source.stack,
        environment=source.environment,
        origin=source.origin,
        resources=[
            {"urn": r.urn, "type": r.type, "name": r.name, "component": r.component, "op": r.op}
            for r in _cloud(resources)
        ],
        counts=counts(resources),
        network=network_section(resources, source.platform),
        iam=iam,
        buckets=buckets_section(resources),
        quotas=quotas_section(resources),
        secrets=secrets_section(resources),
        teams=with_warm_pools(teams_section(resources), warm),
        controller=controller_section(resources),
        alerts=alerts_section(resources),
        warm_pools=warm,
        policy=policy_section(verdicts),
        diagram=mermaid(resources, iam),
        platform=source.platform,
    )
