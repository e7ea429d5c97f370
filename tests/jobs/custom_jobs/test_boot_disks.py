"""Boot disk types per machine: A3 Ultra and A4 take Hyperdisk only (the DiskSpec proto's
default for A3U is hyperdisk-balanced), so a template that leaves the type out gets the
machine's default, and a Persistent Disk type on them is refused before submit."""

from __future__ import annotations

from typing import Any

import pytest

from jobs.core.stack import StackOutputs
from jobs.custom_jobs.compile import compile_job
from jobs.launch.checks import validate_template_doc
from jobs.spec.gcloud import import_spec
from jobs.spec.template import JobTemplate


def doc(machine: str, disk: dict[str, Any] | None = None) -> dict[str, Any]:
    pool: dict[str, Any] = {"machine": machine, **({"boot_disk": disk} if disk else {})}
    return {"name": "disks", "image": "trainer", "pools": {"chief": pool}}


@pytest.mark.parametrize(
    ("machine", "expected"),
    [("a3-ultragpu-8g", "hyperdisk-balanced"), ("a4-highgpu-8g", "hyperdisk-balanced"),
     ("a3-highgpu-8g", "pd-ssd"), ("g2-standard-8", "pd-ssd")],
)  # fmt: skip
def test_a_template_without_a_disk_type_gets_the_machines_default(
    stack: StackOutputs, machine: str, expected: str
) -> None:
    job = compile_job(JobTemplate.from_document(doc(machine)), stack, "disks-run")
    assert job.rest["jobSpec"]["workerPoolSpecs"][0]["diskSpec"]["bootDiskType"] == expected


def test_a_persistent_disk_on_a_hyperdisk_only_machine_is_refused_naming_the_type() -> None:
    problems = validate_template_doc(doc("a4-highgpu-8g", {"type": "pd-ssd"}))
    [problem] = [p for p in problems if p.path.endswith("boot_disk.type")]
    assert "a4-highgpu-8g takes hyperdisk-balanced boot disks, not pd-ssd" in problem.message
    assert problem.hint is not None and problem.hint.startswith("type: hyperdisk-balanced")
    assert not validate_template_doc(doc("a4-highgpu-8g", {"type": "hyperdisk-balanced"}))
    assert not validate_template_doc(doc("n1-standard-4", {"type": "pd-standard"}))


def test_an_imported_spec_without_a_disk_type_keeps_the_machines_default() -> None:
    spec = {
        "workerPoolSpecs": [
            {
                "machineSpec": {"machineType": "a3-ultragpu-8g"},
                "replicaCount": 1,
                "diskSpec": {"bootDiskSizeGb": 200},
                "containerSpec": {"imageUri": "us-docker.pkg.dev/p/r/trainer:1"},
            }
        ]
    }
    imported = import_spec(spec, "disks")
    assert imported.template["pools"]["chief"]["boot_disk"] == {"size_gb": 200}
