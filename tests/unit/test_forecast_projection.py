"""Topic growth spread onto partitions by size, and disk use per broker and pool projected (issue 55)."""

from __future__ import annotations

import pandas as pd
import pytest

from kafka_rebalancer.forecast.projection import broker_forecast, partition_growth, pool_forecast
from kafka_rebalancer.model.schemas import BROKER_FORECAST, POOL_FORECAST

GB = 10**9


def tables() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    brokers = pd.DataFrame({"broker_id": [1, 2, 3], "broker_pool": ["p", "p", "p"], "alive": True,
                            "excluded": False, "disk_capacity_bytes": [100 * GB] * 3})
    partitions = pd.DataFrame({"topic": ["a", "a", "b", "c"], "partition": [0, 1, 0, 0],
                               "size_bytes": [30 * GB, 10 * GB, 0, 5 * GB]})
    replicas = pd.DataFrame({"topic": ["a", "a", "a", "a", "b", "c"], "partition": [0, 0, 1, 1, 0, 0],
                             "broker_id": [1, 2, 2, 3, 3, 1], "size_bytes": [30 * GB, 30 * GB, 10 * GB, 10 * GB, 0,
                                                                             5 * GB]})
    growth = pd.DataFrame({"topic": ["a", "b", "c"], "growth_bytes_per_day": [4 * GB, 1 * GB, None]})
    return brokers, replicas, partitions, growth


def test_forecast_growth_spread_by_partition_size() -> None:
    _, _, partitions, growth = tables()
    spread = partition_growth(partitions, growth).set_index(["topic", "partition"])["growth_bytes_per_day"]
    assert spread[("a", 0)] == 3 * GB and spread[("a", 1)] == 1 * GB and spread[("b", 0)] == 1 * GB
    assert pd.isna(spread[("c", 0)])


def test_forecast_per_broker_and_pool() -> None:
    brokers, replicas, partitions, growth = tables()
    per_broker = broker_forecast(brokers, replicas, partitions, growth, 0.8, 90)
    BROKER_FORECAST.to_arrow_table(per_broker)
    row = per_broker.set_index("broker_id")
    # broker 1: a-0 (30 GB, +3/day) and c-0 (5 GB, no trend); 80 GB at threshold: (80 - 35) / 3 = 15 days
    assert row.loc[1, "growth_bytes_per_day"] == 3 * GB and row.loc[1, "unforecast_bytes"] == 5 * GB
    assert row.loc[1, "used_30d_bytes"] == 125 * GB
    assert row.loc[1, "days_to_threshold"] == pytest.approx(15.0)
    # broker 3: a-1 (10 GB, +1/day), b-0 (+1/day): (80 - 10) / 2 = 35 days
    assert row.loc[3, "days_to_threshold"] == pytest.approx(35.0)
    pools = pool_forecast(per_broker, 0.8, 90)
    POOL_FORECAST.to_arrow_table(pools)
    pool = pools.iloc[0]
    # broker 2: a-0 and a-1 (40 GB, +4/day): (80 - 40) / 4 = 10 days, the first
    assert pool["first_broker"] == 2 and pool["days_to_first_broker"] == pytest.approx(10.0)
    # 85 GB used of 240 GB at threshold, growing 3 + 4 + 2 = 9 GB a day: 155 / 9 days
    assert pool["days_to_pool_total"] == pytest.approx(155 / 9)


def test_forecast_beyond_horizon_is_null() -> None:
    brokers, replicas, partitions, growth = tables()
    per_broker = broker_forecast(brokers, replicas, partitions, growth, 0.8, 9)
    assert per_broker["days_to_threshold"].isna().all()
    assert pool_forecast(per_broker, 0.8, 9)["first_broker"].isna().all()


def test_forecast_projected_snapshot_for_rightsizing() -> None:
    """The snapshot 10 days ahead: a-0 (+3 GB/day) and a-1 (+1 GB/day) grow on every replica, c-0 has no trend."""
    from kafka_rebalancer.forecast.projection import projected_snapshot
    from kafka_rebalancer.snapshot.build import SnapshotTables

    brokers, replicas, partitions, growth = tables()
    brokers = brokers.assign(disk_used_bytes=[35 * GB, 40 * GB, 10 * GB])
    ahead = projected_snapshot(SnapshotTables(brokers, replicas, partitions), growth, 10)
    assert ahead.partitions["size_bytes"].tolist() == [60 * GB, 20 * GB, 10 * GB, 5 * GB]
    assert ahead.replicas["size_bytes"].tolist() == [60 * GB, 60 * GB, 20 * GB, 20 * GB, 10 * GB, 5 * GB]
    assert ahead.brokers["disk_used_bytes"].tolist() == [65 * GB, 80 * GB, 30 * GB]
    shrinking = growth.assign(growth_bytes_per_day=-10 * GB)
    assert projected_snapshot(SnapshotTables(brokers, replicas, partitions), shrinking, 10).partitions[
        "size_bytes"].min() == 0  # never below empty
