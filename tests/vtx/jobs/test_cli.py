"""The `vtx` commands through typer's CliRunner (no API calls here; see test_submission.py)."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from jobs.core.catalog import load_catalog
from tests.conftest import REPO, TEST_DATA
from tests.jobs.core.price_tables import US_CENTRAL1_TABLE, write_table
from tests.jobs.quota.quota_fakes import FakeGoogle
from vtx.cli import app

TEMPLATES = REPO / "jobs" / "templates"
STACK = TEST_DATA / "stack-dev.json"
runner = CliRunner(env={"COLUMNS": "200"})


def vtx(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


def test_validate_accepts_every_example_template() -> None:
    code, out = vtx("validate", *map(str, sorted(TEMPLATES.glob("*.yaml"))))
    assert code == 0, out
    assert out.count("✓") == len(list(TEMPLATES.glob("*.yaml")))


def test_every_example_template_passes_the_dev_stack_policies() -> None:
    templates = map(str, sorted(TEMPLATES.glob("*.yaml")))
    code, out = vtx("validate", *templates, "--stack-file", str(STACK), "--policy")
    assert code == 0, out


def test_validate_reports_every_problem_with_path_and_fix_then_exits_1(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": "bad",
                "image": "trainer",
                "env": {"HF_TOKEN": "hf_abc"},
                "pools": {
                    "chief": {
                        "machine": "n1-standard-8",
                        "accelerator": "NVIDIA_TESLA_T4",
                        "accelerator_count": 8,
                        "persistent_disk_size_gb": 500,
                    }
                },
            }
        )
    )
    code, out = vtx("validate", str(path))
    assert code == 1
    assert f"{path}: pools.chief.persistent_disk_size_gb" in out
    assert f"{path}: pools.chief.accelerator_count" in out and "1, 2, 4" in out
    assert f"{path}: env.HF_TOKEN" in out and "secrets: {HF_TOKEN: hf-token}" in out
    assert out.count("write instead:") == 3


def test_validate_reads_gcloud_yaml(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "workerPoolSpecs": [
                    {
                        "machineSpec": {
                            "machineType": "a2-highgpu-1g",
                            "acceleratorType": "NVIDIA_TESLA_A100",
                            "acceleratorCount": 2,
                        },
                        "replicaCount": 1,
                        "containerSpec": {"imageUri": "img"},
                    }
                ]
            }
        )
    )
    code, out = vtx("validate", str(path))
    assert code == 1
    assert "workerPoolSpecs[0].machineSpec.acceleratorCount" in out and "a2-highgpu-2g" in out


def test_validate_with_stack_and_policy_checks_the_compiled_job() -> None:
    template = str(TEMPLATES / "smoke-cpu.yaml")
    code, out = vtx("validate", template, "--stack-file", str(STACK), "--policy")
    assert code == 0, out
    # dev stacks cap timeouts (policy), although Vertex itself would accept 5 days
    code, out = vtx(
        "validate",
        template,
        "--stack-file",
        str(STACK),
        "--policy",
        "--set",
        "scheduling.timeout=5d",
    )
    assert code == 1
    assert "(policy)" in out and "scheduling.timeout" in out


def test_validate_region_from_stack(tmp_path: Path) -> None:
    stack = json.loads(STACK.read_text()) | {"region": "europe-west1"}
    stack_file = tmp_path / "eu.json"
    stack_file.write_text(json.dumps(stack))
    code, out = vtx(
        "validate", str(TEMPLATES / "a100x16-fsdp.yaml"), "--stack-file", str(stack_file)
    )
    assert code == 1
    assert "not offered for training in europe-west1" in out


def test_validate_refuses_a_job_without_one_of_the_stacks_teams(tmp_path: Path) -> None:
    stack_file = tmp_path / "teams.json"
    stack_file.write_text(json.dumps(json.loads(STACK.read_text()) | {"teams": ["nlp", "vision"]}))
    template = str(TEMPLATES / "smoke-cpu.yaml")
    code, out = vtx("validate", template, "--stack-file", str(stack_file))
    assert code == 1
    assert "team" in out and "(nlp, vision)" in out and "names none" in out
    code, out = vtx("validate", template, "--stack-file", str(stack_file), "--set", "team=ops")
    assert code == 1
    assert "'ops' is not a team of stack" in out
    code, out = vtx("validate", template, "--stack-file", str(stack_file), "--set", "team=nlp")
    assert code == 0, out


def test_cost_prints_pools_totals_spot_timeout_quota_and_table(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("VTX_PRICES_DIR", str(tmp_path))
    write_table(tmp_path, US_CENTRAL1_TABLE)
    code, out = vtx("cost", str(TEMPLATES / "l4-spot-lora.yaml"))
    assert code == 0, out
    table = load_catalog().price_table("us-central1")
    assert table is not None and table.name == "test-us-central1-2026-11-27"
    machine, gpu = table.machines["g2-standard-8"], table.accelerators["NVIDIA_L4"]
    assert machine.usd_per_h is not None and gpu.usd_per_h is not None
    assert f"${machine.usd_per_h + gpu.usd_per_h:,.2f}" in out
    # No Spot figure in the table: the Spot job's price is unknown, not on-demand x a factor.
    assert "at its timeout cap (1d): unknown" in out
    assert "custom_model_training_preemptible_nvidia_l4_gpus" in out
    assert table.name in out


def test_render_yaml_is_a_gcloud_config_and_json_a_custom_job(tmp_path: Path) -> None:
    from google.cloud import aiplatform_v1

    template = str(TEMPLATES / "smoke-cpu.yaml")
    code, out = vtx("render", template, "--stack-file", str(STACK), "--run-id", "smoke-1")
    assert code == 0, out
    assert out.startswith("# CustomJobSpec for: gcloud ai custom-jobs create")
    spec = yaml.safe_load(out)
    assert set(spec) >= {"workerPoolSpecs", "scheduling", "serviceAccount", "baseOutputDirectory"}
    out_file = tmp_path / "job.json"
    code, out = vtx(
        "render",
        template,
        "--stack-file",
        str(STACK),
        "--format",
        "json",
        "--run-id",
        "smoke-1",
        "-o",
        str(out_file),
    )
    assert code == 0, out
    job = aiplatform_v1.CustomJob.from_json(out_file.read_text(), ignore_unknown_fields=False)
    assert job.labels["vtx-run-id"] == "smoke-1"


def test_render_needs_a_stack() -> None:
    code, out = vtx("render", str(TEMPLATES / "smoke-cpu.yaml"))
    assert code == 2 and "no stack given" in out


def test_import_prints_a_template_that_validates(tmp_path: Path) -> None:
    spec = tmp_path / "tutorial.yaml"
    spec.write_text(
        "workerPoolSpecs:\n"
        "  - machineSpec:\n"
        "      {machineType: g2-standard-8, acceleratorType: NVIDIA_L4, acceleratorCount: 1}\n"
        "    replicaCount: 1\n"
        "    containerSpec: {imageUri: us-docker.pkg.dev/p/r/img:1}\n"
        "scheduling: {strategy: SPOT}\n"
    )
    out_file = tmp_path / "tutorial-template.yaml"
    code, out = vtx("import", str(spec), "-o", str(out_file))
    assert code == 0, out
    assert yaml.safe_load(out_file.read_text())["pools"]["chief"]["machine"] == "g2-standard-8"
    code, out = vtx("validate", str(out_file))
    assert code == 0, out


def test_import_refuses_a_vtx_template() -> None:
    code, out = vtx("import", str(TEMPLATES / "smoke-cpu.yaml"))
    assert code == 1 and "already a vtx template" in out


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ((), "NVIDIA_H100_80GB"),
        (("--accelerator", "NVIDIA_L4"), "g2-standard-96: 8"),
        # TPUs like GPUs: each machine with its chips per VM, then its slices and their VMs.
        (("--accelerator", "TPU_V5_LITEPOD"), "ct5lp-hightpu-8t: 8 per VM; tpu_topology 2x4"),
        (("--accelerator", "TPU_V3"), "cloud-tpu: 8,32,64"),
        (("--machines", "--region", "europe-west1"), "g2-standard-8"),
    ],
)
def test_catalog_lists_accelerators_machines_and_sources(
    args: tuple[str, ...], expected: str
) -> None:
    code, out = vtx("catalog", *args)
    assert code == 0, out
    assert expected in out
    assert "prices/vertex-training-us-central1-2026-09.yaml" in out


def test_catalog_region_filter_excludes_machines_not_offered() -> None:
    code, out = vtx("catalog", "--machines", "--region", "europe-west1")
    assert code == 0 and "a2-highgpu-1g" not in out


def test_catalog_unknown_accelerator_is_an_error() -> None:
    code, out = vtx("catalog", "--accelerator", "NVIDIA_K80")
    assert code == 2 and "unknown accelerator" in out


HEAVY = ("google.cloud.aiplatform", "google.cloud.aiplatform_v1", "pulumi", "torch", "transformers")
PROBE = """
import sys
from vtx.cli import app
sys.argv = ["vtx", *sys.argv[1:]]
try:
    app()
except SystemExit:
    pass
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("pulumi", "torch", "transformers")
               or m.startswith("google.cloud.aiplatform"))
print("HEAVY:" + ",".join(heavy), file=sys.stderr)
"""


@pytest.mark.parametrize(
    "args",
    [["--help"], ["validate", str(TEMPLATES / "l4-spot-lora.yaml")], ["validate", "--help"]],
    ids=["help", "validate", "validate-help"],
)
def test_help_and_validate_import_no_heavy_library(args: list[str]) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, *args], cwd=REPO, capture_output=True, text=True, check=False
    )
    heavy_line = [line for line in proc.stderr.splitlines() if line.startswith("HEAVY:")]
    assert heavy_line == ["HEAVY:"], proc.stderr


BUILT = """
import sys
import pydantic
from vtx.cli import app
sys.argv = ["vtx", "--help"]
try:
    app()
except SystemExit:
    pass
def models(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from models(sub)
ours = [m for m in models(pydantic.BaseModel) if m.__module__.split(".")[0] in ("jobs", "infra")]
built = sorted(f"{m.__module__}.{m.__qualname__}" for m in ours if m.__pydantic_complete__)
print("BUILT:" + ",".join(built), file=sys.stderr)
"""


def test_help_builds_no_model_validator() -> None:
    """Every command imports nearly every model: each built at import (a validator, a model
    instance or a validation at module level) is start-up time that `--help` pays for nothing."""
    proc = subprocess.run(
        [sys.executable, "-c", BUILT], cwd=REPO, capture_output=True, text=True, check=False
    )
    built = [line for line in proc.stderr.splitlines() if line.startswith("BUILT:")]
    assert built == ["BUILT:"], proc.stderr


@pytest.mark.parametrize("content", [None, b"\xff\xfe not utf-8"], ids=["directory", "binary"])
def test_unreadable_stack_file_is_an_error_message_not_a_traceback(
    tmp_path: Path, content: bytes | None
) -> None:
    stack_file = tmp_path / "stack.json"
    if content is None:
        stack_file.mkdir()
    else:
        stack_file.write_bytes(content)
    result = runner.invoke(
        app, ["render", str(TEMPLATES / "smoke-cpu.yaml"), "--stack-file", str(stack_file)]
    )
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit)
    assert f"stack file {stack_file}" in " ".join(result.output.split())


def test_commands_that_load_the_sdk_print_no_python_version_notice() -> None:
    args = ["render", str(TEMPLATES / "smoke-cpu.yaml"), "--stack-file", str(STACK)]
    proc = subprocess.run(
        [sys.executable, "-c", "from vtx.cli import main; main()", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "workerPoolSpecs" in proc.stdout
    assert "FutureWarning" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("name", ["[dev].json", "[/dev].json"])
def test_error_messages_print_brackets_in_paths_verbatim(tmp_path: Path, name: str) -> None:
    missing = tmp_path / name
    result = runner.invoke(
        app, ["render", str(TEMPLATES / "smoke-cpu.yaml"), "--stack-file", str(missing)]
    )
    assert result.exit_code == 2, result.output
    assert f"stack file {missing} does not exist" in result.output


def test_local_errors_print_brackets_in_paths_verbatim(tmp_path: Path) -> None:
    data_dir = tmp_path / "[/x]"
    result = runner.invoke(app, ["local", "down", "--data-dir", str(data_dir)])
    assert result.exit_code == 0, result.output  # nothing to stop is not an error
    # Joined lines: vtx.commands.local's console takes its width at import, not from `runner`.
    assert f"no local platform is running from {data_dir}" in " ".join(result.output.split())
    status = runner.invoke(app, ["local", "status", "--data-dir", str(data_dir)])
    assert status.exit_code == 1, status.output
    where = data_dir.resolve()
    assert f"local platform not running in {where}" in " ".join(status.output.split())


def test_validate_names_a_valid_file_whose_path_has_brackets(tmp_path: Path) -> None:
    folder = tmp_path / "[" / "team]"  # the path holds the markup-like text "[/team]"
    folder.mkdir(parents=True)
    path = folder / "smoke.yaml"
    path.write_text((TEMPLATES / "smoke-cpu.yaml").read_text())
    code, out = vtx("validate", str(path))
    assert code == 0, out
    assert f"✓ {path}: valid (template)" in out


@pytest.mark.parametrize(
    "args",
    [(), ("--machines",), ("--accelerator", "NVIDIA_L4"), ("--accelerator", "TPU_V5_LITEPOD")],
)
def test_catalog_on_80_columns_shows_every_name_whole(args: tuple[str, ...]) -> None:
    result = CliRunner(env={"COLUMNS": "80"}).invoke(app, ["catalog", *args])
    assert result.exit_code == 0, result.output
    assert "…" not in result.output
    cat = load_catalog()
    whole = {(): set(cat.accelerators), ("--machines",): set(cat.machines)}
    expected = whole[args] if args in whole else {args[-1]}
    shown = {line.split("│")[1].strip() for line in result.output.splitlines() if "│" in line}
    assert expected <= shown, expected - shown


# ---- hostile inputs: exit 1 with the key path, on every command that reads a job ----------

SMOKE = yaml.safe_load((TEMPLATES / "smoke-cpu.yaml").read_text())
GCLOUD_POOL = {
    "machineSpec": {"machineType": "n1-standard-4"},
    "replicaCount": 1,
    "containerSpec": {"imageUri": "us-docker.pkg.dev/p/r/trainer:1"},
}


def _smoke_with(**pool_changes: object) -> bytes:
    doc = yaml.safe_load((TEMPLATES / "smoke-cpu.yaml").read_text())
    doc["pools"]["workers"].update(pool_changes)
    return yaml.safe_dump(doc).encode()


def _text_with_workers_replicas(literal: str) -> bytes:
    return _smoke_with(replicas=0).replace(b"replicas: 0", f"replicas: {literal}".encode())


def _gcloud_with_second_pool_replicas(count: str) -> bytes:
    pools = [GCLOUD_POOL, {**GCLOUD_POOL, "replicaCount": count}]
    return yaml.safe_dump({"workerPoolSpecs": pools}).encode()


# Built when a test asks, once per name: some are megabytes, which collection need not make.
HOSTILE_JOBS: dict[str, tuple[Callable[[], bytes], str]] = {
    # name: (the file's bytes, the key path or place the answer names)
    "5,000-deep nesting": (
        lambda: ("name: deep\nlabels: " + "[" * 5000 + "]" * 5000 + "\n").encode(),
        "labels[0]",  # PyYAML 6.0.3 goes on [0][0]...; 6.0.4 stops at [0]
    ),
    "non-UTF-8 bytes": (
        lambda: yaml.safe_dump(SMOKE).encode() + b"description: \xff\xfe\n",
        "line ",
    ),
    "a 20 MB file": (
        lambda: yaml.safe_dump(SMOKE).encode() + b"#" + b"x" * 20_000_000,
        "(file)",
    ),
    "200,000 args": (
        lambda: yaml.safe_dump({**SMOKE, "args": ["--x"] * 200_000}, width=10**9).encode(),
        "(file)",
    ),
    "30,000 args": (
        lambda: yaml.safe_dump({**SMOKE, "args": ["a"] * 30_000}, default_flow_style=True).encode(),
        "args[",
    ),
    "an integer beyond int64": (
        lambda: _text_with_workers_replicas("99999999999999999999999"),
        "pools.workers.replicas",
    ),
    "int64 max + 1": (
        lambda: _text_with_workers_replicas(str(2**63)),
        "pools.workers.replicas",
    ),
    "replicas 2147483648, past the machines a job may hold": (
        lambda: _text_with_workers_replicas(str(2**31)),
        "pools.workers.replicas",
    ),
    "a gcloud replicaCount of 2147483648": (
        lambda: _gcloud_with_second_pool_replicas(str(2**31)),
        "workerPoolSpecs[1].replicaCount",
    ),
    "a quoted integer beyond int64": (
        lambda: _text_with_workers_replicas('"99999999999999999999999"'),
        "pools.workers.replicas",
    ),
    "a disk size beyond int32": (
        lambda: _smoke_with(boot_disk={"size_gb": 2**40}),
        "pools.workers.boot_disk.size_gb",
    ),
    "a gcloud replicaCount beyond int64": (
        lambda: _gcloud_with_second_pool_replicas(str(2**63)),
        "workerPoolSpecs[1].replicaCount",
    ),
}


@functools.cache
def hostile_job(name: str) -> bytes:
    return HOSTILE_JOBS[name][0]()


COMMANDS = {
    "validate": ["validate"],
    "validate --stack-file": ["validate", "--stack-file", str(STACK)],
    "render": ["render", "--stack-file", str(STACK)],
    "cost": ["cost"],
    "launch --dry-run": ["launch", "--dry-run", "--stack-file", str(STACK)],
}


@pytest.mark.parametrize("command", COMMANDS.values(), ids=list(COMMANDS))
@pytest.mark.parametrize("name", list(HOSTILE_JOBS))
def test_hostile_job_files_exit_1_naming_the_place_on_every_command(
    tmp_path: Path, command: list[str], name: str
) -> None:
    place = HOSTILE_JOBS[name][1]
    path = tmp_path / "job.yaml"
    path.write_bytes(hostile_job(name))
    result = runner.invoke(app, [command[0], str(path), *command[1:]])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 1, result.output
    assert f"✗ {path}: {place}" in result.output, result.output[:2000]
    assert "Traceback" not in result.output


def test_what_validate_accepts_at_the_machines_limit_render_renders(tmp_path: Path) -> None:
    limit = load_catalog().limits.machines_max  # the chief is one of them
    path = tmp_path / "job.yaml"
    path.write_bytes(_text_with_workers_replicas(str(limit - 1)))
    code, out = vtx("validate", str(path), "--stack-file", str(STACK))
    assert code == 0, out
    code, out = vtx("render", str(path), "--stack-file", str(STACK), "--format", "json")
    assert code == 0, out
    assert f'"replicaCount": "{limit - 1}"' in out
    path.write_bytes(_text_with_workers_replicas(str(limit)))
    code, out = vtx("validate", str(path))
    assert code == 1, out
    assert f"asks for {limit + 1:,} machines at once (chief 1, workers {limit:,})" in out


def test_a_file_name_that_is_not_utf8_is_named_not_a_crash(tmp_path: Path) -> None:
    import os

    path = tmp_path / os.fsdecode(b"caf\xe9.yaml")
    code, out = vtx("validate", str(path))
    assert code == 1, out
    assert "caf\\udce9.yaml: (file): does not exist" in out


def closed_stack_job(tmp_path: Path, **stack_changes: str) -> tuple[Path, Path]:
    """A job that pip-installs from PyPI and trains a Hub model id, and the dev stack closed
    (``egress: none``): the template and the stack file."""
    stack = json.loads(STACK.read_text())
    closed = tmp_path / "closed.json"
    closed.write_text(json.dumps({**stack, "egress": "none", **stack_changes}))
    config = tmp_path / "lora.yaml"
    config.write_text("model:\n  name_or_path: Qwen/Qwen2.5-0.5B-Instruct\n")
    template = tmp_path / "job.yaml"
    template.write_text(
        yaml.safe_dump(
            {
                "name": "hub-job",
                "image": "trainer",
                "command": ["sh", "-c"],
                "args": [f"pip install peft && python -m trainer.launch --config {config}"],
                "pools": {"chief": {"machine": "n1-standard-4"}},
                "scheduling": {"timeout": "1h"},  # the dev stack's launch policy caps it
            }
        )
    )
    return template, closed


def warning_lines(out: str) -> list[str]:
    """Each warning with its `instead:` line, as one line (rich wraps long ones)."""
    blocks = " ".join(out.split()).replace("! warning:", "\n! warning:").splitlines()[1:]
    ends = (" ✓ ", " dry run:")
    for end in ends:
        blocks = [block.split(end)[0] for block in blocks]
    return [block.strip() for block in blocks]


def test_validate_on_a_closed_stack_warns_and_still_passes(tmp_path: Path) -> None:
    template, closed = closed_stack_job(tmp_path)
    code, out = vtx("validate", str(template), "--stack-file", str(closed))
    assert code == 0, out
    flat = " ".join(out.split())
    assert "! warning:" in flat and "pip-installs from PyPI" in flat
    assert "`vtx model mirror Qwen/Qwen2.5-0.5B-Instruct --stack <stack>`" in flat
    # The dev stack (egress nat) says nothing of the kind.
    code, out = vtx("validate", str(template), "--stack-file", str(STACK))
    assert code == 0 and "warning" not in out, out


def test_launch_on_a_closed_stack_shows_validates_warnings_and_goes_on(
    google: FakeGoogle, tmp_path: Path
) -> None:
    template, closed = closed_stack_job(tmp_path, vertex_endpoint=google.url)
    code, validated = vtx("validate", str(template), "--stack-file", str(closed))
    assert code == 0, validated
    code, out = vtx("launch", str(template), "--stack-file", str(closed), "--dry-run")
    assert code == 0, out
    assert "dry run: nothing submitted" in out
    shown = warning_lines(out)
    assert len(shown) == 2 and shown == warning_lines(validated), out
    assert f"{template}: jobSpec.workerPoolSpecs[0].containerSpec.command" in shown[0]
    # An open stack's plan says nothing of the kind.
    _, open_stack = closed_stack_job(tmp_path, egress="nat", vertex_endpoint=google.url)
    code, out = vtx("launch", str(template), "--stack-file", str(open_stack), "--dry-run")
    assert code == 0 and "warning" not in out, out
