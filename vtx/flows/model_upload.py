"""Registering a run's model: plan, confirm, upload; run by `vtx model upload` and by `vtx
launch --follow --upload-model`."""

from __future__ import annotations

from collections.abc import Callable

from rich.console import Console

from jobs.core.stack import StackOutputs
from jobs.runs.checkpoints import Storage
from jobs.serving.model_rest import ModelRest
from jobs.serving.model_upload import (
    Uploaded,
    UploadOptions,
    UploadRefused,
    plan_upload,
    upload_model,
)
from vtx.confirm import Ask, ask, plan_and_confirm
from vtx.options import api_errors
from vtx.views.models import print_model_plan
from vtx.views.output import print_error


def upload_run_model(
    out: Console,
    stack: StackOutputs,
    run_id: str,
    options: UploadOptions,
    *,
    yes: bool = False,
    dry_run: bool = False,
    confirm: Callable[[str], bool] = ask,
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
