"""Moves between a broker's log directories (JBOD; README: JBOD). Kafka's reassignment API has no directory, so
each move names its target with AlterReplicaLogDirs on the broker; the broker copies the replica into a "future"
log there under its own throttle (`replica.alter.log.dirs.io.max.bytes.per.second`) and swaps it in when caught up.
The broker keeps that choice in memory only: a restart loses a move in progress, so the executor asks again
whenever a move in flight has no future copy in its target (as Kafka's own tool retries until the replica is
there). Done means the replica is in its target directory with no future copy left.

Every step is a line in the execution log (`log_dir_started`, `log_dir_reissued`, `log_dir_completed`,
`log_dir_skipped`), so a rerun continues from it; cancel asks for each moved replica's source directory again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from kafka_rebalancer.errors import ExecutionError
from kafka_rebalancer.kafka_admin import LOG_DIR_THROTTLE_CONFIG

log = logging.getLogger(__name__)

Replica = tuple[str, int, int]  # topic, partition, broker


@dataclass(frozen=True)
class LogDirMove:
    topic: str
    partition: int
    broker: int
    source_dir: str
    target_dir: str
    size_bytes: int = 0

    @property
    def replica(self) -> Replica:
        return self.topic, self.partition, self.broker

    def fields(self) -> dict[str, Any]:
        return {"topic": self.topic, "partition": self.partition, "broker": self.broker,
                "source_dir": self.source_dir, "target_dir": self.target_dir, "bytes": self.size_bytes}


class LogDirCluster(Protocol):
    def describe_log_dirs(self, broker_ids: Iterable[int]) -> dict[int, dict[str, Any]]: ...
    def alter_replica_log_dirs(self, targets: Mapping[Replica, str]) -> dict[Replica, str]: ...
    def alter_broker_config(self, name: str, values: Mapping[int, str | None], why: str) -> dict[int, str]: ...


@dataclass(frozen=True)
class LogDirLimits:
    rate_bytes_per_s: int | None  # the intra-broker throttle per broker; None: Kafka's default (unthrottled)
    per_broker: int  # moves in flight per broker
    poll_s: float
    move_timeout_s: float


class LogDirExecution:
    def __init__(self, cluster: LogDirCluster, moves: list[LogDirMove], record: Callable[..., Any],
                 limits: LogDirLimits, sleep: Callable[[float], None], clock: Callable[[], float]) -> None:
        self.cluster, self.moves, self.record, self.limits = cluster, moves, record, limits
        self.sleep, self.clock = sleep, clock
        self.brokers = sorted({m.broker for m in moves})

    def run(self, done: Iterable[Replica] = ()) -> list[LogDirMove]:
        """Execute the moves not `done` (by an earlier attempt); the moves completed now. The throttle is set on
        the brokers moving and removed however it ends."""
        finished = set(done)
        pending = [m for m in self.moves if m.replica not in finished]
        if not pending:
            return []
        self._throttle(str(self.limits.rate_bytes_per_s) if self.limits.rate_bytes_per_s else None)
        try:
            return self._loop(pending)
        finally:
            self._throttle(None)

    def _loop(self, pending: list[LogDirMove]) -> list[LogDirMove]:
        in_flight: dict[Replica, float] = {}  # replica -> when it was asked for
        by_replica = {m.replica: m for m in pending}
        completed: list[LogDirMove] = []
        while pending or in_flight:
            where = self.cluster.describe_log_dirs(self.brokers)
            for replica in list(in_flight):
                move = by_replica[replica]
                state = move_state(where, move)
                if state == "done":
                    del in_flight[replica]
                    completed.append(move)
                    self.record("log_dir_completed", **move.fields())
                elif state == "gone":
                    del in_flight[replica]
                    self.record("log_dir_skipped", **move.fields(), reason=f"no replica on broker {move.broker}")
                elif state == "idle":  # no future copy in the target: the broker forgot the move (a restart)
                    self._ask({replica: move.target_dir})
                    self.record("log_dir_reissued", **move.fields())
            self._check_timeouts(in_flight)
            started = self._start(pending, in_flight, where)
            completed += started
            if pending or in_flight:
                self.sleep(self.limits.poll_s)
        return completed

    def _start(self, pending: list[LogDirMove], in_flight: dict[Replica, float],
               where: Mapping[int, dict[str, Any]]) -> list[LogDirMove]:
        """Ask for the next moves while their brokers have room; those already where they go are done at once."""
        busy: dict[int, int] = {}
        for _, _, broker in in_flight:
            busy[broker] = busy.get(broker, 0) + 1
        asked: dict[Replica, str] = {}
        already: list[LogDirMove] = []
        for move in list(pending):
            if busy.get(move.broker, 0) >= self.limits.per_broker:
                continue
            pending.remove(move)
            state = move_state(where, move)
            if state == "done":
                already.append(move)
                self.record("log_dir_completed", **move.fields(), detail="already in its target directory")
            elif state == "gone":
                self.record("log_dir_skipped", **move.fields(), reason=f"no replica on broker {move.broker}")
            else:
                asked[move.replica] = move.target_dir
                busy[move.broker] = busy.get(move.broker, 0) + 1
                in_flight[move.replica] = self.clock()
                self.record("log_dir_started", **move.fields())
        self._ask(asked)
        return already

    def _ask(self, targets: Mapping[Replica, str]) -> None:
        errors = self.cluster.alter_replica_log_dirs(targets)
        if errors:
            refused = [f"{t}-{p} on broker {b}: {e}" for (t, p, b), e in sorted(errors.items())]
            raise ExecutionError(f"AlterReplicaLogDirs refused {len(refused)} move(s): {', '.join(refused)}")

    def _check_timeouts(self, in_flight: Mapping[Replica, float]) -> None:
        stuck = [f"{t}-{p} on broker {b}" for (t, p, b), since in sorted(in_flight.items())
                 if self.clock() - since > self.limits.move_timeout_s]
        if stuck:
            self.record("timeout", stuck=stuck)
            raise ExecutionError(f"{len(stuck)} move(s) between log directories not done after "
                                 f"{self.limits.move_timeout_s:.0f}s: {', '.join(stuck)}")

    def _throttle(self, value: str | None) -> None:
        failed = self.cluster.alter_broker_config(LOG_DIR_THROTTLE_CONFIG, dict.fromkeys(self.brokers, value),
                                                  "to throttle copies between a broker's log directories")
        self.record("log_dir_throttle_set" if value else "log_dir_throttle_cleared", brokers=self.brokers,
                    rate_bytes_per_s=self.limits.rate_bytes_per_s if value else None, failed=failed)
        if failed:
            log.warning("the log directory throttle could not be %s on brokers %s", "set" if value else "removed",
                        failed)


def move_state(where: Mapping[int, dict[str, Any]], move: LogDirMove) -> str:
    """done (in the target, no future copy), copying (a future copy in the target), idle, or gone."""
    described = where.get(move.broker, {})
    key = (move.topic, move.partition)
    now_in, future = described.get("replica_dirs", {}).get(key), described.get("future_dirs", {}).get(key)
    if now_in is None:
        return "gone"
    if now_in == move.target_dir and future is None:
        return "done"
    return "copying" if future == move.target_dir else "idle"


def cancel_log_dir_moves(cluster: LogDirCluster, moves: Iterable[LogDirMove], record: Callable[..., Any]) -> int:
    """Ask for each replica's source directory again (a move in flight drops its future copy), with no throttle
    left from an executor that did not end on its own; the count asked."""
    moves = list(moves)
    cluster.alter_broker_config(LOG_DIR_THROTTLE_CONFIG, dict.fromkeys(sorted({m.broker for m in moves})),
                                "to remove the throttle of copies between a broker's log directories")
    where = cluster.describe_log_dirs(sorted({m.broker for m in moves}))
    back = {m.replica: m.source_dir for m in moves
            if move_state(where, LogDirMove(m.topic, m.partition, m.broker, m.target_dir, m.source_dir)) != "done"
            and move_state(where, m) != "gone"}
    errors = cluster.alter_replica_log_dirs(back)
    record("log_dir_cancelled", moves=len(back),
           errors={f"{t}-{p} on broker {b}": e for (t, p, b), e in errors.items()})
    return len(back) - len(errors)
