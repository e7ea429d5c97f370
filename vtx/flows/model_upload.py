"""Registering a run's model: plan, confirm, upload; run by `vtx model upload` and by `vtx
launch --follow --upload-model`."""

from __future__ import annotations

from rich.console import Console

from jobs.core.stack import StackOutputs
from jobs.runs.checkpoints import Storage
from jobs.serving.model_rest import ModelRest
from jobs.serving.model_upload import (
    UploadOptions,
    UploadRefused,
    plan_upload,
    upload_model,
)
from vtx.confirm import Ask, confirmed, print_refused
from vtx.options import api_errors
from vtx.views.models import print_model_plan


def upload_run_model(
    out: Console,
    stack: StackOutputs,
    run_id: str,
    options: UploadOptions,
    answer: Ask = Ask(),
    *,
    rest: ModelRest | None = None,
    storage: Storage | None = None,
) -> int:
    """Plan, confirm, upload and wait; the exit code (also `vtx launch --upload-model`'s)."""
    rest = rest or ModelRest(stack)
    with api_errors(out, "not uploaded"):
        try:
            plan = plan_upload(stack, run_id, options, rest, storage or Storage(stack))
        except UploadRefused as refused:
            return print_refused(out, refused, "not uploaded")
        show = lambda: print_model_plan(out, plan)  # noqa: E731
        stop = confirmed(out, show, answer, "Upload this model?", done="uploaded")
        if stop is not None:
            return stop
        uploaded = upload_model(stack, plan, rest)
    out.print(f"model [bold]{uploaded.model}[/bold]", highlight=False)
    out.print(f"version: [bold]{uploaded.version_id}[/bold]", highlight=False)
    return 0
