"""What a forecast says, as the run keeps it (`forecast.json` of the run's forecast stage) and as people read it:
per pool its use now and projected, the days until its first broker and its total cross the disk threshold, whether
that is short of `forecast.warning_days`; the topics without a trend with their reasons; and what the history
lacked. Plain JSON (no NaN: null is "not within the horizon")."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from kafka_rebalancer.forecast.projection import PROJECTED_DAYS
from kafka_rebalancer.model.units import human_bytes

TOPICS_LISTED = 20  # topics without a trend (and topics with a note) named with their reason


def days_left(first_broker_days: float | None, pool_total_days: float | None) -> float | None:
    """The sooner of the two crossings (None: neither within the horizon)."""
    return min((d for d in (first_broker_days, pool_total_days) if d is not None and not math.isnan(d)), default=None)


def is_short(days: float | None, warning_days: int | None) -> bool:
    return warning_days is not None and days is not None and days < warning_days


def forecast_summary(growth: pd.DataFrame, pools: pd.DataFrame, notes: list[str], threshold: float,
                     horizon_days: int, warning_days: int | None, history: dict[str, Any]) -> dict[str, Any]:
    """The forecast made from TOPIC_GROWTH and POOL_FORECAST; `history`: what the snapshot said of its history."""
    pool_rows = []
    for row in pools.to_dict("records"):
        row = {k: _plain(v) for k, v in row.items()}
        row["days_left"] = days_left(row["days_to_first_broker"], row["days_to_pool_total"])
        row["short"] = is_short(row["days_left"], warning_days)
        pool_rows.append(row)
    without = growth[growth["growth_bytes_per_day"].isna()]
    noted = growth[growth["note"].notna()]
    return {"made": True, "notes": list(notes), "threshold": threshold, "horizon_days": horizon_days,
            "warning_days": warning_days, "history": history, "pools": pool_rows,
            "topics": {"with_trend": int(len(growth) - len(without)), "without_trend": len(without),
                       "without_trend_listed": [{"topic": t, "reason": r} for t, r in zip(
                           without["topic"].head(TOPICS_LISTED), without["reason"].head(TOPICS_LISTED), strict=True)],
                       "noted": len(noted),
                       "noted_listed": [{"topic": t, "note": n} for t, n in zip(
                           noted["topic"].head(TOPICS_LISTED), noted["note"].head(TOPICS_LISTED), strict=True)]}}


def no_forecast(history: dict[str, Any]) -> dict[str, Any]:
    """No forecast: the history's notes say why."""
    return {"made": False, "notes": list(history.get("notes") or ["no log size history"]), "history": history,
            "pools": []}


def pool_line(pool: dict[str, Any], horizon_days: int, warning_days: int | None) -> str:
    """One pool's forecast in a sentence (the plan's task log, `show`)."""
    capacity = float(pool["disk_capacity_bytes"])
    name = pool["broker_pool"] or "(no pool)"
    projected = ", ".join(f"+{d}d {share(pool[f'used_{d}d_bytes'], capacity)}" for d in PROJECTED_DAYS)
    first, total = pool["days_to_first_broker"], pool["days_to_pool_total"]
    crossing = (f"first broker over {pool['threshold']:.0%} in {first:.1f} days (broker {pool['first_broker']})"
                if first is not None else f"no broker over {pool['threshold']:.0%} within {horizon_days} days")
    crossing += f", the pool's total in {total:.1f} days" if total is not None else ", nor the pool's total"
    short = (f"; SHORT: under forecast.warning_days ({warning_days})"
             if is_short(pool.get("days_left"), warning_days) else "")
    return (f"pool {name}: disk {share(pool['used_bytes'], capacity)} used, growing "
            f"{human_bytes(pool['growth_bytes_per_day'])}/day; {projected}; {crossing}{short}")


def share(used: float, capacity: float) -> str:
    return f"{used / capacity:.0%}" if capacity > 0 else human_bytes(used)


def _plain(value: Any) -> Any:
    """A table cell as JSON: NaN and NA as null, numpy numbers as Python's."""
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return None
    return value.item() if hasattr(value, "item") else value


def capacity_text(facts: dict[str, Any] | None) -> str:
    """The forecast in a few words (the runs list): the pool soonest over the threshold, else that none is within
    the horizon, else that there is no forecast (its notes say why)."""
    if facts is None:
        return "-"
    if not facts.get("made"):
        return "no forecast"
    crossing = [p for p in facts["pools"] if p.get("days_left") is not None]
    if not crossing:
        return f"no pool over {facts['threshold']:.0%} within {facts['horizon_days']} d"
    pool = min(crossing, key=lambda p: p["days_left"])
    return (f"{pool['broker_pool'] or '(no pool)'} over {facts['threshold']:.0%} in {pool['days_left']:.0f} d"
            + (" (SHORT)" if pool.get("short") else ""))
