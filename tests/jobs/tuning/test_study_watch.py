"""A submitted study, without a server: REST JSON read into a StudyRecord (trials, the best one by
the metric's goal), the trials table and JSON, VertexRest's study calls over a scripted session,
`vtx status|list|cancel` handing a study run to its views, the trials' logs as one source, and
`Vertex.submit_study` creating a study once (a 503 that landed is not sent again)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from jobs.core.stack import StackOutputs
from jobs.spec.gcloud import load_template
from jobs.tuning.study_job import compile_study, plan_study
from jobs.tuning.study_records import StudyRecord
from jobs.vertex.client import Vertex
from jobs.vertex.errors import VertexError
from jobs.vertex.rest import VertexRest
from tests.conftest import TEMPLATES, dev_stack
from tests.jobs.tuning.study_fakes import FAST, Scripted, rest_study, stamp, trial

TINY_TUNE = TEMPLATES / "tiny-tune.yaml"


def test_the_best_trial_is_the_succeeded_one_best_by_the_goal() -> None:
    low = StudyRecord.from_rest(rest_study("MINIMIZE"))
    high = StudyRecord.from_rest(rest_study("MAXIMIZE"))
    assert low.best is not None and low.best.id == "2"
    assert high.best is not None and high.best.id == "1"
    assert low.trial_output(low.best) == "gs://c/runs/tiny-tune-1/2/"
    assert low.trials[0].parameters == {"learning_rate": 0.001, "model.lora.r": 4}
    assert (low.trials[0].metric, low.trials[0].step) == (2.5, 20)
    assert low.run_id == "tiny-tune-1" and not low.terminal


def test_no_best_trial_before_one_succeeds_with_the_metric() -> None:
    study = rest_study()
    study["trials"] = [trial("1", "ACTIVE", 0.01, 4, None, None)]
    assert StudyRecord.from_rest(study).best is None


def test_list_studies_pages_and_keeps_only_vtx_runs_newest_first() -> None:
    other = rest_study(run_id="x")
    del other["labels"]
    newer = rest_study(run_id="newer", createTime=stamp(500))
    session = Scripted(
        {
            ("GET", "/hyperparameterTuningJobs"): [
                {"hyperparameterTuningJobs": [rest_study(), other], "nextPageToken": "t"},
                {"hyperparameterTuningJobs": [newer]},
            ]
        }
    )
    found = VertexRest(dev_stack(), session=session, backoff=FAST).list_studies()
    assert [s["displayName"] for s in found] == ["newer", "tiny-tune-1"]
    assert session.seen[1][2]["pageToken"] == "t"
    assert session.seen[0][2]["filter"] == "labels.vtx-run-id:*"


@dataclass
class FakeJobService:
    """The JobServiceClient methods submit_study calls; ``fail_first`` answers the first create
    with a 503 after storing the study (a request that landed)."""

    studies: list[Any] = field(default_factory=list)
    creates: int = 0
    fail_first: bool = False
    parents: list[str] = field(default_factory=list)

    def list_custom_jobs(self, request: Any, retry: Any = None) -> list:
        return []

    def list_hyperparameter_tuning_jobs(self, request: Any, retry: Any = None) -> list:
        return list(self.studies)

    def create_hyperparameter_tuning_job(
        self, parent: str, hyperparameter_tuning_job: Any, retry: Any = None
    ) -> Any:
        from google.api_core import exceptions

        self.creates += 1
        self.parents.append(parent)
        self.studies.append(hyperparameter_tuning_job)
        if self.fail_first and self.creates == 1:
            raise exceptions.ServiceUnavailable("busy")
        return hyperparameter_tuning_job


def study_plan(on: StackOutputs | None = None, **template: Any) -> Any:
    loaded = load_template(TINY_TUNE).model_copy(update=template)
    return plan_study(compile_study(loaded, on or dev_stack(), "tiny-tune-1"))


def submit(vertex: Vertex, plan: Any) -> Any:
    return vertex.submit_study(plan.study.to_proto(), plan.quota, plan.study.stack.region)


def test_submit_study_creates_the_planned_study_once() -> None:
    service = FakeJobService()
    created = submit(Vertex(dev_stack(), client=service, backoff=FAST), study_plan())  # type: ignore[arg-type]
    assert service.creates == 1
    assert created.labels["vtx-run-id"] == "tiny-tune-1"
    assert created.max_trial_count == 4


def test_a_503_on_create_that_landed_is_not_sent_again() -> None:
    service = FakeJobService(fail_first=True)
    created = submit(Vertex(dev_stack(), client=service, backoff=FAST), study_plan())  # type: ignore[arg-type]
    assert service.creates == 1
    assert created.display_name == "tiny-tune-1"


def test_a_run_id_that_already_has_a_study_is_refused() -> None:
    plan = study_plan()
    service = FakeJobService(studies=[plan.study.to_proto()])
    with pytest.raises(VertexError, match="already exists"):
        submit(Vertex(dev_stack(), client=service, backoff=FAST), plan)  # type: ignore[arg-type]
    assert service.creates == 0


def test_a_study_in_a_further_region_is_created_there() -> None:
    attachment = "projects/vtx-dev-123/regions/europe-west4/networkAttachments/vtx-training"
    regional = dev_stack(regions={"europe-west4": {"network_attachment": attachment}})
    service = FakeJobService()
    plan = study_plan(regional, region="europe-west4")
    submit(Vertex(regional, client=service, backoff=FAST), plan)  # type: ignore[arg-type]
    assert service.parents == ["projects/vtx-dev-123/locations/europe-west4"]
