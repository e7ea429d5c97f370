"""The Model Registry of the local platform: ModelService v1's models, their versions and
aliases, and the long-running operations that upload and delete them.

Each version is stored whole, as the REST ``Model`` Vertex returns for it (camelCase, enum
names): ``name`` is the model's (``.../models/ID``, no ``@``), ``versionId`` counts from "1"
within the model, ``versionAliases`` are unique within it. What model.proto says, and Vertex
does:
- the first version of a model gets the ``default`` alias even when the request names none;
  a later version that names ``default`` (the SDK adds it unless ``is_default_version=False``)
  takes it from the version holding it, so exactly one version holds it;
- a name without ``@`` means the ``default`` version; ``@ID`` or ``@ALIAS`` picks one;
- ListModels answers one entry per model (its default version), ListModelVersions every one;
- MergeVersionAliases adds (``A``) and removes (``-A``) a version's aliases; ``default`` is
  only ever taken by another version, never removed.
Three choices marked UNCONFIRMED (the protos do not say): another alias named by a new version
moves to it, like ``default``; a version's ``createTime`` is its model's (the first version's)
and ``updateTime`` the last change of any version; ``containerSpec`` (input only in the proto)
is returned, as ``gcloud ai models describe`` shows it.

An upload answers an operation named under the new model (``.../models/ID/operations/OP``, as
Vertex names it) that is not done yet; the model is registered at once, and the operation is
done from its first read on, so a client's poll (the SDK's ``lro.result()``) is served and
always ends at once. Deletes answer operations under the model too, already done.

``Models.register`` is the one way in: the upload route calls it, and so can the platform's
own services (a training pipeline that uploads its model at the end).
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from dataclasses import dataclass
from typing import Any

from jobs.core.formats import now_rfc3339
from jobs.core.naming import display_name_problem, label_problems
from jobs.local.platform.operations import TYPE_PREFIX, delete_operation
from jobs.local.platform.state import numbered_name
from jobs.local.platform.store import Store
from jobs.local.serving.model_filters import (
    MODEL_FIELDS,
    VERSION_FIELDS,
    ModelFilterError,
    parse_model_filter,
)
from jobs.serving.model_facts import DEFAULT_ALIAS, alias_problems

MODEL_ID = re.compile(r"^[a-z_][a-z0-9_-]{0,62}$")
"""UploadModelRequest.model_id: up to 63 of ``[a-z0-9_-]``, not starting with a digit or '-'."""
OUTPUT_ONLY = (
    "name",
    "versionId",
    "versionCreateTime",
    "versionUpdateTime",
    "createTime",
    "updateTime",
    "deployedModels",
    "etag",
    "supportedExportFormats",
    "supportedDeploymentResourcesTypes",
    "supportedInputStorageFormats",
    "supportedOutputStorageFormats",
    "trainingPipeline",
    "modelSourceInfo",
    "originalModelInfo",
    "metadataArtifact",
    "satisfiesPzs",
    "satisfiesPzi",
)
"""Fields a client may send but Vertex sets itself: dropped from an upload's model."""


class ModelError(Exception):
    """A request the registry refuses: an HTTP code, Google's status name and a message."""

    def __init__(self, http_code: int, message: str, status: str) -> None:
        super().__init__(message)
        self.http_code, self.message, self.status = http_code, message, status


def not_found(name: str) -> ModelError:
    return ModelError(404, f"Model {name} does not exist", "NOT_FOUND")


def invalid(message: str) -> ModelError:
    return ModelError(400, message, "INVALID_ARGUMENT")


@dataclass(frozen=True)
class ModelRef:
    """A model name as a request writes it: ``projects/P/locations/L/models/ID[@VERSION]``."""

    parent: str
    model_id: str
    version: str | None

    @property
    def name(self) -> str:
        return f"{self.parent}/models/{self.model_id}"

    @classmethod
    def parse(cls, parent: str, model: str) -> ModelRef:
        """``model`` is the path segment after ``models/`` (an id, maybe ``@VERSION``)."""
        model_id, at, version = model.partition("@")
        if not model_id or (at and not version) or "@" in version:
            raise invalid(f"invalid model name {parent}/models/{model}")
        return cls(parent, model_id, version or None)


# -- pure checks -----------------------------------------------------------------------------


def model_problems(model: dict) -> list[str]:
    """What an uploaded ``Model`` must be: a display name, a gs:// artifact folder, a serving
    container with an image when there is a container spec, valid aliases and labels."""
    problems = []
    display = display_name_problem(str(model.get("displayName", "")))
    if display is not None:
        problems.append(f"model.displayName: {display}")
    artifact = model.get("artifactUri")
    if artifact and not str(artifact).startswith("gs://"):
        problems.append(f"model.artifactUri: {artifact!r} must be a gs:// folder")
    container = model.get("containerSpec")
    if container is not None and not container.get("imageUri"):
        problems.append("model.containerSpec.imageUri: required with a containerSpec")
    for port in (container or {}).get("ports", []):
        if not 1 <= int(port.get("containerPort", 0)) <= 65535:
            problems.append(f"model.containerSpec.ports: {port} is not a port (1..65535)")
    problems += [
        f"model.versionAliases: {p}" for p in alias_problems(list(model.get("versionAliases", [])))
    ]
    problems += [f"model.{p}" for p in label_problems(dict(model.get("labels", {})))]
    return problems


def with_aliases_taken(versions: list[dict], taken: set[str]) -> list[dict]:
    """The versions whose aliases change because a new version takes ``taken``."""
    changed = []
    for version in versions:
        kept = [a for a in version.get("versionAliases", []) if a not in taken]
        if kept != version.get("versionAliases", []):
            changed.append({**version, "versionAliases": kept})
    return changed


def pick_version(versions: list[dict], wanted: str | None) -> dict | None:
    """The version a name points at: by id, by alias, else (no ``@``) the default one."""
    key = wanted or DEFAULT_ALIAS
    for version in versions:
        if version.get("versionId") == key or key in version.get("versionAliases", []):
            return version
    return None


def etag_of(model: dict) -> str:
    """A fingerprint of the version's content, which changes when the version does."""
    body = json.dumps({k: v for k, v in model.items() if k != "etag"}, sort_keys=True)
    return hashlib.sha256(body.encode()).hexdigest()[:16]


def upload_operation(model_name: str, version_id: str, created: str, done: bool) -> dict:
    """The long-running operation of an upload, in REST form (``google.longrunning``)."""
    operation: dict[str, Any] = {
        "metadata": {
            "@type": f"{TYPE_PREFIX}UploadModelOperationMetadata",
            "genericMetadata": {"createTime": created, "updateTime": created},
        },
        "done": done,
    }
    if done:
        operation["response"] = {
            "@type": f"{TYPE_PREFIX}UploadModelResponse",
            "model": model_name,
            "modelVersionId": version_id,
        }
    return operation


# -- the service -------------------------------------------------------------------------------


class Models:
    """Models and their operations over the store. Every change that reads what it then
    writes (an upload's version number or modelId, an alias moving, a delete's checks) runs in
    one store transaction, so concurrent requests are serialised: twenty uploads to one model
    make twenty versions, ten creates of one modelId one model and nine 409s."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def register(
        self,
        parent: str,
        model: dict,
        *,
        parent_model: str | None = None,
        model_id: str | None = None,
        training_pipeline: str | None = None,
    ) -> dict:
        """Register ``model`` (REST form) under ``parent`` (``projects/N/locations/L``): a new
        model, or a new version of ``parent_model`` (its full name). Returns the stored version.
        Raises ModelError with what to change."""
        problems = model_problems(model)
        if model_id is not None and not MODEL_ID.match(model_id):
            problems.append(
                f"modelId: {model_id!r}: up to 63 of a-z, 0-9, '_' and '-', not starting with a "
                f"digit or '-'"
            )
        if problems:
            raise invalid("; ".join(problems))
        with self.store.transaction():
            return self._add_version(parent, model, parent_model, model_id, training_pipeline)

    def _add_version(
        self,
        parent: str,
        model: dict,
        parent_model: str | None,
        model_id: str | None,
        training_pipeline: str | None,
    ) -> dict:
        """The checked ``model`` stored as the next version of ``parent_model``, or as a new
        model; inside the caller's transaction."""
        now = now_rfc3339()
        version = {k: v for k, v in model.items() if k not in OUTPUT_ONLY}
        aliases = list(version.get("versionAliases", []))
        if parent_model:
            ref = self._parent_ref(parent, parent_model, model_id)
            versions = [v for _, v in self.store.model_versions(ref.name)]
            if not versions:
                raise not_found(ref.name)
            model_id, created = ref.model_id, versions[0]["createTime"]
            number = 1 + max(int(v["versionId"]) for v in versions)
            for changed in with_aliases_taken(versions, set(aliases)):
                self._touch(changed, now)
        else:
            if model_id is None:
                model_id = self._unused_id(parent)
            elif self.store.model_versions(f"{parent}/models/{model_id}"):
                raise ModelError(
                    409,
                    f"Model {parent}/models/{model_id} already exists: pass it as parentModel "
                    f"to upload a new version",
                    "ALREADY_EXISTS",
                )
            created, number = now, 1
            if DEFAULT_ALIAS not in aliases:
                aliases.append(DEFAULT_ALIAS)
        version.update(
            name=f"{parent}/models/{model_id}",
            versionId=str(number),
            versionAliases=aliases,
            versionCreateTime=now,
            versionUpdateTime=now,
            createTime=created,
            updateTime=now,
        )
        if version.get("containerSpec"):
            # A custom container serves on dedicated machines (model.proto's enum).
            version["supportedDeploymentResourcesTypes"] = ["DEDICATED_RESOURCES"]
        if training_pipeline:
            version["trainingPipeline"] = training_pipeline
        version["etag"] = etag_of(version)
        self.store.put_model_version(version["name"], str(number), version)
        return version

    def _unused_id(self, parent: str) -> str:
        """A 19-digit numeric id, like Vertex's, that no model of ``parent`` has."""
        while self.store.model_versions(f"{parent}/models/{(model_id := self.store.unused_id())}"):
            pass
        return model_id

    def _parent_ref(self, parent: str, parent_model: str, model_id: str | None) -> ModelRef:
        prefix = f"{parent}/models/"
        named = numbered_name(parent_model)  # the SDK names it by the project's id
        if not named.startswith(prefix) or "@" in named:
            raise invalid(
                f"parentModel {parent_model!r}: must be a model of {parent} "
                f"({prefix}ID, without @VERSION)"
            )
        ref = ModelRef.parse(parent, named.removeprefix(prefix))
        if model_id is not None and model_id != ref.model_id:
            raise invalid(f"modelId {model_id!r} differs from parentModel {parent_model!r}")
        return ref

    def upload(
        self, parent: str, model: dict, parent_model: str | None, model_id: str | None
    ) -> dict:
        """UploadModel: register, then answer an operation that is done from its first read."""
        version = self.register(parent, model, parent_model=parent_model, model_id=model_id)
        name = f"{version['name']}/operations/{secrets.randbelow(9 * 10**18) + 10**18}"
        model_name, version_id = version["name"], version["versionId"]
        created = version["versionCreateTime"]
        done = upload_operation(model_name, version_id, created, done=True)
        self.store.put_operation(name, {"name": name, **done})
        return {"name": name, **upload_operation(model_name, version_id, created, done=False)}

    def get(self, ref: ModelRef) -> dict:
        version = pick_version([v for _, v in self.store.model_versions(ref.name)], ref.version)
        if version is None:
            raise not_found(ref.name + (f"@{ref.version}" if ref.version else ""))
        return self._with_deployments(version)

    def _deployed(self, model_name: str, version_id: str | None = None) -> list[dict]:
        """``Model.deployedModels``: where the model (one version of it) is deployed, from the
        endpoints' deployment records."""
        return [
            {"endpoint": record["endpoint"], "deployedModelId": record["id"]}
            for record in self.store.list_deployments()
            if record["model"]["name"] == model_name
            and version_id in (None, record["model"]["versionId"])
        ]

    def _with_deployments(self, version: dict) -> dict:
        deployed = self._deployed(version["name"], version["versionId"])
        return {**version, "deployedModels": deployed} if deployed else version

    def _refuse_while_deployed(self, name: str, version_id: str | None = None) -> None:
        """Vertex refuses to delete a model (or version) that is deployed: undeploy it first."""
        where = sorted({d["endpoint"] for d in self._deployed(name, version_id)})
        if where:
            shown = f"{name}@{version_id}" if version_id else name
            raise ModelError(
                400,
                f"{shown} is deployed at {', '.join(where)}: undeploy it first",
                "FAILED_PRECONDITION",
            )

    def list(self, parent: str, filter: str) -> list[tuple[int, dict]]:
        """(position, default version) of each model of ``parent``, newest model first; the
        position is its first version's, so page tokens stay stable while models are added."""
        matches = self._filter(filter)
        first: dict[str, int] = {}
        chosen: dict[str, dict] = {}
        for pos, version in self.store.list_model_versions():
            if not version["name"].startswith(parent + "/"):
                continue
            first.setdefault(version["name"], pos)
            if DEFAULT_ALIAS in version.get("versionAliases", []):
                chosen[version["name"]] = version
        found = [(first[m], self._with_deployments(v)) for m, v in chosen.items() if matches(v)]
        return sorted(found, key=lambda item: item[0], reverse=True)

    def versions(self, ref: ModelRef, filter: str) -> list[tuple[int, dict]]:
        """(position, version) of one model, oldest version first."""
        if ref.version:
            raise invalid(f"{ref.name}@{ref.version}: list the versions of a model, not of one")
        matches = self._filter(filter, VERSION_FIELDS)
        versions = self.store.model_versions(ref.name)
        if not versions:
            raise not_found(ref.name)
        return [(pos, v) for pos, v in versions if matches(v)]

    @staticmethod
    def _filter(text: str, allowed: tuple[str, ...] = MODEL_FIELDS) -> Any:
        try:
            return parse_model_filter(text, allowed)
        except ModelFilterError as exc:
            raise invalid(str(exc)) from exc

    def delete(self, ref: ModelRef) -> dict:
        """DeleteModel: every version; refused while any of them is deployed."""
        if ref.version:
            raise invalid(f"{ref.name}@{ref.version}: delete a version with :deleteVersion")
        with self.store.transaction():
            self.get(ref)
            self._refuse_while_deployed(ref.name)
            if not self.store.delete_model_versions(ref.name):
                raise not_found(ref.name)  # a delete that raced this one removed it first
            return self._done_operation(ref.name)

    def merge_aliases(self, ref: ModelRef, changes: list[str]) -> dict:
        """MergeVersionAliases: ``ALIAS`` adds (taken from the version holding it), ``-ALIAS``
        removes; the same alias added and removed cancels out, as model_service.proto says.
        ``default`` cannot be removed, only taken by another version. Returns the version."""
        if not ref.version:
            raise invalid(f"{ref.name}: name the version, as {ref.name}@VERSION_ID")
        added = [c for c in changes if not c.startswith("-")]
        removed = [c[1:] for c in changes if c.startswith("-")]
        problems = [f"versionAliases: {p}" for p in alias_problems(added + removed)]
        if not changes:
            problems.append("versionAliases: required")
        if DEFAULT_ALIAS in removed and DEFAULT_ALIAS not in added:
            problems.append(
                "versionAliases: -default: a model keeps exactly one default version; add "
                "default to another version instead"
            )
        if problems:
            raise invalid("; ".join(problems))
        with self.store.transaction():
            return self._move_aliases(ref, added, removed)

    def _move_aliases(self, ref: ModelRef, added: list[str], removed: list[str]) -> dict:
        version = self.get(ref)
        both = set(added) & set(removed)
        taken = set(added) - both
        now = now_rfc3339()
        versions = [v for _, v in self.store.model_versions(ref.name)]
        others = [v for v in versions if v["versionId"] != version["versionId"]]
        for changed in with_aliases_taken(others, taken):
            self._touch(changed, now)
        kept = [a for a in version.get("versionAliases", []) if a not in set(removed) - both]
        version["versionAliases"] = kept + sorted(taken - set(kept))
        return self._touch(version, now)

    def _touch(self, version: dict, now: str) -> dict:
        version.pop("deployedModels", None)  # read from the deployments, never stored
        version["versionUpdateTime"] = version["updateTime"] = now
        version["etag"] = etag_of(version)
        self.store.put_model_version(version["name"], version["versionId"], version)
        return self._with_deployments(version)

    def delete_version(self, ref: ModelRef) -> dict:
        """DeleteModelVersion: refused for the only version (delete the model) and for the
        default one (move ``default`` first), as the ModelService documents."""
        if not ref.version:
            raise invalid(f"{ref.name}: name the version to delete, as {ref.name}@VERSION_ID")
        with self.store.transaction():
            return self._delete_version(ref)

    def _delete_version(self, ref: ModelRef) -> dict:
        version = self.get(ref)
        if len(self.store.model_versions(ref.name)) == 1:
            raise ModelError(
                400,
                f"{ref.name}@{version['versionId']} is the model's only version: delete the model",
                "FAILED_PRECONDITION",
            )
        if DEFAULT_ALIAS in version.get("versionAliases", []):
            raise ModelError(
                400,
                f"{ref.name}@{version['versionId']} holds the default alias: give it to another "
                f"version first",
                "FAILED_PRECONDITION",
            )
        self._refuse_while_deployed(ref.name, version["versionId"])
        if not self.store.delete_model_versions(ref.name, version["versionId"]):
            raise not_found(f"{ref.name}@{version['versionId']}")  # raced by another delete
        return self._done_operation(ref.name)

    def _done_operation(self, model_name: str) -> dict:
        """A delete's operation, named under the model as Vertex names a model's operations
        (and kept: a client may read it after the model is gone)."""
        name = f"{model_name}/operations/{secrets.randbelow(9 * 10**18) + 10**18}"
        operation = delete_operation(name, now_rfc3339())
        self.store.put_operation(name, operation)
        return operation

    def operation(self, name: str) -> dict:
        found = self.store.get_operation(name)
        if found is None:
            raise ModelError(404, f"Operation {name} does not exist", "NOT_FOUND")
        return found
