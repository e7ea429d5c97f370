"""Rules on when and on what capacity a job runs: the scheduling strategy, timeouts and waits,
FLEX_START (Dynamic Workload Scheduler), reservations."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator

from jobs.core.catalog import Catalog
from jobs.core.durations import exact_duration
from jobs.core.naming import RFC1035_PATTERN
from jobs.core.problems import Problem
from jobs.custom_jobs.facts import JobFacts, PoolFacts
from jobs.spec.template import RESERVATION_NAME_KEY

STRATEGIES = ("STANDARD", "SPOT", "FLEX_START")


DEPRECATED_STRATEGIES = {"ON_DEMAND": "STANDARD", "LOW_COST": "SPOT"}


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
                f"{exact_duration(cap)}, not {exact_duration(value)}",
                f"timeout: {exact_duration(cap)} or less, resuming from checkpoints in a new job",
            )
    elif not math.isfinite(value) or value < bounds.min or value > bounds.max:
        yield Problem(
            job.path("timeout"),
            f"timeout must be between {exact_duration(bounds.min)} and "
            f"{exact_duration(bounds.max)}",
            f"e.g. 24h; the longest allowed is {exact_duration(bounds.max)}",
        )


def max_wait_bounds(job: JobFacts, cat: Catalog) -> Iterator[Problem]:
    """maxWaitDuration: 0 waits indefinitely, default 24 h (custom_job.proto)."""
    bounds = cat.limits.max_wait_s
    value = job.max_wait_s
    if value is not None and not (math.isfinite(value) and bounds.min <= value <= bounds.max):
        default = exact_duration(bounds.default or 0)
        example = '"86400s"' if job.rest else "24h"
        yield Problem(
            job.path("max_wait"),
            f"max wait must be a duration of 0 or more, at most {bounds.max:,}s",
            f"e.g. {job.key('max_wait')}: {example} (Vertex's default is {default}; 0 waits "
            "indefinitely)",
        )


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
        builtin = cat.builtin_accelerator(pool.machine)
        what = pool.accelerator or (builtin[0] if builtin else "no GPU")
        tpu = cat.machines[pool.machine or ""].is_tpu
        # A TPU Pod may not run on Spot either (tpus.tpu_spot_not_on_pods): STANDARD only.
        instead = "" if tpu else f" or {job.strategy_value('SPOT')}"
        yield Problem(
            pool.path("accelerator" if pool.accelerator else "machine"),
            f"FLEX_START (Dynamic Workload Scheduler) runs jobs on {_flex_start_gpus(cat)} "
            f"only; the {pool.role} pool has {what} ({pool.machine})",
            f"strategy: {job.strategy_value('STANDARD')}{instead}, or a "
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
    rf"(?P<name>{RFC1035_PATTERN})$"
)


RESERVATION_NAME = re.compile(rf"^{RFC1035_PATTERN}$")


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
