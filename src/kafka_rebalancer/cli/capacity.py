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
from kafka_rebalancer.snapshot import capture
from kafka_rebalancer.snapshot.prometheus_http import prometheus_http

UNFORECAST_SHOWN = 20  # topics without a trend, listed with their reason


def capacity_command(config: RebalancerConfig, connection: KafkaConnection, console: Console) -> int:
    client = prometheus_http(forecast_prometheus(config), str(config.source_file))  # before the cluster is asked
    tables, _ = capture(config, connection)
    print_forecast(console, forecast_capacity(config, tables, client, time.time()))
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
