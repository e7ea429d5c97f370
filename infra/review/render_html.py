"""The review as one self-contained HTML page: inline CSS, no script, no external resource.

Without a script the Mermaid diagram cannot be drawn in the page (its renderer is a JavaScript
library we would have to inline); the page shows the resources as one card per component, and
the Mermaid source (which the Markdown report renders on GitHub) in a fold. Who may do what is
the IAM section's table.
"""

from __future__ import annotations

from html import escape

from infra.review.builder import Report
from infra.review.diff import StackDiff
from infra.review.sections import (
    Cell,
    Code,
    Paragraph,
    Section,
    Strong,
    Styled,
    Table,
    diff_section,
    report_sections,
    verdict,
)

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


def _inline(text: str) -> str:
    if isinstance(text, Strong):
        return f"<strong>{escape(text)}</strong>"
    if isinstance(text, Code):
        return f"<code>{escape(text)}</code>"
    return escape(text)


def _cell(cell: Cell) -> str:
    if isinstance(cell, Styled):
        return f'<td class="{escape(cell.css_class)}">{escape(cell.text)}</td>'
    if isinstance(cell, tuple):
        return "<td>" + "<br>".join(escape(line) for line in cell) + "</td>"
    if isinstance(cell, str):
        return f"<td>{_inline(cell)}</td>"
    return f"<td>{escape(str(cell))}</td>"


def _table(table: Table) -> str:
    if not table.rows:
        return "<p><em>none</em></p>"
    head = "".join(f"<th>{escape(h)}</th>" for h in table.headers)
    body = "".join("<tr>" + "".join(_cell(c) for c in row) + "</tr>" for row in table.rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _block(block: Table | Paragraph) -> str:
    if isinstance(block, Table):
        return _table(block)
    return "<p>" + "".join(_inline(part) for part in block.parts) + "</p>"


def _section(section: Section) -> str:
    return f"<h2>{escape(section.title)}</h2>" + "".join(_block(b) for b in section.blocks)


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


def to_html(report: Report, diff: StackDiff | None = None) -> str:
    line = verdict(report)
    title = f"vtx review: stack {report.stack} ({report.environment or 'environment unknown'})"
    sections = [
        f"<h1>{escape(title)}</h1>",
        f'<p class="verdict">Source: {escape(report.origin)}. '
        f'<span class="{escape(line.css_class)}">{escape(line.text)}</span></p>',
        *(_section(section) for section in report_sections(report)),
        "<h2>Diagram</h2>",
        _diagram(report),
    ]
    if diff is not None:
        sections.append(_section(diff_section(diff)))
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title><style>{_CSS}</style></head>"
        f"<body>{''.join(sections)}</body></html>\n"
    )
