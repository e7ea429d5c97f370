"""A scripted Vertex, its REST twin and a clock that moves only when the walk sleeps: the
capacity ladder's runner without a platform or sleeps, for its tests here and the CLI's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from jobs.core.stack import load_stack_file
from jobs.custom_jobs.compile import compile_job
from jobs.launch.plan import Rung
from jobs.pricing.plan import plan_job
from jobs.quota.cloud_quotas import QuotaCheck
from jobs.spec.gcloud import load_template
from jobs.vertex.errors import VertexError
from jobs.vertex.job_records import JobRecord
from tests.conftest import TEMPLATES, TEST_DATA

RUN_ID = "walk-run"


def rung(number: int, strategy: str, max_wait_s: float | None = 60.0) -> Rung:
    stack = load_stack_file(TEST_DATA / "stack-dev.json")
    template = load_template(TEMPLATES / "l4-spot-lora.yaml", [f"scheduling.strategy={strategy}"])
    plan = plan_job(compile_job(template, stack, RUN_ID))
    return Rung(number, plan, QuotaCheck(stack.region, []), max_wait_s, None)


class Refused(Exception):
    code = 429


@dataclass
class Created:
    name: str


@dataclass
class Submitted:
    job: Created
    attempt: int


class FakeVertex:
    """Creates jobs named job-1, job-2...; a rung whose strategy is in ``refuse`` gets a 429."""

    def __init__(self, refuse: tuple[str, ...] = ()) -> None:
        self.refuse = refuse
        self.created: list[str] = []

    def submit(self, job: Any, needed: dict[str, int], region: str) -> Submitted:
        if job.job_spec.scheduling.strategy.name in self.refuse:
            raise VertexError("quota exceeded in us-central1") from Refused()
        self.created.append(f"job-{len(self.created) + 1}")
        return Submitted(Created(self.created[-1]), len(self.created))


class FakeRest:
    """Each job's states in order, one per get (the last one repeats); cancel ends a job. Gets
    are counted: a walk that keeps polling a job that will not change fails, never hangs."""

    def __init__(self, script: dict[str, list[str | tuple[str, str]]], polls: int = 500) -> None:
        self.script = {name: list(states) for name, states in script.items()}
        self.cancelled: list[str] = []
        self.polls = polls

    def get(self, name: str) -> JobRecord:
        self.polls -= 1
        assert self.polls >= 0, f"still polling {name}, which no longer changes"
        states = self.script[name]
        state = "JOB_STATE_CANCELLED" if name in self.cancelled else states[0]
        if len(states) > 1 and name not in self.cancelled:
            states.pop(0)
        state, error = state if isinstance(state, tuple) else (state, None)
        job = {"name": name, "state": state, **({"error": {"message": error}} if error else {})}
        return JobRecord.from_rest(job)

    def cancel(self, name: str) -> None:
        self.cancelled.append(name)


class Clock:
    """Time moves only when the walk sleeps."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


STOCKOUT = ("JOB_STATE_FAILED", "STOCKOUT: Spot capacity for NVIDIA_L4 is exhausted.")
