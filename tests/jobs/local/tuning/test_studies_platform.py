"""HyperparameterTuningJobs end to end: the real SDK's HyperparameterTuningJob.run() against a
started local platform, each trial a real replica process that reports with cloudml-hypertune."""

from __future__ import annotations

import json

import pytest

from jobs.core.contract import LABEL_RUN_ID
from jobs.core.stack import StackOutputs
from jobs.local.platform.state import PlatformState
from tests.jobs.local.local_helpers import (
    PARENT,
    SDK_TRANSPORTS,
    client,
    pool,
    replica_output,
    transport_options,
    wait_for,
)

# A trial: reads its parameters from the args Vertex appends, reports twice through Google's
# own hypertune writer (the tag from CLOUD_ML_HP_METRIC_TAG), prints what it saw.
TRIAL = """
import argparse, json, os, sys, hypertune
parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float)
parser.add_argument("--layers", type=int)
args = parser.parse_args()
loss = args.lr * args.layers
tune = hypertune.HyperTune()
tag = os.environ["CLOUD_ML_HP_METRIC_TAG"]
tune.report_hyperparameter_tuning_metric(tag, loss, global_step=1)
tune.report_hyperparameter_tuning_metric(tag, loss + 10, global_step=2)
keys = ["CLOUD_ML_TRIAL_ID", "CLOUD_ML_HP_METRIC_TAG", "CLOUD_ML_HP_METRIC_FILE", "AIP_MODEL_DIR"]
print(json.dumps({"args": sys.argv[1:], **{k: os.environ.get(k) for k in keys}}))
"""

HANG = "import time; print('up', flush=True); time.sleep(600)"


@pytest.fixture(params=SDK_TRANSPORTS)
def transport(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def sdk(
    transport: str,
    local_platform: StackOutputs,
    local_platform_state: PlatformState,
    monkeypatch: pytest.MonkeyPatch,
):
    """The high-level SDK on the local platform over each transport (gRPC, the default, and
    REST), anonymous, polling every 0.2 s."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform
    from google.cloud.aiplatform import jobs

    monkeypatch.setattr(jobs, "_JOB_WAIT_TIME", 0.2)
    aiplatform.init(
        project=local_platform.project,
        location=local_platform.region,
        **transport_options(transport, local_platform_state),
        credentials=AnonymousCredentials(),
        staging_bucket=f"gs://{local_platform.buckets.staging}",
    )
    return aiplatform


def _study(sdk, name: str, code: str, base: str, **kwargs):
    from google.cloud.aiplatform import hyperparameter_tuning as hpt

    trial_job = sdk.CustomJob(
        display_name=f"{name}-trial", worker_pool_specs=[pool(code)], base_output_dir=base
    )
    return sdk.HyperparameterTuningJob(
        display_name=name,
        custom_job=trial_job,
        metric_spec={"loss": "minimize"},
        parameter_spec={
            "lr": hpt.DoubleParameterSpec(min=0.001, max=0.1, scale="log"),
            "layers": hpt.IntegerParameterSpec(min=1, max=4, scale="linear"),
        },
        labels={LABEL_RUN_ID: name},
        **kwargs,
    )


def test_sdk_study_runs_every_trial_as_a_reporting_custom_job(
    sdk, transport: str, local_platform: StackOutputs
) -> None:
    name = f"study-e2e-{transport}"  # each transport's run lists its own trials
    base = f"gs://vtx-local-checkpoints/runs/{name}"
    study = _study(sdk, name, TRIAL, base, max_trial_count=4, parallel_trial_count=2)
    study.run()  # raises unless the study SUCCEEDED

    assert study.state.name == "JOB_STATE_SUCCEEDED"
    trials = study.trials
    assert [t.id for t in trials] == ["1", "2", "3", "4"]
    jobs = sdk.CustomJob.list(filter=f'labels.{LABEL_RUN_ID}="{name}"')
    assert len(jobs) == 4
    for trial in trials:
        assert trial.state.name == "SUCCEEDED"
        params = {p.parameter_id: p.value for p in trial.parameters}
        assert 0.001 <= params["lr"] <= 0.1 and params["layers"] in (1, 2, 3, 4)
        # BEST_MEASUREMENT (the SDK's default) of a minimized metric: step 1, not the last.
        assert trial.final_measurement.step_count == 1
        [metric] = trial.final_measurement.metrics
        assert metric.metric_id == "loss"
        assert metric.value == pytest.approx(params["lr"] * params["layers"])
        assert [m.step_count for m in trial.measurements] == [1, 2]
        assert trial.start_time and trial.end_time
        assert trial.custom_job.startswith(
            f"projects/424242424242/{PARENT.split('/', 2)[2]}/customJobs/"
        )
        [seen] = [
            json.loads(line)
            for line in replica_output(local_platform, trial.custom_job, "workerpool0-0")
        ]
        assert seen["args"] == [f"--lr={params['lr']!r}", f"--layers={int(params['layers'])}"]
        assert seen["CLOUD_ML_TRIAL_ID"] == trial.id
        assert seen["CLOUD_ML_HP_METRIC_TAG"] == "loss"
        assert seen["CLOUD_ML_HP_METRIC_FILE"].endswith("hypertune/output.metrics")
        assert seen["AIP_MODEL_DIR"] == f"{base}/{trial.id}/model/"


def test_cancelling_a_study_cancels_its_running_trials(sdk, local_platform: StackOutputs) -> None:
    base = "gs://vtx-local-checkpoints/runs/study-cancel"
    study = _study(sdk, "study-cancel", HANG, base, max_trial_count=3, parallel_trial_count=2)
    study.run(sync=False)
    study.wait_for_resource_creation()

    jobs = client(local_platform.vertex_endpoint)

    def both_trials_print() -> bool:
        trials = jobs.get_hyperparameter_tuning_job(name=study.resource_name).trials
        return len(trials) == 2 and all(
            replica_output(local_platform, t.custom_job, "workerpool0-0") for t in trials
        )

    wait_for(both_trials_print)
    study.cancel()
    wait_for(lambda: study.state.name == "JOB_STATE_CANCELLED")  # .state reads it again
    assert study.error.code == 1  # CANCELLED, as Vertex sets it
    trials = study.trials
    assert len(trials) == 2  # no third trial started after the cancel
    for trial in trials:
        assert sdk.CustomJob.get(trial.custom_job).state.name == "JOB_STATE_CANCELLED"
        assert trial.state.name == "INFEASIBLE"  # stopped before it reported anything
