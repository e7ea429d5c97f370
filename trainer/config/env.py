"""What the platform tells the container: topology, output locations and job identity.

`VertexEnv.from_environ()` is the only code in vtx that reads Vertex's variables (`CLUSTER_SPEC`,
`TF_CONFIG`, `MASTER_ADDR`/`MASTER_PORT`/`WORLD_SIZE`/`RANK`, `AIP_*`, `CLOUD_ML_*`), and
`TrackingEnv.from_environ()` the ones a tuning trial adds (`CLOUD_ML_TRIAL_ID`,
`CLOUD_ML_HP_METRIC_*`) besides the vtx run id that trackers name their run after. Vertex counts
*nodes* (one container per VM) in `WORLD_SIZE`/`RANK`; torchrun later reuses the same names for
*processes*. Inside a torchrun worker we therefore take the node view from torchrun's own
`GROUP_RANK`/`LOCAL_WORLD_SIZE` instead, so both callers get the same answer.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

DEFAULT_MASTER_PORT = 29500
RUN_ID_ENV = "VTX_RUN_ID"
"""The vtx run id, which the compiler sets on every replica (a copy of
`jobs.core.contract.RUN_ID_ENV`:
the trainer ships alone; tests/contracts/ pins it)."""
DEFAULT_METRIC_FILE = "/tmp/hypertune/output.metrics"
"""Where cloudml-hypertune writes a trial's metric when `CLOUD_ML_HP_METRIC_FILE` is not set."""
# Pools that run the training processes. Pool 2 is the parameter-server / Reduction Server pool
# and pool 3 the evaluators: they never join torchrun's rendezvous.
TRAINING_POOLS = ("workerpool0", "workerpool1")
TF_CONFIG_POOLS = {"chief": "workerpool0", "master": "workerpool0", "worker": "workerpool1"}


@dataclass(frozen=True)
class VertexEnv:
    """The container's view of its job. Defaults describe a single node on a laptop."""

    nnodes: int = 1
    """Number of training nodes (Vertex `WORLD_SIZE`)."""
    node_rank: int = 0
    """This node's index (Vertex `RANK`); 0 is the chief (workerpool0)."""
    master_addr: str = "127.0.0.1"
    master_port: int = DEFAULT_MASTER_PORT
    task_type: str = "workerpool0"
    task_index: int = 0
    job_id: str | None = None
    """`CLOUD_ML_JOB_ID`; None outside Vertex."""
    project_number: str | None = None
    model_dir: str | None = None
    """`AIP_MODEL_DIR`: where the exported model goes. None: the config decides."""
    checkpoint_dir: str | None = None
    """`AIP_CHECKPOINT_DIR`: where checkpoints go. None: the config decides."""
    tensorboard_dir: str | None = None
    """`AIP_TENSORBOARD_LOG_DIR`. None: the config decides."""
    cluster_spec: Mapping[str, Any] | None = None

    @property
    def in_job(self) -> bool:
        """Inside a Vertex job (or the local platform's copy of one): its output is read by
        Cloud Logging and `vtx logs`, not watched on a terminal."""
        return self.job_id is not None or self.cluster_spec is not None

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> VertexEnv:
        env = os.environ if environ is None else environ
        spec = _parse_cluster_spec(env.get("CLUSTER_SPEC"))
        task_type, task_index = _task(spec, _parse_json(env.get("TF_CONFIG"), "TF_CONFIG"))
        nnodes, node_rank = _nodes(env, spec, task_type, task_index)
        master_addr, master_port = _master(env, spec)
        return cls(
            nnodes=nnodes,
            node_rank=node_rank,
            master_addr=master_addr,
            master_port=master_port,
            task_type=task_type,
            task_index=task_index,
            job_id=env.get("CLOUD_ML_JOB_ID") or None,
            project_number=env.get("CLOUD_ML_PROJECT_ID") or None,
            model_dir=env.get("AIP_MODEL_DIR") or None,
            checkpoint_dir=env.get("AIP_CHECKPOINT_DIR") or None,
            tensorboard_dir=env.get("AIP_TENSORBOARD_LOG_DIR") or None,
            cluster_spec=spec,
        )


def _parse_json(raw: str | None, name: str) -> dict[str, Any] | None:
    if not raw:
        return None
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        log.warning("ignoring %s: not JSON (%s)", name, exc)
        return None
    return value if isinstance(value, dict) else None


def _parse_cluster_spec(raw: str | None) -> dict[str, Any] | None:
    spec = _parse_json(raw, "CLUSTER_SPEC")
    if spec is not None and isinstance(spec.get("job"), str):
        # Vertex sometimes sends `job` as a JSON document inside the JSON string.
        try:
            spec["job"] = json.loads(spec["job"])
        except json.JSONDecodeError:
            log.warning("CLUSTER_SPEC.job is a string that is not JSON; kept as text")
    return spec


def _task(spec: dict[str, Any] | None, tf_config: dict[str, Any] | None) -> tuple[str, int]:
    for source, mapping in ((spec, None), (tf_config, TF_CONFIG_POOLS)):
        task = (source or {}).get("task")
        if isinstance(task, dict) and "type" in task:
            task_type = str(task["type"])
            if mapping is not None:
                task_type = mapping.get(task_type, task_type)
            return task_type, int(task.get("index", 0))
    return "workerpool0", 0


def _nodes(
    env: Mapping[str, str], spec: dict[str, Any] | None, task_type: str, task_index: int
) -> tuple[int, int]:
    if "TORCHELASTIC_RUN_ID" in env and "GROUP_RANK" in env:
        # Inside a torchrun worker: WORLD_SIZE/RANK now count processes.
        nnodes = int(env["WORLD_SIZE"]) // int(env.get("LOCAL_WORLD_SIZE", "1"))
        return nnodes, int(env["GROUP_RANK"])
    if "WORLD_SIZE" in env and "RANK" in env:
        return int(env["WORLD_SIZE"]), int(env["RANK"])
    cluster = (spec or {}).get("cluster")
    if isinstance(cluster, dict) and task_type in TRAINING_POOLS:
        pools = [list(cluster.get(pool) or []) for pool in TRAINING_POOLS]
        offset = len(pools[0]) if task_type == "workerpool1" else 0
        return max(1, sum(len(p) for p in pools)), offset + task_index
    return 1, 0


def _master(env: Mapping[str, str], spec: dict[str, Any] | None) -> tuple[str, int]:
    if env.get("MASTER_ADDR"):
        return env["MASTER_ADDR"], int(env.get("MASTER_PORT") or DEFAULT_MASTER_PORT)
    chief = ((spec or {}).get("cluster") or {}).get("workerpool0") or []
    if chief:
        # CLUSTER_SPEC's port (2222) belongs to Vertex's TF-era servers; torchrun uses its own.
        return str(chief[0]).split(":")[0], DEFAULT_MASTER_PORT
    return "127.0.0.1", DEFAULT_MASTER_PORT


@dataclass(frozen=True)
class TrackingEnv:
    """What names this run for trackers (W&B) and makes it a tuning trial (the metric file).

    Kept apart from `VertexEnv`: a CustomJob's replicas get none of the trial variables, and the
    local platform's copy of Vertex's environment is pinned to what `VertexEnv` reads."""

    run_id: str | None = None
    """`VTX_RUN_ID`: one id for every attempt of a vtx run (and every trial of a study)."""
    trial_id: str | None = None
    """`CLOUD_ML_TRIAL_ID` as Vertex sets it (even empty); None outside a tuning trial."""
    metric_tag: str | None = None
    """`CLOUD_ML_HP_METRIC_TAG`: the study's metric id, which the trial reports under."""
    metric_file: str = DEFAULT_METRIC_FILE
    """`CLOUD_ML_HP_METRIC_FILE`: where the trial's metric lines go."""

    @property
    def is_trial(self) -> bool:
        """Running as a tuning trial: the platform set a trial id or a metric tag."""
        return bool(self.trial_id) or bool(self.metric_tag)

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> TrackingEnv:
        env = os.environ if environ is None else environ
        return cls(
            run_id=env.get(RUN_ID_ENV) or None,
            trial_id=env.get("CLOUD_ML_TRIAL_ID"),
            metric_tag=env.get("CLOUD_ML_HP_METRIC_TAG") or None,
            metric_file=env.get("CLOUD_ML_HP_METRIC_FILE") or DEFAULT_METRIC_FILE,
        )


TPU_HOST_VARS = ("TPU_WORKER_ID", "TPU_WORKER_HOSTNAMES")
"""What a TPU host's container has (GKE's names, which the local platform sets; what Vertex sets
is UNCONFIRMED: docs/vertex-facts.md, "TPUs")."""
TPU_MACHINE_PREFIXES = ("ct4p-", "ct5lp-", "ct6e-", "tpu7x-")


def tpu_host(environ: Mapping[str, str] | None = None) -> str | None:
    """What says this container runs on a TPU host (a TPU variable, or a TPU machine in its
    pool of CLUSTER_SPEC's job); None on a GPU or CPU machine."""
    env = os.environ if environ is None else environ
    for name in TPU_HOST_VARS:
        if env.get(name) is not None:
            return f"{name} is set"
    spec = _parse_cluster_spec(env.get("CLUSTER_SPEC"))
    task_type, _ = _task(spec, None)
    job = (spec or {}).get("job")
    pools = job.get("workerPoolSpecs") if isinstance(job, dict) else None
    position = int(task_type.removeprefix("workerpool") or 0) if task_type[-1:].isdigit() else 0
    if (
        not isinstance(pools, list)
        or position >= len(pools)
        or not isinstance(pools[position], dict)
    ):
        return None
    machine = pools[position].get("machineSpec") or {}
    kind = str(machine.get("machineType") or "")
    if kind == "cloud-tpu" or kind.startswith(TPU_MACHINE_PREFIXES) or machine.get("tpuTopology"):
        return f"its pool's machine is {kind}"
    return None


def tpu_host_message(reason: str) -> str:
    """Why this trainer stops on a TPU host, and what to run instead."""
    return (
        f"this is a TPU host ({reason}): vtx's trainer is PyTorch on CUDA GPUs and has no TPU "
        "(XLA) path, so it stops here. Run a TPU-native trainer image instead (the TPU "
        "templates run MaxText on JAX: jobs/templates/v5e-lora.yaml), or give the job a GPU "
        "machine (e.g. machine: g2-standard-8)"
    )
