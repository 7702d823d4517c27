"""The benchmark's baselines, on the same snapshot and judged against the same bands as the planner:

- kafka_generate: every topic of a pool re-placed from scratch by Kafka's assignReplicasToBrokers over the
  pool's alive brokers, as `kafka-reassign-partitions.sh --generate` would;
- patent_greedy: seed 001's method as literally described, on disk alone: the band from the plain mean of
  usages, each broker to fix in turn, the first replica whose share lies in the pre-check window and the first
  candidate broker that lands inside the band, then the next broker to fix; passes until nothing moves.
"""

from __future__ import annotations

import random
from typing import Any

import pandas as pd

from kafka_rebalancer.assignment import assign_replicas_to_brokers
from kafka_rebalancer.config import RebalancerConfig
from kafka_rebalancer.model.band_status import band_status, broker_load_frame, out_of_band
from kafka_rebalancer.model.reassignment import Reassignment, leadership_only
from kafka_rebalancer.plan.balance.bands import band_for
from kafka_rebalancer.plan.recheck import replicas_after
from kafka_rebalancer.snapshot.build import SnapshotTables


def _movable(snapshot: SnapshotTables) -> pd.DataFrame:
    """Partitions a careful tool may move: a pool, a leader, a complete ISR, every replica alive."""
    parts = snapshot.partitions
    alive = set(snapshot.brokers.loc[snapshot.brokers["alive"], "broker_id"])
    ok = (parts["topic_pool"].notna() & (parts["leader"] >= 0)
          & (parts["isr"].map(len) == parts["replicas"].map(len))
          & parts["replicas"].map(lambda r: all(b in alive for b in r)))
    return parts[ok]


def kafka_generate(snapshot: SnapshotTables, seed: int) -> list[Reassignment]:
    brokers = snapshot.brokers
    plan = []
    for (topic, pool), group in snapshot.partitions.groupby(["topic", "topic_pool"], sort=True):
        members = brokers[(brokers["broker_pool"] == pool) & brokers["alive"]].sort_values("broker_id")
        ids = members["broker_id"].astype(int).tolist()
        racks = dict(zip(ids, members["rack"], strict=True))
        group = group.sort_values("partition")
        rf = int(group["replication_factor"].max())
        placed = assign_replicas_to_brokers(ids, len(group), rf, racks=racks, rng=random.Random(f"{seed}:{topic}"))
        for (p, old), new in zip(zip(group["partition"], group["replicas"], strict=True), placed.values(),
                                 strict=True):
            if list(old) != new:
                plan.append(Reassignment(topic, int(p), new))
    return plan


def patent_greedy(snapshot: SnapshotTables, config: RebalancerConfig, max_passes: int = 100) -> list[Reassignment]:
    threshold = config.resources["disk"].threshold if "disk" in config.resources else 1.10
    movable = _movable(snapshot)
    movable_keys = set(zip(movable["topic"], movable["partition"], strict=True))
    assignment = {(t, int(p)): list(map(int, r)) for t, p, r in
                  zip(snapshot.partitions["topic"], snapshot.partitions["partition"], snapshot.partitions["replicas"],
                      strict=True)}
    size = dict(zip(zip(snapshot.partitions["topic"], snapshot.partitions["partition"].astype(int), strict=True),
                    snapshot.partitions["size_bytes"].astype(int), strict=True))
    changed: set[tuple[str, int]] = set()
    for _pool, members in snapshot.brokers[snapshot.brokers["alive"] & ~snapshot.brokers["excluded"]
                                          & snapshot.brokers["broker_pool"].notna()].groupby("broker_pool"):
        ids = members["broker_id"].astype(int).tolist()
        cap = dict(zip(ids, members["disk_capacity_bytes"].astype(float), strict=True))
        load = dict.fromkeys(ids, 0.0)
        on: dict[int, list[tuple[str, int]]] = {b: [] for b in ids}
        for key, replicas in assignment.items():
            for b in replicas:
                if b in load:
                    load[b] += size[key]
                    if key in movable_keys:
                        on[b].append(key)
        band = band_for("disk", False, [load[b] / cap[b] for b in ids], [1.0] * len(ids), threshold, 1.0)
        lower, upper = band.lower, band.upper  # the patent's plain mean of usages
        for _ in range(max_passes):
            moved = False
            for b in ids:
                u = load[b] / cap[b]
                if lower <= u <= upper:
                    continue
                move = _patent_move(b, u, ids, load, cap, on, size, assignment, lower, upper)
                if move:
                    key, src, dst = move
                    assignment[key][assignment[key].index(src)] = dst
                    on[src].remove(key)
                    on[dst].append(key)
                    load[src] -= size[key]
                    load[dst] += size[key]
                    changed.add(key)
                    moved = True
            if not moved:
                break
    original = {(t, int(p)): list(map(int, r)) for t, p, r in
                zip(snapshot.partitions["topic"], snapshot.partitions["partition"], snapshot.partitions["replicas"],
                    strict=True)}
    return [Reassignment(t, p, assignment[(t, p)]) for t, p in sorted(changed)
            if assignment[(t, p)] != original[(t, p)]]


def _patent_move(b: int, u: float, ids: list[int], load: dict, cap: dict, on: dict, size: dict, assignment: dict,
                 lower: float, upper: float) -> tuple[tuple[str, int], int, int] | None:
    def inside(broker: int, delta: float) -> bool:
        return lower <= (load[broker] + delta) / cap[broker] <= upper

    if u < lower:  # take a replica from a broker above the lower edge that stays inside
        for c in ids:
            if c == b or load[c] / cap[c] <= lower:
                continue
            for key in on[c]:
                share = size[key] / cap[b]
                if lower - u <= share <= upper - u and inside(c, -size[key]) and b not in assignment[key]:
                    return key, c, b
        return None
    for key in on[b]:  # over: give a replica whose share lands b inside, to a broker it lands inside too
        share = size[key] / cap[b]
        if u - upper <= share <= u - lower:
            for c in ids:
                if c != b and load[c] / cap[c] < upper and inside(c, size[key]) and c not in assignment[key]:
                    return key, b, c
    return None


def evaluate(snapshot: SnapshotTables, config: RebalancerConfig, bands: pd.DataFrame,
             plan: list[Reassignment]) -> dict[str, Any]:
    """Quality figures of an assignment, judged against the planner's bands."""
    old = {(t, int(p)): list(map(int, r)) for t, p, r in
           zip(snapshot.partitions["topic"], snapshot.partitions["partition"], snapshot.partitions["replicas"],
               strict=True)}
    sizes = dict(zip(zip(snapshot.partitions["topic"], snapshot.partitions["partition"].astype(int), strict=True),
                     snapshot.partitions["size_bytes"].astype(int), strict=True))
    replica_moves = leadership_only_changes = moved_bytes = 0
    for r in plan:
        added = set(r.replicas) - set(old[(r.topic, r.partition)])
        replica_moves += len(added)
        moved_bytes += len(added) * sizes[(r.topic, r.partition)]
        leadership_only_changes += leadership_only(old[(r.topic, r.partition)], r.replicas)
    after = band_status(broker_load_frame(snapshot.brokers, replicas_after(snapshot, plan), config.resource_list()),
                        bands)
    return {"out_of_band_after": len(out_of_band(after)), "replica_moves": replica_moves,
            "leadership_only_changes": leadership_only_changes, "moved_bytes": int(moved_bytes)}

