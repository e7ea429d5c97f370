"""`vtx cost --run-time`: the trainer's own estimate of a job, run in a process, at the job's
price. The trainer runs for real (its estimate loads the tiny example model, no training)."""

from __future__ import annotations

import pytest

from jobs.core.catalog import load_catalog
from jobs.custom_jobs.facts import template_facts
from jobs.custom_jobs.training_time import TrainingTimeError, run_estimate, trainer_call
from jobs.spec.gcloud import load_template
from tests.conftest import TEMPLATES
from tests.jobs.custom_jobs.estimate_args import ON_L4, TINY


def _facts(name: str, overrides: list[str] = ()):  # type: ignore[assignment]
    return template_facts(load_template(TEMPLATES / name, overrides))


def test_the_call_carries_the_templates_args_and_its_accelerators() -> None:
    call = trainer_call(_facts("l4-spot-lora.yaml"), load_catalog())
    assert call.args == ["--config", "trainer/examples/l4-lora.yaml"]
    assert (call.accelerator, call.accelerator_count, call.nodes) == ("NVIDIA_L4", 1, 1)
    argv = call.argv(0.98, python="python")
    assert argv[:3] == ["python", "-m", "trainer"]
    assert argv[argv.index("--usd-per-hour") + 1] == "0.980000"


def test_every_training_replica_is_a_node() -> None:
    call = trainer_call(_facts("smoke-cpu.yaml", ON_L4[1::2]), load_catalog())
    assert (call.accelerator, call.nodes) == ("NVIDIA_L4", 2)


def test_a_job_without_a_gpu_says_how_to_give_it_one() -> None:
    with pytest.raises(TrainingTimeError, match=r"n1-standard-4\) has no GPU.*--set pools"):
        trainer_call(_facts("smoke-cpu.yaml"), load_catalog())


@pytest.mark.parametrize("name", ["v5e-slice.yaml", "tpu-v2-pod.yaml"])
def test_a_tpu_job_is_not_estimated_and_says_so(name: str) -> None:
    with pytest.raises(TrainingTimeError, match=r"is a TPU \(.*\): vtx does not estimate TPU"):
        trainer_call(_facts(name), load_catalog())
    # The same job with the trainer's own command is refused for its TPU all the same.
    facts = _facts(name, ["command=[python, -m, trainer]", "args=[--config, x.yaml]"])
    with pytest.raises(TrainingTimeError, match="does not estimate TPU step times"):
        trainer_call(facts, load_catalog())


def test_a_job_that_does_not_run_the_trainer_is_refused() -> None:
    facts = _facts("l4-spot-lora.yaml", ["command=[python, train.py]", "args=[]"])
    with pytest.raises(TrainingTimeError, match="does not run the trainer"):
        trainer_call(facts, load_catalog())


def test_the_trainers_own_error_reaches_the_user() -> None:
    facts = _facts("l4-spot-lora.yaml", ["args=[--config, no/such/config.yaml]"])
    quoted = r"estimate failed: (?!error:).*no/such/config\.yaml"  # the trainer's words, once
    with pytest.raises(TrainingTimeError, match=quoted):
        run_estimate(trainer_call(facts, load_catalog()), 1.0)


def test_the_run_is_priced_at_the_jobs_price_per_hour() -> None:
    facts = _facts("smoke-cpu.yaml", [*TINY[1::2], *ON_L4[1::2]])
    result = run_estimate(trainer_call(facts, load_catalog()), 2.5)
    assert result["total_steps"] == 60  # tiny-lora.yaml's max_steps
    assert result["accelerator"] == "NVIDIA_L4" and result["nodes"] == 2
    assert result["usd_per_hour"] == pytest.approx(2.5)
    assert result["cost_usd"] == pytest.approx(result["hours"] * 2.5)
