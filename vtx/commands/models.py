"""`vtx model upload|list|show|mirror`: a run's exported model into Vertex's Model Registry, what
the registry holds (jobs/serving/model_upload.py, jobs/serving/model_rest.py), and a model's
files into the stack's models bucket (jobs/serving/model_mirror.py).

`upload` checks everything first (the run SUCCEEDED, its model folder holds a model, the parent
model exists, the aliases are valid), prints the plan, asks, then uploads and waits."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from jobs.core.contract import LABEL_RUN_ID
from jobs.serving.model_mirror import (
    MirrorError,
    destination,
    hub_cache,
    local_files,
    mirror,
    resolve_source,
)
from jobs.serving.model_rest import ModelRecord, ModelRest
from jobs.serving.model_upload import (
    UploadOptions,
)
from jobs.vertex.google_session import storage_client
from vtx.confirm import Ask
from vtx.flows.model_upload import upload_run_model
from vtx.options import StackFileOpt, StackOpt, api_errors, console, fail, required_stack
from vtx.views.fit_table import FitTable

model_app = typer.Typer(
    name="model",
    help="Register a run's exported model in the Model Registry; list and show models; mirror "
    "a model's files into the stack's models bucket.",
    no_args_is_help=True,
)
ModelArg = Annotated[
    str, typer.Argument(help="Model id or full resource name, optionally @VERSION or @ALIAS.")
]


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
    raise typer.Exit(upload_run_model(console(), outputs, run_id, options, Ask(yes, dry_run)))


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


@model_app.command("mirror")
def mirror_model(
    source: Annotated[
        str,
        typer.Argument(
            metavar="DIR|ORG/NAME",
            help="A model directory, or a Hugging Face model id already in this machine's cache.",
        ),
    ],
    stack: StackOpt = None,
    stack_file: StackFileOpt = None,
    to: Annotated[
        str | None,
        typer.Option("--to", help="gs://BUCKET/PREFIX (default: the models bucket/NAME)."),
    ] = None,
    revision: Annotated[
        str, typer.Option("--revision", help="Cached revision of a model id (branch or commit).")
    ] = "main",
) -> None:
    """Copy a model's files into the stack's models bucket, with a SHA-256 manifest; unchanged
    files are skipped, every object is checked after the upload. Jobs then name the gs:// prefix
    as `model.name_or_path`: the way in for stacks with no route to the Hub."""
    outputs = required_stack(stack, stack_file)
    out = console()
    try:
        directory, name = resolve_source(source, hub_cache(), revision)
        prefix = destination(outputs, to, name)
        files = local_files(directory)
        result = mirror(
            storage_client(outputs),
            files,
            prefix,
            source,
            on_file=lambda f, up: out.print(
                f"  {'uploaded ' if up else 'unchanged'} {f.relative}", highlight=False
            ),
        )
    except (MirrorError, OSError) as exc:
        raise fail(str(exc)) from None
    out.print(
        f"mirrored {len(files)} file(s) to {prefix} ({len(result.uploaded)} uploaded, "
        f"{len(result.unchanged)} unchanged); manifest {result.manifest_uri}",
        highlight=False,
    )
    if result.extra:
        out.print(f"left in place, not in the source: {', '.join(result.extra)}", highlight=False)
    out.print(f"in a trainer config: model.name_or_path: {prefix}", highlight=False)
