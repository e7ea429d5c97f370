"""`vtx cost`: the cost table as the CLI prints it."""

from __future__ import annotations

import io

from jobs.custom_jobs.facts import template_facts
from jobs.pricing.estimates import estimate
from jobs.spec.gcloud import load_template
from tests.conftest import TEMPLATES
from tests.jobs.core.price_tables import DISK_TABLE, disk_job, with_table


def test_cost_table_on_80_columns_keeps_names_whole() -> None:
    from rich.console import Console

    from vtx.views.costs import cost_table

    result = estimate(template_facts(load_template(TEMPLATES / "a100x16-fsdp.yaml")))
    console = Console(width=80, record=True, file=io.StringIO())
    console.print(cost_table(result, "plan"))
    text = console.export_text()
    assert "…" not in text
    # Too narrow for a grid with every name whole: each pool reads as `column: value` lines.
    for pool in result.pools:
        assert f"machine: {pool.machine}" in text
        if pool.accelerator:
            assert f"accelerators: {pool.accelerator_count} x {pool.accelerator}" in text


def test_the_boot_disks_are_their_own_line_and_an_unknown_one_marks_the_total() -> None:
    from rich.console import Console

    from vtx.views.costs import print_cost

    def printed(worker_disk: dict) -> str:
        result = estimate(disk_job(worker_disk), catalog=with_table(DISK_TABLE))
        console = Console(width=200, record=True, file=io.StringIO())
        print_cost(console, result, "plan")
        return " ".join(console.export_text().replace("│", " ").split())

    known = printed({"size_gb": 200})
    assert "boot disk pd-ssd 100 GB 1 $0.03 unknown" in known
    assert "boot disk pd-ssd 200 GB 3 $0.15 unknown" in known
    assert "total $1.18 unknown" in known
    assert "This job (on-demand price in us-central1): $1.18/h;" in known
    assert (
        "Boot disks (chief: 1 x 100 GB pd-ssd, workers: 3 x 200 GB pd-ssd): $0.18/h, included"
        in known
    )
    unknown = printed({"type": "pd-standard"})
    assert "boot disk pd-standard 100 GB 3 unknown unknown" in unknown
    assert "total $1.00 excl. boot disks unknown" in unknown
    assert "This job (on-demand price in us-central1): $1.00/h excl. boot disks;" in unknown
    assert (
        "Boot disks (chief: 1 x 100 GB pd-ssd, workers: 3 x 100 GB pd-standard): unknown "
        "(pd-standard: no figure in test (no real SKU wording is known for pd-standard boot "
        "disks)); the price above excludes them." in unknown
    )


def test_a_machine_with_built_in_local_ssd_gets_its_own_unknown_line() -> None:
    from rich.console import Console

    from jobs.pricing.estimates import LOCAL_SSD_FLEX_START_UNKNOWN, LOCAL_SSD_UNKNOWN
    from tests.jobs.core.price_tables import priced_job
    from vtx.views.costs import print_cost

    def printed(machine: str, strategy: str | None = None) -> str:
        pools = {"chief": {"machine": machine, "accelerator": "NVIDIA_H100_80GB",
                           "accelerator_count": int(machine[-2])}}  # fmt: skip
        console = Console(width=400, record=True, file=io.StringIO())
        print_cost(console, estimate(priced_job(pools, "us-central1", strategy)), "plan")
        return " ".join(console.export_text().split())

    eight = printed("a3-highgpu-8g")
    assert (
        f"Local SSD (chief: 1 x 6,000 GiB built into a3-highgpu-8g): unknown ({LOCAL_SSD_UNKNOWN});"
        " not in the price above." in eight
    )
    assert "Local SSD (chief: 1 x 750 GiB built into a3-highgpu-1g)" in printed("a3-highgpu-1g")
    assert LOCAL_SSD_FLEX_START_UNKNOWN in printed("a3-highgpu-8g", "flex_start")
    assert "Local SSD" not in printed("a3-highgpu-2g")  # none recorded for it
