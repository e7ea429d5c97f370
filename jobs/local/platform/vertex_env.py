"""The environment Vertex AI gives each replica of a CustomJob, rebuilt for local processes.

One place for these facts (docs/vertex-facts.md, "Training container environment"). Jobs arrive
as REST-form dicts (camelCase keys, enum names). Hosts are 127.0.0.1 with one port per replica
instead of Vertex's per-VM hostnames; the primary's port is MASTER_PORT.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from jobs.core.catalog import load_catalog

# Variables Vertex sets; stripped from the inherited environment so a replica sees only ours.
VERTEX_VARS = (
    "CLUSTER_SPEC",
    "TF_CONFIG",
    "MASTER_ADDR",
    "MASTER_PORT",
    "WORLD_SIZE",
    "RANK",
    "LOCAL_RANK",
    "AIP_MODEL_DIR",
    "AIP_CHECKPOINT_DIR",
    "AIP_TENSORBOARD_LOG_DIR",
    "CLOUD_ML_JOB_ID",
    "CLOUD_ML_PROJECT_ID",
    "CLOUD_ML_TRIAL_ID",
    "CLOUD_ML_HP_METRIC_TAG",
    "CLOUD_ML_HP_METRIC_FILE",
    "STORAGE_EMULATOR_HOST",
    "TPU_WORKER_ID",
    "TPU_WORKER_HOSTNAMES",
)
# TF_CONFIG task types by pool position (0 primary, 1 workers, 2 parameter servers, 3 evaluators).
TF_TASK_TYPES = ("chief", "worker", "ps", "evaluator")
PYTHON_NAMES = {"python", "python3", f"python3.{sys.version_info.minor}"}


@dataclass(frozen=True)
class ReplicaSlot:
    pool: int
    index: int

    @property
    def name(self) -> str:
        return f"workerpool{self.pool}-{self.index}"


def pools(job: dict) -> list[dict]:
    return list(job.get("jobSpec", {}).get("workerPoolSpecs", []))


def replica_counts(job: dict) -> list[int]:
    """Each pool's replicaCount (0 for an empty pool ``{}``), as numbers: int64 comes as a
    string in the REST form."""
    return [int(pool.get("replicaCount", 0) or 0) if pool else 0 for pool in pools(job)]


def tpu_hosts(pool: dict) -> int:
    """The VMs one replica of ``pool`` is on Vertex: a multi-host TPU slice's (from the
    catalog: its topology's, or a cloud-tpu Pod's cores over 8), else 1. Vertex starts every
    VM of a slice from its one replica (docs/vertex-facts.md, "TPUs")."""
    spec = (pool or {}).get("machineSpec", {})
    machine = load_catalog().machines.get(spec.get("machineType", ""))
    if machine is None or not machine.is_tpu:
        return 1
    return machine.hosts(spec.get("tpuTopology"), int(spec.get("acceleratorCount", 0) or 0))


def is_tpu_pool(pool: dict) -> bool:
    spec = (pool or {}).get("machineSpec", {})
    machine = load_catalog().machines.get(spec.get("machineType", ""))
    return machine is not None and machine.is_tpu


def host_counts(job: dict) -> list[int]:
    """The processes each pool runs here: its replicas, times a TPU slice's VMs (a 4x4 v5e
    slice is one replica and 4 processes, one per TPU host)."""
    return [n * tpu_hosts(pool) for n, pool in zip(replica_counts(job), pools(job), strict=True)]


def slots_of(counts: Sequence[int]) -> list[ReplicaSlot]:
    """Every replica of pools with these replica counts, primary first. Empty pools are
    skipped. Callers bound the counts first (the server refuses more than --max-replicas
    before anything else)."""
    return [ReplicaSlot(position, i) for position, count in enumerate(counts) for i in range(count)]


def replica_slots(job: dict) -> list[ReplicaSlot]:
    """Every replica (every TPU host) of every pool of ``job``, primary first."""
    return slots_of(host_counts(job))


def is_distributed(job: dict) -> bool:
    return len(replica_slots(job)) > 1


def _cluster(job: dict, ports: dict[str, int]) -> dict[str, list[str]]:
    cluster: dict[str, list[str]] = {}
    for slot in replica_slots(job):
        cluster.setdefault(f"workerpool{slot.pool}", []).append(f"127.0.0.1:{ports[slot.name]}")
    return cluster


def _node_rank(job: dict, slot: ReplicaSlot) -> int | None:
    """PyTorch node rank: the primary is 0, workerpool1 replicas follow. UNCONFIRMED: Vertex's
    rank for pools 2 and 3 (parameter/reduction servers, evaluators) is not documented; they
    get none here."""
    if slot.pool == 0:
        return 0
    if slot.pool == 1:
        return 1 + slot.index
    return None


def _world_size(job: dict) -> int:
    return sum(1 for s in replica_slots(job) if s.pool in (0, 1))


def replica_command(pool: dict, package_dir: Path | None = None) -> list[str]:
    """The argv a replica runs: containerSpec command+args, or for a pythonPackageSpec
    jobs/local/custom_jobs/package_runner.py, which installs the ``packageUris`` into
    ``package_dir`` and then runs `python -m module args`.

    ``python`` is the local interpreter, as it would be the image's inside a container."""
    if "pythonPackageSpec" in pool:
        spec = pool["pythonPackageSpec"]
        runner = [sys.executable, "-m", "jobs.local.custom_jobs.package_runner"]
        runner += ["--target", str(package_dir or Path("python-packages"))]
        runner += [f"--package={uri}" for uri in spec.get("packageUris", [])]
        return [*runner, "--", spec.get("pythonModule", ""), *spec.get("args", [])]
    spec = pool.get("containerSpec", {})
    argv = [*spec.get("command", []), *spec.get("args", [])]
    if argv and argv[0] in PYTHON_NAMES:
        argv[0] = sys.executable
    return argv


def accelerator_notes(job: dict) -> list[str]:
    """One line per pool that asked for accelerators: the request was checked against the
    catalog when the job was created, and locally its replicas run on this machine's CPU."""
    notes = []
    for position, pool in enumerate(pools(job)):
        machine = pool.get("machineSpec", {}) if pool else {}
        kind, count = machine.get("acceleratorType"), int(machine.get("acceleratorCount", 0) or 0)
        if kind and kind != "ACCELERATOR_TYPE_UNSPECIFIED" and count:
            notes.append(
                f"workerpool{position} asks for {count} x {kind} on {machine.get('machineType')} "
                f"(checked against the catalog); the local platform runs its replicas on this "
                f"machine's CPU"
            )
    return notes


def output_dirs(job: dict) -> dict[str, str]:
    base = job.get("jobSpec", {}).get("baseOutputDirectory", {}).get("outputUriPrefix")
    if not base:
        return {}
    base = base.rstrip("/")
    return {
        "AIP_MODEL_DIR": f"{base}/model/",
        "AIP_CHECKPOINT_DIR": f"{base}/checkpoints/",
        "AIP_TENSORBOARD_LOG_DIR": f"{base}/logs/",
    }


def replica_env(
    job: dict,
    job_id: str,
    slot: ReplicaSlot,
    ports: dict[str, int],
    project_number: str,
    gcs_endpoint: str,
    base_env: dict[str, str] | None = None,
    platform_env: dict[str, str] | None = None,
) -> dict[str, str]:
    """The full environment of one replica: the local base environment without any inherited
    Vertex variables, then exactly what Vertex sets (``platform_env``: a trial's variables),
    then the pool's own ``env`` entries."""
    env = {k: v for k, v in (base_env or dict(os.environ)).items() if k not in VERTEX_VARS}
    venv_bin = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(filter(None, [venv_bin, env.get("PATH")]))
    cluster = _cluster(job, ports)
    env["CLUSTER_SPEC"] = json.dumps(
        {
            "cluster": cluster,
            "environment": "cloud",
            "task": {"type": f"workerpool{slot.pool}", "index": slot.index},
            # Vertex passes the job spec as a JSON string inside the JSON: readers parse twice.
            "job": json.dumps(job.get("jobSpec", {})),
        }
    )
    pool = pools(job)[slot.pool]
    if is_tpu_pool(pool):
        # What a TPU host's container gets on Vertex is UNCONFIRMED (docs/vertex-facts.md,
        # "TPUs"): these are the names GKE's TPU webhook sets and JAX reads. Each host is one
        # process here, its "hostname" its CLUSTER_SPEC address; no PyTorch/TF variables: a
        # TPU slice is one replica, not a chief and workers.
        env["TPU_WORKER_ID"] = str(slot.index)
        env["TPU_WORKER_HOSTNAMES"] = ",".join(cluster[f"workerpool{slot.pool}"])
    elif is_distributed(job):
        tf_cluster = {
            TF_TASK_TYPES[int(pool[len("workerpool") :])]: hosts for pool, hosts in cluster.items()
        }
        env["TF_CONFIG"] = json.dumps(
            {
                "cluster": tf_cluster,
                "task": {"type": TF_TASK_TYPES[slot.pool], "index": slot.index},
                "environment": "cloud",
            }
        )
        env["MASTER_ADDR"] = "127.0.0.1"
        env["MASTER_PORT"] = str(ports["workerpool0-0"])
        env["WORLD_SIZE"] = str(_world_size(job))
        rank = _node_rank(job, slot)
        if rank is not None:
            env["RANK"] = str(rank)
    env.update(output_dirs(job))
    env["CLOUD_ML_JOB_ID"] = job_id
    env["CLOUD_ML_PROJECT_ID"] = project_number
    env["STORAGE_EMULATOR_HOST"] = gcs_endpoint
    # gcsfs otherwise probes every bucket over gRPC, which the emulator cannot answer (60 s each).
    env["GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT"] = "false"
    # Stands in for the image's `ENV PYTHONUNBUFFERED=1` (our trainer Dockerfile sets it), so
    # log lines reach the log files as they are printed.
    env["PYTHONUNBUFFERED"] = "1"
    env.update(platform_env or {})
    spec = pool.get("containerSpec") or pool.get("pythonPackageSpec") or {}
    for item in spec.get("env", []):
        env[item["name"]] = item.get("value", "")
    return env
