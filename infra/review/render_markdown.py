"""The review as Markdown, fit for a PR comment (GitHub renders the Mermaid block)."""

from __future__ import annotations

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


def _inline(text: str) -> str:
    if isinstance(text, Strong):
        return f"**{text}**"
    if isinstance(text, Code):
        return f"`{text}`"
    return text


def _cell(cell: Cell) -> str:
    if isinstance(cell, Styled):
        text = cell.text
    elif isinstance(cell, tuple):
        text = "<br>".join(cell)  # GitHub breaks the line inside a table cell
    elif isinstance(cell, str):
        text = _inline(cell)
    else:
        text = str(cell)
    return text.replace("|", "\\|").replace("\n", " ")


def _table(table: Table) -> str:
    if not table.rows:
        return "_none_"
    lines = ["| " + " | ".join(table.headers) + " |", "|" + "---|" * len(table.headers)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in table.rows]
    return "\n".join(lines)


def _block(block: Table | Paragraph) -> str:
    if isinstance(block, Table):
        return _table(block)
    return "".join(_inline(part) for part in block.parts)


def _section(section: Section) -> str:
    return "\n\n".join([f"## {section.title}", *(_block(b) for b in section.blocks)])


def verdict_line(report: Report) -> str:
    return f"**{verdict(report).text}**"


def to_markdown(report: Report, diff: StackDiff | None = None) -> str:
    environment = report.environment or "environment unknown"
    parts = [
        f"# vtx review: stack `{report.stack}` ({environment})",
        f"Source: {report.origin}. {verdict_line(report)}",
        *(_section(section) for section in report_sections(report)),
        f"## Diagram\n\n```mermaid\n{report.diagram}\n```",
    ]
    if diff is not None:
        parts.append(_section(diff_section(diff)))
    return "\n\n".join(parts) + "\n"
