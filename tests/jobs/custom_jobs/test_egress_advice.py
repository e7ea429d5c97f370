"""The warnings of `vtx validate --stack` for a stack with no route to the internet
(``egress: none``): pip from PyPI, an image from elsewhere, a Hub model id in the trainer config;
none on an open stack."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jobs.core.stack import StackOutputs
from jobs.custom_jobs.egress_advice import egress_warnings
from tests.conftest import stack_outputs

REGISTRY = "us-central1-docker.pkg.dev/acme-ml-dev/vtx"
INDEX = "https://us-central1-python.pkg.dev/acme-ml-dev/pypi/simple/"


def closed(**changes: object) -> StackOutputs:
    return stack_outputs(egress="none", **changes)


def job(*pools: dict[str, Any]) -> dict[str, Any]:
    return {"displayName": "j", "jobSpec": {"workerPoolSpecs": list(pools)}}


def container(*args: str, image: str = f"{REGISTRY}/trainer:1", **env: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"imageUri": image, "command": ["python"], "args": list(args)}
    if env:
        spec["env"] = [{"name": k, "value": v} for k, v in env.items()]
    return {"machineSpec": {"machineType": "n1-standard-4"}, "containerSpec": spec}


def messages(found: list) -> list[tuple[str, str]]:
    return [(p.path, p.message) for p in found]


def test_an_open_stack_gets_no_warning() -> None:
    pool = container("-c", "pip install torch", image="docker.io/library/python:3.11")
    assert egress_warnings(job(pool), stack_outputs()) == []


def test_pip_from_pypi_is_named_unless_an_artifact_registry_index_is_given() -> None:
    shell = {**container(), "containerSpec": {
        "imageUri": f"{REGISTRY}/t:1", "command": ["sh", "-c"],
        "args": ["pip install -r requirements.txt && python -m trainer.launch"],
    }}  # fmt: skip
    (warning,) = egress_warnings(job(shell), closed())
    assert warning.path == "jobSpec.workerPoolSpecs[0].containerSpec.command"
    assert "pip-installs from PyPI" in warning.message
    assert "python.pkg.dev" in (warning.hint or "")
    indexed = {**shell, "containerSpec": {**shell["containerSpec"], "args": [
        f"pip install --index-url {INDEX} -r requirements.txt"
    ]}}  # fmt: skip
    assert egress_warnings(job(indexed), closed()) == []
    by_env = container("-m", "pip", "install", "x", PIP_INDEX_URL=INDEX)
    assert egress_warnings(job(by_env), closed()) == []


def test_a_python_package_job_needs_an_index_for_its_dependencies() -> None:
    package = {
        "machineSpec": {"machineType": "n1-standard-4"},
        "pythonPackageSpec": {
            "executorImageUri": "us-docker.pkg.dev/vertex-ai/training/pytorch-gpu.2-4.py310:latest",
            "packageUris": ["gs://s/trainer-0.1.tar.gz"],
            "pythonModule": "trainer.task",
        },
    }
    (warning,) = egress_warnings(job(package), closed())
    assert warning.path == "jobSpec.workerPoolSpecs[0].pythonPackageSpec"
    with_index = {**package, "pythonPackageSpec": {
        **package["pythonPackageSpec"], "env": [{"name": "PIP_INDEX_URL", "value": INDEX}],
    }}  # fmt: skip
    assert egress_warnings(job(with_index), closed()) == []


def test_an_image_from_elsewhere_is_named_and_google_vertex_images_pass() -> None:
    hub = container(image="docker.io/library/python:3.11")
    google = container(image="europe-docker.pkg.dev/vertex-ai/training/tf-cpu.2-15:latest")
    assert messages(egress_warnings(job(google, hub), closed())) == [
        (
            "jobSpec.workerPoolSpecs[1].containerSpec.imageUri",
            "image 'docker.io/library/python:3.11' is not from the stack's registry: with "
            "network.egress none only Artifact Registry (and Container Registry) are reachable",
        )
    ]


def test_a_hub_model_id_in_the_trainer_config_names_the_mirror_command(tmp_path: Path) -> None:
    config = tmp_path / "cfg" / "lora.yaml"
    config.parent.mkdir()
    config.write_text("model:\n  name_or_path: Qwen/Qwen2.5-0.5B-Instruct\n  tokenizer: tok\n")
    (config.parent / "tok").mkdir()  # a relative folder beside the config is no Hub id
    stack = closed()
    (warning,) = egress_warnings(job(container("--config", "cfg/lora.yaml")), stack, tmp_path)
    assert warning.message.startswith(
        "cfg/lora.yaml: model.name_or_path is 'Qwen/Qwen2.5-0.5B-Instruct', a Hugging Face Hub id"
    )
    assert warning.hint == (
        "`vtx model mirror Qwen/Qwen2.5-0.5B-Instruct --stack <stack>` copies it to "
        "gs://m/Qwen/Qwen2.5-0.5B-Instruct; name that prefix as model.name_or_path"
    )
    # An override to gs:// settles it; one to a Hub id is named as the override.
    mirrored = container("--config", "cfg/lora.yaml", "--set", "model.name_or_path=gs://m/q")
    assert egress_warnings(job(mirrored), stack, tmp_path) == []
    hub_override = container("--config=cfg/lora.yaml", "--set", "model.tokenizer=acme/tok")
    (override,) = [
        w for w in egress_warnings(job(hub_override), stack, tmp_path) if "tokenizer" in w.message
    ]
    assert override.message.startswith("--set model.tokenizer is 'acme/tok'")
    # A config this machine does not have is not judged.
    assert egress_warnings(job(container("--config", "absent.yaml")), stack, tmp_path) == []


def test_the_stacks_mirrors_are_named_and_its_docker_mirror_is_allowed() -> None:
    mirror = "us-central1-docker.pkg.dev/acme-ml-dev/vtx-all"
    stack = closed(python_index=INDEX, docker_mirror=mirror)
    pip = container("-m", "pip", "install", "peft")
    (warning,) = egress_warnings(job(pip), stack)
    assert f"--index-url {INDEX}" in (warning.hint or "")
    assert egress_warnings(job(container(image=f"{mirror}/library/python:3.11")), stack) == []
    (foreign,) = egress_warnings(job(container(image="ghcr.io/acme/x:1")), stack)
    assert (foreign.hint or "").endswith(f"or pull a Docker Hub image as {mirror}/IMAGE")
