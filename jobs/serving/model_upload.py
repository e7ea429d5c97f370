"""`vtx model upload RUN_ID`: a run's exported model registered in Vertex's Model Registry.

Three stages, as a launch goes (vtx/commands/models.py runs them):
- plan (``plan_upload``): the run's newest attempt must have SUCCEEDED; its model folder
  (``AIP_MODEL_DIR`` = ``<run output prefix>model/``, where trainer/model/export.py writes) must
  hold a model; a parent model named must exist; aliases must be ones the registry takes. Every
  problem is collected, then refused at once (``UploadRefused``). The result is the exact REST
  ``Model`` to upload and what it was built from.
- the user confirms the printed plan.
- upload (``upload_model``): ``ModelServiceClient.upload_model`` through the SDK, then the
  operation waited for; the model's name and its new version id come back.

The artifactUri is the model folder itself, whatever the trainer exported there: the serving
entry point (trainer/serving/served_model.py) picks ``merged/`` when a LoRA run merged on export,
else the adapter at the top (over its base model), else a full model; the plan names which it found.

UploadModel is not idempotent (a retried request registers a second version), so it is sent
once, and a 503 is retried only after checking that no version of this run landed meanwhile,
as `client.Vertex.create` does for jobs. aiplatform is imported inside the functions that send.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from jobs.core.contract import LABEL_RUN_ID, LABEL_TEMPLATE, VTX_LABELS
from jobs.core.naming import display_name_problem
from jobs.core.problems import Refused
from jobs.core.stack import StackOutputs
from jobs.core.states import bare_name, succeeded
from jobs.custom_jobs.compile import resolve_image
from jobs.runs.checkpoints import CheckpointsError, Storage
from jobs.serving.model_facts import (
    DEFAULT_ALIAS,
    HEALTH_ROUTE,
    PREDICT_ROUTE,
    SERVING_IMAGE,
    SERVING_PORT,
    alias_problems,
)
from jobs.serving.model_rest import ModelRecord, ModelRest
from jobs.vertex.client import create_and_wait, service_client
from jobs.vertex.errors import NOT_FOUND, VertexError
from jobs.vertex.locations import parent
from jobs.vertex.retry import Backoff

if TYPE_CHECKING:
    from google.cloud import aiplatform_v1


UPLOAD_TIMEOUT_S = 1800.0
"""How long to wait for the upload's operation; Vertex copies the artifacts, minutes for GBs."""
LAYOUTS = (
    ("merged", "merged/config.json"),
    ("adapter", "adapter_config.json"),
    ("full", "config.json"),
)
"""The exported layouts, in the order trainer/serving/served_model.py tries them: (kind, marker file
relative to the model folder)."""


class UploadRefused(Refused):
    """What stops an upload, every problem found (each names what to do)."""


@dataclass(frozen=True)
class UploadOptions:
    """What the user asked for beyond the run id."""

    image: str | None = None
    """The serving image; default the project's (``<artifact_registry>/serve:latest``)."""
    display_name: str | None = None
    parent_model: str | None = None
    """An existing model (id or full name): the upload becomes its next version."""
    aliases: tuple[str, ...] = ()
    description: str | None = None


@dataclass(frozen=True)
class ModelPlan:
    """An upload, checked: the exact REST Model and where its parts came from."""

    run_id: str
    job_name: str
    """The run's attempt that succeeded (and exported the model)."""
    layout: str
    """``merged``, ``adapter`` or ``full`` (LAYOUTS)."""
    parent_model: str | None
    """The full name of the model this becomes a version of; None: a new model."""
    model: dict

    @property
    def artifact_uri(self) -> str:
        return str(self.model["artifactUri"])

    @property
    def image(self) -> str:
        return str(self.model["containerSpec"]["imageUri"])


@dataclass(frozen=True)
class Uploaded:
    model: str
    """The model's resource name."""
    version_id: str


def model_layout(names: Iterable[str], model_path: str) -> str | None:
    """Which exported layout the object names under the model folder (``model_path``, without
    the bucket) hold; None when none (no model was exported there)."""
    relative = {n.removeprefix(f"{model_path.rstrip('/')}/") for n in names}
    return next((kind for kind, marker in LAYOUTS if marker in relative), None)


def model_folder(output_prefix: str) -> str:
    """Vertex's ``AIP_MODEL_DIR`` for a job with this ``baseOutputDirectory``."""
    return f"{output_prefix.rstrip('/')}/model/"


def serving_model(
    stack: StackOutputs, artifact_uri: str, labels: dict[str, str], options: UploadOptions
) -> dict:
    """The REST Model: the artifacts, the serving container with Vertex's custom-container
    contract (port, predict and health routes), the run's labels, the aliases."""
    image = resolve_image(options.image or SERVING_IMAGE, stack)
    model: dict[str, Any] = {
        "displayName": options.display_name,
        "artifactUri": artifact_uri,
        "containerSpec": {
            "imageUri": image,
            "predictRoute": PREDICT_ROUTE,
            "healthRoute": HEALTH_ROUTE,
            "ports": [{"containerPort": SERVING_PORT}],
        },
        "labels": labels,
        # As the SDK's Model.upload does (is_default_version=True): the new version serves.
        "versionAliases": [*options.aliases, DEFAULT_ALIAS]
        if DEFAULT_ALIAS not in options.aliases
        else list(options.aliases),
    }
    if options.description:
        model["description"] = options.description
    return model


def plan_upload(
    stack: StackOutputs,
    run_id: str,
    options: UploadOptions,
    rest: ModelRest,
    storage: Storage,
) -> ModelPlan:
    """Every check before an upload; raises UploadRefused with all problems found."""
    problems = [f"--alias {p}" for p in alias_problems(list(options.aliases))]
    display = None if options.display_name is None else display_name_problem(options.display_name)
    if display is not None:
        problems.append(f"--display-name: {display}")
    parent_model = _parent_model(rest, options.parent_model, problems)
    if rest.list_studies(run_id):
        raise UploadRefused(
            [
                *problems,
                f"run {run_id} is a hyperparameter tuning study: each trial exports its own "
                f"model (under <run prefix>/<trial id>/model/); uploading a trial's model is not "
                f"supported yet",
            ]
        )
    attempts = rest.list(run_id)
    if not attempts:
        raise UploadRefused(
            [*problems, f"run {run_id!r} not found in {parent(stack)}: see `vtx list`"]
        )
    final = attempts[0]
    if not succeeded(final.state):
        problems.append(
            f"run {run_id} is {bare_name(final.state)} (its newest attempt "
            f"{final.name}): only a run that SUCCEEDED has exported its model"
        )
        raise UploadRefused(problems)
    if not final.output_prefix:
        raise UploadRefused([*problems, f"{final.name} has no baseOutputDirectory: no model dir"])
    folder = model_folder(final.output_prefix)
    layout = _layout(storage, folder, problems)
    labels = {k: final.labels[k] for k in VTX_LABELS if k in final.labels}
    display = options.display_name or (
        parent_model.display_name if parent_model else labels.get(LABEL_TEMPLATE, run_id)
    )
    if problems or layout is None:
        raise UploadRefused(problems)
    model = serving_model(stack, folder, labels, replace(options, display_name=display))
    return ModelPlan(
        run_id=run_id,
        job_name=final.name,
        layout=layout,
        parent_model=parent_model.name if parent_model else None,
        model=model,
    )


def _parent_model(rest: ModelRest, ref: str | None, problems: list[str]) -> ModelRecord | None:
    if ref is None:
        return None
    if "@" in ref:
        problems.append(f"--parent-model {ref}: name the model, without @VERSION")
        return None
    try:
        return rest.get_model(ref)
    except VertexError as err:
        if err.http_code != NOT_FOUND:
            raise
        problems.append(
            f"--parent-model {ref}: no such model in {parent(rest.stack)} (see `vtx model list`)"
        )
        return None


def _layout(storage: Storage, folder: str, problems: list[str]) -> str | None:
    try:
        names = storage.names(folder)
    except CheckpointsError as exc:
        problems.append(f"cannot read the run's model folder: {exc}")
        return None
    layout = model_layout(names, folder.removeprefix("gs://").partition("/")[2])
    if layout is None:
        problems.append(
            f"no model under {folder}: expected config.json (a full model), "
            f"adapter_config.json (LoRA) or merged/config.json, as the trainer exports when "
            f"its run ends"
            + (f" (found {len(names)} other objects)" if names else " (the folder is empty)")
        )
    return layout


# -- sending -----------------------------------------------------------------------------------


def make_model_client(stack: StackOutputs) -> aiplatform_v1.ModelServiceClient:
    from google.cloud import aiplatform_v1

    return service_client(aiplatform_v1.ModelServiceClient, stack)


def _run_versions(rest: ModelRest, plan: ModelPlan) -> set[tuple[str, str]]:
    """(model, version) of every version carrying this run's label where the upload lands."""
    if plan.parent_model:
        found = rest.list_versions(plan.parent_model)
    else:
        found = rest.list_models(f'labels.{LABEL_RUN_ID}="{plan.run_id}"')
    return {(m.name, m.version_id) for m in found if m.labels.get(LABEL_RUN_ID) == plan.run_id}


def upload_model(
    stack: StackOutputs,
    plan: ModelPlan,
    rest: ModelRest,
    client: aiplatform_v1.ModelServiceClient | None = None,
    backoff: Backoff = Backoff(),
    timeout_s: float = UPLOAD_TIMEOUT_S,
) -> Uploaded:
    """Send the planned upload and wait for its operation. A 503 is retried with backoff,
    each time after checking that no version of this run landed (then that one is returned)."""
    from google.cloud import aiplatform_v1

    client = client or make_model_client(stack)
    request = aiplatform_v1.UploadModelRequest(
        parent=parent(stack),
        model=aiplatform_v1.Model.from_json(json.dumps(plan.model)),
        parent_model=plan.parent_model or "",
    )
    existing = _run_versions(rest, plan)

    def send() -> Uploaded:
        response = client.upload_model(request=request, retry=None).result(timeout=timeout_s)
        return Uploaded(response.model, response.model_version_id)

    def landed() -> Uploaded | None:
        new = sorted(_run_versions(rest, plan) - existing)
        return Uploaded(*new[-1]) if new else None

    return create_and_wait(stack, "upload", send, landed, backoff, timeout_s, "`vtx model list`")
