"""The topic spread's target checked on a placement (issue 52), apart from the planner: for the validation's
re-check of plan.json against the snapshot, and for verify after execution.

A placement is one row per partition: topic, the topic's pool (`broker_pool`), replicas (broker ids, the first
the preferred leader) and, where known, the `leader` (else the first replica leads, as after the executor's
preferred leader election). The caps come from the placement before the plan (`model.topic_spread.spread_caps`),
the share from the pool's brokers that take replicas; a row comes out per (topic, broker, kind) held above its cap.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import numpy as np
import pandas as pd

from kafka_rebalancer.config import RebalancerConfig
from kafka_rebalancer.model.topic_spread import TopicSpreadSettings
from kafka_rebalancer.snapshot.build import SnapshotTables

VIOLATION_COLUMNS = ["topic", "broker_pool", "broker_id", "kind", "held_before", "held", "cap"]


def replica_rows(placement: pd.DataFrame) -> pd.DataFrame:
    """One row per replica of the placement: topic, broker_pool, broker_id, is_leader."""
    frame = placement[["topic", "broker_pool", "replicas"]].copy()
    leader = placement["leader"] if "leader" in placement else frame["replicas"].map(
        lambda ids: ids[0] if len(ids) else -1)
    frame["leader"] = leader.to_numpy()
    frame = frame.explode("replicas").dropna(subset=["replicas"]).rename(columns={"replicas": "broker_id"})
    frame["broker_id"] = frame["broker_id"].astype(np.int64)
    frame["is_leader"] = frame["broker_id"] == frame["leader"]
    return frame.drop(columns="leader").reset_index(drop=True)


def spread_violations(before: pd.DataFrame, after: pd.DataFrame, brokers_taking: Mapping[str, Collection[int]],
                      settings: TopicSpreadSettings) -> pd.DataFrame:
    """The (topic, broker, kind) held above their cap after the plan: kind `replicas` or `leaders`; held_before,
    held, cap. `brokers_taking`: per pool, the brokers that take replicas (alive, not excluded), whose number
    divides a topic's total into its share. Empty when the spread is off."""
    if not settings.enabled:
        return pd.DataFrame(columns=VIOLATION_COLUMNS)
    old, new = replica_rows(before), replica_rows(after)
    out = []
    for kind, weight in (("replicas", None), ("leaders", "is_leader")):
        held_before = _held(old, weight).rename("held_before")
        held = _held(new, weight).rename("held")
        cells = pd.concat([held_before, held], axis=1).fillna(0).astype(np.int64).reset_index()
        totals = held_before.groupby(level=["topic", "broker_pool"]).sum().rename("total").reset_index()
        cells = cells.merge(totals, on=["topic", "broker_pool"], how="left").fillna({"total": 0})
        taking = cells["broker_pool"].map(lambda pool: max(len(brokers_taking.get(pool, ())), 1))
        target = (cells["total"].astype(np.int64) + taking - 1) // taking + settings.margin
        cells["cap"] = np.maximum(cells["held_before"], target)
        cells["kind"] = kind
        over = cells[(cells["held"] > cells["cap"]) & ~cells["topic"].map(settings.excluded)]
        out.append(over[VIOLATION_COLUMNS])
    return pd.concat(out, ignore_index=True).sort_values(["topic", "broker_id", "kind"], ignore_index=True)


def _held(rows: pd.DataFrame, weight: str | None) -> pd.Series:
    """Per (topic, broker_pool, broker_id): the rows (or those where `weight` is true)."""
    rows = rows if weight is None else rows[rows[weight]]
    return rows.groupby(["topic", "broker_pool", "broker_id"]).size()


def snapshot_violations(config: RebalancerConfig, before: SnapshotTables, after: SnapshotTables) -> pd.DataFrame:
    """`spread_violations` from one snapshot of the cluster to another (verify: the run's, and the one after
    execution): the brokers taking replicas are each pool's alive, non-excluded brokers in the first."""
    brokers = before.brokers.drop_duplicates("broker_id").set_index("broker_id")
    alive = set(brokers.index[brokers["alive"].astype(bool)].tolist()) - set(config.exclude.brokers)
    taking = {pool: [b for b in settings.brokers if b in alive] for pool, settings in config.pools.items()}

    def placement(tables: SnapshotTables) -> pd.DataFrame:
        parts = tables.partitions
        parts = parts[parts["topic_pool"].notna()]
        return parts.rename(columns={"topic_pool": "broker_pool"})[["topic", "broker_pool", "replicas", "leader"]]

    return spread_violations(placement(before), placement(after), taking, config.topic_spread)
