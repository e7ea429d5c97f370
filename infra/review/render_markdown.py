"""The review as Markdown, fit for a PR comment (GitHub renders the Mermaid block)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from infra.review.builder import Report
from infra.review.diff import StackDiff


def _escape(cell: object) -> str:
    return str(cell).replace("|", "\\|").replace("\n", " ")


def table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(_escape(c) for c in row) + " |" for row in rows]
    if len(lines) == 2:
        return ["_none_"]
    return lines


def verdict_line(report: Report) -> str:
    failures = report.mandatory_failures
    if failures:
        return f"**{failures} mandatory policy violation(s): do not apply.**"
    advisory = sum(len(p.violations) for p in report.policy if not p.mandatory)
    return f"**All mandatory policies pass** ({advisory} advisory finding(s))."


def _network(report: Report) -> list[str]:
    net = report.network
    lines = [
        f"Mode: **{net['mode']}**; VPC: {', '.join(net['networks']) or '-'}; "
        f"Shared VPC host: {net['shared_vpc_host']}",
        "",
        *table(
            ["subnet", "CIDR", "purpose", "private Google access", "flow logs"],
            [
                [s["name"], s["cidr"], s["purpose"], s["private_google_access"], s["flow_logs"]]
                for s in net["subnets"]
            ],
        ),
        "",
        *table(
            ["NAT", "IP allocation", "ranges"],
            [[n["name"], n["ip_allocation"], n["ranges"]] for n in net["nat"]],
        ),
    ]
    if net["attachment"]:
        lines += [
            "",
            *table(
                ["network attachment", "connection preference", "exported as"],
                [
                    [a["name"], a["connection_preference"], a["exported_as"]]
                    for a in net["attachment"]
                ],
            ),
        ]
    if net["peering_ranges"]:
        lines += [
            "",
            *table(
                ["reserved range", "CIDR", "purpose"],
                [[r["name"], r["cidr"], r["purpose"]] for r in net["peering_ranges"]],
            ),
        ]
    if net["firewall"]:
        lines += [
            "",
            *table(
                ["firewall", "direction", "action", "sources", "priority"],
                [
                    [f["name"], f["direction"], f["action"], f["sources"], f["priority"]]
                    for f in net["firewall"]
                ],
            ),
        ]
    return lines


def _diff(diff: StackDiff) -> list[str]:
    lines = [f"## {diff.left} vs {diff.right}", ""]
    lines += table(
        ["setting", "key", diff.left, diff.right],
        [[c.resource, c.key, c.left, c.right] for c in diff.settings],
    )
    lines += ["", "Resource counts that differ:", ""]
    lines += table(["type", diff.left, diff.right], diff.counts)
    lines += ["", f"Only in {diff.left}: " + (", ".join(diff.only_left) or "-"), ""]
    lines += [f"Only in {diff.right}: " + (", ".join(diff.only_right) or "-"), ""]
    lines += table(
        ["resource", "input", diff.left, diff.right],
        [[c.resource, c.key, f"`{c.left}`", f"`{c.right}`"] for c in diff.changed],
    )
    return lines


def to_markdown(report: Report, diff: StackDiff | None = None) -> str:
    lines = [
        f"# vtx review: stack `{report.stack}` ({report.environment or 'environment unknown'})",
        "",
        f"Source: {report.origin}. {verdict_line(report)}",
        "",
        "## Resources",
        "",
        *table(
            ["component", "type", "count"], [[c.component, c.type, c.count] for c in report.counts]
        ),
        "",
        "## Network",
        "",
        *_network(report),
        "",
        "## IAM",
        "",
        *table(
            ["principal", "role", "on", "resource", "declared by"],
            [[r.principal, r.role, r.resource_kind, r.resource, r.declared_by] for r in report.iam],
        ),
        "",
        "## Buckets",
        "",
        *table(
            [
                "bucket",
                "location",
                "uniform access",
                "public access prevention",
                "versioning",
                "soft delete",
                "lifecycle",
                "CMEK key",
            ],
            [
                [
                    b["name"],
                    b["location"],
                    b["uniform_access"],
                    b["public_access_prevention"],
                    b["versioning"],
                    b["soft_delete"],
                    b["lifecycle"],
                    b["cmek"],
                ]
                for b in report.buckets
            ],
        ),
        "",
        "## Quotas requested",
        "",
        *table(
            ["quota id", "service", "region", "preferred value"],
            [
                [q["quota_id"], q["service"], q["region"], q["preferred_value"]]
                for q in report.quotas
            ],
        ),
        "",
        "## Secrets (names only)",
        "",
        *table(
            ["secret", "replication", "versions in state"],
            [[s["secret_id"], s["replication"], s["versions_in_state"]] for s in report.secrets],
        ),
        "",
        "## Policies",
        "",
        *table(
            ["policy", "level", "verdict", "findings"],
            [
                [
                    p.policy,
                    "mandatory" if p.mandatory else "advisory",
                    p.status + (f" ({p.note})" if p.note else ""),
                    "<br>".join(p.violations) or "-",
                ]
                for p in report.policy
            ],
        ),
        "",
        "## Diagram",
        "",
        "```mermaid",
        report.diagram,
        "```",
    ]
    if diff is not None:
        lines += ["", *_diff(diff)]
    return "\n".join(lines) + "\n"
