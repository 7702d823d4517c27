"""Plain-text tables for task logs and terminals: per pool, each broker's disk and replica count with the band
and whether the broker is inside it."""

from __future__ import annotations

import pandas as pd

from kafka_rebalancer.model.resources import RESOURCES
from kafka_rebalancer.model.units import human_bytes


def _value(resource: str, row: pd.Series) -> str:
    unit = RESOURCES[resource].unit
    if RESOURCES[resource].is_count:
        return f"{row['load']:.0f}"
    load = human_bytes(row["load"]) + ("/s" if unit == "bytes/s" else "") if unit.startswith("bytes") \
        else f"{row['load']:.2f} {unit}"
    return f"{load} ({row['usage']:.1%})"


def _band(resource: str, row: pd.Series) -> str:
    """Counts in whole items; the others in usage (a fraction of capacity), as percentages."""
    if RESOURCES[resource].is_count:
        return f"{row['lower']:.0f}..{row['upper']:.0f}"
    return f"{row['lower']:.1%}..{row['upper']:.1%}"


def _inside(row: pd.Series | None) -> str:
    if row is None:
        return "-"
    if not row["counted"]:
        return "n/a"
    return "yes" if row["inside"] else "NO"


def band_table(status: pd.DataFrame, after: pd.DataFrame | None = None) -> str:
    """One block per pool; with `after`, each cell reads `before -> after`. Both come from band_status()."""
    resources = [r for r in ("disk", "replica_count") if r in set(status["resource"])]
    resources += sorted(set(status["resource"]) - set(resources))
    lines: list[str] = []
    for pool in sorted(status["broker_pool"].unique()):
        header = ["broker", "rack"]
        for r in resources:
            header += [r, f"{r} band", f"{r} in band"]
        rows = []
        pool_rows = status[status["broker_pool"] == pool]
        for broker_id in sorted(pool_rows["broker_id"].unique()):
            b = pool_rows[pool_rows["broker_id"] == broker_id].set_index("resource")
            first = b.iloc[0]
            cells = [str(broker_id) + ("" if first["alive"] else " (dead)"), str(first["rack"] or "-")]
            for r in resources:
                before = b.loc[r] if r in b.index else None
                post = None
                if after is not None:
                    match = after[(after["broker_id"] == broker_id) & (after["resource"] == r)]
                    post = match.iloc[0] if len(match) else None
                if before is None:
                    cells += ["-", "-", "-"]
                    continue
                value = _value(r, before) + (f" -> {_value(r, post)}" if post is not None else "")
                band = _band(r, post if post is not None else before)
                inside = _inside(before) + (f" -> {_inside(post)}" if after is not None else "")
                cells += [value, band, inside]
            rows.append(cells)
        widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
        lines.append(f"pool {pool}")
        lines.append("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
        lines.append("  ".join("-" * w for w in widths))
        lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
        lines.append("")
    return "\n".join(lines)
