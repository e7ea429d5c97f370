"""Validation rules over JobFacts. Each rule is a small function yielding Problems that say
what is wrong, where, and what to write instead. `RULES` is the ordered registry.

Facts come from the catalog data files (machines, accelerators, regions, limits), each sourced in
docs/vertex-facts.md; rules never hard-code a machine or a price."""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Callable, Iterator

from jobs.core.catalog import REDUCTION_SERVER_IMAGE, Catalog, closest, vertex_limits
from jobs.core.contract import VTX_SECRETS_ENV
from jobs.core.credentials import looks_like_credential_name, looks_like_key
from jobs.core.durations import human_duration
from jobs.core.problems import Problem
from jobs.spec.template import RESERVATION_NAME_KEY
from jobs.training.facts import JobFacts, PoolFacts

Rule = Callable[[JobFacts, Catalog], Iterator[Problem]]

STRATEGIES = ("STANDARD", "SPOT", "FLEX_START")
DEPRECATED_STRATEGIES = {"ON_DEMAND": "STANDARD", "LOW_COST": "SPOT"}
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
LABEL_KEY = re.compile(vertex_limits().label_key_pattern)
LABEL_VALUE = re.compile(vertex_limits().label_value_pattern)
# Variables Vertex sets itself (docs/vertex-facts.md, "Training container environment"): a
# template that sets them would hide the platform's values from the trainer.
RESERVED_ENV = re.compile(
    r"^(AIP_\w+|CLUSTER_SPEC|TF_CONFIG|MASTER_ADDR|MASTER_PORT|WORLD_SIZE|RANK|CLOUD_ML_\w+)$"
)


def _secrets_hint(name: str) -> str:
    secret = name.lower().replace("_", "-")
    return f"`secrets: {{{name}: {secret}}}` (a Secret Manager secret name), not env"


def _gpu_pool(pool: PoolFacts, cat: Catalog) -> bool:
    acc = cat.accelerators.get(pool.accelerator or "")
    return acc is not None and acc.kind == "gpu" and (pool.accelerator_count or 0) > 0


# ---- machines and accelerators ------------------------------------------------------------


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
        if machine is not None and machine.family not in region.families:
            where = [r.name for r in cat.regions.values() if machine.family in r.families]
            yield Problem(
                pool.path("machine"),
                f"{machine.name} ({machine.family}) is not offered for training in {region.name}",
                f"use a region that has it ({', '.join(where)}) or another machine family",
            )


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
            elif machine is not None and machine.builtin:
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
            hint = f"allowed counts on {machine.name}: {', '.join(map(str, allowed))}"
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
        if acc in cat.accelerators and acc not in region.accelerators:
            where = [r.name for r in cat.regions.values() if acc in r.accelerators]
            yield Problem(
                pool.path("accelerator"),
                f"{acc} is not offered for training in {region.name}",
                f"regions with {acc}: {', '.join(where) or 'none in the catalog'}",
            )


# ---- pools ----------------------------------------------------------------------------------


def chief_pool_present(job: JobFacts, cat: Catalog) -> Iterator[Problem]:
    if job.pool("chief") is None:
        yield Problem(
            job.path("pools"),
            "the primary (chief) pool is missing: Vertex needs pool 0",
            "add the chief pool (position 0) with replicas 1",
        )


def chief_single_replica(job: JobFacts, cat: Catalog) -> Iterator[Problem]:
    chief = job.pool("chief")
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


def tpu_rules(job: JobFacts, cat: Catalog) -> Iterator[Problem]:
    for pool in job.pools:
        machine = cat.machines.get(pool.machine or "")
        if machine is None:
            continue
        if not machine.is_tpu:
            if pool.tpu_topology:
                yield Problem(
                    pool.path("tpu_topology"),
                    f"tpu topology is only for TPU machines, not {machine.name}",
                    "remove it",
                )
            continue
        if pool.tpu_topology not in machine.tpu_topologies:
            yield Problem(
                pool.path("tpu_topology"),
                f"{machine.name} needs tpu topology {machine.tpu_topologies[0]}"
                + (f", not {pool.tpu_topology!r}" if pool.tpu_topology else ""),
                f"{job.key('tpu_topology')}: {machine.tpu_topologies[0]}",
            )
        if pool.replicas not in (None, 1):
            yield Problem(
                pool.path("replicas"),
                f"a TPU pool ({machine.name}) runs as one replica",
                f"{job.key('replicas')}: 1 (pick a larger slice for more chips)",
            )
        if job.strategy == "SPOT":
            yield Problem(
                job.path("strategy"),
                f"Spot is not available for TPU pods ({machine.name})",
                # Not FLEX_START: Dynamic Workload Scheduler runs GPU jobs only (schedule-jobs-dws).
                f"strategy: {job.strategy_value('STANDARD')} for TPU jobs",
            )


# ---- scheduling ---------------------------------------------------------------------------


def strategy_known(job: JobFacts, cat: Catalog) -> Iterator[Problem]:
    if job.strategy is None or job.strategy in STRATEGIES:
        return
    if job.strategy in DEPRECATED_STRATEGIES:
        new = DEPRECATED_STRATEGIES[job.strategy]
        yield Problem(
            job.path("strategy"),
            f"strategy {job.strategy} is deprecated",
            f"strategy: {job.strategy_value(new)}",
        )
    else:
        yield Problem(
            job.path("strategy"),
            f"unknown scheduling strategy {job.strategy!r}",
            "one of " + ", ".join(job.strategy_value(s) for s in STRATEGIES),
        )


def flex_start_only_fields(job: JobFacts, cat: Catalog) -> Iterator[Problem]:
    if job.max_wait_s is not None and job.strategy != "FLEX_START":
        yield Problem(
            job.path("max_wait"),
            "max wait duration only applies to FLEX_START jobs",
            f"set strategy: {job.strategy_value('FLEX_START')}, or remove the max wait",
        )


def timeout_bounds(job: JobFacts, cat: Catalog) -> Iterator[Problem]:
    """The general cap is UNCONFIRMED (limits.yaml); FLEX_START's 7 days is documented."""
    bounds = cat.limits.timeout_s
    value = job.timeout_s
    if value is None:
        return
    if job.strategy == "FLEX_START" and bounds.min <= value <= bounds.max:
        cap = cat.limits.flex_start_timeout_max_s
        if value > cap:
            yield Problem(
                job.path("timeout"),
                f"a FLEX_START (Dynamic Workload Scheduler) job's timeout is at most "
                f"{human_duration(cap)}, not {human_duration(value)}",
                f"timeout: {human_duration(cap)} or less, resuming from checkpoints in a new job",
            )
    elif not math.isfinite(value) or value < bounds.min or value > bounds.max:
        yield Problem(
            job.path("timeout"),
            f"timeout must be between {human_duration(bounds.min)} and "
            f"{human_duration(bounds.max)}",
            f"e.g. 24h; the longest allowed is {human_duration(bounds.max)}",
        )


def max_wait_bounds(job: JobFacts, cat: Catalog) -> Iterator[Problem]:
    """maxWaitDuration: 0 waits indefinitely, default 24 h (custom_job.proto)."""
    bounds = cat.limits.max_wait_s
    value = job.max_wait_s
    if value is not None and not (math.isfinite(value) and bounds.min <= value <= bounds.max):
        default = human_duration(bounds.default or 0)
        example = '"86400s"' if job.rest else "24h"
        yield Problem(
            job.path("max_wait"),
            f"max wait must be a duration of 0 or more, at most {bounds.max:,}s",
            f"e.g. {job.key('max_wait')}: {example} (Vertex's default is {default}; 0 waits "
            "indefinitely)",
        )


# ---- FLEX_START (Dynamic Workload Scheduler) -----------------------------------------------
# Source: https://cloud.google.com/vertex-ai/docs/training/schedule-jobs-dws, "Requirements"
# (read 2026-11-23): L4, A100, H100, H200 or B200 GPUs; a timeout of 7 days or less (in
# timeout_bounds); the same machine configuration for all worker pools.


def _flex_start_gpus(cat: Catalog) -> str:
    return ", ".join(a.name for a in cat.accelerators.values() if a.flex_start)


def _machine_config(pool: PoolFacts) -> tuple[str | None, str | None, int | None, str | None]:
    return pool.machine, pool.accelerator, pool.accelerator_count, pool.tpu_topology


def _describe_machine(pool: PoolFacts) -> str:
    if pool.accelerator is None:
        return f"{pool.machine} without accelerators"
    return f"{pool.machine} with {pool.accelerator_count} x {pool.accelerator}"


def flex_start_gpus(job: JobFacts, cat: Catalog) -> Iterator[Problem]:
    """The first pool only: flex_start_same_machines holds every other pool to it."""
    if job.strategy != "FLEX_START" or not job.pools:
        return
    pool = job.pools[0]
    acc = cat.accelerators.get(pool.accelerator or "")
    if pool.machine not in cat.machines or (pool.accelerator and acc is None):
        return  # an unknown machine or accelerator is reported by its own rule
    if acc is None or not acc.flex_start:
        what = pool.accelerator or "no GPU"
        yield Problem(
            pool.path("accelerator" if pool.accelerator else "machine"),
            f"FLEX_START (Dynamic Workload Scheduler) runs jobs on {_flex_start_gpus(cat)} "
            f"only; the {pool.role} pool has {what} ({pool.machine})",
            f"strategy: {job.strategy_value('STANDARD')} or {job.strategy_value('SPOT')}, or a "
            "machine with one of those GPUs (e.g. g2-standard-8, one L4)",
        )


def flex_start_same_machines(job: JobFacts, cat: Catalog) -> Iterator[Problem]:
    if job.strategy != "FLEX_START" or not job.pools:
        return
    first = job.pools[0]
    for pool in job.pools[1:]:
        if _machine_config(pool) != _machine_config(first):
            same = f"{job.key('machine')}: {first.machine}"
            if first.accelerator:
                same += (
                    f", {job.key('accelerator')}: {first.accelerator}, "
                    f"{job.key('accelerator_count')}: {first.accelerator_count}"
                )
            same += f" (as the {first.role})"
            if pool.role == "reduction_server":
                same = "remove the Reduction Server pool (it runs on CPUs)"
            yield Problem(
                pool.path("machine"),
                "a FLEX_START job uses the same machine configuration in every pool: the "
                f"{pool.role} pool has {_describe_machine(pool)}, the {first.role} pool "
                f"{_describe_machine(first)}",
                f"{same}, or strategy: {job.strategy_value('STANDARD')}",
            )


# ---- reservations ---------------------------------------------------------------------------
# Sources, read 2026-11-23: ReservationAffinity in the installed v1 protos
# (google/cloud/aiplatform_v1/types/reservation_affinity.py: the type is required,
# TYPE_UNSPECIFIED "should not be used"; SPECIFIC_RESERVATION "must be identified via the key and
# values fields"; values "must be the full resource name of the reservation", which the SDK
# writes projects/{project_id_or_number}/zones/{zone}/reservations/{reservation_name});
# Compute Engine's reservation names are RFC 1035, 1-63 characters (compute v1 Reservation);
# https://cloud.google.com/compute/docs/instances/reservations-consume ("You can't consume a
# reservation to create Spot VMs"); https://cloud.google.com/vertex-ai/docs/training/use-reservations
# (Dynamic Workload Scheduler's flex-start does not run on reservations).

CONSUMING = ("ANY_RESERVATION", "SPECIFIC_RESERVATION")
AFFINITY_TYPES = ("NO_RESERVATION", *CONSUMING)
RESERVATION_RESOURCE = re.compile(
    r"^projects/(?P<project>[^/]+)/zones/(?P<zone>[a-z]+-[a-z]+\d+-[a-z])/reservations/"
    r"(?P<name>[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?)$"
)
RESERVATION_NAME = re.compile(r"^[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?$")


def _reservation_hint(job: JobFacts, name: str = "NAME") -> str:
    values = job.key("reservation_values")
    return f"{values}: [projects/PROJECT/zones/ZONE/reservations/{name}] (its project, its zone)"


def reservation_affinity_valid(job: JobFacts, cat: Catalog) -> Iterator[Problem]:
    for pool in job.pools:
        affinity = pool.reservation_affinity
        if affinity == "TYPE_UNSPECIFIED":
            yield Problem(
                pool.path("reservation_affinity"),
                "a reservation affinity needs its type (TYPE_UNSPECIFIED is not accepted)",
                f"{job.key('reservation_affinity')}: one of "
                + ", ".join(job.affinity_value(a) for a in AFFINITY_TYPES),
            )
        elif affinity == "SPECIFIC_RESERVATION":
            yield from _specific_reservation(job, pool)


def _specific_reservation(job: JobFacts, pool: PoolFacts) -> Iterator[Problem]:
    if not pool.reservation_key:
        yield Problem(
            pool.path("reservation_key"),
            "a SPECIFIC_RESERVATION names its reservation with key and values; key is missing",
            f"{job.key('reservation_key')}: {RESERVATION_NAME_KEY}",
        )
    if not pool.reservation_values:
        yield Problem(
            pool.path("reservation_values"),
            "a SPECIFIC_RESERVATION names the reservation(s) to consume; values is empty",
            _reservation_hint(job),
        )
    if pool.reservation_key != RESERVATION_NAME_KEY:
        return  # values of another label key are label values, not names
    for value, path in pool.reservation_values:
        match = RESERVATION_RESOURCE.match(value)
        if match is None:
            bare = value if RESERVATION_NAME.match(value) else "NAME"
            yield Problem(
                path,
                f"{value!r} is not a reservation's full resource name "
                "(projects/P/zones/Z/reservations/NAME, the name lower case, at most 63)",
                _reservation_hint(job, bare),
            )
        elif job.region and not match["zone"].startswith(f"{job.region}-"):
            yield Problem(
                path,
                f"reservation {match['name']} holds capacity in {match['zone']}, which is not in "
                f"{job.region}, where this job runs",
                f"a reservation in a {job.region} zone, or run the job in the reservation's region",
            )


def reservation_strategy(job: JobFacts, cat: Catalog) -> Iterator[Problem]:
    why = {
        "SPOT": "Spot VMs cannot consume a reservation",
        "FLEX_START": "Dynamic Workload Scheduler's flex-start does not run on reservations",
    }.get(job.strategy or "")
    if why is None:
        return
    for pool in job.pools:
        if pool.reservation_affinity in CONSUMING:
            yield Problem(
                pool.path("reservation_affinity"),
                f"the {pool.role} pool consumes a reservation in a {job.strategy} job: {why}",
                f"strategy: {job.strategy_value('STANDARD')} (the reservation holds the "
                f"capacity), or {job.key('reservation_affinity')}: "
                f"{job.affinity_value('NO_RESERVATION')}",
            )


# ---- disks --------------------------------------------------------------------------------


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


# ---- environment ----------------------------------------------------------------------------


def env_count(job: JobFacts, cat: Catalog) -> Iterator[Problem]:
    limit = cat.limits.env_vars_max
    for pool in job.pools:
        if len(pool.env) > limit:
            yield Problem(
                pool.path("env"),
                f"{len(pool.env)} environment variables; Vertex accepts at most {limit}",
                "move configuration into a config file or args",
            )


def env_names_valid(job: JobFacts, cat: Catalog) -> Iterator[Problem]:
    limit = cat.limits.env_name_max_chars
    for pool in job.pools:
        for name, _, path in pool.env:
            if not name:
                hint = "e.g. name: MY_VAR" if job.rest else "e.g. MY_VAR: value"
                yield Problem(path, "environment variable without a name", hint)
            elif not ENV_NAME.match(name):
                fixed = re.sub(r"\W", "_", name).upper()
                if not ENV_NAME.match(fixed):  # empty, or starts with a digit
                    fixed = f"_{fixed}" if fixed else "MY_VAR"
                yield Problem(path, f"invalid environment variable name {name!r}", f"e.g. {fixed}")
            elif len(name) > limit:
                yield Problem(path, f"environment variable name longer than {limit}", "shorten it")


def env_names_unique(job: JobFacts, cat: Catalog) -> Iterator[Problem]:
    for pool in job.pools:
        counts = Counter(name for name, _, _ in pool.env)
        seen: set[str] = set()
        for name, _, path in pool.env:
            if counts[name] > 1 and name in seen:
                yield Problem(path, f"environment variable {name} is set twice", "keep one")
            seen.add(name)
        for name in job.secret_env:
            if name in counts:
                yield Problem(
                    f"{job.path('secrets')}.{name}",
                    f"{name} is both in env and in secrets",
                    "keep it only in secrets",
                )


def env_not_reserved(job: JobFacts, cat: Catalog) -> Iterator[Problem]:
    for pool in job.pools:
        for name, _, path in pool.env:
            if RESERVED_ENV.match(name):
                yield Problem(
                    path,
                    f"{name} is set by Vertex itself; setting it hides the platform's value",
                    "remove it (the stack sets baseOutputDirectory, which sets AIP_*_DIR)",
                )


def no_plaintext_secrets(job: JobFacts, cat: Catalog) -> Iterator[Problem]:
    for pool in job.pools:
        for name, value, path in pool.env:
            if name == VTX_SECRETS_ENV or not value:
                continue
            if name == "GOOGLE_APPLICATION_CREDENTIALS":
                yield Problem(
                    path,
                    "service account key files are not used: the job runs as the stack's "
                    "trainer service account",
                    "remove GOOGLE_APPLICATION_CREDENTIALS",
                )
            elif looks_like_credential_name(name):
                yield Problem(
                    path, f"{name} looks like a credential in plain text", _secrets_hint(name)
                )
            elif looks_like_key(value):
                yield Problem(path, f"the value of {name} looks like a key", _secrets_hint(name))
        for value, path in pool.args:
            if looks_like_key(value):
                yield Problem(
                    path,
                    "this argument looks like a key in plain text",
                    "put the key in Secret Manager, name it under `secrets:` and read the env "
                    "variable in the trainer",
                )


SECRET_NAME = re.compile(
    r"^([A-Za-z0-9_-]{1,255}|projects/[^/]+/secrets/[A-Za-z0-9_-]{1,255}(/versions/[^/]+)?)$"
)
"""A Secret Manager secret id, or its full resource name (optionally a version)."""


def _secret_ref_problems(path: str, env_name: str, ref: object, who: str = "") -> Iterator[Problem]:
    """Problems of one reference; ``who`` names the entry where ``path`` does not."""
    name = env_name.lower().replace("_", "-")
    hint = (
        f"secrets: {{{env_name}: {name}}}, after storing the value in Secret Manager "
        f"(`gcloud secrets create {name} --data-file=-`)"
    )
    if isinstance(ref, str) and looks_like_key(ref):
        yield Problem(path, f"{who}this looks like the secret's value, not its name", hint)
    elif not isinstance(ref, str) or not SECRET_NAME.match(ref):
        yield Problem(
            path,
            f"{who}not a Secret Manager secret name (letters, digits, '_' and '-', at most 255)",
            hint,
        )


_VTX_SECRETS_HINT = (
    "names only: ENV_NAME=SECRET_ID[,...] or a JSON object of them (a vtx template writes it "
    "from `secrets:`)"
)


def _vtx_secrets_problems(raw: str, path: str) -> Iterator[Problem]:
    """What the trainer would refuse in a REST job's VTX_SECRETS (see trainer/config/secrets.py)."""
    raw = raw.strip()
    entries: list[tuple[int, object, object]] = []
    if raw.startswith("{"):
        try:
            refs = json.loads(raw)
        except json.JSONDecodeError:
            refs = None
        if not isinstance(refs, dict):
            yield Problem(path, f"{VTX_SECRETS_ENV} is not a JSON object", _VTX_SECRETS_HINT)
            return
        entries = [(i, name, ref) for i, (name, ref) in enumerate(refs.items(), 1)]
    elif raw:
        for i, item in enumerate(raw.split(","), 1):
            name, sep, ref = item.strip().partition("=")
            if sep:
                entries.append((i, name.strip(), ref.strip()))
            else:
                yield Problem(
                    path, f"{VTX_SECRETS_ENV} entry {i} is not ENV_NAME=SECRET", _VTX_SECRETS_HINT
                )
    for i, name, ref in entries:
        if not isinstance(name, str) or not ENV_NAME.match(name) or looks_like_key(name):
            yield Problem(
                path,
                f"{VTX_SECRETS_ENV} entry {i} does not start with an environment variable name",
                _VTX_SECRETS_HINT,
            )
        else:
            yield from _secret_ref_problems(path, name, ref, f"{VTX_SECRETS_ENV} {name}: ")


def secret_names_valid(job: JobFacts, cat: Catalog) -> Iterator[Problem]:
    """``secrets:`` maps env names to secret *names*; a value written there would travel in
    the job's VTX_SECRETS as plain text. Neither is echoed back. A REST job carries the same
    names in its VTX_SECRETS variable: that is checked as the trainer will read it."""
    for env_name, secret in job.secret_env.items():
        if looks_like_key(env_name):
            yield Problem(
                job.path("secrets"),
                "a name under secrets looks like a key, not an environment variable",
                "secrets: {ENV_NAME: secret-id}",
            )
        elif not ENV_NAME.match(env_name):
            fixed = re.sub(r"\W", "_", env_name).upper()
            yield Problem(
                f"{job.path('secrets')}.{env_name}",
                f"invalid environment variable name {env_name!r}",
                f"e.g. {fixed if ENV_NAME.match(fixed) else 'MY_TOKEN'}",
            )
        else:
            yield from _secret_ref_problems(f"{job.path('secrets')}.{env_name}", env_name, secret)
    seen: set[str] = set()  # a template's shared env reaches every pool with one path
    for pool in job.pools:
        for name, value, path in pool.env:
            if name == VTX_SECRETS_ENV and path not in seen:
                seen.add(path)
                yield from _vtx_secrets_problems(value, path)


# ---- metadata -----------------------------------------------------------------------------


def display_name_valid(job: JobFacts, cat: Catalog) -> Iterator[Problem]:
    limit = cat.limits.display_name_max_chars
    if not job.display_name:
        yield Problem(job.path("display_name"), "a name is required", "e.g. llama-lora")
    elif len(job.display_name) > limit:
        yield Problem(
            job.path("display_name"),
            f"name is {len(job.display_name)} characters; the limit is {limit}",
            "shorten it",
        )


def labels_valid(job: JobFacts, cat: Catalog) -> Iterator[Problem]:
    limits = cat.limits
    if len(job.labels) > limits.labels_max:
        yield Problem(job.path("labels"), f"more than {limits.labels_max} labels", "drop some")
    for key, value in job.labels.items():
        path = f"{job.path('labels')}.{key}"
        if not LABEL_KEY.match(key) or len(key) > limits.label_max_chars:
            fixed = re.sub(r"[^a-z0-9_-]", "-", key.lower())[: limits.label_max_chars]
            yield Problem(
                path,
                f"invalid label key {key!r}: lower case letters, digits, '_' and '-', starting "
                f"with a letter, at most {limits.label_max_chars} characters",
                f"e.g. {fixed or 'team'}",
            )
        if not LABEL_VALUE.match(value) or len(value) > limits.label_max_chars:
            fixed = re.sub(r"[^a-z0-9_-]", "-", value.lower())[: limits.label_max_chars]
            yield Problem(
                path,
                f"invalid label value {value!r}: lower case letters, digits, '_' and '-', at most "
                f"{limits.label_max_chars} characters",
                f"e.g. {fixed}",
            )


RULES: dict[str, Rule] = {
    rule.__name__: rule
    for rule in (
        display_name_valid,
        labels_valid,
        region_known,
        chief_pool_present,
        machine_type_known,
        machine_offered_in_region,
        accelerator_fits_machine,
        accelerator_offered_in_region,
        chief_single_replica,
        replicas_positive,
        image_present,
        reduction_server_rules,
        tpu_rules,
        strategy_known,
        flex_start_only_fields,
        flex_start_gpus,
        flex_start_same_machines,
        timeout_bounds,
        max_wait_bounds,
        reservation_affinity_valid,
        reservation_strategy,
        boot_disk_valid,
        no_persistent_disk_paths,
        env_count,
        env_names_valid,
        env_names_unique,
        env_not_reserved,
        no_plaintext_secrets,
        secret_names_valid,
    )
}


def run_rules(job: JobFacts, cat: Catalog, skip: frozenset[str] = frozenset()) -> list[Problem]:
    problems: list[Problem] = []
    for name, rule in RULES.items():
        if name not in skip:
            problems.extend(rule(job, cat))
    return problems
