"""The review as one self-contained HTML page: inline CSS, no script, no external resource.

Without a script the Mermaid diagram cannot be drawn in the page (its renderer is a JavaScript
library we would have to inline); the page shows the resources as one card per component, and
the Mermaid source (which the Markdown report renders on GitHub) in a fold. Who may do what is
the IAM section's table.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape

from infra.review.builder import Report
from infra.review.diff import StackDiff

_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:72rem;color:#1f2328}
h1{font-size:1.6rem}h2{border-bottom:1px solid #d0d7de;padding-bottom:.2rem;margin-top:2rem}
table{border-collapse:collapse;margin:.6rem 0;width:100%}
th,td{border:1px solid #d0d7de;padding:.3rem .5rem;text-align:left;vertical-align:top}
th{background:#f6f8fa}td{word-break:break-word}
.fail{color:#cf222e;font-weight:600}.pass{color:#1a7f37}.skipped{color:#6e7781}
.verdict{padding:.6rem 1rem;border-radius:6px;background:#f6f8fa;border:1px solid #d0d7de}
.cards{display:flex;flex-wrap:wrap;gap:.8rem}
.card{border:1px solid #d0d7de;border-radius:6px;padding:.5rem .8rem;min-width:12rem}
.card h3{margin:.1rem 0 .4rem;font-size:1rem}.card ul{margin:0;padding-left:1.1rem}
pre{background:#f6f8fa;padding:.8rem;overflow:auto}
"""


def _table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    body = "".join(
        "<tr>" + "".join(f"<td>{escape(str(cell))}</td>" for cell in row) + "</tr>" for row in rows
    )
    if not body:
        return "<p><em>none</em></p>"
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _policy(report: Report) -> str:
    rows = []
    for p in report.policy:
        status = escape(p.status + (f" ({p.note})" if p.note else ""))
        findings = "<br>".join(escape(v) for v in p.violations) or "-"
        level = "mandatory" if p.mandatory else "advisory"
        rows.append(
            f"<tr><td>{escape(p.policy)}</td><td>{level}</td>"
            f'<td class="{escape(p.status)}">{status}</td><td>{findings}</td></tr>'
        )
    return (
        "<table><thead><tr><th>policy</th><th>level</th><th>verdict</th><th>findings</th></tr>"
        f"</thead><tbody>{''.join(rows)}</tbody></table>"
    )


def _diagram(report: Report) -> str:
    groups: dict[str, list[str]] = {}
    for resource in report.resources:
        groups.setdefault(resource["component"], []).append(
            f"{resource['type'].rsplit(':', 1)[-1]}: {resource['name']}"
        )
    cards = "".join(
        f'<div class="card"><h3>{escape(component)}</h3><ul>'
        + "".join(f"<li>{escape(item)}</li>" for item in items)
        + "</ul></div>"
        for component, items in sorted(groups.items())
    )
    return (
        f'<div class="cards">{cards}</div>'
        "<details><summary>Mermaid source (rendered in the Markdown report on GitHub)</summary>"
        f"<pre>{escape(report.diagram)}</pre></details>"
    )


def _network(report: Report) -> str:
    net = report.network
    return (
        f"<p>Mode: <strong>{escape(net['mode'])}</strong>; VPC: "
        f"{escape(', '.join(net['networks']) or '-')}; Shared VPC host: "
        f"{escape(net['shared_vpc_host'])}</p>"
        + _table(
            ["subnet", "CIDR", "purpose", "private Google access", "flow logs"],
            [
                [s["name"], s["cidr"], s["purpose"], s["private_google_access"], s["flow_logs"]]
                for s in net["subnets"]
            ],
        )
        + _table(
            ["NAT", "IP allocation", "ranges"],
            [[n["name"], n["ip_allocation"], n["ranges"]] for n in net["nat"]],
        )
        + _table(
            ["network attachment", "connection preference", "exported as"],
            [[a["name"], a["connection_preference"], a["exported_as"]] for a in net["attachment"]],
        )
        + _table(
            ["reserved range", "CIDR", "purpose"],
            [[r["name"], r["cidr"], r["purpose"]] for r in net["peering_ranges"]],
        )
        + _table(
            ["firewall", "direction", "action", "sources", "priority"],
            [
                [f["name"], f["direction"], f["action"], f["sources"], f["priority"]]
                for f in net["firewall"]
            ],
        )
    )


def _diff(diff: StackDiff) -> str:
    return (
        f"<h2>{escape(diff.left)} vs {escape(diff.right)}</h2>"
        + _table(
            ["setting", "key", diff.left, diff.right],
            [[c.resource, c.key, c.left, c.right] for c in diff.settings],
        )
        + _table(["type", diff.left, diff.right], diff.counts)
        + f"<p>Only in {escape(diff.left)}: {escape(', '.join(diff.only_left) or '-')}</p>"
        + f"<p>Only in {escape(diff.right)}: {escape(', '.join(diff.only_right) or '-')}</p>"
        + _table(
            ["resource", "input", diff.left, diff.right],
            [[c.resource, c.key, c.left, c.right] for c in diff.changed],
        )
    )


def to_html(report: Report, diff: StackDiff | None = None) -> str:
    failures = report.mandatory_failures
    verdict = (
        f'<span class="fail">{failures} mandatory policy violation(s): do not apply.</span>'
        if failures
        else '<span class="pass">All mandatory policies pass.</span>'
    )
    title = f"vtx review: stack {report.stack} ({report.environment or 'environment unknown'})"
    sections = [
        f"<h1>{escape(title)}</h1>",
        f'<p class="verdict">Source: {escape(report.origin)}. {verdict}</p>',
        "<h2>Resources</h2>",
        _table(
            ["component", "type", "count"], [[c.component, c.type, c.count] for c in report.counts]
        ),
        "<h2>Network</h2>",
        _network(report),
        "<h2>IAM</h2>",
        _table(
            ["principal", "role", "on", "resource", "declared by"],
            [[r.principal, r.role, r.resource_kind, r.resource, r.declared_by] for r in report.iam],
        ),
        "<h2>Buckets</h2>",
        _table(
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
        "<h2>Quotas requested</h2>",
        _table(
            ["quota id", "service", "region", "preferred value"],
            [
                [q["quota_id"], q["service"], q["region"], q["preferred_value"]]
                for q in report.quotas
            ],
        ),
        "<h2>Secrets (names only)</h2>",
        _table(
            ["secret", "replication", "versions in state"],
            [[s["secret_id"], s["replication"], s["versions_in_state"]] for s in report.secrets],
        ),
        "<h2>Policies</h2>",
        _policy(report),
        "<h2>Diagram</h2>",
        _diagram(report),
    ]
    if diff is not None:
        sections.append(_diff(diff))
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title><style>{_CSS}</style></head>"
        f"<body>{''.join(sections)}</body></html>\n"
    )
