"""What a vtx job carries besides its spec: the names that the compiler writes, and that the
importer, the clients, the local platform and the trainer read back.

- labels: every vtx job is labelled with its run id, its template and the stack's environment;
  ``vtx status|list|logs`` find a run's attempts by the run-id label.
- the run's outputs: every attempt of a run reads and writes one prefix, so the trainer resumes
  from the checkpoints the previous attempt committed.
- environment: the run id, and the Secret Manager *names* (never values) the trainer resolves.

The trainer ships alone and keeps its own copies of the environment names and the secret
grammar; tests/contracts/ fails when the copies drift."""

from __future__ import annotations

import re
import secrets as random
from datetime import UTC, datetime

from jobs.core.stack import LABEL_TEAM, RUNS_PREFIX, StackOutputs

LABEL_RUN_ID = "vtx-run-id"
LABEL_TEMPLATE = "vtx-template"
LABEL_ENVIRONMENT = "vtx-environment"
VTX_LABELS = (LABEL_RUN_ID, LABEL_TEMPLATE, LABEL_ENVIRONMENT)
"""Set by the compiler on every job (and copied to the models and endpoints a run leads to); a
template's own labels of these names are replaced."""
LABEL_BUDGET = "vtx-budget-usd"
"""A run's budget (``budget.max_cost_usd``) on each of its jobs, so that whoever watches a job
(the follower, the local platform) can stop it: label values are [a-z0-9_-], so ``12.5`` is
written ``12_5``. Set by the compiler only; a template's own label of this name is dropped."""
BUDGET_DECIMALS = 6
LABEL_ATTEMPT = "vtx-attempt"
"""The controller's marker on each attempt it submits (``a1``, ``a2``...): looked for before any
submit, so that a job created by a pass that crashed before writing the run's record is adopted,
never submitted twice. Set by the controller only."""
OWN_LABELS = (*VTX_LABELS, LABEL_BUDGET, LABEL_TEAM, LABEL_ATTEMPT)
"""Every label only the compiler writes: a template's own label of one of these names is
dropped (its budget is ``budget:``, its team ``team:``; `jobs.core.stack.LABEL_TEAM`)."""

RUN_ID_ENV = "VTX_RUN_ID"
RUN_ID_PATTERN = re.compile(r"^[a-z][a-z0-9-]{0,62}$")
"""A run id is a label value and a path segment: lower case, digits and '-', at most 63."""

VTX_SECRETS_ENV = "VTX_SECRETS"
"""JSON object: env name -> Secret Manager version resource, resolved by the trainer."""
SECRET_RESOURCE = re.compile(
    r"^projects/(?P<project>[^/]+)/secrets/(?P<secret>[^/]+)(/versions/(?P<version>[^/]+))?$"
)


def budget_label(max_cost_usd: float) -> str:
    """``12.5`` -> ``12_5``: a dollar amount as a label value, to the micro-dollar."""
    return f"{max_cost_usd:.{BUDGET_DECIMALS}f}".rstrip("0").rstrip(".").replace(".", "_")


def budget_of(labels: dict[str, str]) -> float | None:
    """The budget a job's labels carry in dollars; None without one (or with a value that is
    not one ``budget_label`` writes: nothing is enforced on a guess)."""
    value = labels.get(LABEL_BUDGET)
    if value is None or not re.fullmatch(r"[0-9]+(_[0-9]+)?", value):
        return None
    usd = float(value.replace("_", "."))
    return usd if usd > 0 else None


def new_run_id(template_name: str, now: datetime | None = None) -> str:
    """``<name>-<UTC yyyymmdd-hhmmss>-<4 hex>``: sortable, unique, a valid label value."""
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%d-%H%M%S")
    return f"{template_name[:40]}-{stamp}-{random.token_hex(2)}"


def output_prefix(stack: StackOutputs, run_id: str) -> str:
    """Where every attempt of a run reads and writes: checkpoints, model, logs."""
    return f"gs://{stack.buckets.checkpoints}/{RUNS_PREFIX}{run_id}/"


def secret_parts(ref: str) -> tuple[str | None, str, str]:
    """A template's secret reference as (project or None, secret id, version): a secret id, or
    a full ``projects/P/secrets/S[/versions/V]`` name. The version is ``latest`` unless pinned."""
    match = SECRET_RESOURCE.match(ref)
    if match is None:
        return None, ref, "latest"
    return match["project"], match["secret"], match["version"] or "latest"


def region_of(name: str) -> str:
    """The region of a Vertex resource name (``projects/P/locations/REGION/...``); "" for a
    name without one. Every job of a stack's regions is named this way, locally too."""
    parts = name.split("/")
    return parts[3] if len(parts) > 3 and parts[2] == "locations" else ""
