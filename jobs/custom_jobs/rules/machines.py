"""Rules on where a job runs: machines, accelerators and regions from the catalog, the worker
pools (chief, replicas, images, Reduction Server) and their disks. TPU rules: tpus.py."""

from __future__ import annotations

from collections.abc import Iterator

from jobs.core.catalog import REDUCTION_SERVER_IMAGE, Catalog, Region, closest
from jobs.core.problems import Problem
from jobs.custom_jobs.facts import JobFacts, PoolFacts


def _gpu_pool(pool: PoolFacts, cat: Catalog) -> bool:
    acc = cat.accelerators.get(pool.accelerator or "")
    return acc is not None and acc.kind == "gpu" and (pool.accelerator_count or 0) > 0


def machine_type_known(job: JobFacts, cat: Catalog) -> Iterator[Problem]:
    for pool in job.pools:
        if pool.machine is None:
            yield Problem(pool.path("machine"), "machine type is required", "e.g. n1-standard-4")
        elif pool.machine not in cat.machines:
            guess = closest(pool.machine, cat.machines)
            hint = f"did you mean {guess}?" if guess else "run `vtx catalog` for machine types"
            yield Problem(pool.path("machine"), f"unknown machine type {pool.machine!r}", hint)


def region_known(job: JobFacts, cat: Catalog) -> Iterator[Problem]:
    if job.region is not None and job.region not in cat.regions:
        guess = closest(job.region, cat.regions)
        hint = f"did you mean {guess}?" if guess else f"one of {', '.join(cat.regions)}"
        yield Problem(job.path("region"), f"region {job.region!r} is not in the catalog", hint)


def machine_offered_in_region(job: JobFacts, cat: Catalog) -> Iterator[Problem]:
    region = cat.regions.get(job.region or "")
    if region is None:
        return
    for pool in job.pools:
        machine = cat.machines.get(pool.machine or "")
        if machine is None or machine.family in region.families:
            continue
        where = ", ".join(r.name for r in cat.regions.values() if machine.family in r.families)
        if _unrecorded(machine.is_tpu, region, cat):
            yield Problem(
                pool.path("machine"),
                f"whether {region.name} offers {machine.name} ({machine.family}) for "
                f"{cat.purpose} is unknown: {_tpus_only(region, cat)}",
                f"use a region the catalog lists it in ({where or 'none'}), or a TPU machine "
                f"in {region.name}",
            )
            continue
        yield Problem(
            pool.path("machine"),
            f"{machine.name} ({machine.family}) is not offered for {cat.purpose} in "
            f"{region.name}{_tpus_there(region, cat)}",
            f"use a region that has it ({where or 'none in the catalog'}) or another machine "
            "family",
        )


def _unrecorded(is_tpu: bool, region: Region, cat: Catalog) -> bool:
    """Not in the catalog's record of the region: anything but a training TPU where the region
    is known only for its TPUs (regions.yaml `tpus_only_known`)."""
    return region.tpus_only_known and (not is_tpu or cat.purpose != "training")


def _tpus_only(region: Region, cat: Catalog) -> str:
    tpus = ", ".join(region.tpu_names(cat))
    return (
        f"the catalog knows {region.name} only for its TPUs for training ({tpus}), from "
        "Google's locations page; its GPUs and other machines are not recorded"
    )


def _tpus_there(region: Region, cat: Catalog) -> str:
    """Why a TPU is refused in a region known only for its TPUs: the TPUs it does have."""
    if not region.tpus_only_known:
        return ""
    return f" (its TPUs for training: {', '.join(region.tpu_names(cat))})"


def accelerator_fits_machine(job: JobFacts, cat: Catalog) -> Iterator[Problem]:
    for pool in job.pools:
        machine = cat.machines.get(pool.machine or "")
        if pool.accelerator is None:
            if pool.accelerator_count:
                yield Problem(
                    pool.path("accelerator_count"),
                    "accelerator count given without an accelerator type",
                    "set the accelerator type too, or remove the count",
                )
            elif machine is not None and machine.builtin and machine.names_accelerator:
                (acc, (count,)), *_ = machine.accelerators.items()
                yield Problem(
                    pool.path("accelerator"),
                    f"{machine.name} has built-in accelerators that the job must name",
                    f"{job.key('accelerator')}: {acc}, {job.key('accelerator_count')}: {count}",
                )
            continue
        if pool.accelerator not in cat.accelerators:
            guess = closest(pool.accelerator, cat.accelerators)
            hint = f"did you mean {guess}?" if guess else "run `vtx catalog` for accelerator types"
            yield Problem(
                pool.path("accelerator"), f"unknown accelerator {pool.accelerator!r}", hint
            )
            continue
        if machine is None:
            continue
        yield from _accelerator_on_machine(job, pool, machine.name, cat)


def _accelerator_on_machine(
    job: JobFacts, pool: PoolFacts, machine_name: str, cat: Catalog
) -> Iterator[Problem]:
    machine = cat.machines[machine_name]
    acc = pool.accelerator or ""
    allowed = machine.accelerators.get(acc)
    if allowed is None:
        if machine.builtin:
            builtin = next(iter(machine.accelerators))
            hint = f"{machine.name} comes with {builtin}; for {acc} use " + _machines_for(acc, cat)
        elif machine.accelerators:
            hint = f"{machine.name} takes {', '.join(machine.accelerators)}; for {acc} use "
            hint += _machines_for(acc, cat)
        else:
            hint = f"{machine.name} takes no accelerator; for {acc} use " + _machines_for(acc, cat)
        yield Problem(pool.path("accelerator"), f"{acc} cannot be attached to {machine.name}", hint)
        return
    count = pool.accelerator_count
    if count not in allowed:
        if machine.builtin:
            key = job.key("accelerator_count")
            hint = f"{machine.name} has exactly {allowed[0]}: write {key}: {allowed[0]}"
            others = [m.name for m in cat.machines_for(acc) if count in m.accelerators[acc]]
            if others:
                hint += f", or use {others[0]} for {count}"
        else:
            counts = [str(n) for n in allowed]
            if len(counts) > 8:  # cloud-tpu's Pod sizes: every multiple of 32
                counts = [*counts[:4], "...", counts[-1]]
            hint = f"allowed counts on {machine.name}: {', '.join(counts)}"
        yield Problem(
            pool.path("accelerator_count"),
            f"{count} x {acc} is not a valid count for {machine.name}",
            hint,
        )


def _machines_for(accelerator: str, cat: Catalog) -> str:
    names = [m.name for m in cat.machines_for(accelerator)]
    return ", ".join(names[:4]) + (" ..." if len(names) > 4 else "") if names else "`vtx catalog`"


def accelerator_offered_in_region(job: JobFacts, cat: Catalog) -> Iterator[Problem]:
    region = cat.regions.get(job.region or "")
    if region is None:
        return
    for pool in job.pools:
        acc = pool.accelerator
        known = cat.accelerators.get(acc or "")
        if known is None or known.name in region.accelerators:
            continue
        where = ", ".join(r.name for r in cat.regions.values() if known.name in r.accelerators)
        if _unrecorded(known.kind == "tpu", region, cat):
            yield Problem(
                pool.path("accelerator"),
                f"whether {region.name} offers {known.name} for {cat.purpose} is unknown: "
                f"{_tpus_only(region, cat)}",
                f"regions the catalog lists {known.name} in: {where or 'none'}",
            )
            continue
        yield Problem(
            pool.path("accelerator"),
            f"{known.name} is not offered for {cat.purpose} in {region.name}"
            f"{_tpus_there(region, cat)}",
            f"regions with {known.name}: {where or 'none in the catalog'}",
        )


def chief_pool_present(job: JobFacts, cat: Catalog) -> Iterator[Problem]:
    if job.pool("chief") is None:
        yield Problem(
            job.path("pools"),
            "the primary (chief) pool is missing: Vertex needs pool 0",
            "add the chief pool (position 0) with replicas 1",
        )


def chief_single_replica(job: JobFacts, cat: Catalog) -> Iterator[Problem]:
    chief = job.pool("chief")
    machine = cat.machines.get(chief.machine or "") if chief is not None else None
    if machine is not None and machine.is_tpu:
        return  # a TPU slice's replica count: tpus.tpu_one_pool_one_replica says what to write
    if chief is not None and chief.replicas is not None and chief.replicas != 1:
        yield Problem(
            chief.path("replicas"),
            f"the chief pool must have exactly 1 replica, not {chief.replicas}",
            f"{job.key('replicas')}: 1 for the chief, and a workers pool with "
            f"{job.key('replicas')}: {chief.replicas - 1}"
            if chief.replicas > 1
            else f"{job.key('replicas')}: 1",
        )


def replicas_positive(job: JobFacts, cat: Catalog) -> Iterator[Problem]:
    for pool in job.pools:
        if pool.role == "chief":
            continue
        if pool.replicas is None or pool.replicas < 1:
            yield Problem(
                pool.path("replicas"),
                f"the {pool.role} pool needs a replica count of at least 1",
                f"{job.key('replicas')}: N (N >= 1), or remove the pool",
            )


def machines_within_limit(job: JobFacts, cat: Catalog) -> Iterator[Problem]:
    """All pools' replicas together within the catalog's ``machines_max``: a count no quota
    covers is a typo, refused before it is priced, rendered or sent."""
    limit = cat.limits.machines_max
    counted = [(pool, pool.replicas) for pool in job.pools if (pool.replicas or 0) > 0]
    total = sum(count for _, count in counted)
    if total <= limit:
        return
    largest = max(counted, key=lambda item: item[1])[0]
    pools = ", ".join(f"{pool.role} {count:,}" for pool, count in counted)
    yield Problem(
        largest.path("replicas"),
        f"the job asks for {total:,} machines at once ({pools}); vtx takes at most {limit:,} "
        "in one job: each is a VM on the region's quota (limits.yaml machines_max)",
        f"{job.key('replicas')}: the machines this pool needs, e.g. 2",
    )


def image_present(job: JobFacts, cat: Catalog) -> Iterator[Problem]:
    for pool in job.pools:
        if pool.image is None:
            yield Problem(
                pool.path("image"),
                f"the {pool.role} pool has no container image",
                f"{job.key('image')}: a full image URI"
                if job.rest
                else "image: NAME (in the stack's Artifact Registry) or a full image URI",
            )


def reduction_server_rules(job: JobFacts, cat: Catalog) -> Iterator[Problem]:
    rs = job.pool("reduction_server")
    if rs is None:
        return
    workers = job.pool("workers")
    if workers is None:
        yield Problem(
            rs.path("pool"),
            "a Reduction Server pool needs a workers pool: it reduces gradients between nodes",
            f"add {'workerPoolSpecs[1]' if job.rest else 'pools.workers'} (GPU machines), "
            "or remove the reduction server",
        )
    for pool in (job.pool("chief"), workers):
        if pool is not None and pool.accelerator and not _gpu_pool(pool, cat):
            yield Problem(
                pool.path("accelerator"),
                "a Reduction Server needs GPU chief and workers (it speeds up NCCL all-reduce)",
                "use GPU machines for the chief and workers, or remove the reduction server",
            )
        elif pool is not None and not pool.accelerator:
            yield Problem(
                pool.path("machine"),
                f"a Reduction Server needs GPUs on the {pool.role}, which has none",
                "add a GPU accelerator to this pool, or remove the reduction server",
            )
    if rs.accelerator:
        yield Problem(
            rs.path("accelerator"),
            "Reduction Server replicas run on CPU machines",
            "remove the accelerator; n1-highcpu-16 is the recommended machine",
        )
    if rs.image is not None and not REDUCTION_SERVER_IMAGE.match(rs.image):
        image = cat.reduction_server_image(job.region)
        yield Problem(
            rs.path("image"),
            f"the Reduction Server pool must run Google's reduction server image, not {rs.image}",
            f"{job.key('image')}: {image}" + ("" if job.rest else " (or leave image out)"),
        )


def boot_disk_valid(job: JobFacts, cat: Catalog) -> Iterator[Problem]:
    limits = cat.limits
    size = limits.boot_disk_size_gb
    for pool in job.pools:
        takes = cat.boot_disk_types(pool.machine)
        if pool.boot_disk_type is not None and pool.boot_disk_type not in limits.boot_disk_types:
            yield Problem(
                pool.path("boot_disk_type"),
                f"unknown boot disk type {pool.boot_disk_type!r}",
                f"one of {', '.join(limits.boot_disk_types)}",
            )
        elif pool.boot_disk_type is not None and pool.boot_disk_type not in takes:
            yield Problem(
                pool.path("boot_disk_type"),
                f"{pool.machine} takes {' or '.join(takes)} boot disks, not {pool.boot_disk_type}",
                f"type: {takes[0]}, or leave type out (the machine's default)",
            )
        if pool.boot_disk_size_gb is not None and not (
            size.min <= pool.boot_disk_size_gb <= size.max
        ):
            yield Problem(
                pool.path("boot_disk_size_gb"),
                f"boot disk size {pool.boot_disk_size_gb} GB is outside {size.min}..{size.max}",
                f"{size.min} to {size.max} GB; data and checkpoints belong on gs://",
            )


def no_persistent_disk_paths(job: JobFacts, cat: Catalog) -> Iterator[Problem]:
    for pool in job.pools:
        values = [(v, p) for _, v, p in pool.env] + pool.args
        for value, path in values:
            if "/mnt/disks/" in value:
                yield Problem(
                    path,
                    "CustomJob has no persistent disk: /mnt/disks/... does not exist",
                    "write checkpoints to gs:// via AIP_CHECKPOINT_DIR (or /gcs/BUCKET/...)",
                )
