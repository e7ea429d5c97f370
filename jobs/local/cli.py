"""`vtx local up|down|status|preempt` and `vtx demo`: the embedded local platform."""

from __future__ import annotations

import typer

local_app = typer.Typer(
    help="Run the Vertex-compatible local platform on this machine.", no_args_is_help=True
)
# Merged into the top-level app: holds `vtx demo`.
demo_app = typer.Typer()
