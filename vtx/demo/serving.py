"""The demo's last act: the run's model registered, deployed, asked one question, undeployed.

The same stages and plans as `vtx model upload RUN_ID`, `vtx deploy MODEL`, `vtx predict` and
`vtx undeploy --all` (jobs.serving.model_upload, jobs.serving.deploy, jobs.serving.endpoint_rest),
run without prompts on
the local platform, where `deploy` starts the model's serving container command
(`python -m trainer.serve`) as a process and `:predict` reaches it."""

from __future__ import annotations

import time
from dataclasses import dataclass

from rich.console import Console

from jobs.core.stack import StackOutputs
from jobs.runs.checkpoints import Storage
from jobs.serving.deploy import DeployOptions, deploy, plan_deploy, plan_undeploy, undeploy
from jobs.serving.endpoint_rest import EndpointRest
from jobs.serving.model_rest import ModelRest
from jobs.serving.model_upload import UploadOptions, plan_upload, upload_model
from vtx.views.fit_table import FitTable
from vtx.views.models import print_model_plan
from vtx.views.serving import print_deploy_plan

PROMPT = "Write a haiku about checkpoints."
MAX_NEW_TOKENS = 16
ENDPOINT = "vtx-demo"
MACHINE = "n1-standard-4"


@dataclass(frozen=True)
class Served:
    model: str
    """The registered model version (``name@version``)."""
    endpoint: str
    prediction: str
    seconds: dict[str, float]
    """Wall time of each stage: upload, deploy, predict, undeploy."""


def serve_run_model(console: Console, stack: StackOutputs, run_id: str) -> Served:
    """Register the run's exported model, deploy it, predict once, undeploy; VertexError or
    UploadRefused/DeployRefused if a stage cannot go on."""
    seconds: dict[str, float] = {}
    models, endpoints = ModelRest(stack), EndpointRest(stack)
    started = time.perf_counter()
    upload = plan_upload(stack, run_id, UploadOptions(), models, Storage(stack))
    print_model_plan(console, upload)
    uploaded = upload_model(stack, upload, models)
    version = f"{uploaded.model}@{uploaded.version_id}"
    seconds["upload"] = _lap(started)
    started = time.perf_counter()
    options = DeployOptions(machine=MACHINE, endpoint=ENDPOINT)
    plan = plan_deploy(stack, version, options, models, endpoints)
    print_deploy_plan(console, plan)
    deployed = deploy(stack, plan, endpoints)
    seconds["deploy"] = _lap(started)
    started = time.perf_counter()
    answer = endpoints.predict(
        deployed.endpoint, [{"prompt": PROMPT}], {"max_new_tokens": MAX_NEW_TOKENS}
    )
    seconds["predict"] = _lap(started)
    started = time.perf_counter()
    undeploy(stack, plan_undeploy(endpoints, deployed.endpoint, None), endpoints)
    seconds["undeploy"] = _lap(started)
    text = str(answer["predictions"][0].get("generated_text", ""))
    return Served(version, deployed.endpoint, text, seconds)


def _lap(started: float) -> float:
    return time.perf_counter() - started


def print_served(console: Console, served: Served) -> None:
    table = FitTable(title="served", show_header=False, title_justify="left")
    table.add_column(no_wrap=True)
    table.add_column(overflow="fold")
    table.add_row("model version", served.model)
    table.add_row("endpoint", served.endpoint)
    table.add_row("prompt", PROMPT)
    table.add_row(f"generated (at most {MAX_NEW_TOKENS} tokens)", repr(served.prediction))
    table.add_row("seconds", ", ".join(f"{stage} {s:.1f}" for stage, s in served.seconds.items()))
    console.print(table)
