"""Growth forecasts (issue 55): each topic's log size history from Prometheus (history.py), a robust trend per
topic (trend.py), spread onto replicas and projected per broker and pool (projection.py). Everything after the
query is pure, on pandas tables with the schemas of model/schemas.py (TOPIC_HISTORY -> TOPIC_GROWTH ->
BROKER_FORECAST, POOL_FORECAST), so the nightly run's Spark step can call the same functions per partition later.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from kafka_rebalancer.config import PrometheusSettings, RebalancerConfig
from kafka_rebalancer.errors import ConfigError
from kafka_rebalancer.forecast.projection import broker_forecast, pool_forecast
from kafka_rebalancer.forecast.trend import topic_growth
from kafka_rebalancer.model.resources import RESOURCES
from kafka_rebalancer.snapshot.build import SnapshotTables
from kafka_rebalancer.snapshot.log_size_history import STEP_S, query_history
from kafka_rebalancer.snapshot.prometheus import RangeQueries

__all__ = ["CapacityForecast", "disk_threshold", "forecast_capacity", "forecast_prometheus"]


@dataclass(frozen=True)
class CapacityForecast:
    growth: pd.DataFrame  # TOPIC_GROWTH
    brokers: pd.DataFrame  # BROKER_FORECAST
    pools: pd.DataFrame  # POOL_FORECAST
    notes: list[str]  # of the history as a whole (none, or shorter than asked)
    threshold: float
    horizon_days: int
    warning_days: int | None


def disk_threshold(config: RebalancerConfig) -> float:
    """The share of a broker's disk it may fill: resources.disk.capacity_threshold, else the disk's default."""
    if "disk" in config.resources:
        threshold = config.capacity_threshold("disk")
    else:
        threshold = RESOURCES["disk"].default_capacity_threshold
    assert threshold is not None  # the disk resource has a default
    return threshold


def forecast_prometheus(config: RebalancerConfig) -> PrometheusSettings:
    """metrics.prometheus, where the log size history is read; checked before the cluster is contacted."""
    if config.metrics.prometheus is None:
        raise ConfigError(str(config.source_file), "metrics.prometheus", "not set; the capacity forecast reads "
                                                                          "each topic's log size history from "
                                                                          "Prometheus, expected at least {url: ...}")
    return config.metrics.prometheus


def forecast_capacity(config: RebalancerConfig, tables: SnapshotTables, client: RangeQueries,
                      now: float) -> CapacityForecast:
    """The forecast of the cluster in `tables` from the log sizes Prometheus holds up to `now`."""
    prometheus = forecast_prometheus(config)
    settings = config.forecast
    live = tables.brokers.loc[tables.brokers["alive"], "broker_id"].astype(int).tolist()
    history = query_history(client, prometheus, settings, live, now)
    growth = topic_growth(history.samples, STEP_S, settings.history_days, tables.partitions["topic"].unique())
    threshold = disk_threshold(config)
    per_broker = broker_forecast(tables.brokers, tables.replicas, tables.partitions, growth, threshold,
                                 settings.horizon_days)
    return CapacityForecast(growth, per_broker, pool_forecast(per_broker, threshold, settings.horizon_days),
                            history.notes, threshold, settings.horizon_days, settings.warning_days)
