"""`vtx review --stack dev|prod [--against prod] [--preview-json FILE] [--format md|html|json]`.

Cheap to import (the CLI loads it for `vtx --help`): the infra modules it imports keep Pulumi and
pulumi-gcp out of their module tops (``infra.offline.program`` imports them inside ``run_offline``),
so the infra program and the providers are only imported when a review actually runs.
"""

from __future__ import annotations

import logging
from enum import StrEnum
from pathlib import Path

import typer

from infra.config import ConfigError
from infra.offline.program import OfflineError
from infra.review.builder import build_report
from infra.review.diff import diff_stacks
from infra.review.render_html import to_html
from infra.review.render_json import to_json
from infra.review.render_markdown import to_markdown
from infra.review.sources import (
    ReviewSourceError,
    from_offline,
    from_preview_json,
    require_stack,
)
from vtx.options import console as options_console
from vtx.options import write_output
from vtx.views.problems import print_error
from vtx.views.warm_pools import review_price

logger = logging.getLogger(__name__)

review_app = typer.Typer()


class Format(StrEnum):
    md = "md"
    html = "html"
    json = "json"


def render_review(
    stack: str,
    against: str | None = None,
    preview_json: Path | None = None,
    fmt: Format = Format.md,
) -> tuple[str, int]:
    """The rendered report and the exit code (1 when a mandatory policy is violated)."""
    if against is not None:
        require_stack(against)  # a misspelt --against fails before the first stack runs
    source = from_preview_json(preview_json, stack) if preview_json else from_offline(stack)
    report = build_report(source, review_price)
    diff = None
    failures = report.mandatory_failures
    if against is not None:
        other = from_offline(against)
        other_report = build_report(other, review_price)
        diff = diff_stacks(source, other, report, other_report)
        failures += other_report.mandatory_failures
    renderer = {Format.md: to_markdown, Format.html: to_html, Format.json: to_json}[fmt]
    return renderer(report, diff), 1 if failures else 0


@review_app.command("review")
def review(
    stack: str = typer.Option(..., "--stack", help="stack to review (reads Pulumi.<stack>.yaml)"),
    against: str | None = typer.Option(
        None, "--against", help="second stack to compare with, e.g. prod (run offline)"
    ),
    preview_json: Path | None = typer.Option(
        None,
        "--preview-json",
        help="review a real `pulumi preview --json` output instead of running offline",
        exists=True,
        dir_okay=False,
    ),
    fmt: Format = typer.Option(Format.md, "--format", help="md (PR comment), html or json"),
    output: Path | None = typer.Option(None, "--output", "-o", help="write here, not stdout"),
) -> None:
    """Review what a stack creates: resources, network, IAM, buckets, quotas, secrets, warm
    pools and their $/h, policies."""
    console = options_console(stderr=True)  # soft wrap: an error stays one line
    try:
        text, code = render_review(stack, against, preview_json, fmt)
    except (ReviewSourceError, ConfigError, OfflineError) as exc:
        # ConfigError / OfflineError: the stack file is invalid or the program failed; their
        # messages name the file and the key at fault.
        print_error(console, exc)
        raise typer.Exit(2) from exc
    if output is None:
        typer.echo(text, nl=False)
    else:
        write_output(output, text)
        console.print(f"review written to {output}")
    if code:
        console.print("[red]mandatory policy violations: see the Policies section[/red]")
    raise typer.Exit(code)
