"""`vtx prices refresh`: list prices from Google's Cloud Billing Catalog API (or the local
platform's stand-in for `--stack local`), matched SKU by SKU to the catalog and written as dated
tables into the user's prices folder; `vtx cost` and the launch plan then use the newest table
of each region and name the SKU behind each figure (jobs/pricing/refresh.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from jobs.core.catalog import load_catalog
from jobs.pricing.refresh import (
    BillingCatalogReader,
    PricesUnavailable,
    SavedCatalog,
    SkuSource,
    refresh,
)
from vtx.options import StackFileOpt, StackOpt, console, fail, required_stack
from vtx.views.prices import print_refresh

app = typer.Typer(help="List prices from the billing catalog: vtx prices refresh.")

RegionsOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--region", help="A region to refresh (default: every catalog region). Repeatable."
    ),
]


FromFileOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--from-file",
        help="A saved services.skus.list answer (one page or a list of pages, Vertex AI's and "
        "Compute Engine's SKUs) to read instead of the API; - reads stdin. Repeatable. No "
        "stack or network needed.",
    ),
]


@app.command("refresh")
def refresh_prices(
    stack: StackOpt = None,
    stack_file: StackFileOpt = None,
    region: RegionsOpt = None,
    from_file: FromFileOpt = None,
) -> None:
    """Read Vertex AI's SKUs and write dated price tables (each figure with its SKU)."""
    if from_file and (stack or stack_file):
        raise fail("--from-file reads saved SKUs: give it without --stack or --stack-file")
    outputs = None if from_file else required_stack(stack, stack_file)
    catalog = load_catalog()
    regions = list(dict.fromkeys(region or catalog.regions))
    unknown = [r for r in regions if r not in catalog.regions]
    if unknown:
        raise fail(
            f"--region {unknown[0]}: not a catalog region; one of {', '.join(catalog.regions)}"
        )
    try:
        reader: SkuSource = SavedCatalog(from_file) if from_file else BillingCatalogReader(outputs)  # type: ignore[arg-type]
        done = refresh(reader, catalog, regions)
    except PricesUnavailable as exc:
        raise fail(f"cannot read the billing catalog: {exc}", code=1) from exc
    print_refresh(console(), done)
