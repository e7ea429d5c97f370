"""The trainer ships alone and imports nothing of ours, so it keeps its own copy of a few facts
the platform owns. Each test here pins one copy to its original by behaviour on a table of
inputs (not by comparing source text), so that either side drifting fails here first.

Each copy, then its original:
- `trainer.config.secrets` (VTX_SECRETS, the grammar): `jobs.core.contract`, and the validator
  `jobs.custom_jobs.rules`
- `trainer.config.env.VertexEnv.from_environ`: `jobs.local.platform.vertex_env`
  (docs/vertex-facts.md)
- `trainer.config.accelerators.ACCELERATORS`: `jobs/core/catalog/accelerators.yaml` (the GPUs)
- `trainer.config.safe_yaml.load_yaml_text`: `jobs.core.safe_yaml.load_yaml_text`
- `trainer.config.env.RUN_ID_ENV` (W&B's run id): `jobs.core.contract.RUN_ID_ENV`
- `trainer.serving.env.HOST_ENV` (listen on): `jobs.local.serving.serving_process.SERVE_HOST_ENV`
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from jobs.core import contract, safe_yaml
from jobs.core.catalog import load_catalog
from jobs.custom_jobs.rules import environment as rules
from jobs.local.platform import vertex_env
from jobs.local.serving import serving_process
from trainer.config import accelerators, secrets
from trainer.config import safe_yaml as trainer_yaml
from trainer.config.env import TrackingEnv, VertexEnv
from trainer.config.schema import ConfigError
from trainer.serving.env import ServingEnv

# ---- secrets: the variable and the Secret Manager name grammar ------------------------------

SECRET_REFERENCES = [
    # accepted: a secret id, a full name, a full name with a version
    "hf-token",
    "HF_TOKEN_2",
    "a" * 255,
    "projects/my-project/secrets/hf-token",
    "projects/123456789012/secrets/hf_token/versions/3",
    "projects/p/secrets/s/versions/latest",
    # refused: values, paths and near misses
    "",
    "a" * 256,
    "hf_abcdefghijklmnopqrstuvwxyz0123456789.secret",
    "hf token",
    "projects/p/secrets/",
    "projects/p/secrets/s/versions/",
    "projects//secrets/s",
    "projects/p/secrets/s/versions/1/extra",
    "projects/p/topics/s",
    "secrets/s",
    "gs://bucket/secret",
    "projects/p/secrets/s\n",
]


class FakeSecretManager:
    """Answers every read with the resource name it was asked for."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def access_secret_version(self, name: str) -> Any:
        self.names.append(name)
        payload = type("Payload", (), {"data": f"value of {name}".encode()})
        return type("Response", (), {"payload": payload})


def test_the_trainer_reads_the_secrets_variable_the_compiler_writes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    client = FakeSecretManager()
    monkeypatch.setattr(secrets, "_client", lambda env: client)
    written = {"HF_TOKEN": "projects/p/secrets/hf-token/versions/latest"}
    environ = {contract.VTX_SECRETS_ENV: json.dumps(written), "CLOUD_ML_PROJECT_ID": "123"}

    assert secrets.export_secrets(environ) == ["HF_TOKEN"]
    assert client.names == ["projects/p/secrets/hf-token/versions/latest"]
    assert contract.VTX_SECRETS_ENV not in environ  # read and consumed under that very name


@pytest.mark.parametrize("ref", SECRET_REFERENCES)
def test_the_trainer_accepts_the_secret_names_the_validator_accepts(ref: str) -> None:
    validator = rules.SECRET_NAME.match(ref) is not None
    try:
        secrets.parse_secret_refs(json.dumps({"HF_TOKEN": ref}))
        trainer = True
    except secrets.SecretsError:
        trainer = False
    assert trainer == validator, f"{ref!r}: the trainer {'accepts' if trainer else 'refuses'} it"


@pytest.mark.parametrize(
    "name", ["HF_TOKEN", "_x", "a1", "hf_token", "1TOKEN", "HF-TOKEN", "HF TOKEN", "", "É"]
)
def test_the_trainer_accepts_the_variable_names_the_validator_accepts(name: str) -> None:
    validator = rules.ENV_NAME.match(name) is not None
    try:
        secrets.parse_secret_refs(json.dumps({name: "hf-token"}))
        trainer = True
    except secrets.SecretsError:
        trainer = False
    assert trainer == validator, f"{name!r}: the trainer {'accepts' if trainer else 'refuses'} it"


@pytest.mark.parametrize("ref", [r for r in SECRET_REFERENCES if rules.SECRET_NAME.match(r)])
def test_the_trainer_reads_the_version_jobs_means(ref: str) -> None:
    project, secret, version = contract.secret_parts(ref)
    meant = f"projects/{project or '123'}/secrets/{secret}/versions/{version}"
    assert secrets.resource_name(ref, project="123") == meant


# ---- the run id: W&B names a vtx run's one run after it ----------------------------------------


def test_the_trainer_reads_the_run_id_variable_the_compiler_writes() -> None:
    assert TrackingEnv.from_environ({contract.RUN_ID_ENV: "l4-lora-1"}).run_id == "l4-lora-1"


# ---- Vertex's environment: what the local platform sets, what the trainer reads --------------

TORCHRUN_VARS = {"TORCHELASTIC_RUN_ID", "GROUP_RANK", "LOCAL_WORLD_SIZE"}
"""Set by torchrun inside a worker, not by Vertex: the trainer reads them too."""


class RecordingEnviron(Mapping[str, str]):
    """An environment that remembers every variable asked for, set or not."""

    def __init__(self, values: Mapping[str, str]) -> None:
        self.values, self.asked = dict(values), set[str]()

    def __getitem__(self, key: str) -> str:
        self.asked.add(key)
        return self.values[key]

    def __contains__(self, key: object) -> bool:
        self.asked.add(str(key))
        return key in self.values

    def __iter__(self) -> Iterator[str]:
        return iter(self.values)

    def __len__(self) -> int:
        return len(self.values)


def _job(replicas: list[int], base: str | None) -> dict[str, Any]:
    pool = {"machineSpec": {"machineType": "n1-standard-4"}, "containerSpec": {"imageUri": "i"}}
    spec: dict[str, Any] = {
        "workerPoolSpecs": [{**pool, "replicaCount": str(n)} if n else {} for n in replicas]
    }
    if base:
        spec["baseOutputDirectory"] = {"outputUriPrefix": base}
    return {"jobSpec": spec}


# pools' replica counts -> the training topology every replica of pools 0 and 1 must see
JOB_SHAPES = {
    "one replica, no output directory": ([1], None),
    "one replica": ([1], "gs://b/runs/r"),
    "primary and two workers": ([1, 2], "gs://b/runs/r/"),
    "primary, a worker and a reduction server": ([1, 1, 1], "gs://b/runs/r/"),
}


@pytest.mark.parametrize("shape", JOB_SHAPES)
def test_the_trainer_sees_the_topology_and_outputs_the_local_vertex_sets(shape: str) -> None:
    replicas, base = JOB_SHAPES[shape]
    job = _job(replicas, base)
    slots = vertex_env.replica_slots(job)
    ports = {slot.name: 40000 + i for i, slot in enumerate(slots)}
    training = [s for s in slots if s.pool in (0, 1)]
    prefix = base.rstrip("/") if base else None
    for rank, slot in enumerate(training):
        values = vertex_env.replica_env(job, "job-42", slot, ports, "123", "http://gcs", {})
        environ = RecordingEnviron(values)
        seen = VertexEnv.from_environ(environ)

        assert (seen.nnodes, seen.node_rank) == (len(training), rank), slot.name
        assert (seen.task_type, seen.task_index) == (f"workerpool{slot.pool}", slot.index)
        if len(slots) > 1:
            assert (seen.master_addr, seen.master_port) == ("127.0.0.1", ports["workerpool0-0"])
        assert (seen.job_id, seen.project_number) == ("job-42", "123")
        assert (seen.checkpoint_dir, seen.model_dir, seen.tensorboard_dir) == (
            (f"{prefix}/checkpoints/", f"{prefix}/model/", f"{prefix}/logs/")
            if prefix
            else (None, None, None)
        )
        unknown = environ.asked - set(vertex_env.VERTEX_VARS) - TORCHRUN_VARS
        assert not unknown, f"the trainer reads {unknown}, which the local Vertex never sets"


# ---- --estimate and MFU: accelerator memory and peaks ----------------------------------------


def _catalog_gpus() -> dict[str, int]:
    return {
        name: accelerator.memory_gb
        for name, accelerator in load_catalog().accelerators.items()
        if accelerator.kind == "gpu"
    }


def test_the_estimate_knows_every_catalog_gpu_with_its_memory() -> None:
    known = {name: spec.memory_gib for name, spec in accelerators.ACCELERATORS.items()}
    assert known == _catalog_gpus()


def test_every_catalog_gpu_has_a_bf16_peak_for_step_time_and_mfu() -> None:
    peaks = {name: accelerators.ACCELERATORS[name].peak_flops_per_s for name in _catalog_gpus()}
    assert all(peak >= 1e12 for peak in peaks.values()), peaks


# ---- the safe YAML reader ----------------------------------------------------------------------


def _largest_accepted(make: Any, low: int, high: int) -> int:
    """The largest n in [low, high) for which jobs' reader accepts make(n) (accepted at low)."""
    while high - low > 1:
        middle = (low + high) // 2
        try:
            safe_yaml.load_yaml_text(make(middle), "f.yaml")
            low = middle
        except safe_yaml.YamlInputError:
            high = middle
    return low


def _nested(depth: int) -> str:
    return "a: " + "[" * depth + "]" * depth + "\n"


def _long_list(values: int) -> str:
    return "a: [" + ", ".join(["x"] * values) + "]\n"


def _laughs(levels: int) -> str:
    lines = ["l0: &l0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 10) + "]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


ACCEPTED_YAML = {
    "plain values": "a: 1\nb: [x, 2.5, null, true, ~]\nc: {d: 'e'}\n",
    "merge, then override": "base: &b {x: 1, y: 2}\nuse:\n  <<: *b\n  x: 3\n",
    "YAML 1.1 booleans": "a: yes\nb: off\nc: On\n",
    "a date": "a: 2001-12-14\n",
    "integer forms": "a: 0x1F\nb: 017\nc: 1_000\nd: -0b101\n",
    "the 64-bit edges": "a: 18446744073709551615\nb: -9223372036854775808\n",
    "an alias reused": "a: &x [1, 2]\nb: *x\n",
    "an empty document": "",
}
REFUSED_YAML = {
    "deep": "a:\n  b: " + "[" * 100 + "]" * 100,
    "not UTF-8": "a: caf\udce9",
    "written twice": "a: {b: 1, c: {d: 1, d: 2}}",
    "written twice, integer key": "1: a\n1: b\n",
    "beyond 64 bits": "a: [1, 2, 18446744073709551616]",
    "big": _long_list(30_000),
    "a billion laughs": _laughs(6),
    "two documents": "a: 1\n---\nb: 2\n",
    "not YAML": "a: [1, 2\n",
}


@pytest.mark.parametrize("name", ACCEPTED_YAML)
def test_the_trainer_reads_yaml_to_the_values_jobs_reads(name: str) -> None:
    text = ACCEPTED_YAML[name]
    assert trainer_yaml.load_yaml_text(text, "f.yaml") == safe_yaml.load_yaml_text(text, "f.yaml")


@pytest.mark.parametrize("name", REFUSED_YAML)
def test_the_trainer_refuses_the_yaml_jobs_refuses_at_the_same_place(name: str) -> None:
    text = REFUSED_YAML[name]
    with pytest.raises(safe_yaml.YamlInputError) as jobs_error:
        safe_yaml.load_yaml_text(text, "f.yaml")
    with pytest.raises(ConfigError) as trainer_error:
        trainer_yaml.load_yaml_text(text, "f.yaml")
    problem = jobs_error.value.problem
    place = problem.path if not problem.path.startswith(("line", "(")) else ""
    assert f"f.yaml: {place}" in str(trainer_error.value), (problem, trainer_error.value)
    assert problem.message.split(" (")[0][:20] in str(trainer_error.value), problem


def _file_of(size: int) -> bytes:
    return b"a: '" + b"x" * (size - 6) + b"'\n"


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("at the size limit", _file_of(safe_yaml.MAX_BYTES)),
        ("a byte over it", _file_of(safe_yaml.MAX_BYTES + 1)),
        ("a byte that is not UTF-8", b"a: 1\nb: caf\xe9\n"),
    ],
)
def test_the_trainer_reads_the_files_jobs_reads(tmp_path: Path, name: str, data: bytes) -> None:
    path = tmp_path / "f.yaml"
    path.write_bytes(data)
    try:
        jobs_value, jobs_line = safe_yaml.read_yaml_file(path), ""
    except safe_yaml.YamlInputError as exc:
        jobs_value, jobs_line = None, exc.problem.path
    try:
        trainer_value, trainer_error = trainer_yaml.read_yaml(path), ""
    except ConfigError as exc:
        trainer_value, trainer_error = None, str(exc)
    assert trainer_value == jobs_value
    assert bool(trainer_error) == (jobs_value is None), trainer_error
    line = re.match(r"line \d+", jobs_line)  # the trainer names the line, not the column
    assert line is None or f"{line[0]}:" in trainer_error, (jobs_line, trainer_error)


@pytest.mark.parametrize(
    ("limit", "make", "low", "high"),
    [("depth", _nested, 1, 200), ("values", _long_list, 1, 40_000), ("laughs", _laughs, 1, 8)],
)
def test_the_trainer_draws_the_limits_where_jobs_draws_them(
    limit: str, make: Any, low: int, high: int
) -> None:
    edge = _largest_accepted(make, low, high)
    trainer_yaml.load_yaml_text(make(edge), "f.yaml")  # accepted by both
    with pytest.raises(ConfigError):
        trainer_yaml.load_yaml_text(make(edge + 1), "f.yaml")


PLACE: dict[str, Any] = {
    "endpoint_id": "e1",
    "deployed_model_id": "d1",
    "project_number": "1",
    "port": 8080,
    "machine_spec": {"machineType": "n1-standard-4"},
    "gcs_endpoint": "http://127.0.0.1:1",
    "base_env": {},
}


def test_a_model_deployed_locally_is_served_on_127_0_0_1_only() -> None:
    """The local platform's serving environment makes vtx's entry point listen on the loopback
    (Vertex's contract, every interface, is the default elsewhere)."""
    model = {"name": "projects/1/locations/us-central1/models/7", "artifactUri": "gs://m/x/"}
    env = serving_process.serving_env(model, **PLACE)
    assert ServingEnv.from_environ(env).host == "127.0.0.1"
    assert ServingEnv.from_environ({"AIP_STORAGE_URI": "gs://m/x/"}).host == "0.0.0.0"
    widened = {**model, "containerSpec": {"env": [{"name": "VTX_SERVE_HOST", "value": "0.0.0.0"}]}}
    env = serving_process.serving_env(widened, **PLACE)
    assert ServingEnv.from_environ(env).host == "127.0.0.1"  # a Model cannot widen it
