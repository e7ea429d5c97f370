"""CustomJobs as the REST API returns them (camelCase JSON), read once into what watching needs:
``JobRecord`` and its ``PoolRecord``s, and the REST JSON's timestamps (``rfc3339``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from jobs.core.catalog import load_catalog
from jobs.core.contract import LABEL_RUN_ID, region_of
from jobs.core.states import JobState, is_final

NEVER = datetime.min.replace(tzinfo=UTC)
"""Sorts a job without a createTime (never seen from Vertex) before every other."""


def rfc3339(value: object) -> datetime | None:
    """An RFC 3339 timestamp of the REST JSON (``...Z``, up to nanoseconds); None when absent."""
    if not isinstance(value, str) or not value:
        return None
    # fromisoformat (3.11) reads "Z" and truncates digits past microseconds itself.
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def json_int(value: object, default: int = 0) -> int:
    """REST JSON writes int32/int64 as numbers or strings and leaves zero values out."""
    try:
        return int(str(value))
    except ValueError:
        return default


@dataclass(frozen=True)
class PoolRecord:
    """One worker pool as submitted: ``index`` is its position (workerpool0 is the primary).
    A TPU VM pool is submitted with its machine and topology only: its accelerator and count
    are the slice's chips, from the catalog, so it reads as a GPU pool does."""

    index: int
    machine: str
    accelerator: str | None
    accelerator_count: int
    replicas: int

    @property
    def name(self) -> str:
        return f"workerpool{self.index}"

    @property
    def replica_names(self) -> list[str]:
        """Vertex's task names (``workerpool1-0``), as the logs label each replica."""
        return [f"{self.name}-{i}" for i in range(self.replicas)]

    @classmethod
    def from_rest(cls, index: int, spec: dict) -> PoolRecord:
        machine = spec.get("machineSpec") or {}
        accelerator = machine.get("acceleratorType")
        if accelerator in (None, "", "ACCELERATOR_TYPE_UNSPECIFIED"):
            accelerator = None
        count = json_int(machine.get("acceleratorCount"), 0) if accelerator else 0
        machine_type = str(machine.get("machineType", ""))
        known = load_catalog().machines.get(machine_type)
        if accelerator is None and known is not None and known.tpu_topologies:
            accelerator, count = load_catalog().replica_accelerators(
                machine_type, None, None, machine.get("tpuTopology")
            )
        return cls(
            index=index,
            machine=machine_type,
            accelerator=accelerator,
            accelerator_count=count,
            # The API defaults an absent replicaCount to 1 for pool 0 only.
            replicas=json_int(spec.get("replicaCount"), 1 if index == 0 else 0),
        )


@dataclass(frozen=True)
class JobRecord:
    """A CustomJob as the REST API returns it (camelCase JSON), read once into what watching
    needs; ``rest`` keeps the whole document (for cost:
    `jobs.custom_jobs.facts.facts_from_rest_job`)."""

    name: str
    display_name: str
    state: str
    labels: dict[str, str]
    create_time: datetime | None
    start_time: datetime | None
    end_time: datetime | None
    error: str | None
    output_prefix: str | None
    pools: list[PoolRecord]
    rest: dict = field(repr=False)

    @property
    def job_id(self) -> str:
        return self.name.rsplit("/", 1)[-1]

    @property
    def region(self) -> str:
        """Where it runs: the region in its resource name."""
        return region_of(self.name)

    @property
    def run_id(self) -> str | None:
        return self.labels.get(LABEL_RUN_ID)

    @property
    def terminal(self) -> bool:
        """Whether the job has ended (`jobs.core.states.FINAL`)."""
        return is_final(self.state)

    @classmethod
    def from_rest(cls, job: dict) -> JobRecord:
        spec = job.get("jobSpec") or {}
        pools = [
            PoolRecord.from_rest(i, pool)
            for i, pool in enumerate(spec.get("workerPoolSpecs") or [])
            if pool  # `{}` skips a position (no pool 2, say) but keeps the numbering
        ]
        labels = job.get("labels") or {}
        return cls(
            name=str(job.get("name", "")),
            display_name=str(job.get("displayName", "")),
            state=str(job.get("state", JobState.UNSPECIFIED)),
            labels={str(k): str(v) for k, v in labels.items()},
            create_time=rfc3339(job.get("createTime")),
            start_time=rfc3339(job.get("startTime")),
            end_time=rfc3339(job.get("endTime")),
            error=(job.get("error") or {}).get("message") or None,
            output_prefix=(spec.get("baseOutputDirectory") or {}).get("outputUriPrefix") or None,
            pools=pools,
            rest=job,
        )
