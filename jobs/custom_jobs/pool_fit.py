"""Which pool of a persistent resource runs each worker pool of a job, or why none can.

Google's "Run training jobs on a persistent resource" page (docs/vertex-facts.md, "Persistent
resources"): a job's worker pool must match a resource pool exactly in machine type and disk
type, and ask at most the pool's replica count (or its autoscaling maximum). The accelerator is
part of the machine spec, so it must match too. Worker pools that land on the same resource
pool share its replicas. One function decides it for `vtx validate --stack` (a template against
the stack's declared resources) and for the local platform (a CustomJob against a resource it
serves), so both say the same thing in the same words.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from jobs.core.catalog import Catalog, load_catalog
from jobs.core.problems import Problem
from jobs.core.stack import StackOutputs, WarmPool
from jobs.custom_jobs.facts import JobFacts, PoolFacts, template_facts
from jobs.spec.template import JobTemplate

MATCHED = ("machine", "accelerator", "accelerator_count", "boot_disk_type")
"""What a worker pool must share with its resource pool (the page: machine and disk type)."""


@dataclass(frozen=True)
class Misfit:
    """A worker pool that no pool of the resource can hold, and what to change."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


@dataclass(frozen=True)
class Placement:
    """The resource pool each worker pool runs on, and how many replicas it takes there."""

    pools: dict[str, str]
    """Worker pool role (chief, workers...) -> resource pool id."""
    replicas: dict[str, int]
    """Resource pool id -> replicas this job takes of it."""


def _machine(
    catalog: Catalog, machine: str, accelerator: str | None, count: int | None
) -> tuple[str | None, int]:
    """The accelerator a machine runs with: a built-in one (A2, A3, G2...) when none is named;
    no accelerator is 0 of none."""
    builtin = catalog.builtin_accelerator(machine) if machine in catalog.machines else None
    if accelerator is None and builtin is not None:
        return builtin
    return (accelerator, count or 0) if accelerator else (None, 0)


def _ask(pool: PoolFacts, catalog: Catalog) -> dict[str, object]:
    """What a worker pool asks, with Vertex's defaults for what it leaves out (a machine's own
    boot disk type and built-in accelerator)."""
    machine = pool.machine or ""
    accelerator, count = _machine(catalog, machine, pool.accelerator, pool.accelerator_count)
    known = machine in catalog.machines
    disk = pool.boot_disk_type or (catalog.boot_disk_types(machine)[0] if known else None)
    return {
        "machine": machine,
        "accelerator": accelerator,
        "accelerator_count": count,
        "boot_disk_type": disk,
    }


def _offers(pool: WarmPool, catalog: Catalog) -> dict[str, object]:
    accelerator, count = _machine(
        catalog, pool.machine_type, pool.accelerator_type, pool.accelerator_count
    )
    return {
        "machine": pool.machine_type,
        "accelerator": accelerator,
        "accelerator_count": count,
        "boot_disk_type": pool.boot_disk_type,
    }


def _changes(pool: PoolFacts, ask: dict, offer: dict) -> list[str]:
    """Each field to change, at its path in the user's document."""
    return [
        f"set {pool.path(fact)} to {offer[fact] if offer[fact] is not None else 'none'}"
        for fact in MATCHED
        if ask[fact] != offer[fact]
    ]


def _closest(ask: dict, pools: Sequence[WarmPool], catalog: Catalog) -> WarmPool:
    """The pool that differs in fewest of MATCHED, the first of equals (machine counts most:
    it decides the rest)."""

    def score(pool: WarmPool) -> tuple[int, int]:
        offer = _offers(pool, catalog)
        same = sum(ask[f] == offer[f] for f in MATCHED)
        return (ask["machine"] == offer["machine"], same)

    return max(pools, key=score)


def place(
    facts: JobFacts, resource_id: str, pools: Sequence[WarmPool], catalog: Catalog
) -> Placement | list[Misfit]:
    """Where each worker pool of ``facts`` runs on the resource's ``pools``, or every misfit."""
    misfits: list[Misfit] = []
    placed: dict[str, str] = {}
    taken: dict[str, int] = {}
    askers: dict[str, list[PoolFacts]] = {}
    for pool in facts.pools:
        ask = _ask(pool, catalog)
        match = next((p for p in pools if _offers(p, catalog) == ask), None)
        if match is None:
            misfits.append(_no_pool(pool, ask, resource_id, pools, catalog))
            continue
        placed[pool.role] = match.id
        taken[match.id] = taken.get(match.id, 0) + (pool.replicas or 0)
        askers.setdefault(match.id, []).append(pool)
    for pool in pools:
        if taken.get(pool.id, 0) > pool.replicas_max:
            misfits.append(_too_many(pool, askers[pool.id], taken[pool.id], resource_id))
    if misfits:
        return misfits
    return Placement(placed, taken)


def _no_pool(
    pool: PoolFacts, ask: dict, resource_id: str, pools: Sequence[WarmPool], catalog: Catalog
) -> Misfit:
    asked = f"{ask['machine']}" + (
        f", {ask['accelerator_count']} x {ask['accelerator']}" if ask["accelerator"] else ""
    )
    where = f"persistent resource {resource_id!r}"
    if not pools:
        return Misfit(pool.path("pool"), f"{where} has no resource pool")
    closest = _closest(ask, pools, catalog)
    changes = _changes(pool, ask, _offers(closest, catalog))
    return Misfit(
        pool.path("pool"),
        f"no resource pool of {where} holds {asked}, {ask['boot_disk_type']} (a job's pool "
        f"must match a resource pool's machine, accelerator and boot disk type exactly); the "
        f"closest is pool {closest.id!r} ({closest.summary}): {'; '.join(changes)}",
    )


def _too_many(pool: WarmPool, askers: list[PoolFacts], taken: int, resource_id: str) -> Misfit:
    first = askers[0]
    others = f" ({len(askers)} of the job's pools share it)" if len(askers) > 1 else ""
    return Misfit(
        first.path("replicas"),
        f"the job asks {taken} replicas of pool {pool.id!r} of persistent resource "
        f"{resource_id!r}{others}, which has at most {pool.replicas_max} "
        f"({pool.summary}): lower {first.path('replicas')} to fit, or raise the pool's "
        f"replica count",
    )


def warm_pool_problems(template: JobTemplate, stack: StackOutputs) -> list[Problem]:
    """What a template's ``persistent_resource:`` asks that the stack's resource cannot give:
    the resource itself, its region, a strategy or reservation Google does not say combine
    with one (UNCONFIRMED, refused), and a pool for each of its worker pools. On the local
    platform the control plane checks it at create, against the resources it serves."""
    rid = template.persistent_resource
    if rid is None or stack.is_local:
        return []
    resource = stack.persistent_resources.get(rid)
    if resource is None:
        have = ", ".join(stack.persistent_resources) or "none"
        return [
            Problem(
                "persistent_resource",
                f"stack {stack.project} has no persistent resource {rid!r} (it has: {have})",
                "one of the stack's, or declare it under vtx:platform.persistent_resources in "
                "the stack config and `pulumi up`",
            )
        ]
    problems = []
    region = template.region or stack.region
    if resource.region != region:
        problems.append(
            Problem(
                "persistent_resource",
                f"persistent resource {rid!r} is in {resource.region}; this job runs in {region}",
                f"region: {resource.region}",
            )
        )
    if template.scheduling.strategy != "standard":
        problems.append(
            Problem(
                "scheduling.strategy",
                f"{template.scheduling.strategy} on a persistent resource: a job runs on the "
                f"resource's own VMs, and no Google page says Spot or FLEX_START combine with "
                f'one (UNCONFIRMED, docs/vertex-facts.md "Persistent resources")',
                "scheduling.strategy: standard, or leave persistent_resource out",
            )
        )
    for role, pool in template.pools.by_role():
        if pool.reservation is not None:
            problems.append(
                Problem(
                    f"pools.{role}.reservation",
                    "a reservation on a job that runs on a persistent resource: its VMs are "
                    "the resource's (UNCONFIRMED that reservations combine with one)",
                    "remove the reservation",
                )
            )
    found = place(template_facts(template), rid, resource.pools, load_catalog())
    if not isinstance(found, Placement):
        problems += [Problem(m.path, m.message) for m in found]
    return problems
