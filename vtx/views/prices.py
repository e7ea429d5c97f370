"""How `vtx prices refresh` prints: the tables written, what each region matched, and every
figure that stays unknown with the reason."""

from __future__ import annotations

from collections import defaultdict

from rich.console import Console

from jobs.core.user_io import shown_path
from jobs.pricing.refresh import LOCAL_PREFIX, Coverage, Refresh, coverage
from vtx.views.fit_table import FitTable

MAX_REFUSED_SHOWN = 10


def print_coverage(console: Console, found: Coverage) -> None:
    """The last line of a refresh: figures known per region and usage, then the most common
    reasons for the unknown ones."""
    parts: dict[str, list[str]] = defaultdict(list)
    for (region, usage), (known, expected) in found.known.items():
        parts[region].append(f"{usage} {known}/{expected}")
    regions = "; ".join(f"{region} {', '.join(usages)}" for region, usages in parts.items())
    reasons = "; ".join(f"{reason} ({count})" for reason, count in found.reasons)
    console.print(
        f"coverage: {regions or 'no figure expected'}"
        + (f"; unknown mostly: {reasons}" if reasons else ""),
        highlight=False,
        markup=False,
    )


def print_refresh(console: Console, done: Refresh) -> None:
    matched, unknown = done.matched.figures, done.matched.unknown
    table = FitTable(title="Billing catalog: figures per region", title_justify="left")
    for column in ("region", "kind", "matched", "unknown"):
        table.add_column(column, justify="right" if column in ("matched", "unknown") else "left")
    counts: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for key in matched:
        counts[(key.region, key.kind)][0] += 1
    for key in unknown:
        counts[(key.region, key.kind)][1] += 1
    for (region, kind), (known, missing) in sorted(counts.items()):
        table.add_row(region, kind, str(known), str(missing))
    console.print(table)
    why: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    for key, reason in sorted(unknown.items(), key=lambda kv: str(kv[0])):
        why[(key.region, key.kind, reason)].append(f"{key.name} {key.usage}")
    for (region, kind, reason), names in why.items():
        console.print(
            f"unknown in {region} ({kind}): {', '.join(names)}: {reason}",
            style="yellow",
            highlight=False,
        )
    console.print(f"{done.matched.ignored} SKUs price nothing a table holds", highlight=False)
    for reason in done.matched.refused[:MAX_REFUSED_SHOWN]:
        console.print(f"refused: {reason}", style="yellow", highlight=False, markup=False)
    if len(done.matched.refused) > MAX_REFUSED_SHOWN:
        more = len(done.matched.refused) - MAX_REFUSED_SHOWN
        console.print(f"refused: {more} more SKUs that cannot be read", style="yellow")
    for reason in done.matched.disks_refused[:MAX_REFUSED_SHOWN]:
        console.print(f"disk SKU not read: {reason}", style="yellow", highlight=False, markup=False)
    for gpu, wordings in sorted(done.matched.gpu_wordings.items()):
        said = "; ".join(f'"{w}"' for w in sorted(wordings))
        console.print(f"{gpu} is worded {said}", highlight=False, markup=False)
    for path in done.written:
        console.print(f"wrote {shown_path(path)}", highlight=False)
    if done.written and done.tables[0].name.startswith(LOCAL_PREFIX):
        console.print(
            "These are the local stand-in's made-up figures, not Google's: they price the local "
            "stack's jobs only (`--stack local`), never a real stack's.",
            style="yellow",
            highlight=False,
        )
    if not done.written:
        console.print(
            "no table written: no figure matched (the shipped tables stay in use)",
            style="yellow",
            highlight=False,
        )
    print_coverage(console, coverage(done.matched))
