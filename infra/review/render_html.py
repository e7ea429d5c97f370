"""The review as one self-contained HTML page: inline CSS and SVG, no script, no external resource.

The diagram is drawn here as two inline SVG pictures (``pictures``: the job's network path, and
who may do what on which resource), not by Mermaid: its renderer is a ~3 MB JavaScript bundle
the page would have to inline. The Mermaid source (which the Markdown report renders on GitHub)
stays in a fold for those who paste it into another tool.
"""

from __future__ import annotations

from html import escape

from infra.review.builder import Report
from infra.review.diff import StackDiff
from infra.review.pictures import access_svg, network_svg
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
figure{margin:.8rem 0 1.4rem}figcaption{font-weight:600;margin-bottom:.4rem}
svg.diagram{display:block;max-width:100%;height:auto}
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


def _figure(caption: str, svg: str | None, absent: str) -> str:
    picture = svg if svg is not None else f"<p><em>{escape(absent)}</em></p>"
    return f"<figure><figcaption>{escape(caption)}</figcaption>{picture}</figure>"


def _diagram(report: Report) -> str:
    return (
        _figure("Network path of a job", network_svg(report), "no network declared")
        + _figure("Who may do what", access_svg(report), "no IAM grants declared")
        + "<details><summary>Mermaid source (the Markdown report renders it on GitHub; paste it "
        "into any Mermaid editor)</summary>"
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
