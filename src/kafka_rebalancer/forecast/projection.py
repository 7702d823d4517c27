"""Topic growth spread onto replicas, then disk use per broker and pool projected (pure pandas).

In: the snapshot's BROKERS, REPLICAS and PARTITIONS tables and TOPIC_GROWTH. Out: BROKER_FORECAST and
POOL_FORECAST. A topic's growth goes to its partitions by their current sizes (evenly when all are empty), and every
replica of a partition grows as the partition does. A replica whose topic has no trend is counted as not growing and
its bytes are reported as `unforecast_bytes`. Days to the threshold: until a broker's use (or the pool's total)
crosses `threshold` of its disk capacity; null when it does not within the horizon, 0 when it already has.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from kafka_rebalancer.model.schemas import BROKER_FORECAST, POOL_FORECAST
from kafka_rebalancer.snapshot.build import SnapshotTables

PROJECTED_DAYS = (7, 30, 90)


def partition_growth(partitions: pd.DataFrame, growth: pd.DataFrame) -> pd.DataFrame:
    """(topic, partition, growth_bytes_per_day) for every partition; NaN where its topic has no trend."""
    parts = partitions[["topic", "partition", "size_bytes"]].merge(
        growth[["topic", "growth_bytes_per_day"]], on="topic", how="left")
    sizes = parts["size_bytes"].astype(float)
    totals = sizes.groupby(parts["topic"]).transform("sum")
    counts = parts.groupby("topic")["partition"].transform("count")
    share = np.where(totals > 0, sizes / totals.where(totals > 0, 1.0), 1.0 / counts)
    return parts.assign(growth_bytes_per_day=parts["growth_bytes_per_day"] * share)[
        ["topic", "partition", "growth_bytes_per_day"]]


def broker_forecast(brokers: pd.DataFrame, replicas: pd.DataFrame, partitions: pd.DataFrame,
                    growth: pd.DataFrame, threshold: float, horizon_days: float) -> pd.DataFrame:
    """BROKER_FORECAST: one row per live, not excluded broker."""
    per_replica = replicas[["topic", "partition", "broker_id", "size_bytes"]].merge(
        partition_growth(partitions, growth), on=["topic", "partition"], how="left")
    known = per_replica["growth_bytes_per_day"].notna()
    per_broker = pd.DataFrame({
        "broker_id": per_replica["broker_id"],
        "used_bytes": per_replica["size_bytes"].astype(float),
        "growth_bytes_per_day": per_replica["growth_bytes_per_day"].fillna(0.0),
        "unforecast_bytes": np.where(known, 0.0, per_replica["size_bytes"].astype(float)),
    }).groupby("broker_id", as_index=False).sum()
    counted = brokers[brokers["alive"] & ~brokers["excluded"]][["broker_pool", "broker_id", "disk_capacity_bytes"]]
    frame = counted.merge(per_broker, on="broker_id", how="left").fillna(
        {"used_bytes": 0.0, "growth_bytes_per_day": 0.0, "unforecast_bytes": 0.0})
    frame = _projected(frame)
    frame["days_to_threshold"] = days_to(frame["used_bytes"], frame["growth_bytes_per_day"],
                                         threshold * frame["disk_capacity_bytes"].astype(float), horizon_days)
    return frame.astype({"broker_id": "int32", "disk_capacity_bytes": "int64"})[BROKER_FORECAST.names]


def pool_forecast(brokers: pd.DataFrame, threshold: float, horizon_days: float) -> pd.DataFrame:
    """POOL_FORECAST from BROKER_FORECAST: totals, the first broker to cross, and when the total crosses."""
    summed = ["disk_capacity_bytes", "used_bytes", "growth_bytes_per_day", "unforecast_bytes"]
    pools = brokers.groupby("broker_pool", dropna=False, as_index=False).agg(
        n_brokers=("broker_id", "count"), **{c: (c, "sum") for c in summed})
    pools = _projected(pools)
    pools["threshold"] = threshold
    pools["days_to_pool_total"] = days_to(pools["used_bytes"], pools["growth_bytes_per_day"],
                                          threshold * pools["disk_capacity_bytes"].astype(float), horizon_days)
    first = (brokers.dropna(subset=["days_to_threshold"]).sort_values(["days_to_threshold", "broker_id"])
             .drop_duplicates("broker_pool"))[["broker_pool", "broker_id", "days_to_threshold"]]
    pools = pools.merge(first.rename(columns={"broker_id": "first_broker", "days_to_threshold":
                                              "days_to_first_broker"}), on="broker_pool", how="left")
    pools["first_broker"] = pools["first_broker"].astype("Int32")
    return pools.astype({"n_brokers": "int32", "disk_capacity_bytes": "int64"})[POOL_FORECAST.names]


def days_to(used: pd.Series, growth_per_day: pd.Series, limit: pd.Series, horizon_days: float) -> pd.Series:
    """Days until `used` growing by `growth_per_day` reaches `limit`: 0 when it has, NaN when not in the horizon
    (or no capacity is known: a limit of 0)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        days = np.where(used >= limit, 0.0,
                        np.where(growth_per_day > 0, (limit - used) / growth_per_day, np.inf))
    return pd.Series(np.where((days <= horizon_days) & (limit > 0), days, np.nan), index=used.index)


def _projected(frame: pd.DataFrame) -> pd.DataFrame:
    for days in PROJECTED_DAYS:  # a shrinking one stops at empty
        frame[f"used_{days}d_bytes"] = (frame["used_bytes"] + days * frame["growth_bytes_per_day"]).clip(lower=0.0)
    return frame


def replicas_after(replicas: pd.DataFrame, changes: pd.DataFrame) -> pd.DataFrame:
    """(topic, partition, broker_id, size_bytes) of every replica once a plan's PARTITION_CHANGES are made: a changed
    partition's replicas are its new ones, each as large as the partition (a new copy is a full one)."""
    kept = replicas[["topic", "partition", "broker_id", "size_bytes"]]
    if changes.empty:
        return kept
    keys = ["topic", "partition"]
    changed = pd.MultiIndex.from_frame(changes[keys])
    kept = kept[~pd.MultiIndex.from_frame(kept[keys]).isin(changed)]
    new = changes[[*keys, "new_replicas", "size_bytes"]].explode("new_replicas").rename(
        columns={"new_replicas": "broker_id"})
    new = new.dropna(subset=["broker_id"]).astype({"broker_id": "int64"})
    return pd.concat([kept, new], ignore_index=True)


def projected_snapshot(tables: SnapshotTables, growth: pd.DataFrame, days: float) -> SnapshotTables:
    """The snapshot as the forecast sees it `days` ahead (the input rightsizing plans on): every partition and each
    of its replicas grown by the partition's share of its topic's growth (none without a trend; never below
    empty), each broker's disk use by its replicas' growth. Log directories are left out (not projected)."""
    per_partition = partition_growth(tables.partitions, growth).fillna({"growth_bytes_per_day": 0.0})
    keys = ["topic", "partition"]

    def grown(frame: pd.DataFrame) -> tuple[pd.DataFrame, pd.Series]:
        added = frame[keys].merge(per_partition, on=keys, how="left")["growth_bytes_per_day"].fillna(0.0) * days
        size = (frame["size_bytes"].to_numpy(float) + added.to_numpy()).clip(min=0.0).round().astype("int64")
        return frame.assign(size_bytes=size), pd.Series(size - frame["size_bytes"].to_numpy(), index=frame.index)

    partitions, _ = grown(tables.partitions)
    replicas, added = grown(tables.replicas)
    per_broker = added.groupby(tables.replicas["broker_id"]).sum()
    brokers = tables.brokers.assign(disk_used_bytes=tables.brokers["disk_used_bytes"]
                                    + tables.brokers["broker_id"].map(per_broker).fillna(0).astype("int64"))
    return SnapshotTables(brokers, replicas, partitions, list(tables.warnings))
