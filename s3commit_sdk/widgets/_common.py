"""Small helpers shared by the widgets: escaping, sizes, HTML tables and inline SVG charts.

Everything that ends up in an ``ipywidgets.HTML`` value goes through :func:`esc` first: the
HTML widget sets ``innerHTML``, so an S3 key like ``<img src=x onerror=...>`` would otherwise
run in the reader's browser.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..textformat import format_bytes as format_bytes  # re-exported for the widgets
from ..textformat import format_count as format_count
from ..textformat import format_seconds as format_seconds

BAR_COLOR = "#4c78a8"
FONT = "font-family: var(--jp-ui-font-family, sans-serif); font-size: 12px; line-height: 1.4;"
TABLE_STYLE = (
    "border-collapse: collapse; margin: 2px 0 8px 0; line-height: 1.4; "
    "font-family: var(--jp-code-font-family, monospace); font-size: 12px;"
)
CELL_STYLE = "padding: 2px 10px 2px 0; border-bottom: 1px solid #ddd; text-align: {align};"


def esc(value: Any) -> str:
    """Text as HTML: ``<``, ``>``, ``&`` and both quotes escaped; None becomes ``-``."""
    return html.escape("-" if value is None else str(value), quote=True)


def html_table(
    headers: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    numeric: Iterable[int] = (),
    max_rows: int | None = None,
    css_class: str = "",
) -> str:
    """An HTML table; every header and cell is escaped. Columns in ``numeric`` align right."""
    right = set(numeric)
    rows = list(rows)
    shown = rows if max_rows is None else rows[:max_rows]

    def cell(tag: str, index: int, value: Any) -> str:
        style = CELL_STYLE.format(align="right" if index in right else "left")
        return f'<{tag} style="{style}">{esc(value)}</{tag}>'

    head = "".join(cell("th", i, h) for i, h in enumerate(headers))
    body = "".join(
        "<tr>" + "".join(cell("td", i, v) for i, v in enumerate(row)) + "</tr>" for row in shown
    )
    classes = f' class="{esc(css_class)}"' if css_class else ""
    note = ""
    if len(shown) < len(rows):
        note = f'<div style="{FONT}">... and {len(rows) - len(shown)} more</div>'
    return (
        f'<table{classes} style="{TABLE_STYLE}">'
        + (f"<thead><tr>{head}</tr></thead>" if headers else "")
        + f"<tbody>{body}</tbody></table>{note}"
    )


def svg_bar_chart(
    labels: Sequence[str],
    values: Sequence[float],
    *,
    title: str,
    formatter: Callable[[float], str] = str,
    width: int = 420,
    max_bars: int = 25,
) -> str:
    """A horizontal bar chart as inline SVG (no plotting library needed); labels escaped."""
    pairs = list(zip(labels, values, strict=True))[:max_bars]
    bar_h, gap, label_w, value_w, top = 16, 4, 150, 80, 22
    plot_w = max(60, width - label_w - value_w)
    height = top + len(pairs) * (bar_h + gap) + 4
    peak = max((v for _, v in pairs), default=0) or 1
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'role="img" aria-label="{esc(title)}" style="{FONT}">',
        f'<text x="0" y="14" font-weight="bold" fill="currentColor">{esc(title)}</text>',
    ]
    for i, (label, value) in enumerate(pairs):
        y = top + i * (bar_h + gap)
        w = max(1.0, plot_w * value / peak) if value > 0 else 0
        short = label if len(label) <= 22 else label[:21] + "…"
        parts.append(
            f"<g><title>{esc(label)}: {esc(formatter(value))}</title>"
            f'<text x="{label_w - 6}" y="{y + 12}" text-anchor="end" '
            f'fill="currentColor">{esc(short)}</text>'
            f'<rect x="{label_w}" y="{y}" width="{w:.1f}" height="{bar_h}" '
            f'fill="{BAR_COLOR}"/>'
            f'<text x="{label_w + w + 4:.1f}" y="{y + 12}" '
            f'fill="currentColor">{esc(formatter(value))}</text></g>'
        )
    if not pairs:
        parts.append(f'<text x="0" y="{top + 12}" fill="currentColor">no data</text>')
    parts.append("</svg>")
    return "".join(parts)


def histogram(values: Sequence[float], bins: int = 10) -> list[tuple[float, float, int]]:
    """Equal-width bins ``(low, high, count)`` over the values (one bin if all are equal)."""
    if not values:
        return []
    low, high = min(values), max(values)
    if math.isclose(low, high):
        return [(low, high, len(values))]
    bins = max(1, min(bins, len(values)))
    step = (high - low) / bins
    counts = [0] * bins
    for v in values:
        counts[min(bins - 1, int((v - low) / step))] += 1
    return [(low + i * step, low + (i + 1) * step, c) for i, c in enumerate(counts)]


class WidgetWrapper:
    """An object that displays as its ``widget`` (an ipywidgets container)."""

    widget: Any

    def _repr_mimebundle_(self, **kwargs: Any):
        bundle = self.widget._repr_mimebundle_(**kwargs)
        if isinstance(bundle, tuple):  # (data, metadata)
            bundle[0]["text/plain"] = self.text()
        elif isinstance(bundle, dict):
            bundle["text/plain"] = self.text()
        return bundle

    def text(self) -> str:
        """A plain-text rendering, for front ends without widgets (and saved notebooks)."""
        return repr(self)

    def close(self) -> None:
        """Close the widget and every widget inside it (frees their comm channels)."""
        _close_tree(self.widget)


def _close_tree(widget: Any) -> None:
    for child in getattr(widget, "children", ()):
        _close_tree(child)
    widget.close()
