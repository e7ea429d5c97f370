"""The `vtx` command line. Heavy libraries (aiplatform, pulumi, torch) are imported inside the
commands that need them so that `vtx --help` and `vtx validate` start fast.

Command groups live next to the code they drive and are merged here; each module below must
stay cheap to import (no heavy imports at module level)."""

from __future__ import annotations

import typer

from jobs.local.cli import demo_app, local_app

app = typer.Typer(
    name="vtx",
    help="Vertex AI training platform as code: validate, price, render and launch CustomJobs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(local_app, name="local")
app.add_typer(demo_app)


def main() -> None:
    app()
