"""`FitTable`: every table the CLI prints, fitted to the terminal (rows as ``header: value``
lines where the columns cannot fit)."""

from __future__ import annotations

import copy

from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.padding import Padding
from rich.table import Table
from rich.text import Text


class FitTable(Table):
    """Every table the CLI prints (a rich ``Table`` in all else). Columns shrink, the widest
    first, never below their longest word (a no-wrap column: its longest line). Where the console
    is too narrow for that, a table with headers prints each row as ``header: value`` lines
    instead of folding cells into columns one or two characters wide
    (``custom_model_training_cpus`` down a dozen lines); a table without headers is such lines
    already, and keeps its grid (a word longer than its value column folds)."""

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        widths = self.fitted_widths(console, options)
        if widths is None and not self.show_header:
            # Already `field: value` lines: the field keeps its width, a longer word folds.
            yield from Table.__rich_console__(self, console, options)
            return
        if widths is None:
            yield from self._vertical(console)
            return
        fitted = copy.copy(self)
        fitted.columns = [copy.copy(column) for column in self.columns]
        for index, (column, width) in enumerate(zip(fitted.columns, widths, strict=True)):
            column.width = width - self._get_padding_width(index)
        yield from Table.__rich_console__(fitted, console, options)

    def fitted_widths(self, console: Console, options: ConsoleOptions) -> list[int] | None:
        """Each column's width (padding included) within the console, no word broken and no
        no-wrap column's line: the widest shrink first, none below its longest word. None when
        the columns' longest words alone are wider than the console."""
        unbounded = options.update_width(1_000_000)
        measured = [self._measure_column(console, unbounded, column) for column in self.columns]
        widths = [m.maximum for m in measured]
        least = [
            m.maximum if column.no_wrap else m.minimum
            for column, m in zip(self.columns, measured, strict=True)
        ]
        room = options.max_width - self._extra_width
        if not self.columns or sum(least) > room:
            return None
        for _ in range(sum(widths) - room):
            widest = max(
                (i for i, width in enumerate(widths) if width > least[i]),
                key=lambda i: widths[i],
            )
            widths[widest] -= 1
        return widths

    def _vertical(self, console: Console) -> RenderResult:
        if self.title:
            yield _styled(console, self.title, self.title_style or "table.title")
        headers = [str(c.header) for c in self.columns]
        for index, row in enumerate(self.rows):
            if index:
                yield Text()
            cells = [column._cells[index] for column in self.columns]
            yield from _vertical_row(console, headers, cells, row.style or "")
        if self.caption:
            yield Text()
            yield _styled(console, self.caption, self.caption_style or "table.caption")


def _styled(console: Console, text: RenderableType, style: str) -> RenderableType:
    return console.render_str(text, style=style) if isinstance(text, str) else text


def _vertical_row(
    console: Console, headers: list[str], cells: list[RenderableType], style: str
) -> RenderResult:
    """One row as lines: ``header: value``; a value of several lines below its header, indented."""
    values = [console.render_str(c) if isinstance(c, str) else c for c in cells]
    for header, value in zip(headers, values, strict=True):
        if isinstance(value, Text) and not value.plain:
            continue
        key = Text(f"{header}:" if header else "", style="bold")
        if isinstance(value, Text) and "\n" not in value.plain:
            yield Text.assemble(key, " " if header else "", value, style=style)
        elif isinstance(value, Text):
            if header:
                yield key
            yield from (Text.assemble("  ", line, style=style) for line in value.split("\n"))
        else:
            if header:
                yield key
            yield Padding(value, (0, 0, 0, 2), style=style, expand=False)
