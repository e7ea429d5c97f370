"""FLEX_START (Dynamic Workload Scheduler) and reservations, in every form a job takes: the
template, its rules (each bad case is in test_rules.py; the good cases and the template's paths
are here), the REST object it compiles to, gcloud's YAML imported and rendered back, and the
price kind the estimate says applies."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobs.core.catalog import load_catalog
from jobs.core.stack import StackOutputs
from jobs.custom_jobs.compile import custom_job_dict, to_custom_job
from jobs.custom_jobs.facts import facts_from_template, template_facts
from jobs.custom_jobs.rules.registry import run_rules
from jobs.custom_jobs.validate import validate_custom_job_spec
from jobs.launch.checks import validate_template_doc
from jobs.launch.render import render_yaml, rest_dict
from jobs.pricing.estimates import estimate
from jobs.spec.document import CUSTOM_JOB_SPEC, load_document
from jobs.spec.gcloud import import_document, load_template
from jobs.spec.rest_check import SPEC_MESSAGE, check_rest_fields
from jobs.spec.template import JobTemplate
from tests.jobs.core.price_tables import US_CENTRAL1_TABLE, with_table
from tests.jobs.custom_jobs.scheduling_templates import L4, RESERVATION, template, with_reservation

RUN_ID = "sched-20261123-080000-f00d"


NAME_KEY = "compute.googleapis.com/reservation-name"


def problems(doc: dict[str, Any], region: str | None = "us-central1") -> list[str]:
    return [f"{p.path}: {p.message} | {p.hint}" for p in validate_template_doc(doc, region)]


@pytest.mark.parametrize(
    "doc",
    [
        template({"chief": L4}, strategy="flex_start"),
        template({"chief": L4, "workers": {**L4, "replicas": 3}}, strategy="flex_start"),
        template({"chief": L4}, strategy="flex_start", max_wait=0),
        template({"chief": L4}, strategy="flex_start", max_wait="0s", timeout="7d"),
        template({"chief": {"machine": "a3-highgpu-8g"}}, strategy="flex_start", max_wait="3d"),
        template({"chief": with_reservation(L4, affinity="specific", values=[RESERVATION])}),
        template({"chief": with_reservation(L4, affinity="any")}),
        template({"chief": with_reservation(L4, affinity="none")}, strategy="spot"),
        template({"chief": with_reservation(L4, affinity="none")}, strategy="flex_start"),
        template({"chief": with_reservation(L4, affinity="specific", key="team", values=["ml"])}),
    ],
    ids=[
        "flex-one-pool",
        "flex-same-machines",
        "flex-wait-forever-int",
        "flex-wait-forever-7d-timeout",
        "flex-h100",
        "specific-full-name",
        "any-standard",
        "none-spot",
        "none-flex",
        "specific-by-label",
    ],
)
def test_documented_scheduling_and_reservations_are_accepted(doc: dict[str, Any]) -> None:
    assert problems(doc) == []


def test_flex_start_rules_point_at_the_template_fields() -> None:
    doc = template({"chief": {"machine": "n1-standard-8"}, "workers": L4}, strategy="flex_start")
    found = problems(doc)
    assert any(f.startswith("pools.chief.machine: FLEX_START") and "no GPU" in f for f in found)
    same = [f for f in found if f.startswith("pools.workers.machine:")]
    assert same and "machine: n1-standard-8 (as the chief)" in same[0], found
    assert "strategy: standard" in same[0]


def test_flex_start_timeout_cap_is_its_own_documented_seven_days() -> None:
    # The general timeout cap is UNCONFIRMED data; were it raised, FLEX_START keeps its 7 days.
    cat = load_catalog()
    longer = cat.limits.model_copy(
        update={"timeout_s": cat.limits.timeout_s.model_copy(update={"max": 30 * 86400})}
    )
    cat = cat.model_copy(update={"limits": longer})
    flex = facts_from_template(template({"chief": L4}, strategy="flex_start", timeout="8d"), cat)
    found = [p for p in run_rules(flex, cat) if p.path == "scheduling.timeout"]
    assert len(found) == 1 and "at most 7d, not 8d" in found[0].message
    standard = facts_from_template(template({"chief": L4}, timeout="8d"), cat)
    assert [p for p in run_rules(standard, cat) if p.path == "scheduling.timeout"] == []


def test_max_wait_zero_was_refused_before_and_means_wait_indefinitely() -> None:
    spec = {
        "workerPoolSpecs": [
            {
                "machineSpec": {"machineType": "g2-standard-8", "acceleratorType": "NVIDIA_L4",
                                "acceleratorCount": 1},
                "replicaCount": 1,
                "containerSpec": {"imageUri": "us-docker.pkg.dev/p/r/trainer:v1"},
            }
        ],
        "scheduling": {"strategy": "FLEX_START", "maxWaitDuration": "0s"},
    }  # fmt: skip
    assert validate_custom_job_spec(spec, region="us-central1") == []
    assert load_catalog().limits.max_wait_s.default == 86400  # the proto's documented default
    # A negative protobuf duration parses as JSON but is no wait at all: refused at its path.
    spec["scheduling"]["maxWaitDuration"] = "-60s"
    found = validate_custom_job_spec(spec, region="us-central1")
    assert [p.path for p in found] == ["scheduling.maxWaitDuration"]
    assert "0 waits indefinitely" in str(found[0].hint)


def test_reservation_rules_point_at_the_template_fields() -> None:
    east = "projects/capacity-owner/zones/us-east4-a/reservations/l4-pool"
    doc = template(
        {
            "chief": with_reservation(L4, affinity="specific", values=[east]),
            "workers": with_reservation(L4, affinity="specific", values=["l4-pool"]),
        }
    )
    found = problems(doc)
    zone = [f for f in found if f.startswith("pools.chief.reservation.values[0]:")]
    assert zone and "us-east4-a, which is not in us-central1" in zone[0], found
    bare = [f for f in found if f.startswith("pools.workers.reservation.values[0]:")]
    assert bare and "values: [projects/PROJECT/zones/ZONE/reservations/l4-pool]" in bare[0]
    spot = problems(template({"chief": with_reservation(L4, affinity="any")}, strategy="spot"))
    assert len(spot) == 1 and spot[0].startswith("pools.chief.reservation.affinity:")
    assert "Spot VMs cannot consume a reservation" in spot[0] and "affinity: none" in spot[0]


def test_unknown_affinity_is_a_structural_problem_with_the_choices() -> None:
    found = problems(template({"chief": with_reservation(L4, affinity="sometimes")}))
    assert len(found) == 1, found
    assert found[0].startswith("pools.chief.reservation.affinity:")
    assert "one of none, any, specific" in found[0]


def test_a_specific_reservation_is_named_by_name_unless_a_key_is_given() -> None:
    doc = template({"chief": with_reservation(L4, affinity="specific", values=[RESERVATION])})
    chief = facts_from_template(doc, load_catalog()).pools[0]
    assert chief.reservation_affinity == "SPECIFIC_RESERVATION"
    assert chief.reservation_key == NAME_KEY
    assert chief.reservation_values == [(RESERVATION, "pools.chief.reservation.values[0]")]


def test_render_sends_the_exact_scheduling_and_reservation_objects(stack: StackOutputs) -> None:
    doc = template(
        {
            "chief": with_reservation(L4, affinity="specific", values=[RESERVATION]),
            "workers": {**with_reservation(L4, affinity="any"), "replicas": 2},
            "evaluator": with_reservation(L4, affinity="specific", key="team", values=["ml"]),
        },
        timeout="2d",
    )
    job = custom_job_dict(JobTemplate.from_document(doc), stack, RUN_ID)
    specs = job["jobSpec"]["workerPoolSpecs"]
    assert specs[0]["machineSpec"] == {
        "machineType": "g2-standard-8",
        "acceleratorType": "NVIDIA_L4",
        "acceleratorCount": 1,
        "reservationAffinity": {
            "reservationAffinityType": "SPECIFIC_RESERVATION",
            "key": NAME_KEY,
            "values": [RESERVATION],
        },
    }
    assert specs[1]["machineSpec"]["reservationAffinity"] == {
        "reservationAffinityType": "ANY_RESERVATION"
    }
    assert specs[2] == {}  # no reduction server: the position is skipped
    assert specs[3]["machineSpec"]["reservationAffinity"] == {
        "reservationAffinityType": "SPECIFIC_RESERVATION",
        "key": "team",
        "values": ["ml"],
    }
    assert job["jobSpec"]["scheduling"] == {"strategy": "STANDARD", "timeout": "172800s"}
    # The field check generated from the protos and the proto parser both accept it.
    assert check_rest_fields(job) == []
    parsed = rest_dict(to_custom_job(job))
    assert parsed["jobSpec"]["workerPoolSpecs"][0]["machineSpec"] == specs[0]["machineSpec"]


def test_flex_start_compiles_to_strategy_and_max_wait(stack: StackOutputs) -> None:
    doc = template({"chief": L4}, strategy="flex_start", max_wait=0, timeout="7d")
    job = custom_job_dict(JobTemplate.from_document(doc), stack, RUN_ID)
    assert job["jobSpec"]["scheduling"] == {
        "strategy": "FLEX_START",
        "timeout": "604800s",
        "maxWaitDuration": "0s",
    }
    assert "reservationAffinity" not in job["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]
    assert check_rest_fields(job) == []
    assert rest_dict(to_custom_job(job))["jobSpec"]["scheduling"]["strategy"] == "FLEX_START"


GCLOUD_SPEC = {
    "workerPoolSpecs": [
        {
            "machineSpec": {
                "machineType": "g2-standard-8",
                "acceleratorType": "NVIDIA_L4",
                "acceleratorCount": 1,
                "reservationAffinity": {
                    "reservationAffinityType": "SPECIFIC_RESERVATION",
                    "key": NAME_KEY,
                    "values": [RESERVATION],
                },
            },
            "replicaCount": 1,
            "containerSpec": {"imageUri": "us-docker.pkg.dev/p/r/trainer:v1"},
        },
        {
            "machineSpec": {
                "machineType": "g2-standard-8",
                "acceleratorType": "NVIDIA_L4",
                "acceleratorCount": 1,
                "reservationAffinity": {"reservationAffinityType": "NO_RESERVATION"},
            },
            "replicaCount": 2,
            "containerSpec": {"imageUri": "us-docker.pkg.dev/p/r/trainer:v1"},
        },
    ],
    "scheduling": {"strategy": "STANDARD", "timeout": "86400s"},
}


def _imported(spec: dict[str, Any], tmp_path: Path) -> tuple[dict[str, Any], Path]:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    document = load_document(path)
    assert document.kind == CUSTOM_JOB_SPEC
    assert validate_custom_job_spec(document.doc, region="us-central1") == []
    return import_document(document.doc, document.kind, document.source).template, path


def test_gcloud_reservations_import_to_templates_and_render_back(
    stack: StackOutputs, tmp_path: Path
) -> None:
    imported, path = _imported(GCLOUD_SPEC, tmp_path)
    assert imported["pools"]["chief"]["reservation"] == {
        "affinity": "specific",
        "values": [RESERVATION],
    }
    assert imported["pools"]["workers"]["reservation"] == {"affinity": "none"}
    job = custom_job_dict(load_template(path), stack, RUN_ID)
    for sent, original in zip(
        job["jobSpec"]["workerPoolSpecs"], GCLOUD_SPEC["workerPoolSpecs"], strict=True
    ):
        assert sent["machineSpec"] == original["machineSpec"]
    rendered = yaml.safe_load(render_yaml(to_custom_job(job), stack))
    assert (
        rendered["workerPoolSpecs"][0]["machineSpec"]
        == (GCLOUD_SPEC["workerPoolSpecs"][0]["machineSpec"])
    )


def test_gcloud_flex_start_imports_and_round_trips(stack: StackOutputs, tmp_path: Path) -> None:
    spec = copy.deepcopy(GCLOUD_SPEC)
    for pool in spec["workerPoolSpecs"]:
        del pool["machineSpec"]["reservationAffinity"]
    spec["scheduling"] = {"strategy": "FLEX_START", "maxWaitDuration": "0s", "timeout": "3600s"}
    imported, path = _imported(spec, tmp_path)
    assert imported["scheduling"] == {"strategy": "flex_start", "timeout": "3600s",
                                      "max_wait": "0s"}  # fmt: skip
    assert validate_template_doc(imported, "us-central1") == []
    job = custom_job_dict(load_template(path), stack, RUN_ID)
    assert job["jobSpec"]["scheduling"] == spec["scheduling"]


def test_gcloud_reservation_without_a_type_is_refused_at_its_path(tmp_path: Path) -> None:
    spec = copy.deepcopy(GCLOUD_SPEC)
    del spec["workerPoolSpecs"][0]["machineSpec"]["reservationAffinity"]["reservationAffinityType"]
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(spec))
    found = validate_custom_job_spec(load_document(path).doc, region="us-central1")
    where = "workerPoolSpecs[0].machineSpec.reservationAffinity.reservationAffinityType"
    assert [p.path for p in found] == [where]
    assert "SPECIFIC_RESERVATION" in str(found[0].hint)


def test_no_reservation_keeps_the_on_demand_price() -> None:
    doc = template({"chief": with_reservation(L4, affinity="none")})
    job = template_facts(JobTemplate.from_document(doc))
    result = estimate(job, "us-central1", catalog=with_table(US_CENTRAL1_TABLE))
    assert result.price_kind == "on-demand"
    assert result.usd_per_h == result.on_demand_usd_per_h is not None


def test_flex_start_gpus_are_catalog_data_and_the_schema_knows_every_field() -> None:
    cat = load_catalog()
    assert cat.accelerators["NVIDIA_L4"].flex_start
    assert not cat.accelerators["NVIDIA_TESLA_T4"].flex_start
    spec = {"workerPoolSpecs": GCLOUD_SPEC["workerPoolSpecs"],
            "scheduling": {"strategy": "FLEX_START", "maxWaitDuration": "0s"}}  # fmt: skip
    assert check_rest_fields(spec, SPEC_MESSAGE) == []
