"""A compiled CustomJob as the Vertex resource args of a W&B Launch queue (`vtx render --format
wandb-launch`), for teams that keep submitting through W&B Launch queues.

W&B Launch's Vertex runner (wandb/sdk/launch/runner/vertex_runner.py, wandb 0.31) reads
``spec`` and ``run`` from the queue's config and calls the SDK with them:
``aiplatform.CustomJob(worker_pool_specs=spec.worker_pool_specs, base_output_dir=...,
encryption_spec_key_name=..., labels=..., staging_bucket=...)`` then ``.submit(timeout=...,
service_account=..., network=..., enable_web_access=..., tensorboard=...,
restart_job_on_worker_restart=...)``. It overwrites each pool's ``container_spec.command`` with
the launch job's entry point and appends its own env; ``${image_uri}`` is its macro for the
launch job's image. So the pools go in the SDK's snake_case form, and what those calls cannot
carry (a Spot or FLEX_START strategy, a PSC interface) is named, never dropped silently: the
job is validated by the same rules as `vtx launch` before it gets here."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

from jobs.core.contract import LABEL_RUN_ID
from jobs.core.durations import parse_duration_s
from jobs.core.stack import StackOutputs

IMAGE_MACRO = "${image_uri}"
"""W&B Launch fills it with the launch job's image."""


@dataclass(frozen=True)
class LaunchQueueConfig:
    """The queue config (``spec`` and ``run``) and what it could not carry."""

    config: dict[str, Any]
    notes: list[str] = field(default_factory=list)


def _snake(key: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in key)


def snake_case(value: Any) -> Any:
    """REST JSON (camelCase keys) as the SDK's proto-plus field names."""
    if isinstance(value, dict):
        return {_snake(k): snake_case(v) for k, v in value.items()}
    if isinstance(value, list):
        return [snake_case(v) for v in value]
    return value


INT64_FIELDS = ("replica_count",)
"""int64 in the proto: strings in REST JSON, numbers in a queue config written by hand."""


def _pool(rest_pool: dict[str, Any]) -> dict[str, Any]:
    pool = snake_case(rest_pool)
    for key in INT64_FIELDS:
        if key in pool:
            pool[key] = int(pool[key])
    container = pool.get("container_spec")
    if container is not None:  # the reduction server's image is Google's: kept as is
        container.pop("command", None)  # W&B sets the launch job's entry point
        container.pop("args", None)
        container["image_uri"] = IMAGE_MACRO
    return pool


def _run_args(spec: dict[str, Any]) -> dict[str, Any]:
    run: dict[str, Any] = {"service_account": spec["serviceAccount"]}
    timeout = (spec.get("scheduling") or {}).get("timeout")
    if timeout:
        run["timeout"] = int(parse_duration_s(timeout))
    if spec.get("network"):
        run["network"] = spec["network"]
    if spec.get("tensorboard"):
        run["tensorboard"] = spec["tensorboard"]
    if spec.get("enableWebAccess"):
        run["enable_web_access"] = True
    restart = (spec.get("scheduling") or {}).get("restartJobOnWorkerRestart")
    run["restart_job_on_worker_restart"] = bool(restart)
    return run


def _notes(rest: dict[str, Any], image: str) -> list[str]:
    spec = rest["jobSpec"]
    run_id = (rest.get("labels") or {}).get(LABEL_RUN_ID)
    notes = [
        f"container_spec.image_uri is {IMAGE_MACRO} (the launch job's image); `vtx launch` runs "
        f"{image}",
        "container command and args are the launch job's: W&B Launch sets them",
        f"every job from this queue is vtx run {run_id} (one output prefix: each resumes the "
        "last one's checkpoints); render again for a new run",
    ]
    strategy = (spec.get("scheduling") or {}).get("strategy")
    if strategy not in (None, "STANDARD"):
        notes.append(
            f"scheduling.strategy {strategy} is not passed by W&B Launch's Vertex runner: its "
            "jobs run on-demand (STANDARD)"
        )
    if "pscInterfaceConfig" in spec:
        notes.append(
            "the PSC interface (network attachment) is not passed by W&B Launch's Vertex "
            "runner: its jobs get Google-managed networking, not the stack's private path"
        )
    return notes


def launch_queue_config(rest: dict[str, Any], stack: StackOutputs) -> LaunchQueueConfig:
    """A compiled CustomJob (REST form) as a W&B Launch Vertex queue config."""
    spec = rest["jobSpec"]
    pools = [_pool(p) if p else {} for p in spec["workerPoolSpecs"]]
    images = [p["containerSpec"]["imageUri"] for p in spec["workerPoolSpecs"] if p]
    queue_spec: dict[str, Any] = {
        "worker_pool_specs": pools,
        "staging_bucket": f"gs://{stack.buckets.staging}",
        "labels": dict(rest.get("labels") or {}),
    }
    if "baseOutputDirectory" in spec:
        queue_spec["base_output_dir"] = spec["baseOutputDirectory"]["outputUriPrefix"]
    if "encryptionSpec" in rest:
        queue_spec["encryption_spec_key_name"] = rest["encryptionSpec"]["kmsKeyName"]
    config = {"spec": queue_spec, "run": _run_args(spec)}
    return LaunchQueueConfig(config, _notes(rest, images[0] if images else "-"))


def render_launch_queue_config(rest: dict[str, Any], stack: StackOutputs) -> str:
    """The queue config as YAML, what it could not carry in its header."""
    queue = launch_queue_config(rest, stack)
    header = [
        "# W&B Launch queue config for a Vertex AI queue (resource: gcp-vertex); with",
        "# `wandb launch --resource-args FILE` put it under a top-level `vertex:` key.",
        *(f"# note: {n}" for n in queue.notes),
    ]
    body = yaml.safe_dump(queue.config, sort_keys=False, width=100)
    return "\n".join(header) + "\n" + body
