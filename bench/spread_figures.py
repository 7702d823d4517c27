"""The topic spread (issue 52) of a bench plan, whether the plan kept it or not: per kind (replicas, leaders) the
worst held / share over (topic, broker) before and after the plan, and the (topic, broker, kind) cells after the
plan above their cap at the default margin (`plan.balance.spread_violations`). The share is the topic's total
over its pool's alive brokers; after the plan each reassigned partition's first replica leads (the executor's
preferred leader election), the others keep their leader.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from kafka_rebalancer.model.reassignment import parse_reassignment
from kafka_rebalancer.model.topic_spread import TopicSpreadSettings
from kafka_rebalancer.plan.balance.spread_violations import replica_rows, spread_violations
from kafka_rebalancer.run_folder import PLAN, RunFolder
from kafka_rebalancer.snapshot import SnapshotTables


def spread_figures(snapshot: SnapshotTables, run_folder: RunFolder) -> dict[str, Any]:
    plan_path = run_folder.stage_path(PLAN) / "plan.json"
    plan = parse_reassignment(plan_path.read_text(), str(plan_path))
    before = snapshot.partitions[snapshot.partitions["topic_pool"].notna()].rename(
        columns={"topic_pool": "broker_pool"})[["topic", "partition", "broker_pool", "replicas", "leader"]]
    after = _after(before, plan)
    brokers = snapshot.brokers
    alive = brokers[brokers["alive"].astype(bool)]
    taking = {str(pool): group["broker_id"].astype(int).tolist() for pool, group in alive.groupby("broker_pool")}
    violations = spread_violations(before, after, taking, TopicSpreadSettings(enabled=True))
    return {"worst_before": _worst(before, taking), "worst_after": _worst(after, taking),
            "over_cap_after": {kind: int((violations["kind"] == kind).sum()) for kind in ("replicas", "leaders")}}


def _after(before: pd.DataFrame, plan: list[Any]) -> pd.DataFrame:
    moved = pd.DataFrame({"topic": [r.topic for r in plan], "partition": [r.partition for r in plan],
                          "new_replicas": [list(r.replicas) for r in plan]})
    after = before.merge(moved, on=["topic", "partition"], how="left").astype({"leader": np.int64})
    changed = after["new_replicas"].notna()
    after.loc[changed, "replicas"] = after.loc[changed, "new_replicas"]
    after.loc[changed, "leader"] = after.loc[changed, "new_replicas"].map(lambda ids: ids[0])
    return after.drop(columns="new_replicas")


def _worst(placement: pd.DataFrame, taking: dict[str, list[int]]) -> dict[str, float]:
    """Per kind: the largest held / share over (topic, broker)."""
    rows = replica_rows(placement)
    out = {}
    for kind, chosen in (("replicas", slice(None)), ("leaders", rows["is_leader"].to_numpy())):
        held = rows[chosen].groupby(["topic", "broker_pool", "broker_id"], observed=True).size()
        total = held.groupby(level=["topic", "broker_pool"], observed=True).transform("sum")
        n_taking = held.index.get_level_values("broker_pool").map(lambda p: max(len(taking.get(p, ())), 1))
        out[kind] = round(float(np.max(held.to_numpy() / (total.to_numpy() / n_taking.to_numpy()))), 3)
    return out
