"""How a model upload's plan reads."""

from __future__ import annotations

from rich.console import Console

from jobs.serving.model_upload import (
    ModelPlan,
)
from vtx.views.fit_table import FitTable


def print_model_plan(out: Console, plan: ModelPlan) -> None:
    model, spec = plan.model, plan.model["containerSpec"]
    table = FitTable(
        title=f"model upload: run {plan.run_id}", show_header=False, title_justify="left"
    )
    table.add_column(style="bold")
    table.add_column()
    table.add_row("into", plan.parent_model or "a new model")
    table.add_row("display name", model["displayName"])
    table.add_row("artifactUri", f"{plan.artifact_uri} ({plan.layout} model)")
    table.add_row("from", plan.job_name)
    table.add_row("serving image", plan.image)
    ports = ", ".join(str(p["containerPort"]) for p in spec["ports"])
    table.add_row(
        "routes", f"predict {spec['predictRoute']}, health {spec['healthRoute']}, port {ports}"
    )
    table.add_row("aliases", ", ".join(model["versionAliases"]))
    table.add_row("labels", ", ".join(f"{k}={v}" for k, v in model["labels"].items()))
    out.print(table)
