"""gcloud formats: import -> render gives an equivalent spec; gcloud mistakes get hints."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from jobs.core.stack import StackOutputs
from jobs.custom_jobs.compile import compile_job, custom_job_dict, to_custom_job
from jobs.custom_jobs.validate import validate_custom_job_spec
from jobs.launch.checks import validate_template_doc
from jobs.launch.render import render_json, render_yaml, rest_dict
from jobs.spec.document import CUSTOM_JOB, CUSTOM_JOB_SPEC, load_document
from jobs.spec.gcloud import import_document, load_template, template_name
from jobs.spec.template import Budget, TemplateError
from tests.conftest import TEMPLATES

RUN_ID = "roundtrip-20261122-080000-cafe"


@pytest.mark.parametrize("path", sorted(TEMPLATES.glob("*.yaml")), ids=lambda p: p.stem)
def test_rendered_yaml_imports_back_to_an_equivalent_spec(
    path: Path, stack: StackOutputs, tmp_path: Path
) -> None:
    first = compile_job(load_template(path), stack, RUN_ID).to_proto()
    config = tmp_path / f"{path.stem}.yaml"
    config.write_text(render_yaml(first, stack))
    document = load_document(config)
    assert document.kind == CUSTOM_JOB_SPEC
    assert validate_custom_job_spec(document.doc, region=stack.region) == []
    # Every command accepts gcloud's format directly: load_template auto-detects it.
    second = compile_job(load_template(config), stack, RUN_ID).to_proto()
    assert rest_dict(second)["jobSpec"] == rest_dict(first)["jobSpec"]


@pytest.mark.parametrize("path", sorted(TEMPLATES.glob("*.yaml")), ids=lambda p: p.stem)
def test_rendered_json_custom_job_imports_back_with_name_and_labels(
    path: Path, stack: StackOutputs, tmp_path: Path
) -> None:
    template = load_template(path)
    first = compile_job(template, stack, RUN_ID).to_proto()
    job_file = tmp_path / "job.json"
    job_file.write_text(render_json(first))
    document = load_document(job_file)
    assert document.kind == CUSTOM_JOB
    imported = import_document(document.doc, document.kind, document.source)
    again = load_template(job_file)
    assert again.name == template.name
    # The stack's labels come back as template labels: compiling again gives the same labels.
    assert again.labels == {**stack.labels, **template.labels}
    second = custom_job_dict(again, stack, RUN_ID)
    assert rest_dict(to_custom_job(second)) == rest_dict(first)
    assert any("serviceAccount dropped" in n for n in imported.notes)


def test_a_rendered_jobs_budget_label_imports_back_as_its_budget(
    stack: StackOutputs, tmp_path: Path
) -> None:
    template = load_template(TEMPLATES / "smoke-cpu.yaml")
    template = template.model_copy(update={"budget": Budget(max_cost_usd=12.5)})
    first = compile_job(template, stack, RUN_ID).to_proto()
    job_file = tmp_path / "job.json"
    job_file.write_text(render_json(first))
    again = load_template(job_file)
    assert again.budget == Budget(max_cost_usd=12.5)
    assert "vtx-budget-usd" not in again.labels
    assert rest_dict(compile_job(again, stack, RUN_ID).to_proto()) == rest_dict(first)


def test_a_rendered_jobs_team_label_imports_back_as_its_team(
    stack: StackOutputs, tmp_path: Path
) -> None:
    teams = stack.model_copy(update={"teams": ["nlp", "vision"]})
    template = load_template(TEMPLATES / "smoke-cpu.yaml").model_copy(update={"team": "nlp"})
    first = compile_job(template, teams, RUN_ID).to_proto()
    assert first.labels["vtx-team"] == "nlp"
    job_file = tmp_path / "job.json"
    job_file.write_text(render_json(first))
    again = load_template(job_file)
    assert again.team == "nlp"
    assert "vtx-team" not in again.labels
    assert rest_dict(compile_job(again, teams, RUN_ID).to_proto()) == rest_dict(first)


TUTORIAL_SPEC = """
workerPoolSpecs:
  - machineSpec:
      machineType: n1-standard-8
      acceleratorType: NVIDIA_TESLA_T4
      acceleratorCount: 1
    replicaCount: 1
    containerSpec:
      imageUri: us-docker.pkg.dev/my-proj/train/img:v1
      args: ["--epochs", "3"]
      env:
        - name: WANDB_PROJECT
          value: demo
scheduling:
  strategy: SPOT
  timeout: 7200s
serviceAccount: someone@my-proj.iam.gserviceaccount.com
"""


def test_import_a_hand_written_gcloud_spec(tmp_path: Path) -> None:
    path = tmp_path / "Train Job.yaml"
    path.write_text(TUTORIAL_SPEC)
    document = load_document(path)
    imported = import_document(document.doc, document.kind, document.source)
    assert imported.template == {
        "name": "train-job",
        "image": "us-docker.pkg.dev/my-proj/train/img:v1",
        "args": ["--epochs", "3"],
        "env": {"WANDB_PROJECT": "demo"},
        "pools": {
            "chief": {
                "machine": "n1-standard-8",
                "accelerator": "NVIDIA_TESLA_T4",
                "accelerator_count": 1,
                "replicas": 1,
            }
        },
        "scheduling": {"strategy": "spot", "timeout": "7200s"},
    }
    assert imported.notes == [
        "serviceAccount dropped: the stack provides it (the stack's trainer service account)"
    ]


def test_snake_case_and_invented_fields_in_gcloud_yaml_get_hints() -> None:
    spec = yaml.safe_load(
        """
workerPoolSpecs:
  - machine_spec: {machineType: n1-standard-4}
    replicaCount: 1
    containerSpec: {imageUri: img}
    diskSpec: {persistentDiskSizeGb: 500}
scheduling: {useSpot: true, strategy: spot}
"""
    )
    problems = {p.path: p for p in validate_custom_job_spec(spec)}
    assert problems["workerPoolSpecs[0].machine_spec"].hint == "write machineSpec"
    assert "no persistent disk" in (
        problems["workerPoolSpecs[0].diskSpec.persistentDiskSizeGb"].hint or ""
    )
    assert problems["scheduling.useSpot"].hint == "use scheduling.strategy: SPOT"
    assert problems["scheduling.strategy"].hint == "write SPOT"


def test_misshapen_env_entries_are_reported_without_echoing_their_values() -> None:
    secret, number = "hunter2-correct-horse", 8675309
    spec = {
        "workerPoolSpecs": [
            {
                "machineSpec": {"machineType": "n1-standard-4"},
                "containerSpec": {
                    "imageUri": "img",
                    "env": [f"DB_PASSWORD={secret}", {"name": "PIN", "value": number}],
                },
            }
        ]
    }
    problems = {p.path: p for p in validate_custom_job_spec(spec)}
    env = "workerPoolSpecs[0].containerSpec.env"
    assert problems[f"{env}[0]"].message == "expected a mapping, got str"
    assert problems[f"{env}[1].value"].message == "expected a string, got int"
    shown = "\n".join(str(p) for p in problems.values())
    assert secret not in shown and str(number) not in shown


def test_python_package_pools_cannot_be_imported() -> None:
    spec = {
        "workerPoolSpecs": [
            {
                "machineSpec": {"machineType": "n1-standard-4"},
                "replicaCount": 1,
                "pythonPackageSpec": {
                    "executorImageUri": "us-docker.pkg.dev/vertex-ai/training/pytorch:latest",
                    "packageUris": ["gs://b/p.tar.gz"],
                    "pythonModule": "trainer.task",
                },
            }
        ]
    }
    with pytest.raises(TemplateError, match="python packages"):
        import_document(spec, CUSTOM_JOB_SPEC, "spec.yaml")


@pytest.mark.parametrize(
    ("text", "name"),
    [("My Job_v2", "my-job-v2"), ("123", "job-123"), ("", "job"), ("x" * 60, "x" * 40)],
)
def test_template_names_from_display_names(text: str, name: str) -> None:
    assert template_name(text) == name


def test_gcloud_durations_and_counts_must_be_in_api_form() -> None:
    spec = {
        "workerPoolSpecs": [
            {
                "machineSpec": {"machineType": "n1-standard-4"},
                "replicaCount": "two",
                "containerSpec": {"imageUri": "img"},
            }
        ],
        "scheduling": {"timeout": "24h"},
    }
    problems = {p.path: p for p in validate_custom_job_spec(spec)}
    assert set(problems) == {"workerPoolSpecs[0].replicaCount", "scheduling.timeout"}
    assert problems["scheduling.timeout"].hint == "write 86400s"


def test_a_single_pool_written_as_a_mapping_is_accepted_like_gcloud_does(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        "workerPoolSpecs:\n"
        "  machineSpec: {machineType: n1-standard-4}\n"
        "  replicaCount: 1\n"
        "  containerSpec: {imageUri: us-docker.pkg.dev/p/r/img:1}\n"
    )
    document = load_document(path)
    assert validate_custom_job_spec(document.doc) == []
    assert load_template(path).pools.chief.machine == "n1-standard-4"


def test_an_env_entry_without_a_name_is_a_problem_not_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "workerPoolSpecs": [
                    {
                        "machineSpec": {"machineType": "n1-standard-4"},
                        "replicaCount": 1,
                        "containerSpec": {"imageUri": "img", "env": [{"value": "1"}]},
                    }
                ]
            }
        )
    )
    document = load_document(path)
    problems = validate_custom_job_spec(document.doc)
    assert [p.path for p in problems] == ["workerPoolSpecs[0].containerSpec.env[0]"]
    assert problems[0].message == "environment variable without a name"


def test_import_turns_plaintext_credentials_into_secret_names(tmp_path: Path) -> None:
    token = "hf_" + "a1B2c3D4" * 5
    path = tmp_path / "config.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "workerPoolSpecs": [
                    {
                        "machineSpec": {"machineType": "n1-standard-4"},
                        "replicaCount": 1,
                        "containerSpec": {
                            "imageUri": "us-docker.pkg.dev/p/r/img:v1",
                            "env": [
                                {"name": "HF_TOKEN", "value": token},
                                {"name": "WANDB_PROJECT", "value": "demo"},
                            ],
                        },
                    }
                ]
            }
        )
    )
    document = load_document(path)
    imported = import_document(document.doc, document.kind, document.source)
    assert imported.template["env"] == {"WANDB_PROJECT": "demo"}
    assert imported.template["secrets"] == {"HF_TOKEN": "hf-token"}
    assert token not in yaml.safe_dump(imported.template) + "\n".join(imported.notes)
    assert any("gcloud secrets create hf-token" in note for note in imported.notes)
    assert validate_template_doc(imported.template) == []


def test_import_drops_a_vtx_secrets_nested_past_the_parser_with_a_note() -> None:
    deep = '{"HF_TOKEN": ' + "[" * 100_000 + "]" * 100_000 + "}"  # RecursionError before
    pool = {
        "machineSpec": {"machineType": "n1-standard-4"},
        "replicaCount": 1,
        "containerSpec": {
            "imageUri": "us-docker.pkg.dev/p/r/img:v1",
            "env": [{"name": "VTX_SECRETS", "value": deep}],
        },
    }
    imported = import_document({"workerPoolSpecs": [pool]}, CUSTOM_JOB_SPEC, "spec.yaml")
    assert "secrets" not in imported.template
    assert "VTX_SECRETS was dropped: JSON nested more than 64 levels deep: flatten it" in (
        imported.notes
    )
