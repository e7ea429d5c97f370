"""`vtx model upload|list|show`: a run's exported model into Vertex's Model Registry, and what
the registry holds (jobs/serving/model_upload.py, jobs/serving/model_rest.py).

`upload` checks everything first (the run SUCCEEDED, its model folder holds a model, the parent
model exists, the aliases are valid), prints the plan, asks, then uploads and waits."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from jobs.core.contract import LABEL_RUN_ID
from jobs.core.stack import StackOutputs
from jobs.runs.checkpoints import Storage
from jobs.serving.model_rest import ModelRecord, ModelRest
from jobs.serving.model_upload import (
    ModelPlan,
    Uploaded,
    UploadOptions,
    UploadRefused,
    plan_upload,
    upload_model,
)
from vtx.confirm import Ask, plan_and_confirm
from vtx.options import StackFileOpt, StackOpt, api_errors, console, required_stack
from vtx.output import FitTable, print_error

model_app = typer.Typer(
    name="model",
    help="Register a run's exported model in the Model Registry; list and show models.",
    no_args_is_help=True,
)
ModelArg = Annotated[
    str, typer.Argument(help="Model id or full resource name, optionally @VERSION or @ALIAS.")
]


def print_model_plan(out: Console, plan: ModelPlan) -> None:
    model, spec = plan.model, plan.model["containerSpec"]
    table = FitTable(
        title=f"model upload: run {plan.run_id}", show_header=False, title_justify="left"
    )
    table.add_column(style="bold")
    table.add_column()
    table.add_row("into", plan.parent_model or "a new model")
    table.add_row("display name", model["displayName"])
    table.add_row("artifactUri", f"{plan.artifact_uri} ({plan.layout} model)")
    table.add_row("from", plan.job_name)
    table.add_row("serving image", plan.image)
    ports = ", ".join(str(p["containerPort"]) for p in spec["ports"])
    table.add_row(
        "routes", f"predict {spec['predictRoute']}, health {spec['healthRoute']}, port {ports}"
    )
    table.add_row("aliases", ", ".join(model["versionAliases"]))
    table.add_row("labels", ", ".join(f"{k}={v}" for k, v in model["labels"].items()))
    out.print(table)


def upload_run_model(
    out: Console,
    stack: StackOutputs,
    run_id: str,
    options: UploadOptions,
    *,
    yes: bool = False,
    dry_run: bool = False,
    confirm: Callable[[str], bool] = lambda q: typer.confirm(q, default=False),
    rest: ModelRest | None = None,
    storage: Storage | None = None,
) -> int:
    """Plan, confirm, upload and wait; the exit code (also `vtx launch --upload-model`'s)."""
    rest = rest or ModelRest(stack)
    with api_errors(out, "not uploaded"):
        try:
            plan = plan_upload(stack, run_id, options, rest, storage or Storage(stack))
        except UploadRefused as refused:
            for problem in refused.problems:
                print_error(out, problem, "not uploaded")
            return 1
        done: list[Uploaded] = []
        code = plan_and_confirm(
            out, lambda: print_model_plan(out, plan),
            lambda: done.append(upload_model(stack, plan, rest)) or 0,
            Ask(yes, dry_run, confirm), "Upload this model?", done="uploaded",
        )  # fmt: skip
    if code or not done:
        return code
    uploaded = done[0]
    out.print(f"model [bold]{uploaded.model}[/bold]", highlight=False)
    out.print(f"version: [bold]{uploaded.version_id}[/bold]", highlight=False)
    return 0


@model_app.command()
def upload(
    run_id: Annotated[str, typer.Argument(help="The run whose exported model to register.")],
    stack: StackOpt = None,
    stack_file: StackFileOpt = None,
    image: Annotated[
        str | None,
        typer.Option("--image", help="Serving image (default: the stack's serve:latest)."),
    ] = None,
    display_name: Annotated[
        str | None,
        typer.Option("--display-name", help="Default: the parent model's, else the template's."),
    ] = None,
    parent_model: Annotated[
        str | None,
        typer.Option("--parent-model", help="Upload as a new version of this model (id or name)."),
    ] = None,
    alias: Annotated[
        list[str] | None,
        typer.Option("--alias", help="Version alias (repeatable); `default` is always added."),
    ] = None,
    description: Annotated[str | None, typer.Option("--description")] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Stop after the plan.")] = False,
) -> None:
    """Register a SUCCEEDED run's exported model (plan, confirm, upload, wait)."""
    outputs = required_stack(stack, stack_file)
    options = UploadOptions(
        image=image,
        display_name=display_name,
        parent_model=parent_model,
        aliases=tuple(alias or ()),
        description=description,
    )
    raise typer.Exit(
        upload_run_model(console(), outputs, run_id, options, yes=yes, dry_run=dry_run)
    )


def _models_table(title: str, models: list[ModelRecord]) -> Table:
    table = FitTable(title=title, title_justify="left")
    for column in ("model", "version", "aliases", "display name", "run", "created", "artifactUri"):
        table.add_column(column)
    for m in models:
        table.add_row(
            m.model_id,
            m.version_id,
            ", ".join(m.aliases),
            m.display_name,
            m.labels.get(LABEL_RUN_ID, ""),
            m.created,
            m.artifact_uri,
        )
    return table


@model_app.command("list")
def list_models(
    stack: StackOpt = None,
    stack_file: StackFileOpt = None,
    filter: Annotated[
        str, typer.Option("--filter", help='ListModels filter, e.g. labels.vtx-run-id="RUN".')
    ] = "",
) -> None:
    """The region's models (each at its default version), newest first."""
    outputs = required_stack(stack, stack_file)
    out = console()
    with api_errors(out):
        models = ModelRest(outputs).list_models(filter)
    out.print(_models_table(f"models in {outputs.project}/{outputs.region}", models))


@model_app.command()
def show(model: ModelArg, stack: StackOpt = None, stack_file: StackFileOpt = None) -> None:
    """One model: the version named (default: the default one), then every version."""
    outputs = required_stack(stack, stack_file)
    out = console()
    rest = ModelRest(outputs)
    with api_errors(out):
        record = rest.get_model(model)
        versions = rest.list_versions(record.name)
    spec = record.rest.get("containerSpec") or {}
    out.print(f"[bold]{record.name}@{record.version_id}[/bold]", highlight=False)
    for key, value in (
        ("display name", record.display_name),
        ("artifactUri", record.artifact_uri),
        ("serving image", record.image),
        ("routes", f"predict {spec.get('predictRoute', '')}, health {spec.get('healthRoute', '')}"),
        ("labels", ", ".join(f"{k}={v}" for k, v in record.labels.items())),
    ):
        out.print(f"{key}: {value}", highlight=False)
    out.print(_models_table("versions", versions))
