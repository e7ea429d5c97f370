"""The `vtx` command line. Heavy libraries (aiplatform, pulumi, torch) are imported inside the
commands that need them so that `vtx --help` and `vtx validate` start fast."""

from __future__ import annotations

import typer

from jobs.local.cli import local_app

app = typer.Typer(
    name="vtx",
    help="Vertex AI training platform as code: validate, price, render and launch CustomJobs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(local_app, name="local")


def main() -> None:
    app()
