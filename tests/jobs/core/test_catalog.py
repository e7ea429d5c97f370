"""The catalog data files agree with each other, with docs/vertex-facts.md and with the protos."""

from __future__ import annotations

import json

import pytest

from jobs.core.catalog import closest, load_catalog
from jobs.spec.rest_schema import SCHEMA_PATH, generate_schema, message_fields


def test_rest_schema_file_matches_the_installed_protos() -> None:
    # Regenerate with `python -m jobs.spec.rest_schema` after upgrading google-cloud-aiplatform.
    assert json.loads(SCHEMA_PATH.read_text()) == json.loads(json.dumps(generate_schema()))


def test_every_catalog_accelerator_is_a_valid_api_enum_value() -> None:
    api_values = set(
        message_fields("google.cloud.aiplatform.v1.MachineSpec")["acceleratorType"]["values"]
    )
    cat = load_catalog()
    in_api = {name for name, acc in cat.accelerators.items() if acc.in_v1_api}
    assert in_api <= api_values
    # The chips the v1 enum lacks (v6e, TPU7x) are the ones marked so: no job may name them.
    lacking = {"TPU_V6E", "TPU_V7X"}
    assert set(cat.accelerators) - in_api == set(cat.accelerators) - api_values == lacking


def test_every_tpu_of_the_v1_enum_is_in_the_catalog() -> None:
    api_values = message_fields("google.cloud.aiplatform.v1.MachineSpec")["acceleratorType"]
    tpus = {v for v in api_values["values"] if v.startswith("TPU_")}
    assert tpus == {"TPU_V2", "TPU_V3", "TPU_V4_POD", "TPU_V5_LITEPOD"}
    cat = load_catalog()
    assert tpus <= set(cat.accelerators)
    assert all(cat.accelerators[t].kind == "tpu" for t in tpus)


def test_tpu_machines_carry_the_topologies_and_vms_of_googles_table() -> None:
    cat = load_catalog()
    slices = cat.machines["ct5lp-hightpu-4t"].tpu_topologies
    assert slices == {"2x2": 1, "2x4": 2, "4x4": 4, "4x8": 8, "8x8": 16, "8x16": 32, "16x16": 64}
    assert cat.machines["ct5lp-hightpu-8t"].tpu_topologies == {"2x4": 1}
    assert cat.machines["ct6e-standard-1t"].tpu_topologies == {"1x1": 1}
    tpu7x = cat.machines["tpu7x-standard-4t"]  # 4 chips a VM: 2x2x1 is one VM, 8x8x16 is 256
    assert [tpu7x.hosts(t, None) for t in ("2x2x1", "4x4x4", "8x8x16")] == [1, 16, 256]
    assert cat.replica_accelerators("tpu7x-standard-4t", None, None, "8x8x16") == ("TPU_V7X", 1024)
    assert cat.machines["cloud-tpu"].hosts(None, 32) == 4
    assert cat.machines["ct4p-hightpu-4t"].unconfirmed  # not on Google's training page
    # europe-west4's v5e is serving only (Google's locations table); v3 Pods only there.
    assert "TPU_V5_LITEPOD" not in cat.regions["europe-west4"].accelerators
    assert cat.regions["europe-west4"].tpu_pods == ("TPU_V2", "TPU_V3")


def test_machines_regions_and_prices_only_name_known_things() -> None:
    cat = load_catalog()
    families = {m.family for m in cat.machines.values()}
    for machine in cat.machines.values():
        assert set(machine.accelerators) <= set(cat.accelerators), machine.name
        assert all(counts for counts in machine.accelerators.values()), machine.name
        if machine.builtin:
            assert len(machine.accelerators) == 1 and all(
                len(c) == 1 for c in machine.accelerators.values()
            ), machine.name
    for region in cat.regions.values():
        assert set(region.families) <= families, region.name
        assert set(region.accelerators) <= set(cat.accelerators), region.name
    for table in cat.price_tables:
        assert set(table.machines) <= set(cat.machines), table.name
        assert set(table.accelerators) <= set(cat.accelerators), table.name
        assert table.as_of and table.source.startswith("https://")


def test_vertex_md_count_rules_hold() -> None:
    cat = load_catalog()
    t4_counts = [
        c for m in cat.machines_for("NVIDIA_TESLA_T4") for c in m.accelerators["NVIDIA_TESLA_T4"]
    ]
    assert max(t4_counts) == 4  # T4 never exceeds 4 per VM
    assert cat.machines["a2-highgpu-1g"].accelerators == {"NVIDIA_TESLA_A100": (1,)}
    assert cat.machines["a2-megagpu-16g"].accelerators == {"NVIDIA_TESLA_A100": (16,)}
    assert cat.machines["g2-standard-48"].accelerators == {"NVIDIA_L4": (4,)}
    assert cat.machines["n1-standard-32"].accelerators["NVIDIA_TESLA_V100"] == (4, 8)
    assert cat.machines["n1-highmem-64"].accelerators["NVIDIA_TESLA_T4"] == (4,)


def test_quota_metrics_follow_vertex_naming() -> None:
    l4 = load_catalog().accelerators["NVIDIA_L4"]
    assert (
        l4.metric(preemptible=False)
        == "aiplatform.googleapis.com/custom_model_training_nvidia_l4_gpus"
    )
    assert l4.metric(preemptible=True) == (
        "aiplatform.googleapis.com/custom_model_training_preemptible_nvidia_l4_gpus"
    )


def test_the_verified_prices_match_googles_page_as_recorded() -> None:
    table = load_catalog().price_table("us-central1")
    assert table is not None
    assert table.machines["n1-standard-4"].usd_per_h == 0.2185
    assert table.machines["n1-standard-4"].basis == "verified"
    h100 = table.accelerators["NVIDIA_H100_80GB"]
    # Vertex's training SKU (Compute Engine's $9.79655057 x 1.15), not Compute Engine's figure,
    # and the figure names where it was read.
    assert (h100.usd_per_h, h100.basis) == (11.2660332, "verified")
    assert h100.note is not None and "3F95-001E-B747" in h100.note


@pytest.mark.parametrize(
    ("typed", "meant"),
    [
        ("N1-STANDARD-8", "n1-standard-8"),
        ("nvidia_tesla_t4", "NVIDIA_TESLA_T4"),
        ("t4", "NVIDIA_TESLA_T4"),
        ("L4", "NVIDIA_L4"),
        ("g2-standard-7", "g2-standard-8"),
    ],
)
def test_did_you_mean_ignores_case_and_finds_short_accelerator_names(
    typed: str, meant: str
) -> None:
    cat = load_catalog()
    assert closest(typed, [*cat.machines, *cat.accelerators]) == meant


def test_cloud_quota_ids_follow_the_metric_and_an_explicit_id_wins() -> None:
    catalog = load_catalog()
    a100 = catalog.accelerators["NVIDIA_A100_80GB"]
    assert a100.cloud_quota_id(preemptible=False) == (
        "CustomModelTrainingNvidiaA10080gbGpusPerProjectPerRegion"
    )
    assert a100.cloud_quota_id(preemptible=True) == (
        "CustomModelTrainingPreemptibleNvidiaA10080gbGpusPerProjectPerRegion"
    )
    pinned = a100.model_copy(update={"preemptible_quota_id": "FromGcloudQuotasInfo"})
    assert pinned.cloud_quota_id(preemptible=True) == "FromGcloudQuotasInfo"
    # A TPU has no GPU quota key to derive an id from: no quota can be requested as code.
    assert catalog.accelerators["TPU_V5_LITEPOD"].cloud_quota_id(preemptible=False) is None
