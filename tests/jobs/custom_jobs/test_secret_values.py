"""A credential-shaped value is refused wherever a job holds it (env under any name, args,
command, labels, a study's values, a ladder rung, a gcloud document, the compiled job), named by
its place and shape, never shown; commit ids, digests, paths and model ids pass."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from jobs.core.stack import StackOutputs
from jobs.launch.checks import validate_document, validate_template_doc
from jobs.launch.plan import compile_checked
from jobs.spec.document import CUSTOM_JOB_SPEC
from jobs.spec.gcloud import import_document, load_template
from jobs.spec.template import JobTemplate, TemplateError
from tests.conftest import TEMPLATES

WANDB = "0a1b2c3d4e" * 4
"""A W&B API key: 40 lower case hex digits."""
HF = "hf_" + "a1b2c3d4" * 5
"""A Hugging Face token, lower case so that it is also a valid label value."""
DIGEST = "us-docker.pkg.dev/p/r/trainer@sha256:" + "0123456789abcdef" * 4


def smoke() -> dict[str, Any]:
    return load_template(TEMPLATES / "smoke-cpu.yaml").to_document()


def tune() -> dict[str, Any]:
    return load_template(TEMPLATES / "tiny-tune.yaml").to_document()


def _with(doc: dict[str, Any], path: list[Any], value: Any) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    target = doc
    for key in path[:-1]:
        target = target.setdefault(key, {}) if isinstance(target, dict) else target[key]
    target[path[-1]] = value
    return doc


def _categorical(value: str) -> dict[str, Any]:
    doc = tune()
    doc["study"]["parameters"].append(
        {"id": "lr_scheduler_type", "type": "CATEGORICAL", "values": ["linear", value]}
    )
    return doc


CASES = [
    ("env W&B", _with(smoke(), ["env", "MY_SETTING"], WANDB), "env.MY_SETTING", "W&B API key"),
    ("env HF", _with(smoke(), ["env", "MY_SETTING"], HF), "env.MY_SETTING", "Hugging Face"),
    ("pool env", _with(smoke(), ["pools", "chief", "env", "X"], WANDB), "pools.chief.env.X", "W&B"),
    ("env name", _with(smoke(), ["env", HF], "1"), "env", "a key under env"),
    ("arg W&B", _with(smoke(), ["args", 1], WANDB), "args[1]", "W&B API key"),
    ("arg flag=", _with(smoke(), ["args", 1], f"--wandb-key={WANDB}"), "args[1]", "W&B API key"),
    ("arg HF", _with(smoke(), ["args", 3], f"hub.token={HF}"), "args[3]", "Hugging Face"),
    ("command", _with(smoke(), ["command", 2], WANDB), "command[2]", "W&B API key"),
    ("label W&B", _with(smoke(), ["labels", "team"], WANDB), "labels.team", "W&B API key"),
    ("label HF", _with(smoke(), ["labels", "team"], HF), "labels.team", "Hugging Face"),
    ("label key", _with(smoke(), ["labels", HF], "x"), "labels", "a key under labels"),
    ("description", _with(smoke(), ["description"], f"uses {HF}"), "description", "Hugging Face"),
    ("study value", _categorical(WANDB), "study.parameters[2].values[1]", "W&B API key"),
]


@pytest.mark.parametrize(
    ("doc", "path", "shape"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_a_key_is_refused_where_it_is_named_by_its_place_and_shape(
    doc: dict[str, Any], path: str, shape: str
) -> None:
    problems = validate_template_doc(doc)
    found = [p for p in problems if p.path == path]
    assert found, [str(p) for p in problems]
    assert shape in found[0].message
    assert "secrets:" in (found[0].hint or "")
    shown = "\n".join(str(p) for p in problems)
    assert WANDB not in shown and HF not in shown


def test_forty_hex_digits_say_how_to_write_a_commit_id() -> None:
    problems = validate_template_doc(_with(smoke(), ["args", 1], WANDB))
    assert "write its first 12 characters" in (problems[0].hint or "")
    assert "--revision=" in (problems[0].hint or "")


def test_a_capacity_ladder_rung_that_sets_a_key_is_refused() -> None:
    doc = smoke()
    doc["capacity"] = {"ladder": [{"set": {"env.MY_SETTING": WANDB}}]}
    paths = {p.path for p in validate_template_doc(doc)}
    assert "capacity.ladder[0].set['env.MY_SETTING']" in paths


def test_an_invalid_label_value_that_is_a_key_is_not_quoted_nor_lower_cased() -> None:
    token = "hf_" + "a1B2c3D4" * 5  # upper case: not a valid label value either
    problems = validate_template_doc(_with(smoke(), ["labels", "team"], token))
    shown = "\n".join(str(p) for p in problems)
    assert token not in shown and token.lower() not in shown
    assert [p.path for p in problems] == ["labels.team"]


def test_commit_ids_digests_paths_and_model_ids_pass() -> None:
    doc = smoke()
    doc["image"] = DIGEST
    doc["args"] += [
        "--revision", WANDB,
        f"--set=model.revision={WANDB}",
        "--set", "model.name_or_path=meta-llama/Llama-3.1-8B-Instruct",
        "--set", "output_dir=gs://acme-ckpt/runs/x/",
    ]  # fmt: skip
    doc["env"] = {"GIT_COMMIT": WANDB, "HF_HUB_ENABLE_HF_TRANSFER": "1"}
    doc["labels"] = {"git-sha": WANDB, "purpose": "smoke"}
    doc["pools"]["chief"]["image"] = f"us-docker.pkg.dev/p/r/trainer:{WANDB}"
    assert validate_template_doc(doc) == []


def test_a_gcloud_spec_with_a_key_under_a_neutral_env_name_is_refused() -> None:
    spec = {
        "workerPoolSpecs": [
            {
                "machineSpec": {"machineType": "n1-standard-4"},
                "replicaCount": 1,
                "containerSpec": {
                    "imageUri": DIGEST,
                    "args": ["--key", WANDB],
                    "env": [{"name": "MY_SETTING", "value": WANDB}],
                },
            }
        ]
    }
    problems = validate_document(spec, CUSTOM_JOB_SPEC)
    assert {p.path for p in problems} == {
        "workerPoolSpecs[0].containerSpec.env[0]",
        "workerPoolSpecs[0].containerSpec.args[1]",
    }
    assert "MY_SETTING" in problems[0].message
    assert WANDB not in "\n".join(str(p) for p in problems)


def test_import_moves_a_keyed_env_to_secrets_and_refuses_one_it_cannot_move() -> None:
    spec = {
        "workerPoolSpecs": [
            {
                "machineSpec": {"machineType": "n1-standard-4"},
                "containerSpec": {
                    "imageUri": DIGEST,
                    "env": [
                        {"name": "MY_SETTING", "value": WANDB},
                        {"name": "GIT_COMMIT", "value": WANDB},
                    ],
                },
            }
        ]
    }
    imported = import_document(spec, CUSTOM_JOB_SPEC, "config.yaml")
    assert imported.template["secrets"] == {"MY_SETTING": "my-setting"}
    assert imported.template["env"] == {"GIT_COMMIT": WANDB}
    spec["workerPoolSpecs"][0]["containerSpec"]["args"] = ["--hub", HF]
    with pytest.raises(TemplateError) as refused:
        import_document(spec, CUSTOM_JOB_SPEC, "config.yaml")
    assert [p.path for p in refused.value.problems] == ["workerPoolSpecs[0].containerSpec.args[1]"]
    assert HF not in str(refused.value)


def test_the_compiled_job_is_checked_too(stack: StackOutputs) -> None:
    """A template that skipped validation (built in code) is still refused before it is
    rendered or sent: the compiled job's own strings are judged."""
    template = JobTemplate.model_validate(_with(smoke(), ["labels", "team"], WANDB))
    job, problems = compile_checked(template, stack, "smoke-cpu-20260101-000000-ab12", "t", False)
    assert job is not None
    assert [p.path for p in problems] == ["labels.team"]
    assert WANDB not in str(problems[0])
