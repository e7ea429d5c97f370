"""How a deployment's plan reads: the serving price, the traffic split, the plan table."""

from __future__ import annotations

from rich.console import Console

from jobs.core.formats import money, usd_per_h
from jobs.pricing.serving_cost import ServingCost
from jobs.serving.deploy import (
    NEW,
    DeployPlan,
)
from jobs.serving.endpoint_rest import EndpointRecord
from vtx.views.fit_table import FitTable


def price_line(cost: ServingCost) -> str:
    """Floor and ceiling per hour and per month, or "unknown" with the reason (never $0)."""
    if cost.replica_usd_per_h is None or cost.table is None:
        return f"unknown: {cost.reason}"
    return (
        f"{usd_per_h(cost.floor_usd_per_h)} at {cost.min_replicas} replica(s) "
        f"({money(cost.floor_usd_per_month)}/month), {usd_per_h(cost.ceiling_usd_per_h)} at "
        f"{cost.max_replicas} ({money(cost.ceiling_usd_per_month)}/month); "
        f"{usd_per_h(cost.replica_usd_per_h)} a replica, from {cost.table.name} (as of "
        f"{cost.table.as_of}); excluding boot disks"
    )


def disk_line(cost: ServingCost) -> str:
    """A replica's boot disk, on its own line: its figure, or why it is unknown."""
    if cost.disk_usd_per_h is None:
        return f"unknown: {cost.disk_unknown_because}"
    return usd_per_h(cost.disk_usd_per_h)


def sku_lines(cost: ServingCost) -> list[str]:
    """The SKU behind each figure of a replica's price (refreshed tables name one)."""
    return [
        f'{name}: SKU {sku} "{description}", fetched {fetched}'
        for name, sku, description, fetched in cost.skus
    ]


def split_text(traffic: dict[str, int], names: dict[str, str]) -> str:
    """``new model 20%, 123 (m@1) 80%``."""
    if not traffic:
        return "empty (no model left)"
    parts = []
    for deployed_id, share in traffic.items():
        label = "this model" if deployed_id == NEW else deployed_id
        named = names.get(deployed_id)
        parts.append(f"{label}{f' ({named})' if named else ''} {share}%")
    return ", ".join(parts)


def deployed_names(endpoint: EndpointRecord | None) -> dict[str, str]:
    if endpoint is None:
        return {}
    return {d.id: f"{d.model.rsplit('/', 1)[-1]}@{d.version_id}" for d in endpoint.deployed}


def print_deploy_plan(out: Console, plan: DeployPlan) -> None:
    spec = plan.machine
    resources = plan.deployed_model["dedicatedResources"]
    accelerator = (
        f" + {spec['acceleratorCount']} x {spec['acceleratorType']}"
        if "acceleratorType" in spec
        else ""
    )
    where = (
        plan.endpoint.name if plan.endpoint else f"a new endpoint {plan.endpoint_display_name!r}"
    )
    table = FitTable(
        title=f"deploy: {plan.model.model_id}", show_header=False, title_justify="left"
    )
    table.add_column(style="bold")
    table.add_column()
    table.add_row("model", f"{plan.model.name} ({plan.model.display_name})")
    aliases = f" ({', '.join(plan.model.aliases)})" if plan.model.aliases else ""
    table.add_row("version", f"{plan.model.version_id}{aliases}")
    table.add_row("endpoint", where)
    table.add_row("access", plan.access)
    table.add_row("machine", f"{spec['machineType']}{accelerator}")
    table.add_row(
        "replicas", f"min {resources['minReplicaCount']}, max {resources['maxReplicaCount']}"
    )
    table.add_row("traffic after", split_text(plan.traffic, deployed_names(plan.endpoint)))
    table.add_row("service account", plan.service_account)
    table.add_row("serving $/h", price_line(plan.cost))
    table.add_row("boot disk $/h", disk_line(plan.cost))
    for line in sku_lines(plan.cost):
        table.add_row("", line)
    out.print(table)
