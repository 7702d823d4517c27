"""Plain-text tables for task logs and terminals: per pool, each broker's disk and replica count with the band
and whether the broker is inside it; and per pool the topic spread before and after (`spread_table`)."""

from __future__ import annotations

from typing import Any

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


SPREAD_HEADER = ["pool", "kind", "over target before -> after", "over cap after", "worst before", "worst after"]


def spread_cells_text(kind_figures: dict[str, Any]) -> list[str]:
    """One pool's figures of one kind (`spread_violations.spread_figures`) as the cells after the pool and kind of
    SPREAD_HEADER: the worst (topic, broker) as "topic on broker b: held (target t)"."""
    def worst(cell: dict[str, Any] | None) -> str:
        if cell is None:
            return "-"
        return f"{cell['topic']} on broker {cell['broker_id']}: {cell['held']} (target {cell['target']})"

    f = kind_figures
    return [f"{f['over_target_before']} -> {f['over_target_after']}", str(f["over_cap_after"]),
            worst(f["worst_before"]), worst(f["worst_after"])]


def spread_pool_line(kinds: dict[str, dict[str, Any]]) -> str:
    """One pool's topic spread in a line (the approval body): per kind, the (topic, broker) cells over the topic's
    target before -> after and how many end above their cap."""
    return "; ".join(f"{kind}: {f['over_target_before']} -> {f['over_target_after']} over target, "
                     f"{f['over_cap_after']} over cap" for kind, f in kinds.items())


def spread_table(figures: dict[str, dict[str, dict[str, Any]]]) -> str:
    """Per pool and kind (replicas, leaders), the topic spread before and after: how many (topic, broker) hold more
    than the topic's target (ceil(share) + margin), how many end above their cap (max(held before, target)), and the
    worst cell before and after."""
    rows = [[pool, kind, *spread_cells_text(kinds[kind])] for pool, kinds in sorted(figures.items())
            for kind in kinds]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(SPREAD_HEADER)]
    lines = ["topic spread: per topic and broker, against the topic's target ceil(share) + margin",
             "  ".join(h.ljust(w) for h, w in zip(SPREAD_HEADER, widths, strict=True)),
             "  ".join("-" * w for w in widths)]
    return "\n".join([*lines, *("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows), ""])
