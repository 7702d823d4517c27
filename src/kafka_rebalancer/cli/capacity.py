"""`kafka-rebalancer capacity --config C`: the growth forecast per pool, from the cluster now and the log sizes
Prometheus holds (README: Capacity forecast). It plans no move and writes no run."""

from __future__ import annotations

import time
from typing import Any

import pandas as pd
from rich.console import Console

from kafka_rebalancer.cli.tables import plain_table
from kafka_rebalancer.config import RebalancerConfig
from kafka_rebalancer.forecast import CapacityForecast, forecast_capacity, forecast_prometheus
from kafka_rebalancer.forecast.projection import PROJECTED_DAYS
from kafka_rebalancer.forecast.summary import days_left, is_short
from kafka_rebalancer.kafka_admin import KafkaConnection
from kafka_rebalancer.model.units import human_bytes
from kafka_rebalancer.plan.rightsize import PoolRightsizing, rightsize
from kafka_rebalancer.snapshot import capture
from kafka_rebalancer.snapshot.prometheus_http import prometheus_http

UNFORECAST_SHOWN = 20  # topics without a trend, listed with their reason


def capacity_command(config: RebalancerConfig, connection: KafkaConnection, console: Console) -> int:
    client = prometheus_http(forecast_prometheus(config), str(config.source_file))  # before the cluster is asked
    tables, _ = capture(config, connection)
    forecast = forecast_capacity(config, tables, client, time.time())
    print_forecast(console, forecast)
    print_rightsizing(console, rightsize(config, tables, forecast.growth, forecast.threshold, forecast.horizon_days),
                      forecast.horizon_days)
    return 0


def print_forecast(console: Console, forecast: CapacityForecast) -> None:
    for note in forecast.notes:
        console.print(f"note: {note}")
    for pool in forecast.pools.to_dict("records"):
        _pool(console, pool, forecast)
    _without_trend(console, forecast.growth)


def _pool(console: Console, pool: dict[str, Any], forecast: CapacityForecast) -> None:
    """One POOL_FORECAST row and its brokers' BROKER_FORECAST rows."""
    name = pool["broker_pool"] if isinstance(pool["broker_pool"], str) else None
    capacity = float(pool["disk_capacity_bytes"])
    console.print(f"\npool {name or '(no pool)'}: {pool['n_brokers']} brokers, "
                  f"disk {_of(pool['used_bytes'], capacity)}, growing {human_bytes(pool['growth_bytes_per_day'])}"
                  f"/day, threshold {forecast.threshold:.0%}")
    console.print("  projected: " + ", ".join(f"+{d}d {_of(pool[f'used_{d}d_bytes'], capacity)}"
                                              for d in PROJECTED_DAYS))
    within = f"not within the horizon ({forecast.horizon_days} days)"
    first = pool["days_to_first_broker"]
    console.print("  first broker over the threshold: " + (
        within if pd.isna(first) else f"broker {pool['first_broker']} in {first:.1f} days"))
    total = pool["days_to_pool_total"]
    console.print("  pool total over the threshold: " + (within if pd.isna(total) else f"in {total:.1f} days"))
    soonest = days_left(first, total)
    if is_short(soonest, forecast.warning_days):
        console.print(f"  SHORT: over the threshold in {soonest:.1f} days, under forecast.warning_days "
                      f"({forecast.warning_days})")
    if pool["unforecast_bytes"]:
        console.print(f"  {human_bytes(pool['unforecast_bytes'])} in topics without a trend, counted as not growing")
    brokers = forecast.brokers[forecast.brokers["broker_pool"].fillna("") == (name or "")]
    table = plain_table(console, None, ["broker", "used", "growth/day", *(f"+{d}d" for d in PROJECTED_DAYS),
                                        "over threshold in"])
    for b in brokers.sort_values("broker_id").to_dict("records"):
        cap = float(b["disk_capacity_bytes"])
        days = b["days_to_threshold"]
        table.add_row(str(b["broker_id"]), _of(b["used_bytes"], cap), human_bytes(b["growth_bytes_per_day"]),
                      *(_of(b[f"used_{d}d_bytes"], cap) for d in PROJECTED_DAYS),
                      "-" if pd.isna(days) else f"{days:.1f} days")
    console.print(table)


def print_rightsizing(console: Console, pools: list[PoolRightsizing], horizon_days: int) -> None:
    """Per pool, the brokers to add (or that it could give up) to hold the horizon, as the planner found them."""
    console.print(f"\nrightsizing (the planner on the cluster as forecast at +{horizon_days} days):")
    for pool in pools:
        console.print(f"  pool {pool.broker_pool}: {_rightsizing_line(pool)}")


def _rightsizing_line(pool: PoolRightsizing) -> str:
    if pool.note is not None:
        return pool.note
    tried = "; ".join(f"{len(t.added)} added: {'holds' if t.holds else t.why_not}" for t in pool.trials)
    if pool.brokers_to_add is None:
        return (f"more than {len(pool.trials[-1].added)} brokers of {human_bytes(pool.added_capacity_bytes)} "
                f"(the totals ask for at least {pool.lower_bound}; the planner: {tried})")
    held = pool.trials[-1]
    if pool.brokers_to_add:
        return (f"add {pool.brokers_to_add} brokers of {human_bytes(pool.added_capacity_bytes)} (the totals ask for "
                f"at least {pool.lower_bound}; the planner: {tried}); the plan moves {human_bytes(held.moved_bytes)},"
                f" its fullest broker at {held.peak_disk_usage:.0%}")
    line = f"holds without a broker more (a rebalance moves {human_bytes(held.moved_bytes)}, its fullest broker at " \
           f"{held.peak_disk_usage:.0%})"
    if pool.give_up and pool.give_up_trial is not None:
        line += (f"; could give up brokers {', '.join(map(str, pool.give_up))} (a drain moves "
                 f"{human_bytes(pool.give_up_trial.moved_bytes)}, its fullest broker at "
                 f"{pool.give_up_trial.peak_disk_usage:.0%})")
    return line


def _without_trend(console: Console, growth: pd.DataFrame) -> None:
    missing = growth[growth["growth_bytes_per_day"].isna()]
    if missing.empty:
        return
    console.print(f"\n{len(missing)} topics without a trend (counted as not growing):")
    for row in missing.head(UNFORECAST_SHOWN).itertuples():
        console.print(f"  {row.topic}: {row.reason}")
    if len(missing) > UNFORECAST_SHOWN:
        console.print(f"  ... and {len(missing) - UNFORECAST_SHOWN} more")


def _of(used: float, capacity: float) -> str:
    return f"{human_bytes(used)} of {human_bytes(capacity)} ({used / capacity:.0%})" if capacity > 0 else \
        f"{human_bytes(used)} (capacity unknown)"
