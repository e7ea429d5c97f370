"""Cancelling Vertex jobs and studies, written once for the two that do it: the controller
(`jobs.control.guards`, a run's job or study) and the team budget's function
(``infra/functions/budget_cancel``, every job carrying the team's label). The function is
deployed alone and carries this file in its archive (``infra/components/team_budgets.py``), so
it imports the standard library only, nothing of ours, and sends nothing itself: the caller
hands it ``post``, which sends one ``:cancel`` (its own session, its own retries) and answers
Vertex's HTTP status and body.

What the act is: studies go first (Vertex cancels a study's trials with it; a trial cancelled
alone is replaced by the study); a job that is no longer queued, pending or running is not
cancelled again; and a cancel answered 404 (gone) or 400 ``FAILED_PRECONDITION`` (it ended
between the read and the cancel) is done, since an ended job is what the cancel wanted."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

STUDIES, CUSTOM_JOBS = "hyperparameterTuningJobs", "customJobs"
COLLECTIONS = (STUDIES, CUSTOM_JOBS)
"""Studies first: cancelling a study stops its trials; a trial cancelled alone is replaced."""
ACTIVE_STATES = frozenset({"JOB_STATE_QUEUED", "JOB_STATE_PENDING", "JOB_STATE_RUNNING"})
"""States a job still spends (or is about to) in; CANCELLING is on its way out already."""
NOT_FOUND, BAD_REQUEST = 404, 400
SHOWN_CHARS = 500

Post = Callable[[str], tuple[int, str]]
"""Send ``POST .../v1/{name}:cancel`` for a resource name; Vertex's HTTP status and body."""


class CancelError(RuntimeError):
    """Vertex refused a cancel for another reason than "it had ended"."""

    def __init__(self, name: str, status: int, body: str) -> None:
        self.name, self.status, self.body = name, status, body
        super().__init__(f"cancelling {name}: HTTP {status} {body[:SHOWN_CHARS]}")

    @property
    def said(self) -> str:
        """Vertex's message (Google's error shape ``{"error": {"message"}}``), else the body."""
        try:
            return str(json.loads(self.body)["error"]["message"])
        except (ValueError, KeyError, TypeError):
            return self.body[:SHOWN_CHARS] or f"HTTP {self.status}"


def ended_first(status: int, body: str) -> bool:
    """Whether a refused cancel means the job had ended (or gone) before it."""
    return status == NOT_FOUND or (status == BAD_REQUEST and "FAILED_PRECONDITION" in body)


def cancel(post: Post, name: str) -> bool:
    """Cancel the job or study ``name``; False when it had ended meanwhile (just as good),
    ``CancelError`` for any other refusal."""
    status, body = post(name)
    if status < BAD_REQUEST:
        return True
    if ended_first(status, body):
        return False
    raise CancelError(name, status, body)


def collection_of(name: str) -> str:
    """``customJobs`` or ``hyperparameterTuningJobs``, from a resource name."""
    return STUDIES if f"/{STUDIES}/" in name else CUSTOM_JOBS


def cancel_active(post: Post, jobs: Iterable[Mapping[str, Any]]) -> list[str]:
    """Cancel each job or study (REST JSON, with ``name`` and ``state``) still queued, pending
    or running, studies first; the names of those cancelled (not those that ended first)."""
    active = [j for j in jobs if j.get("state") in ACTIVE_STATES]
    ordered = sorted(active, key=lambda j: COLLECTIONS.index(collection_of(str(j["name"]))))
    return [str(j["name"]) for j in ordered if cancel(post, str(j["name"]))]
