"""The rules in the order they run: every problem in a job, reported at once. The rules live by
what they judge (machines.py, scheduling.py, environment.py, metadata.py); each is a small function
yielding Problems that say what is wrong, where, and what to write instead.

Facts come from the catalog data files (machines, accelerators, regions, limits), each sourced in
docs/vertex-facts.md; rules never hard-code a machine or a price."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from jobs.core.catalog import Catalog
from jobs.core.problems import Problem
from jobs.custom_jobs.facts import JobFacts
from jobs.custom_jobs.rules.environment import (
    env_count,
    env_names_unique,
    env_names_valid,
    env_not_reserved,
    env_values_startable,
    no_plaintext_secrets,
    output_dir_is_a_gcs_folder,
    secret_names_valid,
)
from jobs.custom_jobs.rules.machines import (
    accelerator_fits_machine,
    accelerator_offered_in_region,
    boot_disk_valid,
    chief_pool_present,
    chief_single_replica,
    image_present,
    machine_offered_in_region,
    machine_type_known,
    machines_within_limit,
    no_persistent_disk_paths,
    reduction_server_rules,
    region_known,
    replicas_positive,
)
from jobs.custom_jobs.rules.metadata import display_name_valid, labels_valid
from jobs.custom_jobs.rules.scheduling import (
    flex_start_gpus,
    flex_start_only_fields,
    flex_start_same_machines,
    max_wait_bounds,
    reservation_affinity_valid,
    reservation_strategy,
    strategy_known,
    timeout_bounds,
)
from jobs.custom_jobs.rules.secret_values import no_secret_shaped_values
from jobs.custom_jobs.rules.tpus import (
    accelerator_in_api,
    tpu_machine_confirmed,
    tpu_one_pool_one_replica,
    tpu_pod_offered_in_region,
    tpu_spot_not_on_pods,
    tpu_topology_valid,
)

Rule = Callable[[JobFacts, Catalog], Iterator[Problem]]


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
        machines_within_limit,
        image_present,
        reduction_server_rules,
        tpu_machine_confirmed,
        accelerator_in_api,
        tpu_topology_valid,
        tpu_one_pool_one_replica,
        tpu_spot_not_on_pods,
        tpu_pod_offered_in_region,
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
        env_values_startable,
        no_plaintext_secrets,
        no_secret_shaped_values,
        secret_names_valid,
        output_dir_is_a_gcs_folder,
    )
}


def run_rules(job: JobFacts, cat: Catalog, skip: frozenset[str] = frozenset()) -> list[Problem]:
    problems: list[Problem] = []
    for name, rule in RULES.items():
        if name not in skip:
            problems.extend(rule(job, cat))
    return problems
