"""Leadership-only plans: no replica changes broker, only which replica leads.

- elect: every partition whose leader is not its preferred (first) replica gets a preferred-leader election
  (the first replica must be alive and in sync).
- demote: every partition led by, or preferring, a demoted broker gets another replica first (the first in the
  current order that is alive, in sync and not demoted), then a preferred-leader election moves the leadership.

The result is a moves table (schema MOVES, action "leadership", from the current leader to the new one) that
`plan.changes.partition_changes` turns into replica orders, as it does for the planner's leadership transfers.
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from kafka_rebalancer.model.schemas import MOVES
from kafka_rebalancer.model.topics import matches_any


def leadership_moves(partitions: pd.DataFrame, alive: Iterable[int], mode: str, demoted: Iterable[int] = (),
                     pools: Iterable[str] | None = None, topics: tuple[str, ...] = ()) -> pd.DataFrame:
    """`partitions`: one row per partition that may change (topic, partition, replicas, isr, leader, broker_pool:
    the topic's pool), partitions the planner must not touch already left out."""
    alive, demoted = set(alive), set(demoted)
    wanted = set(pools) if pools is not None else None
    rows = []
    seq: dict[str, int] = {}
    for row in partitions.sort_values(["topic", "partition"], kind="mergesort").itertuples(index=False):
        if wanted is not None and row.broker_pool not in wanted:
            continue
        if topics and not matches_any(row.topic, topics):
            continue
        replicas, isr, leader = [int(b) for b in row.replicas], {int(b) for b in row.isr}, int(row.leader)
        if mode == "elect":
            target = replicas[0] if leader != replicas[0] and replicas[0] in isr and replicas[0] in alive else None
        elif leader in demoted or replicas[0] in demoted:
            target = next((b for b in replicas if b in isr and b in alive and b not in demoted), None)
            # The current leader stays when it is not demoted: it only becomes the preferred replica.
            if leader not in demoted and target is not None:
                target = leader
        else:
            target = None
        if target is None:
            continue
        seq[row.broker_pool] = seq.get(row.broker_pool, 0) + 1
        rows.append({"broker_pool": row.broker_pool, "seq": seq[row.broker_pool], "action": "leadership",
                     "topic": row.topic, "partition": int(row.partition), "source_broker": leader,
                     "target_broker": target, "size_bytes": 0, "resource": f"leadership:{mode}", "forced": False})
    return pd.DataFrame(rows, columns=MOVES.names).astype(
        {"seq": "int32", "partition": "int32", "source_broker": "int32", "target_broker": "int32",
         "size_bytes": "int64", "forced": bool})
