"""The topic spread (issue 52) of a bench plan, whether the plan kept it or not: per kind (replicas, leaders) the
worst held / share over (topic, broker) before and after the plan, and the (topic, broker, kind) cells after the
plan above their cap at the default margin (`plan.balance.spread_violations`, as the validation re-checks plan.json
with the spread on: after the plan each reassigned partition's first replica leads). The share is the topic's total
over its pool's brokers taking replicas.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from kafka_rebalancer.config import load_config
from kafka_rebalancer.model.reassignment import parse_reassignment
from kafka_rebalancer.model.topic_spread import TopicSpreadSettings
from kafka_rebalancer.plan.balance.spread_violations import (
    brokers_taking,
    placement_of,
    planned_placement,
    replica_rows,
    spread_violations,
)
from kafka_rebalancer.run_folder import PLAN, RunFolder
from kafka_rebalancer.snapshot import SnapshotTables


def spread_figures(snapshot: SnapshotTables, run_folder: RunFolder) -> dict[str, Any]:
    plan_path = run_folder.stage_path(PLAN) / "plan.json"
    plan = parse_reassignment(plan_path.read_text(), str(plan_path))
    before = placement_of(snapshot.partitions)
    after = planned_placement(before, plan)
    taking = brokers_taking(load_config(run_folder.path.parent / "config.yaml"), snapshot.brokers)
    violations = spread_violations(before, after, taking, TopicSpreadSettings(enabled=True))
    return {"worst_before": _worst(before, taking), "worst_after": _worst(after, taking),
            "over_cap_after": {kind: int((violations["kind"] == kind).sum()) for kind in ("replicas", "leaders")}}


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
