"""hyperparameterTuningJobs through the real aiplatform_v1 REST client: create, get, list,
cancel, delete and their errors, and how a study ends (grid done, failed trials, a trial that
reports nothing)."""

from __future__ import annotations

import json
import urllib.request

import pytest
from google.api_core import exceptions

from jobs.core.stack import StackOutputs
from tests.jobs.local.local_helpers import (
    PARENT,
    client,
    custom_job,
    pool,
    replica_output,
    tuning_job,
    wait_for,
    wait_study,
    wait_terminal,
)

# Reports --rank as the loss, through the file the platform names.
REPORT = """
import json, os, sys, time
rank = int(sys.argv[-1].split("=")[1])
line = {"timestamp": time.time(), "trial": os.environ["CLOUD_ML_TRIAL_ID"],
        os.environ["CLOUD_ML_HP_METRIC_TAG"]: str(rank / 10), "global_step": "1"}
with open(os.environ["CLOUD_ML_HP_METRIC_FILE"], "w") as f:
    f.write(json.dumps(line) + "\\n")
"""


def test_grid_study_ends_when_its_grid_is_done(local_platform: StackOutputs) -> None:
    jobs = client(local_platform.vertex_endpoint)
    created = jobs.create_hyperparameter_tuning_job(
        parent=PARENT, hyperparameter_tuning_job=tuning_job("grid", REPORT, max_trials=5)
    )
    assert created.name.startswith(
        "projects/424242424242/locations/us-central1/hyperparameterTuningJobs/"
    )
    assert created.state == 2  # PENDING, as Vertex answers a create
    done = wait_study(jobs, created.name)
    assert done.state == 4, done.error
    assert [t.parameters[0].value for t in done.trials] == [1.0, 2.0]  # grid order, once each
    assert [t.final_measurement.metrics[0].value for t in done.trials] == [0.1, 0.2]
    assert all(t.state == 4 for t in done.trials)  # Trial.SUCCEEDED


def test_get_list_and_pages(local_platform: StackOutputs) -> None:
    jobs = client(local_platform.vertex_endpoint)
    made = [
        jobs.create_hyperparameter_tuning_job(
            parent=PARENT,
            hyperparameter_tuning_job=tuning_job(f"l{i}", REPORT, run_id="study-list"),
        ).name
        for i in range(3)
    ]
    assert jobs.get_hyperparameter_tuning_job(name=made[0]).display_name == "l0"
    pager = jobs.list_hyperparameter_tuning_jobs(
        request={"parent": PARENT, "filter": 'labels.vtx-run-id="study-list"', "page_size": 2}
    )
    pages = list(pager.pages)
    assert [len(p.hyperparameter_tuning_jobs) for p in pages] == [2, 1]
    assert [j.name for p in pages for j in p.hyperparameter_tuning_jobs] == made[::-1]
    for name in made:
        wait_study(jobs, name)
    listed = jobs.list_hyperparameter_tuning_jobs(
        request={
            "parent": PARENT,
            "filter": 'labels.vtx-run-id="study-list" AND state="JOB_STATE_SUCCEEDED"',
        }
    )
    assert {j.name for j in listed} == set(made)


def test_first_trial_failing_fails_the_study(local_platform: StackOutputs) -> None:
    jobs = client(local_platform.vertex_endpoint)
    fails_first = "import sys; sys.exit(3 if sys.argv[-1] == '--rank=1' else 0)"
    created = jobs.create_hyperparameter_tuning_job(
        parent=PARENT,
        hyperparameter_tuning_job=tuning_job("first-fails", fails_first, max_trials=4, parallel=1),
    )
    done = wait_study(jobs, created.name)
    assert done.state == 5  # FAILED
    assert "first trial failed" in done.error.message
    [trial] = done.trials
    assert trial.state == 5  # INFEASIBLE
    assert "JOB_STATE_FAILED" in trial.infeasible_reason


def test_a_trial_that_reports_nothing_is_infeasible_and_counts_as_failed(
    local_platform: StackOutputs,
) -> None:
    jobs = client(local_platform.vertex_endpoint)
    silent_second = "import sys\nif sys.argv[-1] == '--rank=1':\n" + "\n".join(
        "    " + line for line in REPORT.strip().splitlines()
    )
    created = jobs.create_hyperparameter_tuning_job(
        parent=PARENT,
        hyperparameter_tuning_job=tuning_job(
            "silent", silent_second, max_trials=3, values=(1, 2, 3), max_failed=2
        ),
    )
    done = wait_study(jobs, created.name)
    assert done.state == 5  # FAILED: trials 2 and 3 reported nothing, maxFailedTrialCount 2
    assert [t.state for t in done.trials] == [4, 5, 5]
    assert "reported no value" in done.trials[1].infeasible_reason
    assert "maxFailedTrialCount 2" in done.error.message


def test_cancel_then_delete(local_platform: StackOutputs) -> None:
    jobs = client(local_platform.vertex_endpoint)
    created = jobs.create_hyperparameter_tuning_job(
        parent=PARENT,
        hyperparameter_tuning_job=tuning_job("to-delete", "import time; time.sleep(600)"),
    )
    with pytest.raises(exceptions.BadRequest, match="cancel it first"):
        jobs.delete_hyperparameter_tuning_job(name=created.name).result()
    jobs.cancel_hyperparameter_tuning_job(name=created.name)
    done = wait_study(jobs, created.name)
    assert done.state == 7 and done.error.code == 1
    with pytest.raises(exceptions.BadRequest, match="already ended"):  # FAILED_PRECONDITION
        jobs.cancel_hyperparameter_tuning_job(name=created.name)
    jobs.delete_hyperparameter_tuning_job(name=created.name).result()
    with pytest.raises(exceptions.NotFound):
        jobs.get_hyperparameter_tuning_job(name=created.name)


def test_unknown_study_is_a_404(local_platform: StackOutputs) -> None:
    jobs = client(local_platform.vertex_endpoint)
    with pytest.raises(exceptions.NotFound, match="HyperparameterTuningJob"):
        jobs.get_hyperparameter_tuning_job(name=f"{PARENT}/hyperparameterTuningJobs/1")
    with pytest.raises(exceptions.NotFound):
        jobs.cancel_hyperparameter_tuning_job(name=f"{PARENT}/hyperparameterTuningJobs/1")


def test_bad_studies_get_vertex_style_400s(local_platform: StackOutputs) -> None:
    from google.cloud import aiplatform_v1

    jobs = client(local_platform.vertex_endpoint)
    double_grid = tuning_job("g", REPORT)
    double_grid.study_spec.parameters[0] = aiplatform_v1.StudySpec.ParameterSpec(
        parameter_id="lr", double_value_spec={"min_value": 0.1, "max_value": 1.0}
    )
    with pytest.raises(exceptions.BadRequest, match="GRID_SEARCH needs INTEGER"):
        jobs.create_hyperparameter_tuning_job(parent=PARENT, hyperparameter_tuning_job=double_grid)
    no_command = tuning_job("c", REPORT)
    no_command.trial_job_spec.worker_pool_specs[0].container_spec.command = []
    with pytest.raises(
        exceptions.BadRequest, match=r"trialJobSpec.workerPoolSpecs\[0\].containerSpec.command"
    ):
        jobs.create_hyperparameter_tuning_job(parent=PARENT, hyperparameter_tuning_job=no_command)


def test_unknown_field_is_refused_in_googles_error_shape(local_platform: StackOutputs) -> None:
    body = {"displayName": "x", "maxTrialCount": 1, "maxTrials": 1}
    request = urllib.request.Request(
        f"{local_platform.vertex_endpoint}/v1/{PARENT}/hyperparameterTuningJobs",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(request)
    assert info.value.code == 400
    error = json.load(info.value)["error"]
    assert error["status"] == "INVALID_ARGUMENT" and "maxTrials" in error["message"]


def test_a_runaway_study_creates_only_what_runs_and_cancel_stops_it(
    local_platform: StackOutputs,
) -> None:
    """parallelTrialCount as high as Vertex takes: the study creates no more trial jobs than
    the platform runs at once (8 replicas here), another user's job says why it waits and
    where, and cancel ends every trial and creates none after."""
    jobs = client(local_platform.vertex_endpoint)
    runaway = tuning_job(
        "runaway",
        "import time; time.sleep(600)",
        max_trials=1000,
        parallel=1000,
        algorithm="RANDOM_SEARCH",
    )
    created = jobs.create_hyperparameter_tuning_job(
        parent=PARENT, hyperparameter_tuning_job=runaway
    )

    def running_trials() -> list:
        trials = jobs.get_hyperparameter_tuning_job(name=created.name).trials
        states = [jobs.get_custom_job(name=t.custom_job).state for t in trials]
        return trials if states.count(3) == 8 else []  # JOB_STATE_RUNNING

    assert len(wait_for(running_trials)) == 8
    other = jobs.create_custom_job(
        parent=PARENT, custom_job=custom_job("other-user", pool("print('mine')"))
    )
    said = wait_for(lambda: replica_output(local_platform, other.name, "service")[1:])
    assert "waiting in the queue: position 1 of 1" in said[0]
    assert "8 are in use and this job needs 1" in said[0]

    jobs.cancel_hyperparameter_tuning_job(name=created.name)
    done = wait_study(jobs, created.name)
    assert done.state == 7  # CANCELLED
    assert len(done.trials) == 8
    for trial in done.trials:
        assert jobs.get_custom_job(name=trial.custom_job).state == 7
    assert wait_terminal(jobs, other.name).state == 4
