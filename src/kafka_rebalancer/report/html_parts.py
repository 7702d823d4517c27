"""The report page's HTML building blocks: sections, sortable tables and their cells (numbers, shares, bytes, an
amount of a resource), escaped text and JSON blocks; shared by render.py and the sections drawn apart from it."""

from __future__ import annotations

import html
import json
import math
from collections.abc import Callable, Sequence
from typing import Any

from kafka_rebalancer.model.resources import RESOURCES
from kafka_rebalancer.model.units import human_bytes

Cell = str | tuple[str, float]  # text, or text and the number it sorts by


def section(name: str, title: str, body: str) -> str:
    # Prefixed: the moves table owns the plain id "moves".
    return f'<section id="section-{name}"><h2>{esc(title)}</h2>{body}</section>'


def not_run(why: str) -> str:
    return f'<p class="not-run">not run: {esc(why)}</p>'


def table(headers: Sequence[str | tuple[str, bool]], rows: list[list[Cell]], table_id: str | None = None,
           sortable: bool = False) -> str:
    """A plain table; numeric columns (header given as (name, True)) sort by the number in their cells."""
    ths = []
    for h in headers:
        name, numeric = h if isinstance(h, tuple) else (h, False)
        kind = ' data-type="number"' if numeric else ""
        ths.append(f"<th{kind}>{esc(name)}</th>")
    body = []
    for row in rows:
        cells = []
        for cell in row:
            if isinstance(cell, tuple):
                cells.append(f'<td class="num" data-value="{sort_value(cell[1])}">{esc(cell[0])}</td>')
            else:
                cells.append(f"<td>{esc(cell)}</td>")
        body.append(f"<tr>{''.join(cells)}</tr>")
    attributes = (f' id="{table_id}"' if table_id else "") + (' class="sortable"' if sortable else "")
    return f"<table{attributes}><thead><tr>{''.join(ths)}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def sort_value(value: float) -> str:
    """The number as the table script's parseFloat reads it (it knows -Infinity, not Python's -inf)."""
    value = float(value)
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return repr(value)


def json_block(name: str, value: Any) -> str:
    return f"<details><summary>{esc(name)}</summary><pre>{esc(json.dumps(value, indent=2))}</pre></details>"


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def plain(value: Any) -> str:
    return "-" if value is None else str(value)


# Missing numbers sort first: -Infinity parses in the table script as a number.
def number_cell(value: float | None) -> Cell:
    return ("-", float("-inf")) if value is None else (f"{value:,}", value)


def ratio_cell(value: float | None) -> Cell:
    return ("-", float("-inf")) if value is None else (f"{value:.2f}", value)


def share_cell(value: float | None) -> Cell:
    return ("-", float("-inf")) if value is None else (f"{value:.1%}", value)


def bytes_cell(value: float | None) -> Cell:
    return ("-", float("-inf")) if value is None else (human_bytes(value), value)


def amount_text(resource: str) -> Callable[[float | None], str]:
    """How an amount of the resource is written (the text of its cell)."""
    return lambda value: amount_cell(resource, value)[0]


def amount_cell(resource: str, value: float | None) -> Cell:
    """An amount of a resource in its unit (bytes, bytes/s, cores, a count)."""
    if value is None:
        return "-", float("-inf")
    known = RESOURCES.get(resource)
    if known is None or known.is_count:
        return f"{value:,.0f}", value
    if known.unit == "bytes":
        return human_bytes(value), value
    if known.unit == "bytes/s":
        return f"{human_bytes(value)}/s", value
    return f"{value:,.2f} {known.unit}", value
