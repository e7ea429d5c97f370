"""The controller on GCP: an HTTP function that makes one pass over the stack's live runs.

The stack deploys it as a Cloud Function (2nd gen) that Cloud Scheduler calls every minute
(infra/components/controller.py), with the stack's outputs as JSON in ``VTX_STACK``: the same
`Driver` the local platform's controller process runs every few seconds. One pass per call; a
pass that fails answers 500 and the next call tries again (conditional writes on each run's
record make two passes at once safe, so Scheduler's overlaps and retries need no lock).

Each pass that ends writes one structured line (``vtx_event: controller_pass``) and each guard
breach it acted on one more (``vtx_event: guard_breach``, with the run, the action, the job,
the reason and the team as fields): the stack's alerts count them with log-based metrics
(infra/components/alerts.py), which need fields, not a sentence, to tell a run from another."""

from __future__ import annotations

import json
import logging
import os
import sys
from dataclasses import asdict
from typing import Any

from jobs.control.driver import Driver, PassReport
from jobs.control.records import RecordError
from jobs.core.stack import StackOutputs
from jobs.vertex.errors import VertexError

STACK_ENV = "VTX_STACK"
"""The stack's outputs (`jobs.core.stack.StackOutputs`) as JSON, set by the stack."""

EVENT_FIELD = "vtx_event"
"""The field of a structured line that says what it reports."""
PASS_EVENT = "controller_pass"
BREACH_EVENT = "guard_breach"

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
    log_pass(report)
    return _json({"runs": report.runs, "actions": report.actions, "errors": report.errors}, 200)


def log_pass(report: PassReport) -> None:
    """A pass's structured lines: one per breach, then the pass's own."""
    for breach in report.breaches:
        structured(
            "WARNING",
            f"run {breach.run_id}: progress guard breached ({breach.action}): {breach.reason}",
            BREACH_EVENT,
            asdict(breach),
        )
    counts = {"runs": report.runs, "breaches": len(report.breaches), "errors": len(report.errors)}
    structured("INFO", f"pass over {report.runs} live run(s)", PASS_EVENT, counts)


def structured(severity: str, message: str, event: str, fields: dict[str, Any]) -> None:
    """One JSON object on one line of stdout: Cloud Run (where the function runs) takes such a
    line as the entry's ``jsonPayload``, its ``severity`` and ``message`` as the entry's
    (docs/vertex-facts.md, "Alerts"). google-cloud-logging's StructuredLogHandler writes the
    same, but the function does not otherwise need that library."""
    line = {"severity": severity, "message": message, EVENT_FIELD: event, **fields}
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


def _json(body: dict[str, Any], status: int) -> tuple[str, int, dict[str, str]]:
    return json.dumps(body), status, {"Content-Type": "application/json"}
