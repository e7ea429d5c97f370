"""Boxes in layers (columns, or rows top down) joined by arrows, drawn as one inline SVG element.

The review draws two pictures: the job's network path (a chain: one box per row) and who may
do what (three columns: principals, their roles, resources; every edge joins neighbouring
columns). Neither needs a general graph layout engine (Graphviz, ELK, dagre: a binary or a
JavaScript bundle of megabytes to ship in a self-contained page): the caller fixes each layer's
order, and this module only sizes the boxes and places them, each box level with the boxes it
connects to in the layer placed before it, pushed along where it would overlap its neighbour.

Text is measured, not rendered: the SVG asks for a monospace font and sizes a box for
``_CHAR_W`` pixels a character (two for East Asian wide ones), so a box fits its text without a
browser. Every text and attribute value is escaped: names come from the user's stack config.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

_FONT_PX = 12
_CHAR_W = 0.62 * _FONT_PX  # DejaVu Sans Mono and Liberation Mono advance 0.60 em; 0.02 spare
_LINE_H = 16
_PAD = 8
_GAP_IN_LAYER = 14  # between boxes of one column (or row)
_GAP_ACROSS = 56  # between columns: room for the arrows' curves
_GAP_DOWN = 30  # between rows
_MARGIN = 10
_HEADER_H = 22
_FONTS = "DejaVu Sans Mono, Menlo, Consolas, Liberation Mono, monospace"

# kind -> (fill, stroke): the caller names a kind, this module picks its colours.
PALETTE: dict[str, tuple[str, str]] = {
    "vertex": ("#ddf4ff", "#0969da"),
    "link": ("#fbefff", "#8250df"),
    "network": ("#dafbe1", "#1a7f37"),
    "nat": ("#fff8c5", "#9a6700"),
    "outside": ("#f6f8fa", "#6e7781"),
    "closed": ("#ffebe9", "#cf222e"),
    "principal": ("#fbefff", "#8250df"),
    "roles": ("#f6f8fa", "#6e7781"),
    "resource": ("#ddf4ff", "#0969da"),
    "project": ("#fff1e5", "#bc4c00"),
}


@dataclass(frozen=True)
class Box:
    key: str
    """Identifies the box for edges; never shown."""
    title: str
    """Bold first line; "" for a box of plain lines."""
    lines: tuple[str, ...] = ()
    kind: str = "resource"
    """A key of ``PALETTE``."""

    @property
    def rows(self) -> tuple[str, ...]:
        return (self.title, *self.lines) if self.title else self.lines

    @property
    def width(self) -> float:
        return 2 * _PAD + max((text_width(text) for text in self.rows), default=0)

    @property
    def height(self) -> float:
        return 2 * _PAD + _LINE_H * max(len(self.rows), 1)


@dataclass(frozen=True)
class _Placed:
    box: Box
    x: float
    y: float
    width: float
    height: float


def text_width(text: str) -> float:
    return _CHAR_W * sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


@dataclass(frozen=True)
class _Axes:
    """Layers run along one axis (left to right, or top down); a layer's boxes along the other."""

    down: bool

    def depth(self, box: Box) -> float:
        """A box's size along the layers' axis."""
        return box.height if self.down else box.width

    def breadth(self, box: Box) -> float:
        """A box's size along a layer."""
        return box.width if self.down else box.height

    def middle(self, p: _Placed) -> float:
        """A placed box's middle along its layer."""
        return p.x + p.width / 2 if self.down else p.y + p.height / 2

    def place(self, box: Box, layer_at: float, layer_depth: float, at: float) -> _Placed:
        if self.down:
            return _Placed(box, at, layer_at, box.width, layer_depth)
        return _Placed(box, layer_at, at, layer_depth, box.height)


def _stack(
    boxes: Sequence[Box], wanted: Sequence[float | None], start: float, axes: _Axes
) -> list[float]:
    """Starts for boxes in this order: each at its wanted middle, else right after the one before,
    never overlapping it."""
    starts, floor = [], start
    for box, middle in zip(boxes, wanted, strict=True):
        at = floor if middle is None else max(floor, middle - axes.breadth(box) / 2)
        starts.append(at)
        floor = at + axes.breadth(box) + _GAP_IN_LAYER
    return starts


def _layout(
    layers: Sequence[Sequence[Box]],
    edges: Sequence[tuple[str, str]],
    origin: tuple[float, float],
    axes: _Axes,
    anchor: int | None,
) -> dict[str, _Placed]:
    """The anchor layer (by default the longest) stacked from the start; then, outwards from it,
    each box level with the mean middle of the boxes it connects to in the layer placed before."""
    depths = [max((axes.depth(box) for box in layer), default=0) for layer in layers]
    layer_at, at = [], origin[1] if axes.down else origin[0]
    for depth in depths:
        layer_at.append(at)
        at += depth + (_GAP_DOWN if axes.down else _GAP_ACROSS)
    start = origin[0] if axes.down else origin[1]

    def length(layer: Sequence[Box]) -> float:
        return sum(axes.breadth(box) + _GAP_IN_LAYER for box in layer)

    if anchor is None:
        anchor = max(range(len(layers)), key=lambda i: length(layers[i]), default=0)
    placed: dict[str, _Placed] = {}
    for index in [anchor, *range(anchor + 1, len(layers)), *range(anchor - 1, -1, -1)]:
        wanted = []
        for box in layers[index]:
            near = [placed[a] for a, b in edges if b == box.key and a in placed]
            near += [placed[b] for a, b in edges if a == box.key and b in placed]
            wanted.append(sum(map(axes.middle, near)) / len(near) if near else None)
        for box, at in zip(layers[index], _stack(layers[index], wanted, start, axes), strict=True):
            placed[box.key] = axes.place(box, layer_at[index], depths[index], at)
    return placed


def _node(p: _Placed) -> str:
    fill, stroke = PALETTE[p.box.kind]
    rows = [
        f'<text x="{p.x + _PAD:g}" y="{p.y + _PAD + _LINE_H * (i + 1) - 4:g}"'
        + (' font-weight="bold"' if i == 0 and p.box.title else "")
        + f">{escape(text)}</text>"
        for i, text in enumerate(p.box.rows)
    ]
    return (
        f'<g class="node" data-kind="{escape(p.box.kind)}">'
        f'<rect x="{p.x:g}" y="{p.y:g}" width="{p.width:g}" height="{p.height:g}" rx="6" '
        f'fill="{fill}" stroke="{stroke}"/>{"".join(rows)}</g>'
    )


def _edge(a: _Placed, b: _Placed, marker: str, axes: _Axes) -> str:
    """A curve from the end of ``a`` to the start of ``b``, leaving and arriving straight."""
    if axes.down:
        x1, y1, x2, y2 = a.x + a.width / 2, a.y + a.height, b.x + b.width / 2, b.y - 2
        bend = (y2 - y1) / 2
        controls = f"{x1:g},{y1 + bend:g} {x2:g},{y2 - bend:g}"
    else:
        x1, y1, x2, y2 = a.x + a.width, a.y + a.height / 2, b.x - 2, b.y + b.height / 2
        bend = (x2 - x1) / 2
        controls = f"{x1 + bend:g},{y1:g} {x2 - bend:g},{y2:g}"
    return (
        f'<path class="edge" d="M{x1:g},{y1:g} C{controls} {x2:g},{y2:g}" fill="none" '
        f'stroke="#57606a" marker-end="url(#{escape(marker)})"/>'
    )


def draw(
    layers: Sequence[Sequence[Box]],
    edges: Sequence[tuple[str, str]],
    label: str,
    headers: Sequence[str] = (),
    marker: str = "arrow",
    down: bool = False,
    anchor: int | None = None,
) -> str:
    """One ``<svg>`` of ``layers`` (columns, or rows when ``down``); ``headers`` name the columns;
    ``marker`` names its arrowhead and must be unique in the page (SVG ids are page-wide);
    ``anchor`` is the layer the others align to (by default the longest)."""
    axes = _Axes(down)
    top = _MARGIN + (_HEADER_H if headers and not down else 0)
    placed = _layout(layers, edges, (_MARGIN, top), axes, anchor)
    width = max((p.x + p.width for p in placed.values()), default=0) + _MARGIN
    height = max((p.y + p.height for p in placed.values()), default=top) + _MARGIN
    xs = [] if down else sorted({p.x for p in placed.values()})  # one per non-empty column
    head = [
        f'<text class="header" x="{x + _PAD:g}" y="{_MARGIN + 12}" fill="#57606a">'
        f"{escape(text)}</text>"
        for x, text in zip(xs, headers, strict=False)
    ]
    arrow = (
        f'<defs><marker id="{escape(marker)}" viewBox="0 0 10 10" refX="9" refY="5" '
        'markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
        '<path d="M0,0 L10,5 L0,10 z" fill="#57606a"/></marker></defs>'
    )
    body = [
        _edge(placed[a], placed[b], marker, axes) for a, b in edges if a in placed and b in placed
    ]
    body += [_node(p) for p in placed.values()]
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="diagram" role="img" '
        f'aria-label="{escape(label)}" viewBox="0 0 {width:g} {height:g}" width="{width:g}" '
        f'height="{height:g}" font-family="{_FONTS}" font-size="{_FONT_PX}" fill="#1f2328">'
        f"<title>{escape(label)}</title>{arrow}{''.join(head)}{''.join(body)}</svg>"
    )
