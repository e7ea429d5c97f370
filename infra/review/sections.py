"""The review's tabular sections, defined once: the Markdown and HTML renderers only format them.

A section is a title and a list of blocks (tables and paragraphs) holding plain text; the little
markup they need (emphasis, raw values, a verdict's colour, multi-line cells) is named by type,
so each renderer decides how it looks and how to escape it. The verdict is worded here too, so
the Markdown and HTML pages cannot disagree; the title and the diagram stay with each renderer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from infra.review.builder import Report
from infra.review.diff import StackDiff


class Strong(str):
    """Emphasised text: bold in both formats."""


class Code(str):
    """A raw value shown verbatim (an input as JSON): code-formatted in both formats."""


@dataclass(frozen=True)
class Styled:
    """A cell the HTML page colours: ``css_class`` is one of its classes (pass, fail, skipped)."""

    text: str
    css_class: str


# A tuple cell holds several lines (a policy's findings); ints are counts.
Cell = str | int | Styled | tuple[str, ...]


@dataclass(frozen=True)
class Paragraph:
    """One line of prose; parts are plain, Strong or Code text."""

    parts: tuple[str, ...]


@dataclass(frozen=True)
class Table:
    """Rows under headers; an empty table renders as "none"."""

    headers: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]


@dataclass(frozen=True)
class Section:
    title: str
    blocks: tuple[Table | Paragraph, ...]


def verdict(report: Report) -> Styled:
    """The one-line verdict both pages show, with the advisory count either way."""
    advisory = sum(len(p.violations) for p in report.policy if not p.mandatory)
    findings = f"{advisory} advisory finding(s)"
    failures = report.mandatory_failures
    if failures:
        return Styled(
            f"{failures} mandatory policy violation(s): do not apply ({findings}).", "fail"
        )
    return Styled(f"All mandatory policies pass ({findings}).", "pass")


def _table(headers: Sequence[str], rows: Sequence[Sequence[Cell]]) -> Table:
    return Table(tuple(headers), tuple(tuple(row) for row in rows))


def _network(report: Report) -> Section:
    net = report.network
    # Further regions (capacity_regions) are named only where a stack has them.
    further = sorted(report.platform.get("regions") or {})
    lead = Paragraph(
        (
            "Mode: ",
            Strong(net["mode"]),
            "; egress: ",
            Strong(net["egress"]),
            f"; VPC: {', '.join(net['networks']) or '-'}; "
            f"Shared VPC host: {net['shared_vpc_host']}",
            *([f"; further regions: {', '.join(further)}"] if further else []),
            f"; serving: {net['serving']}",
        )
    )
    blocks: list[Table | Paragraph] = [
        lead,
        _table(
            ("subnet", "CIDR", "purpose", "private Google access", "flow logs"),
            [
                (s["name"], s["cidr"], s["purpose"], s["private_google_access"], s["flow_logs"])
                for s in net["subnets"]
            ],
        ),
        _table(
            ("NAT", "IP allocation", "ranges"),
            [(n["name"], n["ip_allocation"], n["ranges"]) for n in net["nat"]],
        ),
    ]
    # A stack uses either a PSC interface or peering: the table of the other mode is left out.
    optional = [
        _table(
            ("network attachment", "connection preference", "exported as"),
            [(a["name"], a["connection_preference"], a["exported_as"]) for a in net["attachment"]],
        ),
        _table(
            ("reserved range", "CIDR", "purpose"),
            [(r["name"], r["cidr"], r["purpose"]) for r in net["peering_ranges"]],
        ),
        _table(
            ("PSC endpoint", "internal address", "service attachment"),
            [(c["name"], c["address"], c["target"]) for c in net["psc_consumers"]],
        ),
        _table(
            ("firewall", "direction", "action", "sources", "destinations", "priority"),
            [
                (
                    f["name"],
                    f["direction"],
                    f["action"],
                    f["sources"],
                    f["destinations"],
                    f["priority"],
                )
                for f in net["firewall"]
            ],
        ),
        # Every way out of the subnets jobs use, then where names resolve (only a stack with
        # private zones answers differently from public DNS), then where code and weights come
        # from.
        _table(
            ("egress from", "to", "route", "firewall", "result"),
            [
                (p["from"], p["to"], p["route"], p["firewall"], _result(p["result"]))
                for p in net["egress_paths"]
            ],
        ),
        _table(
            ("private DNS name", "type", "answer", "zone"),
            [(d["name"], d["type"], d["answer"], d["zone"]) for d in net["dns"]],
        ),
        _table(
            ("package source", "from"), [(p["what"], p["from"]) for p in net["package_sources"]]
        ),
    ]
    blocks += [table for table in optional if table.rows]
    return Section("Network", tuple(blocks))


def _result(result: str) -> Styled:
    """An egress path's result, coloured: an open way out to the internet is what to look at."""
    return Styled(result, "pass" if result == "closed" else "skipped")


def _one_table(title: str, headers: Sequence[str], rows: Sequence[Sequence[Cell]]) -> Section:
    return Section(title, (_table(headers, rows),))


def report_sections(report: Report) -> list[Section]:
    """Every tabular section of the review, in reading order (the diagram comes after them)."""
    return [
        _one_table(
            "Resources",
            ("component", "type", "count"),
            [(c.component, c.type, c.count) for c in report.counts],
        ),
        _network(report),
        _one_table(
            "IAM",
            ("principal", "role", "on", "resource", "declared by"),
            [(r.principal, r.role, r.resource_kind, r.resource, r.declared_by) for r in report.iam],
        ),
        _one_table(
            "Buckets",
            (
                "bucket",
                "location",
                "uniform access",
                "public access prevention",
                "versioning",
                "soft delete",
                "lifecycle",
                "CMEK key",
            ),
            [
                (
                    b["name"],
                    b["location"],
                    b["uniform_access"],
                    b["public_access_prevention"],
                    b["versioning"],
                    b["soft_delete"],
                    b["lifecycle"],
                    b["cmek"],
                )
                for b in report.buckets
            ],
        ),
        _one_table(
            "Quotas requested",
            ("quota id", "service", "region", "preferred value"),
            [
                (q["quota_id"], q["service"], q["region"], q["preferred_value"])
                for q in report.quotas
            ],
        ),
        _one_table(
            "Secrets (names only)",
            ("secret", "replication", "versions in state"),
            [(s["secret_id"], s["replication"], s["versions_in_state"]) for s in report.secrets],
        ),
        _one_table(
            "Team budgets",
            (
                "team",
                "budget",
                "alerts at",
                "counts",
                "topic",
                "topic key",
                "function",
                "cancels at",
                "in regions",
                "runs as",
                "may",
                "warm pools billed to it",
                "their month, idle",
            ),
            [
                (
                    t["team"],
                    t["budget"],
                    t["thresholds"],
                    t["label_filter"],
                    t["topic"],
                    t["topic_cmek"],
                    t["function"],
                    t["cancel_at"],
                    t["regions"],
                    t["runs_as"],
                    tuple(t["permissions"]),
                    tuple(t["warm_pools"]),
                    t["warm_month"],
                )
                for t in report.teams
            ],
        ),
        _one_table(
            "Controller",
            ("function", "schedule (UTC)", "called by", "runs as", "may", "objects it may touch"),
            [
                (
                    c["function"],
                    c["schedule"],
                    c["called_by"],
                    c["runs_as"],
                    tuple(c["permissions"]),
                    tuple(c["objects"]),
                )
                for c in report.controller
            ],
        ),
        _one_table(
            "Alerts",
            ("alert", "fires when", "notifies"),
            [(a["alert"], tuple(a["fires_when"]), tuple(a["notifies"])) for a in report.alerts],
        ),
        _one_table(
            "Persistent resources (warm pools)",
            ("resource", "region", "network", "key", "labels", "pools", "$/h, busy or idle"),
            [
                (
                    w["resource"],
                    w["region"],
                    w["network"],
                    w["cmek"],
                    w["labels"],
                    tuple(w["pools"]),
                    w["per_hour"],
                )
                for w in report.warm_pools
            ],
        ),
        _one_table(
            "Policies",
            ("policy", "level", "verdict", "findings"),
            [
                (
                    p.policy,
                    "mandatory" if p.mandatory else "advisory",
                    Styled(p.status + (f" ({p.note})" if p.note else ""), p.status),
                    tuple(p.violations) or "-",
                )
                for p in report.policy
            ],
        ),
    ]


def diff_section(diff: StackDiff) -> Section:
    """What differs between the two stacks of ``--against``."""
    left, right = diff.left, diff.right
    return Section(
        f"{left} vs {right}",
        (
            _table(
                ("setting", "key", left, right),
                [(c.resource, c.key, c.left, c.right) for c in diff.settings],
            ),
            Paragraph(("Resource counts that differ:",)),
            _table(("type", left, right), diff.counts),
            Paragraph((f"Only in {left}: " + (", ".join(diff.only_left) or "-"),)),
            Paragraph((f"Only in {right}: " + (", ".join(diff.only_right) or "-"),)),
            _table(
                ("resource", "input", left, right),
                [(c.resource, c.key, Code(c.left), Code(c.right)) for c in diff.changed],
            ),
        ),
    )
