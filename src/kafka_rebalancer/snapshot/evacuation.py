"""Which pool plans the replicas a drain takes off its brokers (and a demotion's leadership changes) when no pool
balances their partition.

A drained broker is going away: every replica on it must leave, whatever the config says about balancing. Most
partitions belong to a pool (their topic's), whose planner sends the drained broker's replica home like any other
replica outside the pool. Two kinds belong to none: an excluded topic (`exclude.topics`, Kafka's internal topics by
default) and a topic that matches no pool rule where there is no `default_pool`. For those, a drain run plans the
leaving replicas (and only those: the exclusion still keeps the rest of the partition where it is) in the topic's
pool if it has one, else in the pool the broker leaves. A partition left with no such pool (its broker was in no
pool either) cannot leave; the plan's promises name it (plan/promises.py). A demotion takes leadership off its
brokers in such partitions the same way (the topic's pool, else the demoted broker's plans the change). A
replication factor change of such a topic (`__consumer_offsets` raised to 3) adds or removes replicas in the topic's
pool, else in the pool of the partition's leader (its first replica when it has none).

The run's snapshot is read through `as_planned`, so the planner, the re-check, the validation and the executor all
see the same pool for these partitions.
"""

from __future__ import annotations

import pandas as pd

from kafka_rebalancer.model.topics import matches_any
from kafka_rebalancer.operations.request import ManualRequest

# Why a held partition's replica stays on a drained broker when no pool can take it (plan.promises' excuse).
NO_POOL = "no pool can take its replica off the drained broker: the topic has no pool, nor had the broker"


def stranded(partitions: pd.DataFrame, brokers: pd.DataFrame, request: ManualRequest | None) -> list[tuple[str, int]]:
    """The held partitions the run must touch that no pool can plan (`held_pools` without a run pool)."""
    held = held_pools(partitions, brokers, request)
    return [(str(t), int(p)) for t, p in zip(held.loc[held["run_pool"].isna(), "topic"],
                                             held.loc[held["run_pool"].isna(), "partition"], strict=True)]


def held_pools(partitions: pd.DataFrame, brokers: pd.DataFrame, request: ManualRequest | None) -> pd.DataFrame:
    """The partitions no pool balances (excluded, or of no pool) that the run's action must still touch, with the
    pool that plans them in this run (None: none can). A drain's, with a replica on a drained broker (only those
    replicas move): the topic's pool, else the pool the first such broker leaves. A demotion's, led by or preferring
    a demoted broker (only the leadership changes): the topic's pool, else the demoted broker's. A replication factor
    change's, of its topics: the topic's pool, else the leader's. Columns: topic, partition, run_pool."""
    columns = ["topic", "partition", "run_pool"]
    leaving = request.scope.drained if request is not None else {}
    demoted = set(request.scope.demoted) if request is not None else set()
    resized = request.scope.topics if request is not None and request.scope.replication_factor else ()
    if not (leaving or demoted or resized) or partitions.empty:
        return pd.DataFrame(columns=columns)
    pool_of = {int(b): p for b, p in zip(brokers["broker_id"], brokers["broker_pool"], strict=True)
               if isinstance(p, str)}
    held = partitions[partitions["excluded"].astype(bool) | partitions["topic_pool"].isna()]
    rows = []
    for topic, partition, replicas, leader, topic_pool in zip(held["topic"], held["partition"], held["replicas"],
                                                               held["leader"], held["topic_pool"], strict=True):
        ids = [int(b) for b in replicas]
        on_leaving = [b for b in ids if b in leaving]
        touched = [int(leader)] if int(leader) in demoted else ids[:1] if ids[:1] and ids[0] in demoted else []
        if not touched and ids and matches_any(topic, resized):
            touched = [int(leader) if int(leader) >= 0 else ids[0]]
        if on_leaving or touched:
            own = topic_pool if isinstance(topic_pool, str) else None
            pool = own or (leaving[on_leaving[0]] if on_leaving else pool_of.get(touched[0]))
            rows.append((topic, int(partition), pool))
    return pd.DataFrame(rows, columns=columns)


def as_planned(partitions: pd.DataFrame, brokers: pd.DataFrame, request: ManualRequest | None) -> pd.DataFrame:
    """The partitions table as the run plans it: a held partition (`held_pools`) has the run's pool as its
    `topic_pool`, and is marked `excluded` (no pool balances it: `plan.balance.transforms.planner_replicas` and the
    re-check move only its replicas on drained brokers, or its leadership)."""
    held = held_pools(partitions, brokers, request)
    if held.empty:
        return partitions
    pools = held.set_index(["topic", "partition"])["run_pool"]
    keys = pd.MultiIndex.from_arrays([partitions["topic"], partitions["partition"].astype(int)])
    found = keys.isin(pools.index)
    planned = pd.Series(pools.reindex(keys).to_numpy(), index=partitions.index)
    out = partitions.copy()
    out["topic_pool"] = planned.where(found & planned.notna(), partitions["topic_pool"])
    out["excluded"] = partitions["excluded"].astype(bool) | found
    return out
