"""The `vtx` command line: the composition root. It mounts the command groups, which live in
commands/ (see vtx/README.md) and drive jobs/ (the job pipeline, the local platform) and infra/
(the stack review). Heavy libraries (aiplatform, pulumi, torch) are imported inside the commands
that need them, so that `vtx --help` and `vtx validate` start fast."""

from __future__ import annotations

import logging
import warnings

import typer

from vtx.commands import deploy, jobs, logs, prices, quota, runs
from vtx.commands.local import demo_app, local_app
from vtx.commands.models import model_app
from vtx.commands.pools import pool_app
from vtx.commands.review import review_app
from vtx.views import help_format

help_format.install()
app = typer.Typer(
    name="vtx",
    help="Vertex AI training platform as code: validate, price, render and launch CustomJobs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(jobs.app)
app.add_typer(runs.app)
app.add_typer(logs.app)
app.add_typer(quota.app)
app.add_typer(prices.app, name="prices")
app.add_typer(model_app)
app.add_typer(pool_app)
app.add_typer(deploy.app)
app.add_typer(deploy.endpoint_app)
app.add_typer(local_app, name="local")
app.add_typer(demo_app)
app.add_typer(review_app)


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
