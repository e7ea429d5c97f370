"""Compiling templates against a stack into real `aiplatform_v1.CustomJob`s.

Snapshots live in tests/data/snapshots/ and are only read here; after a deliberate change,
regenerate them with `.venv/bin/python tests/jobs/custom_jobs/update_snapshots.py` and review the
diff."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jobs.core.contract import budget_of, new_run_id
from jobs.core.stack import StackOutputs
from jobs.custom_jobs.compile import (
    CompileError,
    compile_job,
    custom_job_dict,
    resolve_image,
    to_custom_job,
)
from jobs.custom_jobs.validate import validate_custom_job
from jobs.launch.render import render_json, rest_dict
from jobs.spec.gcloud import load_template
from jobs.spec.template import Budget, JobTemplate
from tests.conftest import TEMPLATES
from tests.jobs.custom_jobs.update_snapshots import (
    REGENERATE,
    RUN_ID,
    read_snapshot,
    template_snapshot,
)


def prod(stack: StackOutputs, **changes: object) -> StackOutputs:
    return stack.model_copy(update={"environment": "prod", **changes})


@pytest.mark.parametrize("path", sorted(TEMPLATES.glob("*.yaml")), ids=lambda p: p.stem)
def test_example_template_compiles_to_snapshot(path: Path, stack: StackOutputs) -> None:
    job = compile_job(load_template(path), stack, RUN_ID).to_proto()
    expected = read_snapshot(template_snapshot(path))
    assert json.loads(render_json(job)) == expected, f"a deliberate change? {REGENERATE}"


@pytest.mark.parametrize("path", sorted(TEMPLATES.glob("*.yaml")), ids=lambda p: p.stem)
def test_compiled_job_passes_validation_and_parses_without_unknown_fields(
    path: Path, stack: StackOutputs
) -> None:
    from google.cloud import aiplatform_v1

    job = compile_job(load_template(path), stack, RUN_ID).to_proto()
    rest = rest_dict(job)
    assert validate_custom_job(rest, region=stack.region) == []
    again = aiplatform_v1.CustomJob.from_json(render_json(job), ignore_unknown_fields=False)
    assert again == job


def test_stack_decides_identity_network_outputs_and_labels(stack: StackOutputs) -> None:
    template = load_template(TEMPLATES / "l4-spot-lora.yaml")
    job = custom_job_dict(template, stack, RUN_ID)
    spec = job["jobSpec"]
    assert spec["serviceAccount"] == stack.trainer_service_account
    assert spec["pscInterfaceConfig"]["networkAttachment"] == stack.network_attachment
    assert spec["baseOutputDirectory"]["outputUriPrefix"] == (
        f"gs://vtx-dev-123-checkpoints/runs/{RUN_ID}/"
    )
    assert spec["tensorboard"] == stack.tensorboard
    assert job["labels"] == {
        "stack": "vtx-dev",
        "team": "ml",
        "vtx-run-id": RUN_ID,
        "vtx-template": "l4-spot-lora",
        "vtx-environment": "dev",
    }
    chief = spec["workerPoolSpecs"][0]
    assert chief["machineSpec"] == {
        "machineType": "g2-standard-8",
        "acceleratorType": "NVIDIA_L4",
        "acceleratorCount": 1,
    }
    assert chief["containerSpec"]["imageUri"] == (
        "us-central1-docker.pkg.dev/vtx-dev-123/vtx/trainer:latest"
    )


@pytest.mark.parametrize(("usd", "label"), [(12.5, "12_5"), (40, "40"), (0.000125, "0_000125")])
def test_a_budget_travels_as_a_label_value_read_back_the_same(
    stack: StackOutputs, usd: float, label: str
) -> None:
    template = load_template(TEMPLATES / "l4-spot-lora.yaml")
    template = template.model_copy(update={"budget": Budget(max_cost_usd=usd)})
    job = custom_job_dict(template, stack, RUN_ID)
    assert job["labels"]["vtx-budget-usd"] == label
    assert budget_of(job["labels"]) == usd


def test_a_budget_label_a_template_sets_itself_is_replaced_or_dropped(stack: StackOutputs) -> None:
    template = load_template(TEMPLATES / "l4-spot-lora.yaml")
    template = template.model_copy(update={"labels": {"vtx-budget-usd": "999"}})
    assert "vtx-budget-usd" not in custom_job_dict(template, stack, RUN_ID)["labels"]


def test_a_team_travels_as_the_vtx_team_label_and_a_templates_own_is_dropped(
    stack: StackOutputs,
) -> None:
    template = load_template(TEMPLATES / "l4-spot-lora.yaml")
    own = template.model_copy(update={"labels": {"vtx-team": "vision"}})
    assert "vtx-team" not in custom_job_dict(own, stack, RUN_ID)["labels"]
    named = own.model_copy(update={"team": "nlp"})
    assert custom_job_dict(named, stack, RUN_ID)["labels"]["vtx-team"] == "nlp"


@pytest.mark.parametrize(
    ("team", "message", "hint"),
    [
        (None, "bills every job to a team (nlp, vision); this job names none", "team: nlp"),
        ("ops", "'ops' is not a team of stack", "one of nlp, vision, or add it under"),
    ],
)
def test_a_stack_with_team_budgets_refuses_a_job_without_one_of_its_teams(
    stack: StackOutputs, team: str | None, message: str, hint: str
) -> None:
    teams = stack.model_copy(update={"teams": ["nlp", "vision"]})
    template = load_template(TEMPLATES / "l4-spot-lora.yaml").model_copy(update={"team": team})
    with pytest.raises(CompileError) as raised:
        custom_job_dict(template, teams, RUN_ID)
    [problem] = raised.value.problems
    assert problem.path == "team"
    assert message in problem.message and hint in (problem.hint or "")
    # A stack without teams takes the same job, team or not.
    assert custom_job_dict(template, stack, RUN_ID)["labels"].get("vtx-team") == team


def test_secrets_pass_as_names_in_vtx_secrets_never_values(stack: StackOutputs) -> None:
    template = load_template(TEMPLATES / "l4-spot-lora.yaml")
    env = {
        e["name"]: e["value"]
        for e in custom_job_dict(template, stack, RUN_ID)["jobSpec"]["workerPoolSpecs"][0][
            "containerSpec"
        ]["env"]
    }
    assert json.loads(env["VTX_SECRETS"]) == {
        "HF_TOKEN": "projects/vtx-dev-123/secrets/hf-token/versions/latest"
    }
    assert "HF_TOKEN" not in env


def test_unknown_secret_region_mismatch_and_prod_web_access_are_problems(
    stack: StackOutputs,
) -> None:
    template = JobTemplate.model_validate(
        {
            "name": "t",
            "image": "trainer",
            "region": "europe-west4",
            "web_access": True,
            "secrets": {"API_TOKEN": "not-in-stack"},
            "pools": {"chief": {"machine": "n1-standard-4"}},
        }
    )
    with pytest.raises(CompileError) as err:
        custom_job_dict(template, prod(stack), RUN_ID)
    assert {p.path for p in err.value.problems} == {"region", "web_access", "secrets.API_TOKEN"}


def local(stack: StackOutputs) -> StackOutputs:
    """A stack shaped as the local platform's: its own project, no secrets map, endpoints."""
    return stack.model_copy(
        update={
            "project": "vtx-local",
            "project_number": "000000000000",
            "environment": "local",
            "secrets": {},
            "vertex_endpoint": "http://127.0.0.1:1",
            "gcs_endpoint": "http://127.0.0.1:2",
        }
    )


STACKS = {
    "dev": lambda s: s,
    "dev without a secrets map": lambda s: s.model_copy(update={"secrets": {}}),
    "local": local,
}


def secrets_env(template: JobTemplate, stack: StackOutputs) -> dict[str, str]:
    job = custom_job_dict(template, stack, RUN_ID)
    env = job["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["env"]
    return json.loads(next(e["value"] for e in env if e["name"] == "VTX_SECRETS"))


def secrets_template(secrets: dict[str, str]) -> JobTemplate:
    return JobTemplate.model_validate(
        {
            "name": "t",
            "image": "trainer",
            "secrets": secrets,
            "pools": {"chief": {"machine": "n1-standard-4"}},
        }
    )


@pytest.mark.parametrize("make", list(STACKS.values()), ids=list(STACKS))
def test_a_full_secret_name_in_the_stacks_project_is_its_id_with_the_version_kept(
    make, stack: StackOutputs
) -> None:
    target = make(stack)
    own = target.secrets.get("hf-token", f"projects/{target.project}/secrets/hf-token")
    template = secrets_template(
        {
            "BY_ID": "hf-token",
            "BY_NAME": f"projects/{target.project}/secrets/hf-token",
            "BY_NUMBER": f"projects/{target.project_number}/secrets/hf-token",
            "PINNED": f"projects/{target.project}/secrets/hf-token/versions/3",
        }
    )
    assert secrets_env(template, target) == {
        "BY_ID": f"{own}/versions/latest",
        "BY_NAME": f"{own}/versions/latest",
        "BY_NUMBER": f"{own}/versions/latest",
        "PINNED": f"{own}/versions/3",
    }


@pytest.mark.parametrize("make", list(STACKS.values()), ids=list(STACKS))
def test_a_secret_in_another_project_is_refused_on_every_stack_without_echoing_it(
    make, stack: StackOutputs
) -> None:
    ref = "projects/elsewhere-9/secrets/hf-token/versions/2"
    with pytest.raises(CompileError) as err:
        custom_job_dict(secrets_template({"HF_TOKEN": ref}), make(stack), RUN_ID)
    (problem,) = err.value.problems
    assert problem.path == "secrets.HF_TOKEN"
    assert "another project" in problem.message and "secrets: {HF_TOKEN: ID}" in problem.hint
    assert "elsewhere-9" not in str(problem)


def test_an_imported_job_keeps_its_secrets_and_a_pinned_version(stack: StackOutputs) -> None:
    from jobs.spec.gcloud import import_spec

    secrets = {
        "HF_TOKEN": "hf-token",
        "PINNED": f"projects/{stack.project}/secrets/hf-token/versions/3",
    }
    compiled = custom_job_dict(secrets_template(secrets), stack, RUN_ID)
    imported = import_spec(compiled["jobSpec"], "t")
    assert imported.template["secrets"] == secrets
    assert any("PINNED pins a version" in note for note in imported.notes)
    again = JobTemplate.model_validate(imported.template)
    assert secrets_env(again, stack) == secrets_env(secrets_template(secrets), stack)


def test_web_access_only_outside_prod(stack: StackOutputs) -> None:
    template = JobTemplate.model_validate(
        {
            "name": "t",
            "image": "trainer",
            "web_access": True,
            "pools": {"chief": {"machine": "n1-standard-4"}},
        }
    )
    assert custom_job_dict(template, stack, RUN_ID)["jobSpec"]["enableWebAccess"] is True


def test_peering_network_and_kms_key_when_the_stack_has_them(stack: StackOutputs) -> None:
    peered = stack.model_copy(
        update={
            "network_attachment": None,
            "network": "projects/123456789012/global/networks/vtx",
            "reserved_ip_ranges": ["vtx-training"],
            "kms_key": "projects/p/locations/us-central1/keyRings/r/cryptoKeys/k",
        }
    )
    template = load_template(TEMPLATES / "smoke-cpu.yaml")
    job = to_custom_job(custom_job_dict(template, peered, RUN_ID))
    assert job.job_spec.network == "projects/123456789012/global/networks/vtx"
    assert list(job.job_spec.reserved_ip_ranges) == ["vtx-training"]
    assert not job.job_spec.psc_interface_config.network_attachment
    assert job.encryption_spec.kms_key_name.endswith("cryptoKeys/k")


@pytest.mark.parametrize(
    ("image", "uri"),
    [
        ("trainer", "us-central1-docker.pkg.dev/vtx-dev-123/vtx/trainer:latest"),
        ("trainer:v3", "us-central1-docker.pkg.dev/vtx-dev-123/vtx/trainer:v3"),
        ("trainer@sha256:ab", "us-central1-docker.pkg.dev/vtx-dev-123/vtx/trainer@sha256:ab"),
        ("team/trainer:v1", "us-central1-docker.pkg.dev/vtx-dev-123/vtx/team/trainer:v1"),
        ("europe-docker.pkg.dev/x/y/z:1", "europe-docker.pkg.dev/x/y/z:1"),
        ("localhost:5000/t:1", "localhost:5000/t:1"),
    ],
)
def test_image_names_resolve_against_the_stack_registry(
    image: str, uri: str, stack: StackOutputs
) -> None:
    assert resolve_image(image, stack) == uri


def test_run_ids_are_valid_label_values() -> None:
    run_id = new_run_id("a100x16-fsdp")
    assert run_id.startswith("a100x16-fsdp-") and len(run_id) <= 63
    assert run_id == run_id.lower()


def test_invalid_run_id_is_refused(stack: StackOutputs) -> None:
    template = load_template(TEMPLATES / "smoke-cpu.yaml")
    with pytest.raises(CompileError, match="run id"):
        custom_job_dict(template, stack, "Bad_Run")
