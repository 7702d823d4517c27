"""A pool's part of the validated plan as the executor takes it: its moves, how they are ordered and batched, and
the pools a run covers."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kafka_rebalancer.config import RebalancerConfig
from kafka_rebalancer.errors import RebalancerError
from kafka_rebalancer.execute.log_dir_moves import LogDirMove
from kafka_rebalancer.model.copy_time import copy_loads
from kafka_rebalancer.model.reassignment import Key, copies_nothing, parse_reassignment, plan_folder_hash
from kafka_rebalancer.model.schemas import LOG_DIR_MOVES
from kafka_rebalancer.run_folder import EXECUTE, PLAN, SNAPSHOT, RunFolder, read_json, read_table
from kafka_rebalancer.snapshot.store import read_snapshot
from kafka_rebalancer.snapshot.tiered import move_costs
from kafka_rebalancer.validate.suite import assert_validated

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PartitionMove:
    topic: str
    partition: int
    old: tuple[int, ...]
    new: tuple[int, ...]
    size_bytes: int
    leader: int = -1  # the partition's leader in the snapshot: it serves the copies (-1: not known)
    target_dirs: tuple[tuple[int, str], ...] = ()  # (receiving broker, log directory plan.json names for it)

    @property
    def key(self) -> Key:
        return (self.topic, self.partition)

    @property
    def brokers(self) -> frozenset[int]:
        """Brokers a move loads: the ones gaining a replica and the ones losing one."""
        return frozenset(self.old) ^ frozenset(self.new)

    @property
    def leadership_only(self) -> bool:
        """Copies nothing (the order at most changes): runs in the leadership batches."""
        return copies_nothing(self.old, self.new)

    def arrival_dirs(self) -> dict[tuple[str, int, int], str]:
        return {(self.topic, self.partition, broker): path for broker, path in self.target_dirs}

    @property
    def bytes_to_copy(self) -> int:
        return self.size_bytes * len(set(self.new) - set(self.old))


# A broker copying less than this many poll intervals' worth of its throttle takes moves beyond its count limit:
# five small moves in flight drain in a fraction of a poll interval, and the throttle then idles until the next poll.
BUFFER_POLLS = 3


@dataclass(frozen=True)
class Limits:
    max_moves_per_broker: int
    max_moves_cluster: int
    poll_interval_s: float
    move_timeout_s: float
    run_timeout_s: float = float("inf")
    urp_wait_timeout_s: float = float("inf")
    # Bytes in flight (received, or served as leader) under which a broker takes moves beyond max_moves_per_broker;
    # 0: the count alone (unthrottled: no rate to keep busy).
    buffer_bytes: float = 0.0

    @classmethod
    def of(cls, config: RebalancerConfig, rate_bytes_per_s: int | None = None) -> Limits:
        e = config.execution
        return cls(e.max_moves_per_broker, e.max_moves_cluster, e.poll_interval_s, e.move_timeout_s,
                   e.run_timeout_s, e.urp_wait_timeout_s,
                   (rate_bytes_per_s or 0) * e.poll_interval_s * BUFFER_POLLS)


@dataclass(frozen=True)
class PoolPlan:
    """One pool's moves of a validated plan, with what the executor needs to judge the cluster's state."""

    digest: str
    moves: list[PartitionMove]
    targets: dict[Key, tuple[int, ...]]  # every pool's targets: reassignments a sibling pool task started
    pool_topics: list[str]
    disk_utilisation: dict[int, float]
    log_dir_moves: list[LogDirMove] = field(default_factory=list)  # remove-disks: within brokers


@dataclass(frozen=True)
class SyncFacts:
    """What decides whether a partition short of in-sync replicas may move: the cluster's live brokers now, the
    brokers this run drains, and each moving topic's min.insync.replicas."""

    live: frozenset[int]
    drained: frozenset[int]
    min_isr: Mapping[str, int]

    def replaced(self, broker: int) -> bool:
        """A dead or drained broker: its replicas are the ones the run restores elsewhere."""
        return broker not in self.live or broker in self.drained


def out_of_sync_reason(move: PartitionMove, isr: Sequence[int], facts: SyncFacts) -> str | None:
    """Why a move of a partition whose ISR lacks some of its replicas must not start (None: it may). It may when
    every replica out of sync is on a dead or drained broker and the move removes it: the move restores the lost
    copy elsewhere, and every replica it keeps is in sync. Kafka's min.insync.replicas must still hold."""
    removed = set(move.old) - set(move.new)
    held = [b for b in move.old if b not in isr and (b not in removed or not facts.replaced(b))]
    if held:
        return (f"under-replicated now: ISR {list(isr)} of replicas {list(move.old)}; replica(s) {held} out of sync "
                "are not on a dead or drained broker the move removes")
    live_isr = [b for b in isr if b in facts.live]
    if len(live_isr) < facts.min_isr[move.topic]:
        return (f"under-replicated now: {len(live_isr)} live in-sync replica(s) {live_isr}, fewer than the topic's "
                f"min.insync.replicas {facts.min_isr[move.topic]}")
    return None


def replaced_brokers(moves: Iterable[PartitionMove], live: Iterable[int], drained: frozenset[int]) -> frozenset[int]:
    """The brokers whose replicas missing from an ISR the pool's gate does not wait for: dead ones the plan moves
    replicas off, and the run's drained ones. Only the plan brings those replicas back."""
    up = set(live)
    sources = {b for m in moves for b in set(m.old) - set(m.new)}
    return frozenset(b for b in sources if b not in up) | drained


def pick_batch(pending: list[PartitionMove], in_flight: Iterable[PartitionMove], limits: Limits) -> list[PartitionMove]:
    """The pending moves that may start now, in order, within the per-broker and cluster-wide limits.

    A move loads the brokers gaining or losing a replica and the leader serving its copies. Each of them takes it
    while it has fewer than max_moves_per_broker moves in flight, or copies fewer than `buffer_bytes` (small moves
    beyond the count keep its throttle busy until the next poll). Leadership-only changes and data moves never
    share a batch nor run at the same time: a batch takes the kind of the first pending move and starts only when
    nothing of the other kind is in flight."""
    running = list(in_flight)
    if not pending or any(m.leadership_only != pending[0].leadership_only for m in running):
        return []
    kind = pending[0].leadership_only
    per_broker: dict[int, int] = {}
    copying: dict[int, int] = {}

    def take(move: PartitionMove) -> None:
        for b in _loaded(move):
            per_broker[b] = per_broker.get(b, 0) + 1
        for b, _, n in copy_loads(move):
            copying[b] = copying.get(b, 0) + n

    for move in running:
        take(move)
    batch: list[PartitionMove] = []
    for move in pending:
        if len(running) + len(batch) >= limits.max_moves_cluster:
            break
        if move.leadership_only == kind and all(
                per_broker.get(b, 0) < limits.max_moves_per_broker or copying.get(b, 0) < limits.buffer_bytes
                for b in _loaded(move)):
            batch.append(move)
            take(move)
    return batch


def _loaded(move: PartitionMove) -> set[int]:
    return set(move.brokers) | {b for b, _, _ in copy_loads(move)}


def bottleneck_first(pending: list[PartitionMove], in_flight: Iterable[PartitionMove]) -> list[PartitionMove]:
    """Data moves by the work left on their busiest broker (bytes to receive or serve, in flight or pending), the
    largest first within it: the broker that sets the throttle-bound minimum starts at once and stays busy to the
    end. Leadership-only changes keep their place in front."""
    work: dict[tuple[int, str], int] = {}
    for move in [*pending, *in_flight]:
        for b, side, n in copy_loads(move):
            work[(b, side)] = work.get((b, side), 0) + n

    def busiest(move: PartitionMove) -> tuple[int, int, str, int]:
        return (-max((work[(b, side)] for b, side, _ in copy_loads(move)), default=0), -move.size_bytes, *move.key)

    return [m for m in pending if m.leadership_only] + sorted((m for m in pending if not m.leadership_only),
                                                              key=busiest)


def order_moves(moves: list[PartitionMove], order: str, disk_utilisation: Mapping[int, float]) -> list[PartitionMove]:
    """Leadership-only changes first (plan order), then data moves in the configured order."""
    def most_loaded(m: PartitionMove) -> tuple[float, int, str, int]:
        leaving = set(m.old) - set(m.new)
        return (-max((disk_utilisation.get(b, 0.0) for b in leaving), default=0.0), m.size_bytes, *m.key)

    keys: dict[str, Callable[[PartitionMove], Any]] = {
        "smallest_first": lambda m: (m.size_bytes, *m.key),
        "largest_first": lambda m: (-m.size_bytes, *m.key),
        "most_loaded_first": most_loaded,
    }
    if order == "bottleneck_first":  # the executor keeps this order up as moves finish
        return bottleneck_first(moves, [])
    data = [m for m in moves if not m.leadership_only]
    if order != "plan":
        data.sort(key=keys[order])
    return [m for m in moves if m.leadership_only] + data


def load_pool_plan(config: RebalancerConfig, run: RunFolder, pool: str) -> PoolPlan:
    """The validated plan's moves for one pool (by the topic's pool in the snapshot), in plan order; refused
    unless the plan, its snapshot and the config are still the ones validated."""
    plan_dir = run.require(PLAN)
    summary = read_json(plan_dir / "summary.json")
    digest = plan_folder_hash(plan_dir, summary["snapshot_hash"], config.fingerprint())
    assert_validated(run, digest)
    return read_pool_plan(run, pool, digest)


def read_pool_plan(run: RunFolder, pool: str, digest: str) -> PoolPlan:
    """One pool's moves as the run folder holds them, without checking them against the config."""
    plan_dir = run.require(PLAN)
    plan = parse_reassignment((plan_dir / "plan.json").read_text(), str(plan_dir / "plan.json"))
    rollback = {(r.topic, r.partition): r.replicas
                for r in parse_reassignment((plan_dir / "rollback.json").read_text(), str(plan_dir / "rollback.json"))}
    snapshot, _ = read_snapshot(run)
    parts = snapshot.partitions.set_index(["topic", "partition"])
    # What a new replica copies: a tiered partition's cost (snapshot.tiered), else the leader's log.
    tiered_costs = move_costs(snapshot.tiered_partitions)
    moves = [PartitionMove(r.topic, r.partition, tuple(rollback[(r.topic, r.partition)]), tuple(r.replicas),
                           tiered_costs.get((r.topic, r.partition),
                                            int(parts.at[(r.topic, r.partition), "size_bytes"])),
                           int(parts.at[(r.topic, r.partition), "leader"]), tuple(sorted(r.target_dirs().items())))
             for r in plan if parts.at[(r.topic, r.partition), "topic_pool"] == pool]
    brokers = snapshot.brokers
    used = snapshot.replicas.groupby("broker_id")["size_bytes"].sum()
    utilisation = {int(b): float(used.get(b, 0)) / float(c) if c else 0.0
                   for b, c in zip(brokers["broker_id"], brokers["disk_capacity_bytes"], strict=True)}
    pool_topics = sorted(snapshot.partitions.loc[snapshot.partitions["topic_pool"] == pool, "topic"].unique())
    log_dir_moves = [LogDirMove(r.topic, int(r.partition), int(r.broker_id), r.source_dir, r.target_dir,
                                int(r.size_bytes))
                     for r in (read_table(plan_dir, LOG_DIR_MOVES).itertuples()
                               if (plan_dir / f"{LOG_DIR_MOVES.name}.parquet").exists() else ())
                     if r.broker_pool == pool]
    return PoolPlan(digest, moves, {(r.topic, r.partition): tuple(r.replicas) for r in plan}, pool_topics,
                    utilisation, log_dir_moves)


def run_pools(run: RunFolder) -> list[str]:
    """The pools a run planned for (its snapshot's topic pools) and any pool it started executing: what a
    cancel of the whole run covers, whatever pools the config names now."""
    pools = {p.name for p in run.stage_path(EXECUTE).iterdir() if p.is_dir() and not p.name.startswith(".")} \
        if run.has(EXECUTE) else set()
    if run.has(SNAPSHOT):
        try:
            snapshot, _ = read_snapshot(run)
        except RebalancerError as exc:  # the brake still reaches the pools that started executing
            log.warning("the pools the run planned are unknown (%s): only those it started executing are "
                        "covered; name others with --pool", exc)
        else:
            pools |= set(snapshot.partitions["topic_pool"].dropna())
    return sorted(pools)


def reassignment_target(state: Mapping[str, list[int]]) -> frozenset[int]:
    """The replica set a reassignment in progress is heading for."""
    return frozenset(state["replicas"]) - frozenset(state.get("removing_replicas") or [])
