"""Fixtures of the review tests: each shipped stack run once offline, and the CLI app."""

from __future__ import annotations

import pytest
import typer

from infra.review.builder import Report, build_report
from infra.review.sources import ReviewSource, from_offline
from vtx.commands.review import review_app


@pytest.fixture(scope="session")
def offline() -> dict[str, tuple[ReviewSource, Report]]:
    """Each stack run once under mocks for the whole session (about 2 s a stack)."""
    runs = {}
    for stack in ("dev", "prod"):
        source = from_offline(stack)
        runs[stack] = (source, build_report(source))
    return runs


@pytest.fixture
def review_cli() -> typer.Typer:
    """The review command registered the way vtx/cli.py registers it."""
    app = typer.Typer()
    app.command("noop")(lambda: None)
    app.add_typer(review_app)
    return app
