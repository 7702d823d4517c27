"""Seeded synthetic clusters for tests and benchmarks: snapshot tables plus the config that goes with them.

Brokers are spread over racks and cut into pools; topics belong to pools; partition traffic is Zipf-skewed and
partition sizes follow it (size ~ bytes in x retention); the initial placement is rack-aware but skewed towards
"hot" brokers, and a scale-out can add empty brokers. Some partitions are under-replicated, one broker can be
dead (its replicas out of the ISR), and some replicas can sit outside their topic's pool. Hardware is
heterogeneous but every rack of a pool has the same total capacity, as real deployments are built.

Shape factors for benchmarks of many shapes (issue 36), each off by default so that an existing spec generates the
same cluster byte for byte: partition sizes drawn apart from the traffic (uniform, log-normal, Pareto, a few giant
partitions), racks of unequal broker counts, a share of each pool as new empty brokers, disk capacities that differ
per broker, and Kafka's own placement (`placement="kafka"`: every topic placed by
`assignment.assign_replicas_to_brokers`, rack-aware, over the pool's brokers that are not new, as a cluster whose
topics Kafka created looks before a scale-out). Issue 52's shape adds: log-normal sizes around a given median
(`size_median_bytes`), new brokers as an equal count per rack (`new_brokers_per_rack`), and hot brokers as a share of
the pool (`hot_broker_fraction`) whose led partitions are larger (`hot_leader_size_factor`). Each factor draws from
its own generator (seeded from the spec's seed), so turning one on leaves the rest of the cluster as it was.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from kafka_rebalancer.assignment import assign_replicas_to_brokers
from kafka_rebalancer.model.resources import CPU, NETWORK_IN, NETWORK_OUT, CpuModel, role_loads
from kafka_rebalancer.model.schemas import BROKERS, PARTITIONS, REPLICAS
from kafka_rebalancer.run_folder import RunFolder
from kafka_rebalancer.snapshot.build import SnapshotTables
from kafka_rebalancer.snapshot.store import write_snapshot

ALL_RESOURCES = ["disk", "network_in", "network_out", "cpu", "replica_count", "leader_count"]
SIZE_DISTRIBUTIONS = ("zipf-traffic", "uniform", "lognormal", "pareto", "giants")
LOGNORMAL_SIGMA = 1.0  # sizes over about two orders of magnitude, as the partitions of a real cluster
PARETO_SHAPE = 1.5  # tail index: the largest of 10,000 partitions is some 150 times the mean
GIANT_PARTITIONS = 3  # "giants": this many partitions ...
GIANT_SHARE = 0.3  # ... each this share of a broker's mean disk load (the rest log-normal, GIANT_BODY_SIGMA)
GIANT_BODY_SIGMA = 0.5
# Seeds of the shape factors' own generators, next to the spec's seed.
_SIZES_STREAM, _CAPACITY_STREAM, _PLACEMENT_STREAM = 1, 2, 3
PLACEMENTS = ("weighted", "kafka")


@dataclass(frozen=True)
class SyntheticSpec:
    n_brokers: int = 12
    n_racks: int = 3
    n_pools: int = 2
    n_partitions: int = 3000
    replication_factor: int = 3
    partitions_per_topic: int = 50
    zipf_a: float = 1.8  # traffic skew across partitions (smaller: heavier tail)
    max_skew: int = 200  # the busiest partition carries at most this many times the quietest's traffic
    mean_bytes_in_per_s: float = 256 * 1024
    retention_s: float = 3600.0
    hot_brokers_per_pool: int = 1
    hot_weight: float = 3.0  # a hot broker is this many times likelier to get a replica
    leader_skew: float = 0.0  # 0..1: fraction of partitions whose leader is moved onto a hot broker's replica
    empty_brokers_per_pool: int = 0  # a scale-out: brokers that hold nothing yet
    under_replicated_fraction: float = 0.01
    out_of_pool_fraction: float = 0.0  # replicas placed on a broker of another pool
    dead_broker: bool = False
    target_usage: float = 0.45
    mixed_hardware: bool = False  # every second broker of a rack has twice the capacity (racks stay equal)
    seed: int = 0
    size_distribution: str = "zipf-traffic"  # zipf-traffic: size ~ bytes in x retention; else drawn apart
    rack_weights: tuple[float, ...] | None = None  # relative broker counts of the n_racks racks (None: equal)
    empty_broker_fraction: float = 0.0  # more empty brokers: this share of each pool, rounded up
    capacity_spread: float = 0.0  # disk capacity per broker x uniform(1 - spread, 1 + spread), pool total kept
    placement: str = "weighted"  # weighted: sampled, hot brokers likelier; kafka: Kafka's rack-aware assignment
    size_median_bytes: float | None = None  # log-normal sizes: this median (None: the mean of zipf-traffic's)
    new_brokers_per_rack: bool = False  # the new brokers (empty_broker_fraction) an equal count per rack
    hot_broker_fraction: float = 0.0  # more hot brokers: this share of each pool, rounded up
    hot_leader_size_factor: float = 1.0  # partitions whose preferred leader is hot are this many times larger

    def __post_init__(self) -> None:
        if self.size_distribution not in SIZE_DISTRIBUTIONS:
            raise ValueError(f"size_distribution {self.size_distribution!r}: one of {', '.join(SIZE_DISTRIBUTIONS)}")
        if self.placement not in PLACEMENTS:
            raise ValueError(f"placement {self.placement!r}: one of {', '.join(PLACEMENTS)}")
        if self.rack_weights is not None and len(self.rack_weights) != self.n_racks:
            raise ValueError(f"rack_weights has {len(self.rack_weights)} racks, n_racks is {self.n_racks}")
        if self.size_median_bytes is not None and self.size_distribution != "lognormal":
            raise ValueError(f"size_median_bytes is for lognormal sizes, not {self.size_distribution!r}")


def _place(rng: np.random.Generator, weights: np.ndarray, racks: np.ndarray, n: int, rf: int,
           chunk: int = 50_000) -> np.ndarray:
    """n replica lists of rf distinct brokers on distinct racks (with more replicas than racks: on every rack, as
    Kafka's rack-aware placement puts them), weighted sampling without replacement by the Gumbel-top-k trick,
    vectorised."""
    rack_ids = np.unique(racks)
    log_w = np.log(np.where(weights > 0, weights, 1e-300))
    out = np.empty((n, rf), dtype=np.int64)
    for start in range(0, n, chunk):
        m = min(chunk, n - start)
        keys = log_w[None, :] + rng.gumbel(size=(m, len(weights)))
        if len(rack_ids) == 1:
            out[start:start + m] = np.argsort(-keys, axis=1)[:, :rf]
            continue
        best = np.empty((m, len(rack_ids)), dtype=np.int64)
        best_key = np.empty((m, len(rack_ids)))
        for i, rack in enumerate(rack_ids):
            cols = np.flatnonzero(racks == rack)
            pick = np.argmax(keys[:, cols], axis=1)
            best[:, i] = cols[pick]
            best_key[:, i] = keys[np.arange(m), cols[pick]]
        order = np.argsort(-best_key, axis=1)[:, :rf]
        out[start:start + m, :order.shape[1]] = np.take_along_axis(best, order, axis=1)
        if rf > len(rack_ids):  # one on every rack, the rest the best of the other brokers
            np.put_along_axis(keys, best, -np.inf, axis=1)
            out[start:start + m, len(rack_ids):] = np.argsort(-keys, axis=1)[:, :rf - len(rack_ids)]
    return out


@dataclass(frozen=True)
class _Layout:
    """Brokers, racks and pools of a generated cluster, and where each partition's replicas are."""

    broker_ids: np.ndarray
    racks: np.ndarray
    pool_names: list[str]
    broker_pool: np.ndarray
    replicas: np.ndarray  # partition x position: broker index
    topics: np.ndarray
    partition_no: np.ndarray
    topic_pool: np.ndarray


@dataclass(frozen=True)
class _Traffic:
    """Per partition: bytes in and out per second, size, CPU of the leader and a follower, under-replicated."""

    bytes_in: np.ndarray
    bytes_out: np.ndarray
    sizes: np.ndarray
    cpu_leader: np.ndarray
    cpu_follower: np.ndarray
    under: np.ndarray


def generate(spec: SyntheticSpec) -> tuple[SnapshotTables, dict[str, Any]]:
    # One generator drawn in a fixed order: the same spec gives the same cluster, byte for byte.
    rng = np.random.default_rng(spec.seed)
    layout, hot_of_pool = _placed(rng, spec)
    _skew_leaders(rng, spec, layout.replicas, hot_of_pool)
    _stray_replicas(rng, spec, layout)
    dead_index = int(rng.integers(spec.n_brokers)) if spec.dead_broker else -1
    traffic = _traffic(rng, spec)
    _enlarge_hot_led(spec, layout.replicas, hot_of_pool, traffic.sizes)
    replicas_df, partitions_df, flat_broker, current = _replica_tables(spec, layout, traffic, dead_index)
    brokers_df = _brokers_table(spec, layout, replicas_df, flat_broker, current, dead_index)
    tables = SnapshotTables(brokers_df[BROKERS.names], replicas_df[REPLICAS.names], partitions_df[PARTITIONS.names])
    config = {
        "cluster": {"name": f"synthetic-{spec.seed}"},
        "pools": {pool: {"brokers": [int(b) for b in layout.broker_ids[layout.broker_pool == pool]]}
                  for pool in layout.pool_names},
        "topic_pools": [{"topics": f"{pool}.*", "pool": pool} for pool in layout.pool_names],
        "resources": {name: {} for name in ALL_RESOURCES},
        "metrics": {"source": "sampled"},  # only read when snapshotting a real cluster: the traffic is given here
        "budgets": {"max_replica_moves": max(1000, spec.n_partitions)},
    }
    return tables, config


def _placed(rng: np.random.Generator, spec: SyntheticSpec) -> tuple[_Layout, dict[str, np.ndarray]]:
    """The brokers in pools and racks, and each pool's partitions placed on its brokers (hot ones likelier, new
    ones empty); also each pool's hot brokers."""
    rf, n_parts = spec.replication_factor, spec.n_partitions
    broker_ids = np.arange(1, spec.n_brokers + 1)
    racks = _racks(spec)
    pool_names = [f"pool-{i}" for i in range(spec.n_pools)]
    # Contiguous blocks of brokers per pool; ids alternate racks, so every pool spans the racks.
    broker_pool = np.array([pool_names[min(i * spec.n_pools // spec.n_brokers, spec.n_pools - 1)]
                            for i in range(spec.n_brokers)])
    per_pool = np.array_split(np.arange(n_parts), spec.n_pools)
    replicas = np.empty((n_parts, rf), dtype=np.int64)
    hot_of_pool: dict[str, np.ndarray] = {}
    topics = np.empty(n_parts, dtype=object)
    partition_no = np.empty(n_parts, dtype=np.int32)
    topic_pool = np.empty(n_parts, dtype=object)
    for pool, part_idx in zip(pool_names, per_pool, strict=True):
        members = np.flatnonzero(broker_pool == pool)
        weights = np.ones(len(members))
        shuffled = rng.permutation(len(members))
        n_hot = spec.hot_brokers_per_pool + _share_of(spec.hot_broker_fraction, len(members))
        hot = shuffled[:n_hot]
        empty = _new_brokers(spec, shuffled[n_hot:], racks[members])
        weights[hot] = spec.hot_weight
        weights[empty] = 0.0
        hot_of_pool[pool] = members[hot]
        if spec.placement == "kafka":
            replicas[part_idx] = _kafka_placed(spec, members[weights > 0], racks, len(part_idx))
        else:
            replicas[part_idx] = members[_place(rng, weights, racks[members], len(part_idx), rf)]
        j = np.arange(len(part_idx))
        topics[part_idx] = [f"{pool}.topic-{t:04d}" for t in j // spec.partitions_per_topic]
        partition_no[part_idx] = j % spec.partitions_per_topic
        topic_pool[part_idx] = pool
    return _Layout(broker_ids, racks, pool_names, broker_pool, replicas, topics, partition_no, topic_pool), hot_of_pool


def _share_of(fraction: float, n: int) -> int:
    """This share of n brokers, rounded up (0 for a share of 0)."""
    return math.ceil(fraction * n - 1e-9)


def _new_brokers(spec: SyntheticSpec, candidates: np.ndarray, member_racks: np.ndarray) -> np.ndarray:
    """The pool's new empty brokers (indexes into its members), the first of the shuffled candidates: the spec's
    count, or with new_brokers_per_rack the share of each rack's members from that rack."""
    if not spec.new_brokers_per_rack:
        n_empty = spec.empty_brokers_per_pool + _share_of(spec.empty_broker_fraction, len(member_racks))
        return candidates[:n_empty]
    chosen = [candidates[member_racks[candidates] == rack][:_share_of(spec.empty_broker_fraction,
                                                                      int(np.sum(member_racks == rack)))]
              for rack in np.unique(member_racks)]
    return np.concatenate(chosen)


def _kafka_placed(spec: SyntheticSpec, members: np.ndarray, racks: np.ndarray, n: int) -> np.ndarray:
    """n partitions' replicas (broker indexes) as Kafka places them: topic by topic of partitions_per_topic
    partitions, rack-aware, each topic with its own random start index and shift (seeded apart)."""
    draws = random.Random(spec.seed * 1_000 + _PLACEMENT_STREAM)
    rack_of = {int(b): str(racks[b]) for b in members}
    out = np.empty((n, spec.replication_factor), dtype=np.int64)
    for start in range(0, n, spec.partitions_per_topic):
        count = min(spec.partitions_per_topic, n - start)
        placed = assign_replicas_to_brokers(sorted(rack_of), count, spec.replication_factor, racks=rack_of,
                                            rng=draws)
        out[start:start + count] = [placed[p] for p in range(count)]
    return out


def _racks(spec: SyntheticSpec) -> np.ndarray:
    """Each broker's rack: ids alternate racks, so every contiguous pool spans the racks; with rack_weights each rack
    gets its share of the brokers (largest remainder), spread evenly along the ids."""
    if spec.rack_weights is None:
        return np.array([f"rack-{i % spec.n_racks}" for i in range(spec.n_brokers)])
    share = np.asarray(spec.rack_weights, dtype=float)
    share = share / share.sum() * spec.n_brokers
    counts = np.floor(share).astype(int)
    counts[np.argsort(counts - share, kind="stable")[:spec.n_brokers - counts.sum()]] += 1
    rack_of = np.repeat(np.arange(spec.n_racks), counts)
    along = np.concatenate([(np.arange(c) + 0.5) / c for c in counts])  # where a rack's k-th broker falls
    return np.array([f"rack-{r}" for r in rack_of[np.argsort(along, kind="stable")]])


def _skew_leaders(rng: np.random.Generator, spec: SyntheticSpec, replicas: np.ndarray,
                  hot_of_pool: dict[str, np.ndarray]) -> None:
    """Leadership skew: some partitions get their hot-broker replica as leader (first position)."""
    if spec.leader_skew > 0:
        hot_all = np.concatenate(list(hot_of_pool.values()))
        is_hot = np.isin(replicas, hot_all)
        chosen = (rng.random(spec.n_partitions) < spec.leader_skew) & is_hot.any(axis=1)
        for p in np.flatnonzero(chosen):
            j = int(np.argmax(is_hot[p]))
            replicas[p, [0, j]] = replicas[p, [j, 0]]


def _enlarge_hot_led(spec: SyntheticSpec, replicas: np.ndarray, hot_of_pool: dict[str, np.ndarray],
                     sizes: np.ndarray) -> None:
    """Partitions whose preferred leader is a hot broker made hot_leader_size_factor times larger (in place)."""
    if spec.hot_leader_size_factor != 1.0:
        led_by_hot = np.isin(replicas[:, 0], np.concatenate(list(hot_of_pool.values())))
        sizes[led_by_hot] = (sizes[led_by_hot] * spec.hot_leader_size_factor).astype(sizes.dtype)


def _stray_replicas(rng: np.random.Generator, spec: SyntheticSpec, layout: _Layout) -> None:
    """Some replicas live outside their topic's pool (a topic moved to a new pool, not yet migrated)."""
    if spec.out_of_pool_fraction > 0 and spec.n_pools > 1:
        replicas, racks = layout.replicas, layout.racks
        for p in np.flatnonzero(rng.random(spec.n_partitions) < spec.out_of_pool_fraction):
            others = np.flatnonzero((layout.broker_pool != layout.topic_pool[p])
                                    & ~np.isin(np.arange(spec.n_brokers), replicas[p]))
            same_rack = others[racks[others] == racks[replicas[p, -1]]]
            if len(same_rack):
                replicas[p, -1] = rng.choice(same_rack)


def _traffic(rng: np.random.Generator, spec: SyntheticSpec) -> _Traffic:
    n_parts = spec.n_partitions
    bytes_in = np.minimum(rng.zipf(spec.zipf_a, n_parts), spec.max_skew).astype(float)
    bytes_in = bytes_in / bytes_in.mean() * spec.mean_bytes_in_per_s
    fanout = rng.integers(1, 4, n_parts)  # consumer groups per topic-ish
    bytes_out = bytes_in * fanout
    sizes = (bytes_in * spec.retention_s * rng.lognormal(0.0, 0.3, n_parts)).astype(np.int64)
    if spec.size_distribution != "zipf-traffic":
        sizes = _drawn_sizes(spec)
    cpu = CpuModel()
    return _Traffic(bytes_in, bytes_out, sizes, cpu.leader(bytes_in, bytes_out), cpu.follower(bytes_in),
                    rng.random(n_parts) < spec.under_replicated_fraction)


def _drawn_sizes(spec: SyntheticSpec) -> np.ndarray:
    """Partition sizes apart from the traffic (retention, not rate, makes a partition big), with zipf-traffic's
    mean: mean bytes in x retention."""
    rng = np.random.default_rng([spec.seed, _SIZES_STREAM])
    n, mean = spec.n_partitions, spec.mean_bytes_in_per_s * spec.retention_s
    if spec.size_distribution == "uniform":
        sizes = rng.uniform(0.0, 2.0, n)
    elif spec.size_distribution == "lognormal":
        sizes = rng.lognormal(0.0, LOGNORMAL_SIGMA, n)
        if spec.size_median_bytes is not None:  # log-normal(0, sigma) has median 1
            return (sizes * spec.size_median_bytes).astype(np.int64)
    elif spec.size_distribution == "pareto":
        sizes = rng.pareto(PARETO_SHAPE, n) + 1.0
    else:  # giants
        sizes = rng.lognormal(0.0, GIANT_BODY_SIGMA, n)
    sizes = sizes / sizes.mean() * mean
    if spec.size_distribution == "giants":
        broker_load = mean * n * spec.replication_factor / spec.n_brokers
        sizes[rng.choice(n, size=min(GIANT_PARTITIONS, n), replace=False)] = GIANT_SHARE * broker_load
    return sizes.astype(np.int64)


def _replica_tables(spec: SyntheticSpec, layout: _Layout, traffic: _Traffic,
                    dead_index: int) -> tuple[pd.DataFrame, pd.DataFrame, np.ndarray, np.ndarray]:
    """The replicas and partitions tables; also each replica's broker index and its load in its current role."""
    rf, n_parts, replicas, broker_ids = spec.replication_factor, spec.n_partitions, layout.replicas, layout.broker_ids
    flat_broker = replicas.ravel()
    position = np.tile(np.arange(rf), n_parts)
    in_isr = np.ones_like(flat_broker, dtype=bool)
    in_isr[np.repeat(traffic.under, rf) & (position == rf - 1)] = False
    in_isr[flat_broker == dead_index] = False
    isr_matrix = in_isr.reshape(-1, rf)
    # The leader is the first in-sync replica (the preferred one unless it is out of the ISR).
    leader = replicas[np.arange(n_parts), np.argmax(isr_matrix, axis=1)]
    is_leader = flat_broker == np.repeat(leader, rf)

    per_replica = lambda a: np.repeat(a, rf)  # noqa: E731 - partition value for each of its replicas
    lead, follow = role_loads(per_replica(traffic.sizes).astype(float), per_replica(traffic.bytes_in),
                              per_replica(traffic.bytes_out), np.full(n_parts * rf, float(rf)),
                              per_replica(traffic.cpu_leader), per_replica(traffic.cpu_follower),
                              [NETWORK_IN, NETWORK_OUT, CPU])
    current = np.where(is_leader[:, None], lead, follow)
    replicas_df = pd.DataFrame({
        "topic": per_replica(layout.topics), "partition": per_replica(layout.partition_no),
        "broker_id": broker_ids[flat_broker].astype(np.int32), "position": position.astype(np.int32),
        "is_leader": is_leader, "in_isr": in_isr, "size_bytes": per_replica(traffic.sizes),
        "nw_in_bytes_per_s": current[:, 0], "nw_out_bytes_per_s": current[:, 1], "cpu_cores": current[:, 2]})
    partitions_df = pd.DataFrame({
        "topic": layout.topics, "partition": layout.partition_no, "replication_factor": rf,
        "replicas": list(broker_ids[replicas].astype(int).tolist()),
        "isr": [list(map(int, broker_ids[r][m])) for r, m in zip(replicas, isr_matrix, strict=True)],
        "leader": broker_ids[leader].astype(np.int32), "topic_pool": layout.topic_pool, "excluded": False,
        "size_bytes": traffic.sizes, "bytes_in_per_s": traffic.bytes_in, "bytes_out_per_s": traffic.bytes_out,
        "cpu_leader_cores": traffic.cpu_leader, "cpu_follower_cores": traffic.cpu_follower})
    return replicas_df, partitions_df, flat_broker, current


def _brokers_table(spec: SyntheticSpec, layout: _Layout, replicas_df: pd.DataFrame, flat_broker: np.ndarray,
                   current: np.ndarray, dead_index: int) -> pd.DataFrame:
    """Capacities such that each pool's mean usage is target_usage (with mixed hardware, twice as much on every
    second broker of a rack; with a capacity spread, disks of differing sizes)."""
    racks, broker_pool = layout.racks, layout.broker_pool
    disk_spread = (np.random.default_rng([spec.seed, _CAPACITY_STREAM])
                   .uniform(1.0 - spec.capacity_spread, 1.0 + spec.capacity_spread, spec.n_brokers))
    load = {"disk": np.bincount(flat_broker, weights=replicas_df["size_bytes"], minlength=spec.n_brokers),
            "nw_in": np.bincount(flat_broker, weights=current[:, 0], minlength=spec.n_brokers),
            "nw_out": np.bincount(flat_broker, weights=current[:, 1], minlength=spec.n_brokers),
            "cpu": np.bincount(flat_broker, weights=current[:, 2], minlength=spec.n_brokers)}
    capacity = {k: np.zeros(spec.n_brokers) for k in load}
    for pool in layout.pool_names:
        members = np.flatnonzero(broker_pool == pool)
        rank_in_rack = np.array([np.sum(racks[members][:i] == racks[members][i]) for i in range(len(members))])
        factor = np.where((rank_in_rack % 2 == 1) & spec.mixed_hardware, 2.0, 1.0)
        for k in load:
            share = factor * disk_spread[members] if k == "disk" and spec.capacity_spread else factor
            capacity[k][members] = load[k][members].sum() / spec.target_usage * share / share.sum()
    return pd.DataFrame({
        "broker_id": layout.broker_ids.astype(np.int32), "rack": racks, "broker_pool": broker_pool,
        "alive": np.arange(spec.n_brokers) != dead_index, "excluded": False, "host": "synthetic", "port": 9092,
        "disk_capacity_bytes": capacity["disk"].astype(np.int64), "disk_used_bytes": load["disk"].astype(np.int64),
        "log_dir_total_bytes": None, "log_dir_usable_bytes": None,
        "nw_in_capacity_bytes_per_s": capacity["nw_in"], "nw_out_capacity_bytes_per_s": capacity["nw_out"],
        "cpu_capacity_cores": capacity["cpu"]})


def write_cluster(folder: Path, tables: SnapshotTables, config: dict[str, Any]) -> tuple[Path, RunFolder]:
    """A generated cluster on disk, as the plan step reads it: `folder/config.yaml` (runs under `folder/runs`) and
    the snapshot in the run folder `folder/run`."""
    folder.mkdir(parents=True, exist_ok=True)
    config_path = folder / "config.yaml"
    config_path.write_text(yaml.safe_dump({**config, "run_root": str(folder / "runs")}, sort_keys=False))
    run = RunFolder(folder / "run")
    write_snapshot(run, tables, {"cluster": config["cluster"]["name"]})
    return config_path, run
