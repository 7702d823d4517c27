"""The plan as partition changes: the difference between the snapshot's assignment and the planned one."""

from __future__ import annotations

import pandas as pd

from kafka_rebalancer.config import Budgets
from kafka_rebalancer.model.schemas import PARTITION_CHANGES


def trim_to_budgets(moves: pd.DataFrame, budgets: Budgets) -> pd.DataFrame:
    """Keep the run's budgets across pools.

    Each pool's actions (a move, or a swap's two moves, sharing a `seq`) were accepted one after the other, so
    every prefix of a pool's sequence is itself a valid plan. The budgets are kept by taking whole actions as
    prefixes, round-robin over the pools (by `seq`), so every pool gets its most useful actions first.
    """
    keep: list[int] = []
    stopped: set[str] = set()
    total_bytes = 0
    for (_seq, pool), action in moves.groupby(["seq", "broker_pool"], sort=True):
        if pool in stopped:
            continue
        size = int(action["size_bytes"].sum())
        over_count = len(keep) + len(action) > budgets.max_replica_moves
        over_bytes = budgets.max_moved_bytes is not None and total_bytes + size > budgets.max_moved_bytes
        if over_count or over_bytes:
            stopped.add(pool)
            continue
        keep.extend(action.index)
        total_bytes += size
    return moves.loc[sorted(keep)].sort_values(["broker_pool", "seq"], kind="mergesort").reset_index(drop=True)


def partition_changes(partitions: pd.DataFrame, moves: pd.DataFrame) -> pd.DataFrame:
    """Apply the moves (in order) to the partitions' replica lists; positions are kept, so the preferred leader
    only changes when the leader's replica itself moves. `partitions` needs topic, partition, replicas,
    size_bytes for at least the moved partitions. Schema PARTITION_CHANGES, sorted by topic and partition."""
    current = {(t, int(p)): (list(map(int, r)), int(s)) for t, p, r, s in
               zip(partitions["topic"], partitions["partition"], partitions["replicas"], partitions["size_bytes"],
                   strict=True)}
    new: dict[tuple[str, int], list[int]] = {}
    pool_of: dict[tuple[str, int], str] = {}
    for row in moves.sort_values(["broker_pool", "seq"], kind="mergesort").itertuples(index=False):
        key = (row.topic, int(row.partition))
        replicas = new.setdefault(key, list(current[key][0]))
        if int(row.source_broker) not in replicas or int(row.target_broker) in replicas:
            raise ValueError(f"move of {key} from {row.source_broker} to {row.target_broker} does not apply to "
                             f"replicas {replicas}")
        replicas[replicas.index(int(row.source_broker))] = int(row.target_broker)
        pool_of[key] = row.broker_pool
    rows = [(pool_of[key], key[0], key[1], current[key][0], replicas, current[key][1])
            for key, replicas in sorted(new.items()) if replicas != current[key][0]]
    return pd.DataFrame(rows, columns=PARTITION_CHANGES.names)
