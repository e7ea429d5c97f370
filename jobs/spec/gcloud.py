"""Documents to templates: a vtx template as written, and gcloud's formats converted: a
CustomJobSpec (``gcloud ai custom-jobs create --config``) or a whole CustomJob (REST form) become
vtx templates (``vtx import``, and every command that reads such a file). The way back out, the
CustomJobSpec YAML gcloud accepts, is `jobs.launch.render`.

What a stack provides (service account, network, output directory, TensorBoard, encryption) is
not part of a template: import drops it and says so, compile puts the stack's values back."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jobs.core.catalog import REDUCTION_SERVER_IMAGE
from jobs.core.contract import (
    LABEL_TEMPLATE,
    OWN_LABELS,
    RUN_ID_ENV,
    VTX_SECRETS_ENV,
    budget_of,
    secret_parts,
)
from jobs.core.credentials import looks_like_credential_name, looks_like_key
from jobs.core.document_strings import document_strings, shaped_string_problems
from jobs.core.naming import rfc1035_name
from jobs.core.problems import Problem
from jobs.core.stack import LABEL_TEAM
from jobs.core.user_io import load_json_text
from jobs.spec.document import CUSTOM_JOB, TEMPLATE, Document, load_document
from jobs.spec.rest_check import SPEC_MESSAGE, check_rest_fields
from jobs.spec.template import (
    AFFINITIES,
    NAME_PATTERN,
    RESERVATION_NAME_KEY,
    ROLES,
    TEMPLATE_NAME_MAX,
    BootDisk,
    JobTemplate,
    Pool,
    TemplateError,
)

_DEFAULT_DISK_GB = BootDisk.model_fields["size_gb"].default
STACK_FIELDS = {
    "serviceAccount": "the stack's trainer service account",
    "network": "the stack's network",
    "reservedIpRanges": "the stack's network",
    "pscInterfaceConfig": "the stack's network attachment",
    "baseOutputDirectory": "gs://<checkpoints bucket>/runs/<run id>/",
    "tensorboard": "the stack's TensorBoard",
    "encryptionSpec": "the stack's KMS key",
}


@dataclass
class Imported:
    template: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    """What was dropped or changed, for the user to read."""


def template_name(text: str) -> str:
    """A valid template name from a display name or file stem (``My Job_v2`` -> ``my-job-v2``)."""
    return rfc1035_name(text, TEMPLATE_NAME_MAX, "job")


def _pool_from_rest(spec: dict, role: str, notes: list[str]) -> dict[str, Any]:
    machine = spec.get("machineSpec") or {}
    disk = spec.get("diskSpec") or {}
    container = spec.get("containerSpec") or {}
    pool: dict[str, Any] = {"machine": machine.get("machineType")}
    accelerator = machine.get("acceleratorType")
    if accelerator and accelerator != "ACCELERATOR_TYPE_UNSPECIFIED":
        pool["accelerator"] = accelerator
        pool["accelerator_count"] = int(machine.get("acceleratorCount", 1))
    if machine.get("tpuTopology"):
        pool["tpu_topology"] = machine["tpuTopology"]
    if "reservationAffinity" in machine:
        pool["reservation"] = _reservation_from_rest(machine["reservationAffinity"] or {})
    pool["replicas"] = int(spec.get("replicaCount", Pool.model_fields["replicas"].default))
    if disk:
        pool["boot_disk"] = {"size_gb": int(disk.get("bootDiskSizeGb", _DEFAULT_DISK_GB))}
        if "bootDiskType" in disk:  # else the machine's default, as Vertex picks it
            pool["boot_disk"]["type"] = disk["bootDiskType"]
    image = container.get("imageUri")
    if role == "reduction_server" and image and REDUCTION_SERVER_IMAGE.match(image):
        notes.append("reduction server image left to the template default (same image)")
    elif image:
        pool["image"] = image
    for key in ("command", "args"):
        if container.get(key):
            pool[key] = list(container[key])
    env = {e["name"]: str(e.get("value", "")) for e in container.get("env") or []}
    if env:
        pool["env"] = env
    for key in ("nfsMounts", "lustreMounts"):
        if spec.get(key):
            notes.append(f"{role}: {key} dropped (vtx templates do not support them yet)")
    return pool


def _reservation_from_rest(affinity: dict) -> dict[str, Any]:
    """ReservationAffinity as a template's ``reservation``; the by-name key of a specific
    reservation is the template's default, so it is left out (compile writes it back). A type
    the template cannot name (TYPE_UNSPECIFIED, absent) is kept as written: the structural check
    of the template then says what to write."""
    kind = affinity.get("reservationAffinityType")
    names = {api: name for name, api in AFFINITIES.items()}
    reservation: dict[str, Any] = {"affinity": names.get(kind, kind)}
    key = affinity.get("key")
    if key is not None and not (key == RESERVATION_NAME_KEY and kind == "SPECIFIC_RESERVATION"):
        reservation["key"] = key
    if affinity.get("values"):
        reservation["values"] = list(affinity["values"])
    return reservation


def _hoist(pools: dict[str, dict], template: dict[str, Any]) -> None:
    """Move image/command/args/env shared by every non-reduction pool to the template level."""
    members = [p for role, p in pools.items() if role != "reduction_server"]
    for key in ("image", "command", "args", "env"):
        values = [p.get(key) for p in members]
        if values and values[0] is not None and all(v == values[0] for v in values):
            template[key] = values[0]
            for p in members:
                p.pop(key, None)


def _secrets_from_env(template: dict[str, Any], notes: list[str]) -> None:
    env = template.get("env") or {}
    raw = env.pop(VTX_SECRETS_ENV, None)
    env.pop(RUN_ID_ENV, None)
    if raw is None:
        return
    try:
        secrets = load_json_text(raw)
    except ValueError as exc:
        notes.append(f"{VTX_SECRETS_ENV} was dropped: {exc}")
        return
    if not isinstance(secrets, dict):
        notes.append(f"{VTX_SECRETS_ENV} was not a JSON object; dropped")
        return
    # Back to secret ids (projects/P/secrets/ID[/versions/latest] -> ID), which every stack
    # resolves in its own project; a pinned version keeps its full name, bound to project P.
    template["secrets"] = {}
    for name, ref in secrets.items():
        _project, secret, version = secret_parts(str(ref))
        if version != "latest":
            notes.append(f"secret {name} pins a version: kept as its full name (one project only)")
        template["secrets"][name] = secret if version == "latest" else str(ref)


def _plaintext_credentials_to_secrets(
    template: dict[str, Any], pools: dict[str, dict], notes: list[str]
) -> None:
    """Credentials in env become ``secrets:`` names: the template must not carry their values
    (the same judgement as `vtx validate`'s no_plaintext_secrets rule)."""
    for env in [template.get("env") or {}, *((p.get("env") or {}) for p in pools.values())]:
        for name, value in list(env.items()):
            if name == "GOOGLE_APPLICATION_CREDENTIALS" or not value:
                continue  # a key file path: validation explains why it goes
            if looks_like_credential_name(name) or looks_like_key(value, name):
                del env[name]
                secret = name.lower().replace("_", "-")
                template.setdefault("secrets", {})[name] = secret
                notes.append(
                    f"env {name} held a credential in plain text: left out; it is now "
                    f"`secrets: {{{name}: {secret}}}`: store the value with "
                    f"`gcloud secrets create {secret} --data-file=-`"
                )
    for pool in pools.values():
        if pool.get("env") == {}:
            pool.pop("env")


_ENV_ENTRY = re.compile(r"\.env\[\d+\]$")


def _env_entry(path: str) -> bool:
    """An env entry's value: import turns a credential there into a ``secrets:`` name. A
    credential anywhere else (args, labels, any field) cannot be moved, so import refuses it
    rather than write it into the template."""
    return bool(_ENV_ENTRY.search(path))


def import_spec(spec: dict, name: str, labels: dict | None = None) -> Imported:
    """A CustomJobSpec (camelCase dict, already checked) as a template document."""
    notes: list[str] = []
    template: dict[str, Any] = {"name": name}
    pools: dict[str, dict] = {}
    for i, pool_spec in enumerate((spec.get("workerPoolSpecs") or [])[: len(ROLES)]):
        if pool_spec:
            if "pythonPackageSpec" in pool_spec:
                raise TemplateError(
                    [
                        Problem(
                            f"workerPoolSpecs[{i}].pythonPackageSpec",
                            "vtx templates run containers; python packages cannot be imported",
                            "build an image with the package and use containerSpec.imageUri",
                        )
                    ]
                )
            pools[ROLES[i]] = _pool_from_rest(pool_spec, ROLES[i], notes)
    _hoist(pools, template)
    _secrets_from_env(template, notes)
    _plaintext_credentials_to_secrets(template, pools, notes)
    if template.get("env") == {}:
        template.pop("env")
    template["pools"] = pools
    scheduling = spec.get("scheduling") or {}
    out: dict[str, Any] = {}
    if scheduling.get("strategy") not in (None, "STRATEGY_UNSPECIFIED"):
        out["strategy"] = scheduling["strategy"].lower()
    for rest_key, key in (
        ("timeout", "timeout"),
        ("maxWaitDuration", "max_wait"),
        ("restartJobOnWorkerRestart", "restart_job_on_worker_restart"),
        ("disableRetries", "disable_retries"),
    ):
        if scheduling.get(rest_key) not in (None, False):
            out[key] = scheduling[rest_key]
    if out:
        template["scheduling"] = out
    if spec.get("enableWebAccess"):
        template["web_access"] = True
    user_labels = {k: v for k, v in (labels or {}).items() if k not in OWN_LABELS}
    if user_labels:
        template["labels"] = user_labels
    budget = budget_of(labels or {})
    if budget is not None:  # a job vtx compiled carries its template's budget as a label
        template["budget"] = {"max_cost_usd": budget}
    team = (labels or {}).get(LABEL_TEAM)
    if team:  # a job vtx compiled carries its template's team as a label
        template["team"] = team
    for key, provider in STACK_FIELDS.items():
        if key in spec:
            notes.append(f"{key} dropped: the stack provides it ({provider})")
    return Imported(template, notes)


def import_document(doc: dict, kind: str, source: str) -> Imported:
    """A gcloud document (spec or whole job) as a template; raises TemplateError when invalid."""
    problems = (
        check_rest_fields(doc) if kind == CUSTOM_JOB else check_rest_fields(doc, SPEC_MESSAGE)
    )
    if not problems:
        problems = list(shaped_string_problems(document_strings(doc), _env_entry))
    if problems:
        raise TemplateError([Problem(p.path, p.message, p.hint, source) for p in problems])
    if kind == CUSTOM_JOB:
        # A job vtx rendered names its template in a label; its display name is the run id.
        labels = doc.get("labels") or {}
        raw_name = labels.get(LABEL_TEMPLATE) or doc.get("displayName") or Path(source).stem
        name = template_name(raw_name)
        imported = import_spec(doc.get("jobSpec") or {}, name, doc.get("labels"))
        if "encryptionSpec" in doc:
            imported.notes.append("encryptionSpec dropped: the stack provides its KMS key")
    else:
        name = template_name(Path(source).stem)
        imported = import_spec(doc, name)
    if not re.match(NAME_PATTERN, name):  # template_name guarantees it; keep the contract visible
        raise TemplateError([Problem("name", f"cannot derive a template name from {name!r}")])
    return imported


def template_from_document(document: Document) -> JobTemplate:
    """The JobTemplate a document describes: a vtx template as written, a gcloud document
    converted. Raises TemplateError with every structural problem (the rules run elsewhere)."""
    if document.kind == TEMPLATE:
        return JobTemplate.from_document(document.doc, document.source)
    imported = import_document(document.doc, document.kind, document.source)
    return JobTemplate.from_document(imported.template, document.source)


def load_template(path: Path, overrides: Iterable[str] = ()) -> JobTemplate:
    """The JobTemplate in ``path`` (any format), with ``--set`` overrides applied. Raises
    TemplateError with every structural problem; `jobs.custom_jobs.validate` runs the rules."""
    document = load_document(path, overrides)
    if document.problems:
        raise TemplateError(document.problems)
    return template_from_document(document)
