"""Template + StackOutputs + run id -> CompiledJob: the REST CustomJob and its facts, built once.

``custom_job_dict`` builds the REST form (camelCase) with plain Python, so the rules, policies and
cost read it without importing aiplatform; ``CompiledJob.to_proto`` turns it into a real
``aiplatform_v1.CustomJob`` with ``CustomJob.from_json``, which rejects any field the API does not
know (so a typo in this module cannot reach the API either).

What the stack decides (never the template): the service account, the network attachment or
peering network, ``baseOutputDirectory = gs://<checkpoints>/runs/<run-id>/``, TensorBoard, the
KMS key, the registry images resolve against, and web access (off in prod)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jobs.core.catalog import load_catalog
from jobs.core.contract import (
    LABEL_BUDGET,
    LABEL_ENVIRONMENT,
    LABEL_RUN_ID,
    LABEL_TEMPLATE,
    OWN_LABELS,
    RUN_ID_ENV,
    RUN_ID_PATTERN,
    VTX_SECRETS_ENV,
    budget_label,
    output_prefix,
    secret_parts,
)
from jobs.core.durations import format_duration_s
from jobs.core.guard import heartbeat_interval_s, template_guard
from jobs.core.heartbeat import HEARTBEAT_INTERVAL_ENV
from jobs.core.naming import label_value
from jobs.core.problems import Problem
from jobs.core.stack import LABEL_TEAM, StackOutputs, is_production
from jobs.custom_jobs.facts import JobFacts, facts_from_rest_job
from jobs.custom_jobs.pool_fit import warm_pool_problems
from jobs.spec.template import AFFINITIES, ROLES, JobTemplate, Pool, Reservation

if TYPE_CHECKING:
    from google.cloud import aiplatform_v1


class CompileError(Exception):
    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


def resolve_image(image: str, stack: StackOutputs) -> str:
    """A bare name (``trainer``, ``trainer:v3``, ``trainer@sha256:...``) lives in the stack's
    Artifact Registry; anything with a registry host (a '.' or ':' before the first '/') is a
    full URI and is kept as is. An untagged name gets ``:latest``."""
    first = image.split("/", 1)[0]
    if "/" in image and ("." in first or ":" in first or first == "localhost"):
        return image
    if "@" not in image and ":" not in image.rsplit("/", 1)[-1]:
        image = f"{image}:latest"
    return f"{stack.artifact_registry.rstrip('/')}/{image}"


def secret_resource(ref: str, stack: StackOutputs) -> str:
    """A secret reference -> the version the trainer reads. An id and a full name in the stack's
    project mean the same secret (``stack_problems`` refuses one in another project): the stack's
    ``secrets`` map ids to resources; an id it does not list is a secret in the stack's project."""
    _, secret, version = secret_parts(ref)
    resource = stack.secrets.get(secret, f"projects/{stack.project}/secrets/{secret}")
    return f"{resource.split('/versions/')[0]}/versions/{version}"


def _secret_problems(template: JobTemplate, stack: StackOutputs) -> Iterator[Problem]:
    """The same judgement on every stack, local included. References are not echoed: a value
    written by mistake would be (`vtx validate` refuses those; this may run without it)."""
    for env_name, ref in template.secrets.items():
        project, secret, _ = secret_parts(ref)
        path = f"secrets.{env_name}"
        if project is not None and project not in (stack.project, stack.project_number):
            yield Problem(
                path,
                f"names a secret in another project than stack {stack.project}'s; its jobs read "
                "only their own project's secrets (the trainer account may read no others)",
                f"the secret id alone (what follows secrets/), `secrets: {{{env_name}: ID}}`: "
                "every stack resolves an id in its own project",
            )
        elif stack.secrets and secret not in stack.secrets:
            yield Problem(
                path,
                "not a secret the stack created",
                f"one of {', '.join(sorted(stack.secrets))} (add others in the stack config so "
                "the trainer account may read them)",
            )


def _region_problems(region: str | None, stack: StackOutputs) -> Iterator[Problem]:
    """A job runs in the stack's region or in one of its further ``regions``, which must give
    what the stack's own region gives: a private network path and a key in that region (a job
    must not lose either by moving)."""
    if region is None or region == stack.region:
        return
    if region not in stack.regions:
        yield Problem(
            "region",
            f"stack {stack.project} runs jobs in {', '.join(stack.job_regions)}, not {region}",
            f"region: {stack.region}, or add `- region: {region}` under vtx:platform."
            "capacity_regions in the stack config and `pulumi up`",
        )
        return
    regional = stack.regions[region]
    for have, there, what in (
        (stack.network_attachment, regional.network_attachment, "a PSC network attachment"),
        (stack.kms_key, regional.kms_key, "a CMEK key"),
    ):
        if have and not there:
            yield Problem(
                "region",
                f"stack {stack.project} has {what} in {stack.region} but none in {region}: the "
                "job would run there without it",
                f"`pulumi up` the stack with {region} in vtx:platform.capacity_regions",
            )


def job_stack(template: JobTemplate, stack: StackOutputs) -> StackOutputs:
    """The stack as the job's region sees it (after `stack_problems` found none)."""
    return stack.in_region(template.region) if template.region else stack


def stack_problems(template: JobTemplate, stack: StackOutputs) -> list[Problem]:
    """What the template asks for that this stack cannot give."""
    problems = []
    problems.extend(_region_problems(template.region, stack))
    if template.web_access and is_production(stack.environment):
        problems.append(
            Problem(
                "web_access",
                "interactive shells into replicas are off in prod",
                "web_access: false (use a dev stack to debug)",
            )
        )
    problems.extend(_secret_problems(template, stack))
    problems.extend(_team_problems(template.team, stack))
    problems.extend(warm_pool_problems(template, stack))
    return problems


def _team_problems(team: str | None, stack: StackOutputs) -> Iterator[Problem]:
    """A stack with team budgets counts every job toward one: a job without a team, or with
    one the stack has no budget for, would run outside every team's budget and its cancel."""
    if not stack.teams:
        return
    teams = ", ".join(stack.teams)
    if team is None:
        yield Problem(
            "team",
            f"stack {stack.project} bills every job to a team ({teams}); this job names none",
            f"team: {stack.teams[0]} (one of {teams})",
        )
    elif team not in stack.teams:
        yield Problem(
            "team",
            f"{team!r} is not a team of stack {stack.project} ({teams})",
            f"one of {teams}, or add it under vtx:platform.teams in the stack config and "
            "`pulumi up`",
        )


def _machine_spec(pool: Pool) -> dict[str, Any]:
    spec: dict[str, Any] = {"machineType": pool.machine}
    accelerator, count = pool.accelerator, pool.accelerator_count
    cat = load_catalog()
    builtin = cat.builtin_accelerator(pool.machine)
    # TPU VMs are named by machine and topology alone, as Google's page configures them.
    named = builtin is not None and cat.machines[pool.machine or ""].names_accelerator
    if accelerator is None and named and count is None:
        accelerator, count = builtin  # type: ignore[misc]
    if accelerator is not None:
        spec["acceleratorType"] = accelerator
        spec["acceleratorCount"] = count if count is not None else (builtin[1] if builtin else 1)
    if pool.tpu_topology:
        spec["tpuTopology"] = pool.tpu_topology
    if pool.reservation is not None:
        spec["reservationAffinity"] = reservation_affinity(pool.reservation)
    return spec


def reservation_affinity(reservation: Reservation) -> dict[str, Any]:
    """A template's ``reservation`` as the API's ReservationAffinity (empty fields left out)."""
    affinity: dict[str, Any] = {"reservationAffinityType": AFFINITIES[reservation.affinity]}
    if reservation.api_key is not None:
        affinity["key"] = reservation.api_key
    if reservation.values:
        affinity["values"] = list(reservation.values)
    return affinity


def _env(template: JobTemplate, pool: Pool, stack: StackOutputs, run_id: str) -> list[dict]:
    env = {**template.env, **pool.env}
    if template.secrets:
        # Names only: the trainer resolves values at run time with its own identity.
        resolved = {name: secret_resource(s, stack) for name, s in template.secrets.items()}
        env[VTX_SECRETS_ENV] = json.dumps(resolved, sort_keys=True)
    env[RUN_ID_ENV] = run_id
    guard = template_guard(template.guard, stack.guard, study=template.study is not None)
    if guard is not None:
        # The trainer beats often enough that a beat's age never passes for a hang.
        env[HEARTBEAT_INTERVAL_ENV] = f"{heartbeat_interval_s(guard):g}"
    return [{"name": k, "value": v} for k, v in env.items()]


def _pool_spec(
    role: str, pool: Pool, template: JobTemplate, stack: StackOutputs, run_id: str
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "machineSpec": _machine_spec(pool),
        "replicaCount": str(pool.replicas),
        "diskSpec": {
            "bootDiskType": pool.boot_disk.type or load_catalog().boot_disk_types(pool.machine)[0],
            "bootDiskSizeGb": pool.boot_disk.size_gb,
        },
    }
    if role == "reduction_server":
        image = pool.image or load_catalog().reduction_server_image(stack.region)
        spec["containerSpec"] = {"imageUri": image}
        return spec
    image = pool.image or template.image
    if image is None:
        raise CompileError([Problem(f"pools.{role}.image", "no image", "set image: NAME")])
    container: dict[str, Any] = {"imageUri": resolve_image(image, stack)}
    command = pool.command if pool.command is not None else template.command
    args = pool.args if pool.args is not None else template.args
    if command:
        container["command"] = list(command)
    if args:
        container["args"] = list(args)
    container["env"] = _env(template, pool, stack, run_id)
    spec["containerSpec"] = container
    return spec


def _scheduling(template: JobTemplate) -> dict[str, Any]:
    s = template.scheduling
    out: dict[str, Any] = {"strategy": s.strategy.upper()}
    if s.timeout_s is not None:
        out["timeout"] = format_duration_s(s.timeout_s)
    if s.max_wait_s is not None:
        out["maxWaitDuration"] = format_duration_s(s.max_wait_s)
    if s.restart_job_on_worker_restart:
        out["restartJobOnWorkerRestart"] = True
    if s.disable_retries:
        out["disableRetries"] = True
    return out


def _labels(template: JobTemplate, stack: StackOutputs, run_id: str) -> dict[str, str]:
    # The platform team's labels (billing, ownership) win over a template's.
    # vtx's own labels only ever say what the compiler wrote (a budget is `budget:`, a team
    # `team:`).
    own = {k: v for k, v in template.labels.items() if k not in OWN_LABELS}
    return {
        **own,
        **stack.labels,
        LABEL_RUN_ID: run_id,
        LABEL_TEMPLATE: template.name,
        LABEL_ENVIRONMENT: label_value(stack.environment),
        **({LABEL_BUDGET: budget_label(template.budget.max_cost_usd)} if template.budget else {}),
        **({LABEL_TEAM: template.team} if template.team else {}),
    }


def custom_job_dict(template: JobTemplate, stack: StackOutputs, run_id: str) -> dict[str, Any]:
    """The CustomJob in REST form (camelCase), ready for ``CustomJob.from_json``."""
    if not RUN_ID_PATTERN.match(run_id):
        raise CompileError(
            [Problem("--run-id", f"invalid run id {run_id!r}", "lower case, digits, '-'")]
        )
    problems = stack_problems(template, stack)
    if problems:
        raise CompileError(problems)
    stack = job_stack(template, stack)
    pools = dict(template.pools.by_role())
    specs = [
        _pool_spec(role, pools[role], template, stack, run_id) if role in pools else {}
        for role in ROLES
    ]
    while specs and not specs[-1]:
        specs.pop()  # trailing empty positions are not sent
    job_spec: dict[str, Any] = {
        "workerPoolSpecs": specs,
        "scheduling": _scheduling(template),
        "serviceAccount": stack.trainer_service_account,
        "baseOutputDirectory": {"outputUriPrefix": output_prefix(stack, run_id)},
    }
    if template.web_access and not is_production(stack.environment):
        job_spec["enableWebAccess"] = True  # stack_problems refused it in prod already
    if stack.network_attachment:
        job_spec["pscInterfaceConfig"] = {"networkAttachment": stack.network_attachment}
    elif stack.network:
        job_spec["network"] = stack.network
        if stack.reserved_ip_ranges:
            job_spec["reservedIpRanges"] = list(stack.reserved_ip_ranges)
    if template.persistent_resource:
        job_spec["persistentResourceId"] = template.persistent_resource
    if stack.tensorboard:
        job_spec["tensorboard"] = stack.tensorboard
    job: dict[str, Any] = {
        "displayName": run_id,
        "jobSpec": job_spec,
        "labels": _labels(template, stack, run_id),
    }
    if stack.kms_key:
        job["encryptionSpec"] = {"kmsKeyName": stack.kms_key}
    return job


def to_custom_job(job: dict[str, Any]) -> aiplatform_v1.CustomJob:
    """The REST dict as a real proto; unknown fields raise (``ignore_unknown_fields=False``)."""
    from google.cloud import aiplatform_v1

    return aiplatform_v1.CustomJob.from_json(json.dumps(job), ignore_unknown_fields=False)


@dataclass(frozen=True)
class CompiledJob:
    """A template compiled for a stack, built once: the REST CustomJob (what is submitted) and
    its facts (what the rules, the policies and the cost read)."""

    template: JobTemplate
    stack: StackOutputs
    run_id: str
    rest: dict[str, Any]
    facts: JobFacts

    @property
    def output_prefix(self) -> str:
        return output_prefix(self.stack, self.run_id)

    def to_proto(self) -> aiplatform_v1.CustomJob:
        return to_custom_job(self.rest)


def compile_job(template: JobTemplate, stack: StackOutputs, run_id: str) -> CompiledJob:
    """Raises CompileError when the stack cannot give what the template asks for."""
    rest = custom_job_dict(template, stack, run_id)
    stack = job_stack(template, stack)
    facts = facts_from_rest_job(rest)
    # The region is the endpoint's, not a field: the stack's, except on the local platform.
    facts.region = None if stack.is_local else stack.region
    return CompiledJob(template, stack, run_id, rest, facts)
