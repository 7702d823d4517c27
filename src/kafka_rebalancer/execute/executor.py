"""Executing one pool's part of a validated plan with the Kafka Admin API (DESIGN §7).

Moves start in batches that keep at most N in-flight partition moves per broker and M in the cluster. Right
before a partition starts, its current replicas must still equal the plan's old replicas and its ISR must be
complete; otherwise it is skipped and recorded, never overwritten. A move is complete when the partition has
left ListPartitionReassignments, its replicas equal the target and every target replica is in the ISR. Then a
preferred leader election runs for the moved partitions. Every action is appended to the execution log, which
is also what lets a rerun continue where an earlier attempt stopped.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from kafka_rebalancer.config import RebalancerConfig
from kafka_rebalancer.errors import ExecutionError
from kafka_rebalancer.execute.log import ExecutionLog, Key
from kafka_rebalancer.kafka_admin import PartitionInfo
from kafka_rebalancer.plan.artifacts import parse_reassignment, plan_hash
from kafka_rebalancer.quality.suite import assert_validated
from kafka_rebalancer.run_folder import EXECUTE, PLAN, RunFolder, read_json, write_json
from kafka_rebalancer.snapshot.store import read_snapshot

log = logging.getLogger(__name__)


class Cluster(Protocol):
    """The admin calls the executor needs (ClusterAdmin in production, a fake in unit tests)."""

    def describe_partitions(self, topics: Iterable[str] | None = None) -> list[PartitionInfo]: ...
    def list_reassignments(self) -> dict[Key, dict[str, list[int]]]: ...
    def alter_reassignments(self, targets: Mapping[Key, list[int] | None]) -> dict[Key, str]: ...
    def elect_preferred_leaders(self, partitions: Iterable[Key]) -> dict[Key, str | None]: ...


@dataclass(frozen=True)
class PartitionMove:
    topic: str
    partition: int
    old: tuple[int, ...]
    new: tuple[int, ...]
    size_bytes: int

    @property
    def key(self) -> Key:
        return (self.topic, self.partition)

    @property
    def brokers(self) -> frozenset[int]:
        """Brokers a move loads: the ones gaining a replica and the ones losing one."""
        return frozenset(self.old) ^ frozenset(self.new)

    @property
    def bytes_to_copy(self) -> int:
        return self.size_bytes * len(set(self.new) - set(self.old))


@dataclass(frozen=True)
class Limits:
    max_moves_per_broker: int
    max_moves_cluster: int
    poll_interval_s: float
    move_timeout_s: float


def pick_batch(pending: list[PartitionMove], in_flight: Iterable[PartitionMove], limits: Limits) -> list[PartitionMove]:
    """The pending moves that may start now, in order, within the per-broker and cluster-wide limits."""
    per_broker: dict[int, int] = {}
    running = list(in_flight)
    for move in running:
        for b in move.brokers:
            per_broker[b] = per_broker.get(b, 0) + 1
    batch: list[PartitionMove] = []
    for move in pending:
        if len(running) + len(batch) >= limits.max_moves_cluster:
            break
        if all(per_broker.get(b, 0) < limits.max_moves_per_broker for b in move.brokers):
            batch.append(move)
            for b in move.brokers:
                per_broker[b] = per_broker.get(b, 0) + 1
    return batch


def load_pool_moves(config: RebalancerConfig, run: RunFolder, pool: str) -> tuple[str, list[PartitionMove]]:
    """The validated plan's moves for one pool (by the topic's pool in the snapshot), in plan order."""
    plan_dir = run.require(PLAN)
    summary = read_json(plan_dir / "summary.json")
    plan_text = (plan_dir / "plan.json").read_text()
    digest = plan_hash(plan_text, summary["snapshot_hash"], config.fingerprint())
    assert_validated(run, digest)
    plan = parse_reassignment(plan_text, str(plan_dir / "plan.json"))
    rollback = {(r.topic, r.partition): r.replicas
                for r in parse_reassignment((plan_dir / "rollback.json").read_text(), str(plan_dir / "rollback.json"))}
    snapshot, _ = read_snapshot(run)
    parts = snapshot.partitions.set_index(["topic", "partition"])
    moves = [PartitionMove(r.topic, r.partition, tuple(rollback[(r.topic, r.partition)]), tuple(r.replicas),
                           int(parts.at[(r.topic, r.partition), "size_bytes"]))
             for r in plan if parts.at[(r.topic, r.partition), "topic_pool"] == pool]
    return digest, moves


class Progress:
    """Moves and bytes done of the total, with a time-left estimate, logged at intervals."""

    def __init__(self, pool: str, moves: list[PartitionMove], every_s: float = 10.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.pool, self.total_moves = pool, len(moves)
        self.total_bytes = sum(m.bytes_to_copy for m in moves)
        self.done_moves = self.done_bytes = 0
        self.clock, self.every_s = clock, every_s
        self.started = self.last = clock()

    def done(self, move: PartitionMove) -> None:
        self.done_moves += 1
        self.done_bytes += move.bytes_to_copy

    def line(self) -> str:
        elapsed = self.clock() - self.started
        left = "unknown"
        if self.done_bytes and self.total_bytes:
            rate = self.done_bytes / max(elapsed, 1e-3)
            left = f"{(self.total_bytes - self.done_bytes) / rate:.0f}s"
        return (f"{self.pool}: {self.done_moves}/{self.total_moves} moves, {self.done_bytes / 2**20:.1f} of "
                f"{self.total_bytes / 2**20:.1f} MiB, {elapsed:.0f}s elapsed, about {left} left")

    def maybe_log(self, force: bool = False) -> None:
        if force or self.clock() - self.last >= self.every_s:
            self.last = self.clock()
            log.info("progress %s", self.line())


def execute_pool(config: RebalancerConfig, cluster: Cluster, run: RunFolder, pool: str, *,
                 sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic) -> dict[str, Any]:
    """Execute (or continue executing) the pool's moves; returns the result also written to result.json."""
    digest, moves = load_pool_moves(config, run, pool)
    limits = Limits(config.execution.max_moves_per_broker, config.execution.max_moves_cluster,
                    config.execution.poll_interval_s, config.execution.move_timeout_s)
    out_dir = run.stage_path(f"{EXECUTE}/{pool}")
    xlog = ExecutionLog(out_dir / "execution_log.jsonl", pool, digest)
    state = xlog.state()
    by_key = {m.key: m for m in moves}

    ongoing = cluster.list_reassignments()
    ours = {k for k, e in state.last.items() if e["action"] == "started" and k in by_key}
    foreign = sorted(k for k in ongoing if k not in ours)
    if foreign:
        raise ExecutionError(f"refusing to start: {len(foreign)} reassignment(s) in progress that this run did not "
                             f"start, e.g. {[f'{t}-{p}' for t, p in foreign[:10]]}; wait for them or cancel them")
    xlog.append("execute_started", moves=len(moves), resumed=bool(state.last))

    done_actions = {"completed", "skipped"}
    pending = [m for m in moves if state.action(m.key) not in done_actions and m.key not in ours]
    in_flight: dict[Key, float] = {k: clock() for k in ours}  # re-adopted moves get a fresh timeout
    progress = Progress(pool, moves, clock=clock)
    for m in moves:
        if state.action(m.key) == "completed":
            progress.done(m)
    completed_now: list[Key] = []
    skipped: list[dict[str, Any]] = []

    while pending or in_flight:
        if in_flight:
            ongoing = cluster.list_reassignments()
            current = _describe(cluster, in_flight)
            for key in list(in_flight):
                move, info = by_key[key], current.get(key)
                if key in ongoing:
                    continue
                if info is not None and tuple(info.replicas) == move.new and set(move.new) <= set(info.isr):
                    xlog.append("completed", key, replicas=list(move.new), isr=info.isr)
                    completed_now.append(key)
                    progress.done(move)
                    del in_flight[key]
                elif info is not None and tuple(info.replicas) == move.old:
                    # Ended without reaching the target (cancelled): try again from the start.
                    xlog.append("restart", key, detail="reassignment ended with the old replicas")
                    del in_flight[key]
                    pending.insert(0, move)
                elif info is not None and tuple(info.replicas) == move.new:
                    continue  # target replicas not all in the ISR yet
                else:
                    replicas = info.replicas if info else None
                    xlog.append("skipped", key, reason="drifted while moving", current=replicas)
                    skipped.append({"topic": key[0], "partition": key[1], "reason": "drifted while moving"})
                    del in_flight[key]
            stuck = [k for k, since in in_flight.items() if clock() - since > limits.move_timeout_s]
            if stuck:
                names = [f"{t}-{p}" for t, p in stuck]
                xlog.append("timeout", stuck=names, timeout_s=limits.move_timeout_s)
                raise ExecutionError(f"{pool}: {len(stuck)} move(s) not complete after {limits.move_timeout_s:.0f}s: "
                                     f"{names}; a rerun continues from the execution log, "
                                     "`kafka-rebalancer cancel` reverts them")
        batch = pick_batch(pending, [by_key[k] for k in in_flight], limits)
        if batch:
            current = _describe(cluster, [m.key for m in batch])
            targets: dict[Key, list[int]] = {}
            for move in batch:
                pending.remove(move)
                info = current.get(move.key)
                reason = _drift_reason(move, info)
                if reason == "already at target":
                    xlog.append("completed", move.key, replicas=list(move.new), detail=reason)
                    progress.done(move)
                elif reason:
                    xlog.append("skipped", move.key, reason=reason, current=info.replicas if info else None)
                    skipped.append({"topic": move.topic, "partition": move.partition, "reason": reason})
                else:
                    targets[move.key] = list(move.new)
            refused = cluster.alter_reassignments(targets)
            for key, target in targets.items():
                if key in refused:
                    xlog.append("skipped", key, reason=f"controller refused: {refused[key]}")
                    skipped.append({"topic": key[0], "partition": key[1], "reason": f"refused: {refused[key]}"})
                else:
                    move = by_key[key]
                    xlog.append("started", key, old=list(move.old), new=target, bytes=move.bytes_to_copy)
                    in_flight[key] = clock()
        progress.maybe_log()
        if in_flight:
            sleep(limits.poll_interval_s)

    moved = [k for k, e in xlog.state().last.items() if e["action"] == "completed" and k in by_key]
    elections = cluster.elect_preferred_leaders(moved)
    failed_elections = {f"{t}-{p}": err for (t, p), err in elections.items() if err}
    xlog.append("leader_election", partitions=len(moved), failed=failed_elections)
    progress.maybe_log(force=True)
    final = xlog.state()
    result = {
        "pool": pool, "plan_hash": digest, "moves": len(moves),
        "completed": sum(1 for m in moves if final.action(m.key) == "completed"),
        "completed_this_attempt": len(completed_now),
        "skipped": [{"topic": k[0], "partition": k[1], "reason": e.get("reason")}
                    for k, e in sorted(final.last.items()) if e["action"] == "skipped" and k in by_key],
        "leader_elections_failed": failed_elections,
    }
    xlog.append("execute_finished", completed=result["completed"], skipped=len(result["skipped"]))
    write_json(out_dir / "result.json", result)
    log.info("%s: %d of %d moves complete, %d skipped", pool, result["completed"], len(moves), len(result["skipped"]))
    return result


def _describe(cluster: Cluster, keys: Iterable[Key]) -> dict[Key, PartitionInfo]:
    keys = set(keys)
    infos = cluster.describe_partitions(sorted({t for t, _ in keys}))
    return {(i.topic, i.partition): i for i in infos if (i.topic, i.partition) in keys}


def _drift_reason(move: PartitionMove, info: PartitionInfo | None) -> str | None:
    """Why a move must not start now (None: it may)."""
    if info is None:
        return "drifted: the partition no longer exists"
    if tuple(info.replicas) == move.new:
        return "already at target"
    if tuple(info.replicas) != move.old:
        return f"drifted: replicas are {info.replicas}, the plan expected {list(move.old)}"
    if info.leader < 0:
        return "no leader now"
    if len(info.isr) < len(info.replicas):
        return f"under-replicated now: ISR {info.isr} of replicas {info.replicas}"
    return None


def dry_run_pool(config: RebalancerConfig, cluster: Cluster, run: RunFolder, pool: str) -> dict[str, Any]:
    """What execute would do now, without changing anything: each move with its drift status."""
    digest, moves = load_pool_moves(config, run, pool)
    current = _describe(cluster, [m.key for m in moves])
    rows = [{"topic": m.topic, "partition": m.partition, "old": list(m.old), "new": list(m.new),
             "bytes": m.bytes_to_copy, "would": _drift_reason(m, current.get(m.key)) or "start"} for m in moves]
    result = {"pool": pool, "plan_hash": digest, "dry_run": True, "moves": rows}
    out_dir = run.stage_path(f"{EXECUTE}/{pool}")
    out_dir.mkdir(parents=True, exist_ok=True)
    write_json(out_dir / "dry_run.json", result)
    for row in rows:
        log.info("dry-run %s: %s-%d %s -> %s (%s)", pool, row["topic"], row["partition"], row["old"], row["new"],
                 row["would"])
    return result


def run_execute(config: RebalancerConfig, connection: Any, run: RunFolder, pool: str, *,
                dry_run: bool) -> dict[str, Any]:
    """Execute (or dry-run) one pool against the cluster behind `connection` (a KafkaConnection)."""
    from kafka_rebalancer.kafka_admin import ClusterAdmin

    with ClusterAdmin(connection) as admin:
        admin.check_reachable()
        if dry_run:
            return dry_run_pool(config, admin, run, pool)
        return execute_pool(config, admin, run, pool)
