"""`vtx deploy`, `vtx predict`, `vtx undeploy` and `vtx endpoint list|show`: a registered model
version served from a Vertex Endpoint, asked for predictions, and taken down
(jobs/serving/deploy.py, jobs/serving/endpoint_rest.py).

`deploy` and `undeploy` check everything first, print the plan (for a deploy: machine, replicas,
the traffic split after the change, the serving identity, $/h at min and max replicas), ask,
then send and wait. `predict` and `endpoint` read over plain REST (no aiplatform import)."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.console import Console

from jobs.core.stack import StackOutputs
from jobs.core.user_io import (
    STDIN,
    UserFileError,
    load_json_text,
    read_user_file,
    shown_path,
)
from jobs.serving.deploy import (
    DeployOptions,
    DeployRefused,
    UndeployPlan,
    deploy,
    plan_deploy,
    plan_undeploy,
    undeploy,
)
from jobs.serving.endpoint_access import access_of, reach_lines
from jobs.serving.endpoint_rest import PREDICT_REQUEST_MAX_BYTES, EndpointRest
from jobs.serving.model_rest import ModelRest
from jobs.vertex.errors import VertexError
from vtx.confirm import Ask, confirmed, print_refused
from vtx.options import StackFileOpt, StackOpt, api_errors, console, fail, required_stack
from vtx.views.fit_table import FitTable
from vtx.views.problems import print_error
from vtx.views.serving import deployed_names, print_deploy_plan, split_text

app = typer.Typer()
endpoint_app = typer.Typer(
    name="endpoint", help="The region's endpoints and what they serve.", no_args_is_help=True
)
EndpointArg = Annotated[
    str, typer.Argument(help="Endpoint id, full resource name or display name.")
]
YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Stop after the plan.")]
TOO_BIG = "one :predict request carries at most that: send the instances in several calls"


def deploy_model(
    out: Console,
    stack: StackOutputs,
    model: str,
    options: DeployOptions,
    answer: Ask = Ask(),
    *,
    models: ModelRest | None = None,
    endpoints: EndpointRest | None = None,
    client: Any = None,
) -> int:
    """Plan, confirm, deploy and wait; the exit code."""
    endpoints = endpoints or EndpointRest(stack)
    with api_errors(out, "not deployed"):
        try:
            plan = plan_deploy(stack, model, options, models or ModelRest(stack), endpoints)
        except DeployRefused as refused:
            return print_refused(out, refused, "not deployed")
        show = lambda: print_deploy_plan(out, plan)  # noqa: E731
        stop = confirmed(out, show, answer, "Deploy this model?", done="deployed")
        if stop is not None:
            return stop
        deployed = deploy(stack, plan, endpoints, client)
    out.print(f"endpoint [bold]{deployed.endpoint}[/bold]", highlight=False)
    out.print(f"deployed model id: [bold]{deployed.deployed_model_id}[/bold]", highlight=False)
    if stack.private_serving is not None:
        _print_reach(out, stack, endpoints, deployed.endpoint)
    return 0


def _print_reach(out: Console, stack: StackOutputs, endpoints: EndpointRest, name: str) -> None:
    """Where the VPC calls a private endpoint; the deploy stands even if this read fails."""
    try:
        endpoint = endpoints.get_endpoint(name).rest
    except VertexError as exc:
        print_error(out, exc, "deployed, but the endpoint could not be read back")
        return
    for line in reach_lines(stack, endpoint):
        out.print(line, highlight=False, markup=False)


@app.command("deploy")
def deploy_command(
    model: Annotated[
        str, typer.Argument(help="Model id or full name, optionally @VERSION or @ALIAS.")
    ],
    stack: StackOpt = None,
    stack_file: StackFileOpt = None,
    endpoint: Annotated[
        str | None,
        typer.Option(
            "--endpoint",
            help="Endpoint id, full name or display name (a new display name creates one). "
            "Default: a new endpoint named after the model.",
        ),
    ] = None,
    machine: Annotated[str, typer.Option("--machine", help="Serving machine type.")] = (
        DeployOptions.machine
    ),
    accelerator: Annotated[
        str | None,
        typer.Option("--accelerator", help="e.g. NVIDIA_L4 (default: the machine's built-in)."),
    ] = None,
    accelerator_count: Annotated[int | None, typer.Option("--accelerator-count")] = None,
    min_replicas: Annotated[int, typer.Option("--min-replicas", help="Nodes always running.")] = 1,
    max_replicas: Annotated[
        int | None, typer.Option("--max-replicas", help="Autoscaling ceiling (default: min).")
    ] = None,
    traffic: Annotated[
        int | None,
        typer.Option(
            "--traffic",
            help="Percent of the endpoint's traffic for this model; the others keep theirs, "
            "scaled (default: 100 on an empty endpoint, else 0).",
        ),
    ] = None,
    yes: YesOpt = False,
    dry_run: DryRunOpt = False,
) -> None:
    """Deploy a model version to an endpoint (plan, confirm, deploy, wait)."""
    outputs = required_stack(stack, stack_file)
    options = DeployOptions(
        machine=machine,
        accelerator=accelerator,
        accelerator_count=accelerator_count,
        min_replicas=min_replicas,
        max_replicas=max_replicas,
        traffic=traffic,
        endpoint=endpoint,
    )
    raise typer.Exit(deploy_model(console(), outputs, model, options, Ask(yes, dry_run)))


def read_instances(text: str, source: str) -> list[Any]:
    """A JSON list, or JSON lines (one instance per non-blank line); ValueError of one line for
    text that is neither (or nests deeper than jobs.core.user_io.MAX_JSON_DEPTH)."""
    stripped = text.strip()
    if not stripped:
        raise ValueError(f"{source}: no instances")
    if stripped.startswith("["):
        try:
            instances = load_json_text(stripped)
        except ValueError as exc:
            raise ValueError(f"{source}: not a JSON list: {exc}") from None
        if not instances:
            raise ValueError(f"{source}: the list is empty")
        return list(instances)
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                found.append(load_json_text(line))
            except ValueError as exc:
                raise ValueError(
                    f"{source} line {number}: {exc}; write one JSON value per line, e.g. "
                    f'"a prompt" or {{"prompt": "..."}}'
                ) from None
    return found


@app.command("predict")
def predict_command(
    endpoint: EndpointArg,
    instances: Annotated[
        str,
        typer.Option(
            "--instances", help="File of JSON lines or a JSON list of instances; - for stdin."
        ),
    ],
    parameters: Annotated[
        str | None,
        typer.Option("--parameters", help='JSON, e.g. {"max_new_tokens": 32}.'),
    ] = None,
    stack: StackOpt = None,
    stack_file: StackFileOpt = None,
) -> None:
    """Send instances to an endpoint's :predict (by id, full name or display name); print its
    predictions as JSON."""
    outputs = required_stack(stack, stack_file)
    source = "stdin" if instances == STDIN else shown_path(instances)
    try:
        data = read_user_file(instances, PREDICT_REQUEST_MAX_BYTES, stdin=True, too_big=TOO_BIG)
        batch = read_instances(data.decode("utf-8"), source)
    except UserFileError as exc:
        raise fail(f"--instances {exc}") from None
    except UnicodeDecodeError as exc:
        raise fail(f"--instances {source}: not UTF-8 text (byte {exc.start})") from None
    except ValueError as exc:
        raise fail(str(exc)) from None
    try:
        params = load_json_text(parameters) if parameters is not None else None
    except ValueError as exc:
        raise fail(f"--parameters: {exc}") from None
    rest = EndpointRest(outputs)
    with api_errors(console(stderr=True), "no prediction"):
        answer = rest.predict(rest.resolve(endpoint), batch, params)
    typer.echo(json.dumps(answer.get("predictions", []), indent=2, ensure_ascii=False))


def parse_split(entries: list[str]) -> dict[str, int]:
    """``ID=PERCENT`` entries into a split."""
    split: dict[str, int] = {}
    for entry in entries:
        deployed_id, _, share = entry.partition("=")
        if not deployed_id or not share.strip().isdigit():
            raise ValueError(f"--traffic {entry}: write DEPLOYED_MODEL_ID=PERCENT, e.g. 123=100")
        split[deployed_id.strip()] = int(share)
    return split


def print_undeploy_plan(out: Console, plan: UndeployPlan) -> None:
    names = deployed_names(plan.endpoint)
    table = FitTable(title=f"undeploy from {plan.endpoint.name}", title_justify="left")
    for column in ("deployed model", "model", "traffic after"):
        table.add_column(column)
    for step in plan.steps:
        after = (
            split_text(step.traffic, names)
            if step.traffic
            else ("empty (no model left)" if step is plan.steps[-1] else "unchanged")
        )
        table.add_row(step.deployed_model_id, names.get(step.deployed_model_id, ""), after)
    out.print(table)


def undeploy_models(
    out: Console,
    stack: StackOutputs,
    endpoint: str,
    deployed_id: str | None,
    split: dict[str, int] | None = None,
    answer: Ask = Ask(),
    *,
    endpoints: EndpointRest | None = None,
    client: Any = None,
) -> int:
    """Plan, confirm, undeploy and wait; the exit code."""
    endpoints = endpoints or EndpointRest(stack)
    with api_errors(out, "not undeployed"):
        try:
            plan = plan_undeploy(endpoints, endpoint, deployed_id, split)
        except DeployRefused as refused:
            return print_refused(out, refused, "not undeployed")
        show = lambda: print_undeploy_plan(out, plan)  # noqa: E731
        stop = confirmed(out, show, answer, "Undeploy?", done="undeployed")
        if stop is not None:
            return stop
        done = undeploy(stack, plan, endpoints, client)
    out.print(f"undeployed {', '.join(done)} from {plan.endpoint.name}", highlight=False)
    return 0


@app.command("undeploy")
def undeploy_command(
    endpoint: EndpointArg,
    deployed_model_id: Annotated[
        str | None, typer.Argument(help="The DeployedModel id (`vtx endpoint show`).")
    ] = None,
    all_models: Annotated[
        bool, typer.Option("--all", help="Undeploy every model of the endpoint.")
    ] = False,
    traffic: Annotated[
        list[str] | None,
        typer.Option(
            "--traffic",
            help="ID=PERCENT: the split to leave (repeatable; default: the undeployed model's "
            "share goes to the others in proportion).",
        ),
    ] = None,
    stack: StackOpt = None,
    stack_file: StackFileOpt = None,
    yes: YesOpt = False,
    dry_run: DryRunOpt = False,
) -> None:
    """Undeploy a model (or --all) from an endpoint, re-splitting its traffic."""
    if (deployed_model_id is None) == (not all_models):
        raise fail("name one DEPLOYED_MODEL_ID, or --all")
    if all_models and traffic:
        raise fail("--traffic goes with one DEPLOYED_MODEL_ID, not --all")
    try:
        split = parse_split(traffic) if traffic else None
    except ValueError as exc:
        raise fail(str(exc)) from exc
    outputs = required_stack(stack, stack_file)
    raise typer.Exit(
        undeploy_models(console(), outputs, endpoint, deployed_model_id, split, Ask(yes, dry_run))
    )


@endpoint_app.command("list")
def list_endpoints(stack: StackOpt = None, stack_file: StackFileOpt = None) -> None:
    """The region's endpoints, with what each serves."""
    outputs = required_stack(stack, stack_file)
    out = console()
    with api_errors(out):
        found = EndpointRest(outputs).list_endpoints()
    table = FitTable(title=f"endpoints in {outputs.project}/{outputs.region}", title_justify="left")
    for column in ("endpoint", "display name", "deployed models", "traffic", "created"):
        table.add_column(column)
    for e in found:
        names = deployed_names(e)
        table.add_row(
            e.endpoint_id,
            e.display_name,
            ", ".join(f"{d.id} ({names[d.id]})" for d in e.deployed),
            ", ".join(f"{k} {v}%" for k, v in e.traffic.items()),
            e.created,
        )
    out.print(table)


@endpoint_app.command("show")
def show_endpoint(
    endpoint: EndpointArg, stack: StackOpt = None, stack_file: StackFileOpt = None
) -> None:
    """One endpoint: each deployed model, its machine, replicas, identity and traffic."""
    outputs = required_stack(stack, stack_file)
    out = console()
    rest = EndpointRest(outputs)
    with api_errors(out):
        record = rest.get_endpoint(rest.resolve(endpoint))
    out.print(f"[bold]{record.name}[/bold] ({record.display_name})", highlight=False)
    out.print(f"access: {access_of(record.rest)}", highlight=False)
    for line in reach_lines(outputs, record.rest):
        out.print(line, highlight=False, markup=False)
    table = FitTable(title="deployed models", title_justify="left")
    for column in ("id", "model", "machine", "replicas", "service account", "traffic"):
        table.add_column(column)
    names = deployed_names(record)
    for d in record.deployed:
        accelerator = f" + {d.accelerator_count} x {d.accelerator}" if d.accelerator else ""
        table.add_row(
            d.id,
            names[d.id],
            f"{d.machine}{accelerator}",
            f"{d.min_replicas}-{d.max_replicas}",
            d.service_account,
            f"{record.traffic.get(d.id, 0)}%",
        )
    out.print(table)
