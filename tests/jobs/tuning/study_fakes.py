"""Studies as Vertex's REST returns them, scripted: for the study watch tests and the CLI's."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import requests

from jobs.vertex.retry import Backoff

PARENT = "projects/vtx-dev-123/locations/us-central1"


T0 = datetime(2026, 11, 23, 10, 0, tzinfo=UTC)


FAST = Backoff(initial_s=0.0, maximum_s=0.0, multiplier=1.0, deadline_s=5.0)


def stamp(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


def trial(
    trial_id: str, state: str, lr: float, r: int, loss: float | None, ended_s: float | None
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": trial_id,
        "state": state,
        "parameters": [
            {"parameterId": "learning_rate", "value": lr},
            {"parameterId": "model.lora.r", "value": r},
        ],
        "startTime": stamp(10),
        "customJob": f"{PARENT}/customJobs/10{trial_id}",
    }
    if loss is not None:
        out["finalMeasurement"] = {
            "stepCount": "20",
            "metrics": [{"metricId": "eval_loss", "value": loss}],
        }
    if ended_s is not None:
        out["endTime"] = stamp(ended_s)
    return out


def rest_study(goal: str = "MINIMIZE", run_id: str = "tiny-tune-1", **changes: Any) -> dict:
    study: dict[str, Any] = {
        "name": f"{PARENT}/hyperparameterTuningJobs/77",
        "displayName": run_id,
        "state": "JOB_STATE_RUNNING",
        "labels": {"vtx-run-id": run_id},
        "createTime": stamp(0),
        "studySpec": {
            "metrics": [{"metricId": "eval_loss", "goal": goal}],
            "parameters": [{"parameterId": "learning_rate"}, {"parameterId": "model.lora.r"}],
        },
        "maxTrialCount": 4,
        "parallelTrialCount": 2,
        "trialJobSpec": {"baseOutputDirectory": {"outputUriPrefix": f"gs://c/runs/{run_id}/"}},
        "trials": [
            trial("1", "SUCCEEDED", 0.001, 4, 2.5, 70),
            trial("2", "SUCCEEDED", 0.01, 8, 1.25, 100),
            trial("3", "INFEASIBLE", 0.03, 8, None, 40),
            trial("4", "ACTIVE", 0.0003, 4, None, None),
        ],
    }
    return {**study, **changes}


@dataclass
class Scripted:
    """Answers each request by (method, path suffix) and records what was asked."""

    answers: dict[tuple[str, str], list[dict]]
    seen: list[tuple[str, str, dict]] = field(default_factory=list)

    def request(self, method: str, url: str, timeout: float, **kwargs: Any) -> requests.Response:
        self.seen.append((method, url, kwargs.get("params") or {}))
        body: dict = {}
        for (m, suffix), bodies in self.answers.items():
            if m == method and url.endswith(suffix) and bodies:
                body = bodies.pop(0) if len(bodies) > 1 else bodies[0]
                break
        response = requests.Response()
        response.status_code = 200
        response._content = json.dumps(body).encode()
        return response
