"""Seeded synthetic clusters for tests and benchmarks: snapshot tables plus the config that goes with them.

Brokers are spread over racks and cut into pools; topics belong to pools; partition sizes are Zipf-skewed; the
initial placement is rack-aware but skewed towards "hot" brokers, and a scale-out can add empty brokers. Some
partitions are under-replicated, and one broker can be dead (its replicas out of the ISR).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from kafka_rebalancer.model.schemas import BROKERS, PARTITIONS, REPLICAS
from kafka_rebalancer.snapshot.build import SnapshotTables


@dataclass(frozen=True)
class SyntheticSpec:
    n_brokers: int = 12
    n_racks: int = 3
    n_pools: int = 2
    n_partitions: int = 3000
    replication_factor: int = 3
    partitions_per_topic: int = 50
    zipf_a: float = 1.6  # partition size skew (smaller: heavier tail)
    mean_partition_bytes: int = 200 * 2**20
    hot_brokers_per_pool: int = 1
    hot_weight: float = 3.0  # a hot broker is this many times likelier to get a replica
    empty_brokers_per_pool: int = 0  # a scale-out: brokers that hold nothing yet
    under_replicated_fraction: float = 0.01
    dead_broker: bool = False
    target_disk_usage: float = 0.45
    seed: int = 0


def _place(rng: np.random.Generator, weights: np.ndarray, racks: np.ndarray, n: int, rf: int,
           chunk: int = 50_000) -> np.ndarray:
    """n replica lists of rf distinct brokers on distinct racks (when there are enough), weighted sampling
    without replacement by the Gumbel-top-k trick, vectorised."""
    rack_ids = np.unique(racks)
    log_w = np.log(np.where(weights > 0, weights, 1e-300))
    out = np.empty((n, rf), dtype=np.int64)
    for start in range(0, n, chunk):
        m = min(chunk, n - start)
        keys = log_w[None, :] + rng.gumbel(size=(m, len(weights)))
        if rf <= len(rack_ids):
            best = np.empty((m, len(rack_ids)), dtype=np.int64)
            best_key = np.empty((m, len(rack_ids)))
            for i, rack in enumerate(rack_ids):
                cols = np.flatnonzero(racks == rack)
                pick = np.argmax(keys[:, cols], axis=1)
                best[:, i] = cols[pick]
                best_key[:, i] = keys[np.arange(m), cols[pick]]
            order = np.argsort(-best_key, axis=1)[:, :rf]
            out[start:start + m] = np.take_along_axis(best, order, axis=1)
        else:
            out[start:start + m] = np.argsort(-keys, axis=1)[:, :rf]
    return out


def generate(spec: SyntheticSpec) -> tuple[SnapshotTables, dict[str, Any]]:
    rng = np.random.default_rng(spec.seed)
    broker_ids = np.arange(1, spec.n_brokers + 1)
    racks = np.array([f"rack-{i % spec.n_racks}" for i in range(spec.n_brokers)])
    pool_names = [f"pool-{i}" for i in range(spec.n_pools)]
    # Contiguous blocks of brokers per pool; ids alternate racks, so every pool spans the racks.
    broker_pool = np.array([pool_names[min(i * spec.n_pools // spec.n_brokers, spec.n_pools - 1)]
                            for i in range(spec.n_brokers)])
    alive = np.ones(spec.n_brokers, dtype=bool)
    dead_index = int(rng.integers(spec.n_brokers)) if spec.dead_broker else -1

    topic_rows: list[tuple[str, int, str]] = []
    per_pool = np.array_split(np.arange(spec.n_partitions), spec.n_pools)
    replicas = np.empty((spec.n_partitions, spec.replication_factor), dtype=np.int64)
    for pool, part_idx in zip(pool_names, per_pool, strict=True):
        members = np.flatnonzero(broker_pool == pool)
        weights = np.ones(len(members))
        shuffled = rng.permutation(len(members))
        hot = shuffled[:spec.hot_brokers_per_pool]
        empty = shuffled[spec.hot_brokers_per_pool:spec.hot_brokers_per_pool + spec.empty_brokers_per_pool]
        weights[hot] = spec.hot_weight
        weights[empty] = 0.0
        local = _place(rng, weights, racks[members], len(part_idx), spec.replication_factor)
        replicas[part_idx] = members[local]
        for j in range(len(part_idx)):
            topic_rows.append((f"{pool}.topic-{j // spec.partitions_per_topic:04d}",
                               j % spec.partitions_per_topic, pool))
    if dead_index >= 0:
        alive[dead_index] = False

    sizes = np.minimum(rng.zipf(spec.zipf_a, spec.n_partitions), 1000).astype(float)
    sizes = (sizes / sizes.mean() * spec.mean_partition_bytes).astype(np.int64)
    under = rng.random(spec.n_partitions) < spec.under_replicated_fraction

    rf = spec.replication_factor
    flat_broker = replicas.ravel()
    position = np.tile(np.arange(rf), spec.n_partitions)
    in_isr = np.ones_like(flat_broker, dtype=bool)
    in_isr[(np.repeat(under, rf)) & (position == rf - 1)] = False
    in_isr[flat_broker == dead_index] = False
    # The leader is the first in-sync replica (the preferred one unless it is out of the ISR).
    isr_matrix = in_isr.reshape(-1, rf)
    leader_pos = np.argmax(isr_matrix, axis=1)
    leader = replicas[np.arange(spec.n_partitions), leader_pos]
    topics = np.array([t for t, _, _ in topic_rows], dtype=object)
    partition_no = np.array([p for _, p, _ in topic_rows], dtype=np.int32)
    topic_pool = np.array([pool for _, _, pool in topic_rows], dtype=object)

    replicas_df = pd.DataFrame({
        "topic": np.repeat(topics, rf), "partition": np.repeat(partition_no, rf),
        "broker_id": broker_ids[flat_broker].astype(np.int32), "position": position.astype(np.int32),
        "is_leader": flat_broker == np.repeat(leader, rf), "in_isr": in_isr,
        "size_bytes": np.repeat(sizes, rf)})
    partitions_df = pd.DataFrame({
        "topic": topics, "partition": partition_no, "replication_factor": rf,
        "replicas": [list(map(int, broker_ids[r])) for r in replicas],
        "isr": [list(map(int, broker_ids[r][m])) for r, m in zip(replicas, isr_matrix, strict=True)],
        "leader": broker_ids[leader].astype(np.int32), "topic_pool": topic_pool, "excluded": False,
        "size_bytes": sizes})
    used = np.bincount(flat_broker, weights=np.repeat(sizes, rf), minlength=spec.n_brokers)
    capacity = np.empty(spec.n_brokers, dtype=np.int64)
    for pool in pool_names:
        members = broker_pool == pool
        per_broker = used[members].sum() / members.sum() / spec.target_disk_usage
        # Every second broker of a rack is newer hardware with twice the disk; every rack of the pool keeps the
        # same total, since with RF = racks each rack holds one replica of every partition.
        rank_in_rack = np.array([np.sum(racks[members][:i] == racks[members][i]) for i in range(members.sum())])
        factor = np.where(rank_in_rack % 2 == 1, 2.0, 1.0)
        capacity[members] = (per_broker * factor / factor.mean()).astype(np.int64)
    brokers_df = pd.DataFrame({
        "broker_id": broker_ids.astype(np.int32), "rack": racks, "broker_pool": broker_pool, "alive": alive,
        "excluded": False, "host": "synthetic", "port": 9092, "disk_capacity_bytes": capacity,
        "disk_used_bytes": used.astype(np.int64), "log_dir_total_bytes": None, "log_dir_usable_bytes": None})
    tables = SnapshotTables(brokers_df[BROKERS.names], replicas_df[REPLICAS.names], partitions_df[PARTITIONS.names])
    config = {
        "cluster": {"name": f"synthetic-{spec.seed}"},
        "pools": {pool: {"brokers": [int(b) for b in broker_ids[broker_pool == pool]]} for pool in pool_names},
        "topic_pools": [{"topics": f"{pool}.*", "pool": pool} for pool in pool_names],
        "capacity": {"brokers": {int(b): {"disk_bytes": int(c)} for b, c in zip(broker_ids, capacity, strict=True)}},
        "budgets": {"max_replica_moves": max(1000, spec.n_partitions)},
    }
    return tables, config
