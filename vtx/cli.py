"""The `vtx` command line. Heavy libraries (aiplatform, pulumi, torch) are imported inside the
commands that need them so that `vtx --help` and `vtx validate` start fast.

Command groups live next to the code they drive and are merged here; each module below must
stay cheap to import (no heavy imports at module level)."""

from __future__ import annotations

import logging
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from vtx.local_commands import demo_app, local_app
from vtx.output import print_error
from vtx.review_commands import review_app

if TYPE_CHECKING:
    from rich.console import Console

    from jobs.problems import Problem
    from jobs.spec import Document, JobTemplate
    from jobs.stack import StackOutputs

app = typer.Typer(
    name="vtx",
    help="Vertex AI training platform as code: validate, price, render and launch CustomJobs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(local_app, name="local")
app.add_typer(demo_app)
app.add_typer(review_app)

FileArg = Annotated[
    Path, typer.Argument(help="A vtx template, or gcloud CustomJobSpec/CustomJob YAML.")
]
SetOpt = Annotated[
    list[str] | None,
    typer.Option("--set", help="Override a field: key.path=value (YAML value). Repeatable."),
]
PollOpt = Annotated[
    float, typer.Option("--poll-s", hidden=True, help="Seconds between polls when following.")
]
StackOpt = Annotated[str | None, typer.Option("--stack", help="Stack name (Pulumi), or `local`.")]
StackFileOpt = Annotated[
    Path | None, typer.Option("--stack-file", help="Exported `platform` stack output JSON.")
]
RegionOpt = Annotated[
    str | None, typer.Option("--region", help="Region to check against (default: the stack's).")
]


def _console(stderr: bool = False) -> Console:
    from rich.console import Console

    return Console(stderr=stderr, soft_wrap=True)


def _fail(message: str, code: int = 2) -> typer.Exit:
    print_error(_console(stderr=True), message)
    return typer.Exit(code)


def _load_stack(
    stack: str | None, stack_file: Path | None, required: bool = True
) -> StackOutputs | None:
    from jobs.stack import StackError, load_stack

    if stack is None and stack_file is None:
        if required:
            raise _fail("no stack given: pass --stack NAME, --stack local or --stack-file FILE")
        return None
    try:
        return load_stack(stack, stack_file)
    except StackError as exc:
        raise _fail(str(exc)) from exc


def _problems(document: Document, region: str | None) -> list[Problem]:
    from jobs.validate import validate_document

    if document.problems:
        return document.problems
    return validate_document(document.doc, document.kind, region, document.source)


def _template(document: Document) -> JobTemplate:
    from jobs.spec import TemplateError, template_from_document

    try:
        return template_from_document(document)
    except TemplateError as exc:
        from vtx.output import print_problems

        print_problems(_console(), exc.problems)
        raise typer.Exit(1) from exc


@app.command()
def validate(
    files: Annotated[list[Path], typer.Argument(help="Templates or gcloud YAML files.")],
    set_: SetOpt = None,
    region: RegionOpt = None,
    stack: StackOpt = None,
    stack_file: StackFileOpt = None,
    policy: Annotated[
        bool, typer.Option("--policy", help="Also check organisation policies (needs a stack).")
    ] = False,
) -> None:
    """Check jobs locally and report every problem at once; exit 1 if there is any."""
    from rich.text import Text

    from jobs.spec import load_document
    from vtx.output import print_problems

    console = _console()
    outputs = _load_stack(stack, stack_file, required=policy)
    region = region or (outputs.region if outputs and not outputs.is_local else None)
    failed = False
    for path in files:
        document = load_document(path, set_ or [])
        problems = _problems(document, region)
        if not problems and outputs is not None:
            from jobs.validate import validate_compiled

            _, problems = validate_compiled(
                _template(document), outputs, "validate-run", str(path), policy
            )
        if problems:
            failed = True
            print_problems(console, problems)
        else:
            console.print(Text("✓ ", style="green") + Text(f"{path}: valid ({document.kind})"))
    if failed:
        raise typer.Exit(1)


def _valid_template(path: Path, overrides: list[str], region: str | None) -> JobTemplate:
    from jobs.spec import load_document
    from vtx.output import print_problems

    document = load_document(path, overrides)
    problems = _problems(document, region)
    if problems:
        print_problems(_console(), problems)
        raise typer.Exit(1)
    return _template(document)


@app.command()
def catalog(
    accelerator: Annotated[
        str | None, typer.Option("--accelerator", help="Show one accelerator's machines.")
    ] = None,
    region: RegionOpt = None,
    machines: Annotated[bool, typer.Option("--machines", help="List machine types.")] = False,
) -> None:
    """Machines, accelerators, allowed counts, regions and prices (like `sky show-gpus`)."""
    from jobs.catalog import load_catalog
    from vtx.output import catalog_table, machines_table

    cat = load_catalog()
    console = _console()
    if region and region not in cat.regions:
        raise _fail(f"region {region!r} is not in the catalog: one of {', '.join(cat.regions)}")
    if accelerator and accelerator.upper() not in cat.accelerators:
        raise _fail(f"unknown accelerator {accelerator!r}: one of {', '.join(cat.accelerators)}")
    console.print(
        machines_table(cat, region) if machines else catalog_table(cat, accelerator, region)
    )
    for name, source in cat.sources.items():
        console.print(f"{name}: {source}", style="dim", highlight=False)


@app.command()
def cost(
    file: FileArg,
    set_: SetOpt = None,
    region: RegionOpt = None,
    stack: StackOpt = None,
    stack_file: StackFileOpt = None,
) -> None:
    """$/h per pool and in total, cost at the timeout cap, on-demand vs Spot, quota needed."""
    from jobs.cost import estimate
    from vtx.output import print_cost

    outputs = _load_stack(stack, stack_file, required=False)
    region = region or (outputs.region if outputs else None)
    template = _valid_template(file, set_ or [], region)
    print_cost(_console(), estimate(template, region), f"{template.name}: cost per hour")


@app.command()
def render(
    file: FileArg,
    set_: SetOpt = None,
    stack: StackOpt = None,
    stack_file: StackFileOpt = None,
    format_: Annotated[
        str,
        typer.Option("--format", help="yaml: CustomJobSpec for gcloud --config; json: CustomJob."),
    ] = "yaml",
    run_id: Annotated[str | None, typer.Option("--run-id", help="Run id (default: new).")] = None,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write to a file.")] = None,
) -> None:
    """Print the job exactly as it would be submitted."""
    from jobs.compile import compile_job, new_run_id
    from jobs.render import render_json, render_yaml

    if format_ not in ("yaml", "json"):
        raise _fail("--format is yaml or json")
    outputs = _load_stack(stack, stack_file)
    assert outputs is not None
    template = _valid_template(file, set_ or [], None if outputs.is_local else outputs.region)
    run_id = run_id or new_run_id(template.name)
    from jobs.validate import validate_compiled

    _, problems = validate_compiled(template, outputs, run_id, str(file), policy=False)
    if problems:
        from vtx.output import print_problems

        print_problems(_console(), problems)
        raise typer.Exit(1)
    from google.protobuf.json_format import ParseError

    try:
        job = compile_job(template, outputs, run_id)
    except ParseError as exc:  # validation should have refused it first: a vtx bug
        raise _fail(
            f"{file}: the compiled job does not convert to the API's types ({exc}); "
            "validation missed this: please report it",
            code=1,
        ) from exc
    text = render_yaml(job, outputs) if format_ == "yaml" else render_json(job)
    if output:
        output.write_text(text)
        _console(stderr=True).print(f"wrote {output}", highlight=False)
    else:
        sys.stdout.write(text)


@app.command("import")
def import_(
    file: Annotated[Path, typer.Argument(help="gcloud CustomJobSpec or CustomJob YAML/JSON.")],
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write to a file.")] = None,
) -> None:
    """Turn a gcloud --config YAML (or a whole CustomJob) into a vtx template."""
    import yaml

    from jobs.gcloud import import_document
    from jobs.spec import TEMPLATE, TemplateError, load_document
    from vtx.output import print_problems

    document = load_document(file)
    if document.problems:
        print_problems(_console(), document.problems)
        raise typer.Exit(1)
    if document.kind == TEMPLATE:
        raise _fail(f"{file} is already a vtx template (no workerPoolSpecs/jobSpec)", code=1)
    try:
        imported = import_document(document.doc, document.kind, document.source)
    except TemplateError as exc:
        print_problems(_console(), exc.problems)
        raise typer.Exit(1) from exc
    text = yaml.safe_dump(imported.template, sort_keys=False)
    if output:
        output.write_text(text)
    else:
        sys.stdout.write(text)
    for note in imported.notes:
        _console(stderr=True).print(f"note: {note}", style="dim", highlight=False)


@app.command()
def launch(
    file: FileArg,
    set_: SetOpt = None,
    stack: StackOpt = None,
    stack_file: StackFileOpt = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Stop after the plan.")] = False,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Stream logs to the end.")] = False,
    run_id: Annotated[
        str | None, typer.Option("--run-id", help="Resubmit an existing run (same output prefix).")
    ] = None,
    poll_s: PollOpt = 5.0,
) -> None:
    """Plan, confirm and submit a job; print its name and run id."""
    from vtx.runs import launch_job

    outputs = _load_stack(stack, stack_file)
    assert outputs is not None
    template = _valid_template(file, set_ or [], None if outputs.is_local else outputs.region)
    code = launch_job(
        _console(),
        template,
        outputs,
        str(file),
        run_id=run_id,
        yes=yes,
        dry_run=dry_run,
        follow=follow,
        poll_s=poll_s,
    )
    raise typer.Exit(code)


RefArg = Annotated[str, typer.Argument(help="Run id, job id or full job resource name.")]


@app.command()
def status(ref: RefArg, stack: StackOpt = None, stack_file: StackFileOpt = None) -> None:
    """State of a run's newest attempt (or of one job)."""
    from vtx.runs import show_status

    raise typer.Exit(show_status(_console(), _load_stack(stack, stack_file), ref))


@app.command("list")
def list_(
    stack: StackOpt = None,
    stack_file: StackFileOpt = None,
    run_id: Annotated[
        str | None, typer.Option("--run-id", help="Only this run's attempts.")
    ] = None,
) -> None:
    """Jobs launched with vtx in this stack, newest first."""
    from vtx.runs import show_list

    raise typer.Exit(show_list(_console(), _load_stack(stack, stack_file), run_id))


@app.command()
def logs(
    ref: RefArg,
    stack: StackOpt = None,
    stack_file: StackFileOpt = None,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Until the run ends.")] = False,
    poll_s: PollOpt = 5.0,
) -> None:
    """Logs of a run across all its attempts."""
    from vtx.runs import show_logs

    outputs = _load_stack(stack, stack_file)
    raise typer.Exit(show_logs(_console(), outputs, ref, follow, poll_s=poll_s))


@app.command()
def cancel(ref: RefArg, stack: StackOpt = None, stack_file: StackFileOpt = None) -> None:
    """Cancel a run's newest attempt (or one job)."""
    from vtx.runs import cancel_run

    raise typer.Exit(cancel_run(_console(), _load_stack(stack, stack_file), ref))


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    # google.api_core warns on every import that it will drop Python 3.11 in 2027: four lines
    # on stderr before every `vtx launch|status|list` answer, and nothing the user can act on.
    warnings.filterwarnings(
        "ignore",
        message=r".*Python version.*",
        category=FutureWarning,
        module=r"google\.api_core\.",
    )
    app()
