"""Calls to the control plane's vtx-only endpoints (preemption, logs, capacity). JobService calls
go through the real aiplatform client instead; these have no Google counterpart, and want the
platform's token (``state.json``; see jobs/local/plumbing/guard.py)."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request


class LocalApiError(Exception):
    """The control plane refused a request (``status``: Google's status name, e.g. ABORTED)
    or could not be reached (``status`` None)."""

    def __init__(self, message: str, status: str | None = None) -> None:
        super().__init__(message)
        self.status = status


def _call(
    url: str, token: str, body: dict | None = None, wait_s: float = 0.0, method: str = "POST"
) -> dict:
    """``method`` applies to a call with a body; one without is a GET."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url,
        data=data,
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
        method=method if data else "GET",
    )
    try:
        with urllib.request.urlopen(request, timeout=30 + wait_s) as resp:
            return json.load(resp)
    except urllib.error.HTTPError as exc:
        try:
            error = json.load(exc)["error"]
            message, status = error["message"], error.get("status")
        except (ValueError, KeyError, TypeError):
            message, status = f"HTTP {exc.code}", None
        raise LocalApiError(message, status) from exc
    except OSError as exc:
        raise LocalApiError(f"cannot reach the local control plane at {url}: {exc}") from exc


def preempt_replica(
    endpoint: str, token: str, job: str, replica: str | None = None, wait_s: float = 0.0
) -> str:
    """Preempt one replica of a running job, waiting up to ``wait_s`` for a job that is
    queued or starting to run it; returns the replica's name."""
    job_id = job.rsplit("/", 1)[-1]
    body = {"replica": replica, "wait_s": wait_s} if replica else {"wait_s": wait_s}
    return _call(f"{endpoint}/vtx/jobs/{job_id}:preempt", token, body, wait_s)["replica"]


def hinder_replica(
    endpoint: str,
    token: str,
    job: str,
    replica: str | None = None,
    factor: float | None = None,
    wait_s: float = 0.0,
) -> str:
    """Stall one replica of a running job (``factor`` None), or slow it down ``factor`` times,
    waiting up to ``wait_s`` for it to run; returns the replica's name."""
    job_id = job.rsplit("/", 1)[-1]
    body: dict = {"wait_s": wait_s}
    if replica:
        body["replica"] = replica
    if factor is not None:
        body["factor"] = factor
    verb = "stall" if factor is None else "slow"
    return _call(f"{endpoint}/vtx/jobs/{job_id}:{verb}", token, body, wait_s)["replica"]


def read_logs(
    endpoint: str,
    token: str,
    *,
    run_id: str | None = None,
    job: str | None = None,
    cursor: int = 0,
) -> dict:
    """One page of log entries after ``cursor``: ``{"entries": [...], "cursor": N}``."""
    query = {"cursor": cursor} | ({"run_id": run_id} if run_id else {"job": job})
    return _call(f"{endpoint}/vtx/logs?{urllib.parse.urlencode(query)}", token)


def read_capacity(endpoint: str, token: str) -> dict:
    """``{"capacity": {...}, "in_use": {REGION: {"quotas": ..., "accelerators": ...}}}``."""
    return _call(f"{endpoint}/vtx/capacity", token)


def set_capacity(endpoint: str, token: str, capacity: dict) -> dict:
    """Replace the running platform's capacity model (the YAML file's shape); answers as
    ``read_capacity`` does."""
    return _call(f"{endpoint}/vtx/capacity", token, capacity, method="PUT")


def health(endpoint: str) -> dict:
    """``{"status": "ok", "active_jobs": {STATE: count}}`` (needs no token)."""
    return _call(f"{endpoint}/vtx/health", "")
