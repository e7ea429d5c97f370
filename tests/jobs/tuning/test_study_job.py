"""A study compiled to the exact v1 `HyperparameterTuningJob`: parsed by the real proto (unknown
fields refused), written back unchanged, its trial job the template's CustomJob spec under the
run's prefix with the run's labels; rendered as REST JSON (snapshot) and as gcloud's
hp-tuning-jobs config; priced as trials x the trial's cost.

Snapshots live in tests/data/snapshots/ and are only read here; after a deliberate change,
regenerate them with `.venv/bin/python tests/jobs/custom_jobs/update_snapshots.py` and review the
diff."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from jobs.core.contract import LABEL_RUN_ID
from jobs.core.stack import StackOutputs
from jobs.custom_jobs.compile import compile_job
from jobs.custom_jobs.facts import template_facts
from jobs.launch.render import render_study_json, render_study_yaml
from jobs.pricing.estimates import StudyCost, estimate
from jobs.spec.gcloud import load_template
from jobs.tuning.study_job import (
    compile_study,
    plan_study,
    reporting_metric,
    to_tuning_job,
    tuning_job_dict,
    tuning_job_rest,
)
from tests.conftest import TEMPLATES
from tests.jobs.custom_jobs.update_snapshots import REGENERATE, RUN_ID, read_snapshot
from tests.jobs.tuning.study_templates import SNAPSHOT, TINY_TUNE, rich_template


def test_the_example_study_renders_to_its_snapshot(stack: StackOutputs) -> None:
    rendered = render_study_json(compile_study(load_template(TINY_TUNE), stack, RUN_ID).to_proto())
    assert json.loads(rendered) == read_snapshot(SNAPSHOT), f"a deliberate change? {REGENERATE}"


def test_the_rest_study_is_exactly_what_the_proto_writes_back(stack: StackOutputs) -> None:
    rest = compile_study(rich_template(), stack, RUN_ID).rest
    assert tuning_job_rest(to_tuning_job(rest)) == rest
    spec = rest["studySpec"]
    assert spec["algorithm"] == "RANDOM_SEARCH"
    assert spec["measurementSelectionType"] == "LAST_MEASUREMENT"
    assert spec["medianAutomatedStoppingSpec"] == {"useElapsedDuration": True}
    by_id = {p["parameterId"]: p for p in spec["parameters"]}
    assert by_id["warmup_steps"]["integerValueSpec"] == {"maxValue": "10"}  # 0: the default
    lora = by_id["model.lora.r"]["conditionalParameterSpecs"][0]
    assert lora["parentDiscreteValues"] == {"values": [16.0]}
    assert lora["parameterSpec"]["parameterId"] == "model.lora.alpha"
    cosine = by_id["lr_scheduler_type"]["conditionalParameterSpecs"][0]
    assert cosine["parentCategoricalValues"] == {"values": ["cosine"]}
    assert rest["maxFailedTrialCount"] == 2


def test_vertex_defaults_are_left_out_as_the_api_writes_them(stack: StackOutputs) -> None:
    spec = compile_study(load_template(TINY_TUNE), stack, RUN_ID).rest["studySpec"]
    assert "algorithm" not in spec  # ALGORITHM_UNSPECIFIED: Vizier's default
    assert "measurementSelectionType" not in spec


def test_the_trial_job_is_the_templates_custom_job_under_the_runs_prefix(
    stack: StackOutputs,
) -> None:
    template = load_template(TINY_TUNE)
    study = compile_study(template, stack, RUN_ID)
    custom_job = compile_job(reporting_metric(template), stack, RUN_ID).rest
    assert study.rest["trialJobSpec"] == custom_job["jobSpec"]
    assert study.rest["labels"] == custom_job["labels"]
    assert study.rest["labels"][LABEL_RUN_ID] == RUN_ID == study.run_id
    prefix = study.rest["trialJobSpec"]["baseOutputDirectory"]["outputUriPrefix"]
    assert prefix == f"gs://{stack.buckets.checkpoints}/runs/{RUN_ID}/"
    assert study.rest["displayName"] == RUN_ID


def test_the_kms_key_goes_on_the_study_too(stack: StackOutputs) -> None:
    key = "projects/p/locations/us-central1/keyRings/r/cryptoKeys/k"
    keyed = stack.model_copy(update={"kms_key": key})
    study = compile_study(load_template(TINY_TUNE), keyed, RUN_ID)
    assert study.rest["encryptionSpec"] == {"kmsKeyName": key}
    assert "--kms-key-name=" in render_study_yaml(study.to_proto(), keyed)


def test_an_unknown_field_is_refused_by_the_proto(stack: StackOutputs) -> None:
    from google.protobuf.json_format import ParseError

    rest: dict[str, Any] = compile_study(load_template(TINY_TUNE), stack, RUN_ID).rest
    rest["studySpec"]["metrics"][0]["metricName"] = "eval_loss"
    with pytest.raises(ParseError):
        to_tuning_job(rest)


def test_gcloud_yaml_holds_the_study_and_its_counts_and_the_rest_as_flags(
    stack: StackOutputs,
) -> None:
    study = compile_study(load_template(TINY_TUNE), stack, RUN_ID)
    text = render_study_yaml(study.to_proto(), stack)
    header, _, body = text.partition("\n")
    assert "gcloud ai hp-tuning-jobs create" in header
    assert f"--display-name={RUN_ID}" in header and f"vtx-run-id={RUN_ID}" in header
    config = yaml.safe_load(body)
    assert list(config) == [
        "studySpec",
        "maxTrialCount",
        "parallelTrialCount",
        "maxFailedTrialCount",
        "trialJobSpec",
    ]
    assert (config["maxTrialCount"], config["parallelTrialCount"]) == (4, 2)


def test_a_study_costs_its_trials_and_its_wall_time_counts_parallel_rounds(
    stack: StackOutputs,
) -> None:
    plan = plan_study(compile_study(rich_template(), stack, RUN_ID))
    trial = plan.trial.cost
    assert trial.usd_per_h is not None
    cost = plan.cost
    assert (cost.max_trials, cost.parallel_trials, cost.waves) == (8, 3, 3)
    assert cost.usd_per_h == pytest.approx(trial.usd_per_h * 3)
    assert cost.usd_at_timeout == pytest.approx(trial.usd_at_timeout * 8)
    assert cost.usd_for(0.5) == pytest.approx(trial.usd_per_h * 0.5 * 8)
    assert cost.wall_hours(0.5) == pytest.approx(1.5)
    assert plan.quota == {m: n * 3 for m, n in trial.quota.items()}


def test_an_unknown_trial_price_leaves_the_study_price_unknown() -> None:
    template = load_template(TINY_TUNE)
    priced = estimate(template_facts(template), "nowhere-1")
    cost = StudyCost(priced, 4, 2)
    assert priced.usd_per_h is None
    assert (cost.usd_per_h, cost.usd_at_timeout, cost.usd_for(1.0)) == (None, None, None)


def test_the_study_dict_wraps_any_compiled_trial(stack: StackOutputs) -> None:
    template = rich_template()
    assert template.study is not None
    trial = compile_job(template, stack, RUN_ID).rest
    job = tuning_job_dict(template.study, trial)
    assert (job["maxTrialCount"], job["parallelTrialCount"]) == (8, 3)
    assert job["trialJobSpec"] is not trial["jobSpec"]  # a copy: the trial job stays as built


def test_our_trainer_is_told_the_studys_metric_after_its_own_args(stack: StackOutputs) -> None:
    """Vertex is not documented to set CLOUD_ML_HP_METRIC_TAG: the trial's args name it."""
    args = compile_study(load_template(TINY_TUNE), stack, RUN_ID).rest["trialJobSpec"][
        "workerPoolSpecs"
    ][0]["containerSpec"]["args"]
    assert args[-2:] == ["--set", "hypertune_metric=eval_loss"]
    plain = load_template(TEMPLATES / "smoke-cpu.yaml")
    assert reporting_metric(plain) is plain  # no study: unchanged
