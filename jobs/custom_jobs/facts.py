"""JobFacts: the format-neutral view of a job that validation rules read.

A job arrives as a vtx template or as a REST/gcloud CustomJob; the rules in
`jobs/custom_jobs/rules/` are
written once against this view, and every fact carries the path of the field it came from in the
document the user wrote, so a problem points at *their* file (``pools.chief.accelerator_count``
in a template, ``workerPoolSpecs[0].machineSpec.acceleratorCount`` in gcloud YAML).

Builders are lenient on purpose: a field of the wrong type becomes ``None`` here (the structural
check reports it), so the rules still run and every problem is reported at once."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from jobs.core.catalog import Catalog, load_catalog
from jobs.core.document_strings import DocString, document_strings
from jobs.core.durations import parse_duration_s
from jobs.spec.template import AFFINITIES, RESERVATION_NAME_KEY, ROLES, BootDisk, JobTemplate, Pool

REST_KEYS = {
    "machine": "machineType",
    "accelerator": "acceleratorType",
    "accelerator_count": "acceleratorCount",
    "replicas": "replicaCount",
    "tpu_topology": "tpuTopology",
    "strategy": "strategy",
    "max_wait": "maxWaitDuration",
    "image": "imageUri",
    "reservation": "reservationAffinity",
    "reservation_affinity": "reservationAffinityType",
    "reservation_key": "key",
    "reservation_values": "values",
}
TEMPLATE_KEYS = {
    "reservation_affinity": "affinity",
    "reservation_key": "key",
    "reservation_values": "values",
}
"""Facts whose name is not the template's own key (reservation fields sit under ``reservation``)."""


@dataclass
class PoolFacts:
    role: str
    paths: dict[str, str]
    """Fact name -> path in the source document (see ``path``)."""
    machine: str | None = None
    accelerator: str | None = None
    accelerator_count: int | None = None
    replicas: int | None = None
    tpu_topology: str | None = None
    reservation_affinity: str | None = None
    """The API's ``reservationAffinityType`` (NO_RESERVATION, ANY_RESERVATION,
    SPECIFIC_RESERVATION; TYPE_UNSPECIFIED when an affinity names none); None: no affinity."""
    reservation_key: str | None = None
    reservation_values: list[tuple[str, str]] = field(default_factory=list)
    """(value, path) per reservation the affinity names."""
    boot_disk_type: str | None = None
    boot_disk_size_gb: int | None = None
    image: str | None = None
    env: list[tuple[str, str, str]] = field(default_factory=list)
    """(name, value, path) per environment variable, in order."""
    args: list[tuple[str, str]] = field(default_factory=list)
    """(value, path) for command and args entries."""

    def path(self, fact: str) -> str:
        return self.paths.get(fact, self.paths["pool"])


@dataclass
class JobFacts:
    paths: dict[str, str]
    display_name: str | None = None
    region: str | None = None
    pools: list[PoolFacts] = field(default_factory=list)
    strategy: str | None = None
    """Upper case as in the API: STANDARD, SPOT, FLEX_START (or a deprecated/unknown value)."""
    timeout_s: float | None = None
    max_wait_s: float | None = None
    labels: dict[str, str] = field(default_factory=dict)
    secret_env: dict[str, str] = field(default_factory=dict)
    """Template ``secrets:`` (env name -> secret name): names only, never values."""
    output_dir: str | None = None
    """``baseOutputDirectory.outputUriPrefix`` where a document sets it (vtx launch sets the
    stack's)."""
    strings: list[DocString] = field(default_factory=list)
    """Every string in the document (env, args, labels, study values, any field, mapping keys)
    with its path: what the credential-shape rule reads."""
    rest: bool = False
    """True for REST/gcloud documents: hints then use camelCase keys and enum names."""
    persistent_resource: str | None = None
    """The persistent resource the job runs on (``persistentResourceId``), if any: it then adds
    nothing to the bill (`jobs.pricing.estimates`)."""

    def path(self, fact: str) -> str:
        return self.paths[fact]

    def key(self, fact: str) -> str:
        """How the user writes a field in this document's form (for hints)."""
        return REST_KEYS.get(fact, fact) if self.rest else TEMPLATE_KEYS.get(fact, fact)

    def strategy_value(self, strategy: str) -> str:
        return strategy if self.rest else strategy.lower()

    def affinity_value(self, affinity: str) -> str:
        """SPECIFIC_RESERVATION as this document writes it (``specific`` in a template)."""
        if self.rest:
            return affinity
        return next((k for k, v in AFFINITIES.items() if v == affinity), affinity)

    def pool(self, role: str) -> PoolFacts | None:
        return next((p for p in self.pools if p.role == role), None)


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    # int64 fields arrive as JSON strings in REST form. A longer string is beyond any 64-bit
    # integer (the structural check says so) and int() of 4,300 digits or more raises.
    if isinstance(value, str) and len(value) <= 32 and value.strip().lstrip("-").isdigit():
        return int(value)
    return None


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def _scalar_str(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, bool | int | float):
        return str(value).lower() if isinstance(value, bool) else str(value)
    return None


_TEMPLATE_DEFAULTS = {
    "replicas": Pool.model_fields["replicas"].default,
    "boot_disk_type": BootDisk.model_fields["type"].default,
    "boot_disk_size_gb": BootDisk.model_fields["size_gb"].default,
}
"""What a template means when it leaves a field out: the model's defaults, read, not copied."""


def _reservation_paths(prefix: str, type_key: str) -> dict[str, str]:
    return {
        "reservation": prefix,
        "reservation_affinity": f"{prefix}.{type_key}",
        "reservation_key": f"{prefix}.key",
        "reservation_values": f"{prefix}.values",
    }


def _set_reservation(pool: PoolFacts, affinity: str, key: str | None, values: list) -> None:
    pool.reservation_affinity = affinity
    pool.reservation_key = key
    where = pool.paths["reservation_values"]
    pool.reservation_values = [(v, f"{where}[{i}]") for i, v in enumerate(values) if _str(v)]


# ---- REST / gcloud form -------------------------------------------------------------------


def _rest_pool(role: str, spec: dict, prefix: str) -> PoolFacts:
    machine = _dict(spec.get("machineSpec"))
    disk = _dict(spec.get("diskSpec"))
    container_key = "pythonPackageSpec" if "pythonPackageSpec" in spec else "containerSpec"
    container = _dict(spec.get(container_key))
    image_key = "imageUri" if container_key == "containerSpec" else "executorImageUri"
    m, d, c = f"{prefix}.machineSpec", f"{prefix}.diskSpec", f"{prefix}.{container_key}"
    pool = PoolFacts(
        role=role,
        paths={
            "pool": prefix,
            "machine": f"{m}.machineType",
            "accelerator": f"{m}.acceleratorType",
            "accelerator_count": f"{m}.acceleratorCount",
            "replicas": f"{prefix}.replicaCount",
            "tpu_topology": f"{m}.tpuTopology",
            "boot_disk_type": f"{d}.bootDiskType",
            "boot_disk_size_gb": f"{d}.bootDiskSizeGb",
            "image": f"{c}.{image_key}",
            "env": f"{c}.env",
            **_reservation_paths(f"{m}.reservationAffinity", "reservationAffinityType"),
        },
        machine=_str(machine.get("machineType")),
        accelerator=_str(machine.get("acceleratorType")),
        accelerator_count=_int(machine.get("acceleratorCount")),
        # Absent is proto3's 0 (the API's JSON leaves a 0 out): the primary pool must say 1
        # (docs/vertex-facts.md, "Training container environment"), the others at least 1.
        replicas=_int(spec.get("replicaCount", 0 if role == "chief" else None)),
        tpu_topology=_str(machine.get("tpuTopology")),
        boot_disk_type=_str(disk.get("bootDiskType")),
        boot_disk_size_gb=_int(disk.get("bootDiskSizeGb")),
        image=_str(container.get(image_key)),
    )
    if pool.accelerator == "ACCELERATOR_TYPE_UNSPECIFIED":
        pool.accelerator = None
    if "reservationAffinity" in machine:
        affinity = _dict(machine.get("reservationAffinity"))
        _set_reservation(
            pool,
            _str(affinity.get("reservationAffinityType")) or "TYPE_UNSPECIFIED",
            _str(affinity.get("key")),
            _list(affinity.get("values")),
        )
    for i, var in enumerate(_list(container.get("env"))):
        if not isinstance(var, dict):
            continue  # the structural check reports it
        # A missing name is kept as "" so that env_names_valid reports it: the API requires one.
        raw_name = var.get("name")
        name = "" if raw_name is None else _str(raw_name)
        value = _scalar_str(var.get("value"))
        if name is not None:
            pool.env.append((name, value or "", f"{c}.env[{i}]"))
    for key in ("command", "args"):
        for i, arg in enumerate(_list(container.get(key))):
            if isinstance(arg, str):
                pool.args.append((arg, f"{c}.{key}[{i}]"))
    return pool


def _rest_duration_s(value: Any) -> float | None:
    """Protobuf JSON durations may be negative ("-60s"), which the structural check lets through
    and the template grammar has no word for: kept negative, so the bounds rules refuse them."""
    if isinstance(value, str) and value.startswith("-"):
        seconds = parse_duration_s(value[1:])
        return None if seconds is None else -seconds
    return parse_duration_s(value) if value is not None else None


def facts_from_rest_spec(spec: dict, prefix: str = "", display_name: Any = None) -> JobFacts:
    """Facts of a CustomJobSpec (camelCase); ``prefix`` is its path in the document."""
    dot = f"{prefix}." if prefix else ""
    scheduling = _dict(spec.get("scheduling"))
    facts = JobFacts(
        rest=True,
        paths={
            "display_name": "displayName",
            "pools": f"{dot}workerPoolSpecs",
            "strategy": f"{dot}scheduling.strategy",
            "timeout": f"{dot}scheduling.timeout",
            "max_wait": f"{dot}scheduling.maxWaitDuration",
            "labels": "labels",
            "scheduling": f"{dot}scheduling",
            # The region of a REST job is the endpoint's location, not a field.
            "region": "(region)",
            "secrets": "(secrets)",
            "output_dir": f"{dot}baseOutputDirectory.outputUriPrefix",
        },
        display_name=_str(display_name),
        output_dir=_str(_dict(spec.get("baseOutputDirectory")).get("outputUriPrefix")),
        strategy=_str(scheduling.get("strategy")),
        timeout_s=_rest_duration_s(scheduling.get("timeout")),
        max_wait_s=_rest_duration_s(scheduling.get("maxWaitDuration")),
        persistent_resource=_str(spec.get("persistentResourceId")) or None,
    )
    if facts.strategy == "STRATEGY_UNSPECIFIED":
        facts.strategy = None
    for i, pool_spec in enumerate(_list(spec.get("workerPoolSpecs"))[: len(ROLES)]):
        # An empty pool `{}` skips a position (e.g. evaluators without a pool 2).
        if isinstance(pool_spec, dict) and pool_spec:
            facts.pools.append(_rest_pool(ROLES[i], pool_spec, f"{dot}workerPoolSpecs[{i}]"))
    facts.strings = list(document_strings(spec, prefix))
    return facts


def facts_from_rest_job(job: dict) -> JobFacts:
    """Facts of a whole CustomJob in REST form (``displayName`` + ``jobSpec``)."""
    facts = facts_from_rest_spec(_dict(job.get("jobSpec")), "jobSpec", job.get("displayName"))
    facts.labels = {k: v for k, v in _dict(job.get("labels")).items() if isinstance(v, str)}
    facts.strings += document_strings({k: v for k, v in job.items() if k != "jobSpec"})
    return facts


# ---- vtx template form --------------------------------------------------------------------


def _template_pool(role: str, pool: dict, doc: dict, cat: Catalog) -> PoolFacts:
    p = f"pools.{role}"
    disk = _dict(pool.get("boot_disk"))
    facts = PoolFacts(
        role=role,
        paths={
            "pool": p,
            "machine": f"{p}.machine",
            "accelerator": f"{p}.accelerator",
            "accelerator_count": f"{p}.accelerator_count",
            "replicas": f"{p}.replicas",
            "tpu_topology": f"{p}.tpu_topology",
            "boot_disk_type": f"{p}.boot_disk.type",
            "boot_disk_size_gb": f"{p}.boot_disk.size_gb",
            "image": f"{p}.image" if "image" in pool else "image",
            "env": "env",
            **_reservation_paths(f"{p}.reservation", "affinity"),
        },
        machine=_str(pool.get("machine")),
        accelerator=_str(pool.get("accelerator")),
        accelerator_count=_int(pool.get("accelerator_count")),
        replicas=_int(pool.get("replicas", _TEMPLATE_DEFAULTS["replicas"])),
        tpu_topology=_str(pool.get("tpu_topology")),
        boot_disk_type=_str(disk.get("type", _TEMPLATE_DEFAULTS["boot_disk_type"])),
        boot_disk_size_gb=_int(disk.get("size_gb", _TEMPLATE_DEFAULTS["boot_disk_size_gb"])),
        image=_str(pool.get("image", doc.get("image"))),
    )
    reservation = pool.get("reservation")
    if isinstance(reservation, dict):
        affinity = _str(reservation.get("affinity"))
        api = AFFINITIES.get(affinity.lower()) if affinity else None
        key = _str(reservation.get("key"))
        # What compile sends: a specific reservation named by name unless a key is given.
        if key is None and api == "SPECIFIC_RESERVATION":
            key = RESERVATION_NAME_KEY
        _set_reservation(facts, api or "TYPE_UNSPECIFIED", key, _list(reservation.get("values")))
    if role == "reduction_server" and "image" not in pool:
        facts.image = cat.reduction_server_image(_str(doc.get("region")))
    # Templates may leave a built-in GPU implicit (`machine: g2-standard-8`): the compiler fills
    # it in the same way, so validate what will be sent.
    builtin = cat.builtin_accelerator(facts.machine)
    named = cat.machines[facts.machine].names_accelerator if builtin and facts.machine else True
    if builtin and named and facts.accelerator is None and "accelerator_count" not in pool:
        facts.accelerator, facts.accelerator_count = builtin
    elif facts.accelerator is not None and "accelerator_count" not in pool:
        facts.accelerator_count = builtin[1] if builtin else 1
    if role != "reduction_server":
        env = {**_dict(doc.get("env")), **_dict(pool.get("env"))}
        for name, value in env.items():
            where = f"{p}.env.{name}" if name in _dict(pool.get("env")) else f"env.{name}"
            facts.env.append((str(name), _scalar_str(value) or "", where))
        for key in ("command", "args"):
            source, values = (p, pool[key]) if key in pool else ("", doc.get(key))
            for i, arg in enumerate(_list(values)):
                if isinstance(arg, str):
                    facts.args.append((arg, f"{source}.{key}[{i}]".lstrip(".")))
    return facts


def facts_from_template(doc: dict, cat: Catalog) -> JobFacts:
    """Facts of a template document (after ``extends`` and ``--set``)."""
    scheduling = _dict(doc.get("scheduling"))
    strategy = _str(scheduling.get("strategy"))
    facts = JobFacts(
        paths={
            "display_name": "name",
            "pools": "pools",
            "strategy": "scheduling.strategy",
            "timeout": "scheduling.timeout",
            "max_wait": "scheduling.max_wait",
            "labels": "labels",
            "scheduling": "scheduling",
            "region": "region",
            "secrets": "secrets",
        },
        display_name=_str(doc.get("name")),
        region=_str(doc.get("region")),
        strategy=strategy.upper() if strategy else None,
        timeout_s=parse_duration_s(scheduling.get("timeout"))
        if scheduling.get("timeout") is not None
        else None,
        max_wait_s=parse_duration_s(scheduling.get("max_wait"))
        if scheduling.get("max_wait") is not None
        else None,
        labels={k: v for k, v in _dict(doc.get("labels")).items() if isinstance(v, str)},
        secret_env={str(k): v for k, v in _dict(doc.get("secrets")).items() if isinstance(v, str)},
        strings=list(document_strings(doc)),
        persistent_resource=_str(doc.get("persistent_resource")) or None,
    )
    pools = _dict(doc.get("pools"))
    for role in ROLES:
        if isinstance(pools.get(role), dict):
            facts.pools.append(_template_pool(role, pools[role], doc, cat))
    return facts


def template_facts(template: JobTemplate) -> JobFacts:
    """Facts of a parsed template (what `vtx cost` prices without a stack)."""
    return facts_from_template(template.to_document(), load_catalog())


PREEMPTIBLE_STRATEGIES = ("SPOT", "FLEX_START")
"""Strategies whose VMs are preemptible: they draw on the preemptible quota metrics and
pay Spot or FLEX_START prices."""


def hosts(pool: PoolFacts, cat: Catalog) -> int:
    """The VMs one replica of ``pool`` is: a multi-host TPU slice's hosts, else 1."""
    machine = cat.machines.get(pool.machine or "")
    return machine.hosts(pool.tpu_topology, pool.accelerator_count) if machine else 1


def replica_accelerators(pool: PoolFacts, cat: Catalog) -> tuple[str | None, int]:
    """The accelerator and its units in one replica (a TPU slice's chips on all its hosts)."""
    return cat.replica_accelerators(
        pool.machine, pool.accelerator, pool.accelerator_count, pool.tpu_topology
    )
