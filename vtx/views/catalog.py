"""How the catalog prints (`vtx catalog`): accelerators and machines with their counts and each
region's on-demand and Spot prices."""

from __future__ import annotations

from typing import Literal

from rich.table import Table

from jobs.core.catalog import Catalog, Machine, Price
from jobs.core.formats import UNKNOWN
from vtx.views.fit_table import FitTable


def _price_cell(price: Price | None, spot: bool) -> str:
    if price is None:
        return UNKNOWN
    usd, basis = (price.usd_per_h, price.basis)
    if spot:
        usd, basis = (price.spot_usd_per_h, price.spot_basis)
    return UNKNOWN if usd is None else f"{usd:.4f} ({basis})"


def _region_prices(
    cat: Catalog, regions: list[str], kind: Literal["machines", "accelerators"], name: str
) -> str:
    """One line per region with a figure (on-demand / Spot $/h); regions without any figure are
    named together on one line, so "unknown" is said without a line per region. Of several
    regions, those known only for their TPUs are counted, not named (`vtx catalog --region`
    names them): their long names would push an 80-column table out of its grid."""
    lines, unknown, tpu_only = [], [], 0
    for region in regions:
        table = cat.price_table(region)
        price = getattr(table, kind).get(name) if table else None
        cells = (_price_cell(price, spot=False), _price_cell(price, spot=True))
        if cells != (UNKNOWN, UNKNOWN):
            lines.append(f"{region}: {cells[0]} / {cells[1]}")
        elif len(regions) > 1 and cat.regions[region].tpus_only_known:
            tpu_only += 1
        else:
            unknown.append(region)
    if tpu_only:
        unknown.append(f"{tpu_only} region(s) known only for TPUs")
    if unknown:
        lines.append(f"{UNKNOWN} in {', '.join(unknown)}")
    return "\n".join(lines)


PRICE_COLUMN = "region: on-demand / Spot $/h"


PRICE_CAPTION = (
    "Prices per region from its newest table (each table's source and date below); 'unknown': "
    "the region's table has no figure read from a source: `vtx prices refresh` reads them from "
    "the billing catalog."
)


def catalog_table(cat: Catalog, accelerator: str | None, region: str | None) -> Table:
    table = FitTable(
        title="Accelerators for Vertex AI custom training",
        title_justify="left",
        caption=PRICE_CAPTION + " Per unit: add the machine's price.",
        caption_justify="left",
    )
    for column in ("accelerator", "memory", "machine: counts", PRICE_COLUMN):
        # Names are what users copy into templates: never cut them ("NVIDIA_TESLA_V…").
        table.add_column(column, no_wrap=column == "accelerator", overflow="fold")
    for acc in cat.accelerators.values():
        if accelerator and acc.name != accelerator.upper():
            continue
        regions = [r.name for r in cat.regions.values() if acc.name in r.accelerators]
        if region and region not in regions:
            continue
        machines = [_machine_counts(m, acc.name) for m in cat.machines_for(acc.name)]
        table.add_row(
            acc.name,
            f"{acc.memory_gb:g} GB",
            "\n".join(machines) if accelerator else _count_summary(cat, acc.name),
            _region_prices(cat, [region] if region else regions, "accelerators", acc.name),
        )
    return table


def _machine_counts(machine: Machine, accelerator: str) -> str:
    """``g2-standard-24: 2``; a TPU VM machine with its topologies and their VMs (the chips a
    job gets are the count per VM times the VMs); an unconfirmed machine says so."""
    line = f"{machine.name}: {','.join(map(str, machine.accelerators[accelerator]))}"
    if machine.tpu_topologies:
        slices = [
            f"{t}" + (f" ({n} VMs)" if n > 1 else "") for t, n in machine.tpu_topologies.items()
        ]
        line += f" per VM; tpu_topology {', '.join(slices)}"
    if machine.unconfirmed:
        line += " (UNCONFIRMED for training: refused)"
    return line


def _count_summary(cat: Catalog, accelerator: str) -> str:
    machines = cat.machines_for(accelerator)
    counts = sorted({c for m in machines for c in m.accelerators[accelerator]})
    return f"{', '.join(map(str, counts))} per VM on {len(machines)} machine type(s)"


def machines_table(cat: Catalog, region: str | None) -> Table:
    table = FitTable(
        title="Machine types",
        title_justify="left",
        caption=PRICE_CAPTION + " Machine part only: accelerators are priced apart.",
        caption_justify="left",
    )
    for column in ("machine", "vCPUs", "memory", "built-in", PRICE_COLUMN):
        table.add_column(column, no_wrap=column == "machine", overflow="fold")
    offered = cat.regions.get(region or "")
    if offered is not None and offered.tpus_only_known:
        table.caption = (
            f"{table.caption} {offered.name}: known only for its TPUs; its other machines are "
            "not recorded (unknown, not absent)."
        )
    for m in cat.machines.values():
        if offered and m.family not in offered.families:
            continue
        builtin = ", ".join(f"{c[0]} x {a}" for a, c in m.accelerators.items()) if m.builtin else ""
        regions = [r.name for r in cat.regions.values() if m.family in r.families]
        table.add_row(
            m.name,
            "?" if m.vcpus is None else str(m.vcpus),
            "?" if m.memory_gb is None else f"{m.memory_gb:g} GB",
            builtin,
            _region_prices(cat, [region] if region else regions, "machines", m.name),
        )
    return table
