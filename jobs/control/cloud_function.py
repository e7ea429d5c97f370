"""The controller on GCP: an HTTP function that makes one pass over the stack's live runs.

The stack deploys it as a Cloud Function (2nd gen) that Cloud Scheduler calls every minute
(infra/components/controller.py), with the stack's outputs as JSON in ``VTX_STACK``: the same
`Driver` the local platform's controller process runs every few seconds. One pass per call; a
pass that fails answers 500 and the next call tries again (conditional writes on each run's
record make two passes at once safe, so Scheduler's overlaps and retries need no lock)."""

from __future__ import annotations

import json
import logging
import os
from typing import Any

from jobs.control.driver import Driver
from jobs.control.records import RecordError
from jobs.core.stack import StackOutputs
from jobs.vertex.errors import VertexError

STACK_ENV = "VTX_STACK"
"""The stack's outputs (`jobs.core.stack.StackOutputs`) as JSON, set by the stack."""

log = logging.getLogger("jobs.control")


def controller_pass(request: Any = None) -> tuple[str, int, dict[str, str]]:
    """The function's entry point (Functions Framework, HTTP): one pass, its report as JSON.
    The request carries nothing: Scheduler's call is the clock."""
    stack = StackOutputs.model_validate_json(os.environ[STACK_ENV])
    try:
        report = Driver(stack).run_pass()
    except (VertexError, RecordError, OSError) as exc:
        log.warning("pass failed; the next call tries again: %s", exc)
        return _json({"error": str(exc)}, 500)
    for run_id, said in report.actions.items():
        for line in said:
            log.info("%s: %s", run_id, line)
    return _json({"runs": report.runs, "actions": report.actions, "errors": report.errors}, 200)


def _json(body: dict[str, Any], status: int) -> tuple[str, int, dict[str, str]]:
    return json.dumps(body), status, {"Content-Type": "application/json"}
