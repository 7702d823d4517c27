"""Moves between a broker's log directories against a fake broker: asked for per broker up to the limit, asked
again when the broker forgot a move (no future copy: it restarted), done only in the target with no future copy
left, skipped when the replica is gone, the throttle set and removed, a stuck move named; cancel asks for the source
directory again."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pytest

from kafka_rebalancer.errors import ExecutionError
from kafka_rebalancer.execute.log_dir_moves import LogDirExecution, LogDirLimits, LogDirMove, cancel_log_dir_moves
from kafka_rebalancer.kafka_admin import LOG_DIR_THROTTLE_CONFIG

A = LogDirMove("t", 0, 1, "/d1", "/d2", 100)
B = LogDirMove("t", 1, 1, "/d1", "/d2", 100)
C = LogDirMove("t", 2, 2, "/d1", "/d2", 100)


class FakeBroker:
    """Each asked move takes `polls` describes to copy; `forget` drops the moves in progress once (a restart)."""

    def __init__(self, polls: int = 2) -> None:
        self.dirs: dict[tuple[str, int, int], str] = {m.replica: "/d1" for m in (A, B, C)}
        self.futures: dict[tuple[str, int, int], list[Any]] = {}
        self.polls, self.asked, self.configs = polls, [], []
        self.forget_at: int | None = None
        self.describes = 0

    def describe_log_dirs(self, broker_ids: Iterable[int]) -> dict[int, dict[str, Any]]:
        self.describes += 1
        if self.describes == self.forget_at:
            self.futures.clear()
        for replica, future in list(self.futures.items()):
            future[1] -= 1
            if future[1] <= 0:
                self.dirs[replica] = future[0]
                del self.futures[replica]
        return {b: {"replica_dirs": {(t, p): d for (t, p, rb), d in self.dirs.items() if rb == b},
                    "future_dirs": {(t, p): f[0] for (t, p, rb), f in self.futures.items() if rb == b}}
                for b in broker_ids}

    def alter_replica_log_dirs(self, targets: Mapping[tuple[str, int, int], str]) -> dict:
        self.asked.append(dict(targets))
        for replica, path in targets.items():
            if self.dirs.get(replica) == path:
                self.futures.pop(replica, None)
            else:
                self.futures[replica] = [path, self.polls]
        return {}

    def alter_broker_config(self, name: str, values: Mapping[int, str | None], why: str) -> dict[int, str]:
        self.configs.append((name, dict(values)))
        return {}


def run(broker: FakeBroker, moves: list[LogDirMove], per_broker: int = 1, timeout_s: float = 100.0,
        done: tuple = ()) -> tuple[list[LogDirMove], list[dict[str, Any]]]:
    records: list[dict[str, Any]] = []
    clock = iter(range(10_000))
    execution = LogDirExecution(broker, moves, lambda action, **e: records.append({"action": action, **e}),
                                LogDirLimits(5_000_000, per_broker, 1.0, timeout_s), lambda s: None,
                                lambda: float(next(clock)))
    return execution.run(done), records


def test_one_move_per_broker_at_a_time_until_every_replica_is_in_its_target() -> None:
    broker = FakeBroker()
    completed, records = run(broker, [A, B, C])
    assert sorted(m.replica for m in completed) == sorted(m.replica for m in (A, B, C))
    assert broker.dirs == {A.replica: "/d2", B.replica: "/d2", C.replica: "/d2"}
    assert broker.asked[0] == {A.replica: "/d2", C.replica: "/d2"}  # broker 1's second move waits its turn
    assert broker.configs == [(LOG_DIR_THROTTLE_CONFIG, {1: "5000000", 2: "5000000"}),
                              (LOG_DIR_THROTTLE_CONFIG, {1: None, 2: None})]
    assert [r["action"] for r in records].count("log_dir_completed") == 3


def test_a_move_the_broker_forgot_is_asked_for_again_and_a_rerun_skips_what_is_done() -> None:
    broker = FakeBroker(polls=3)
    broker.forget_at = 2
    completed, records = run(broker, [A])
    assert completed == [A] and broker.dirs[A.replica] == "/d2"
    assert [r["action"] for r in records if r["action"].startswith("log_dir_re")] == ["log_dir_reissued"]
    broker.dirs[B.replica] = "/d2"  # already where it goes: done without asking
    completed, records = run(broker, [A, B], done=(A.replica,))
    assert completed == [B] and records[1]["detail"] == "already in its target directory"


def test_a_stuck_move_is_named_and_the_throttle_still_removed() -> None:
    broker = FakeBroker(polls=1000)
    with pytest.raises(ExecutionError, match=r"not done after 5s: t-0 on broker 1"):
        run(broker, [A], timeout_s=5)
    assert broker.configs[-1] == (LOG_DIR_THROTTLE_CONFIG, {1: None})


def test_a_replica_gone_from_its_broker_is_skipped_and_cancel_asks_for_the_source_again() -> None:
    broker = FakeBroker()
    del broker.dirs[C.replica]
    completed, records = run(broker, [A, C])
    assert completed == [A] and any(r["action"] == "log_dir_skipped" and r["partition"] == 2 for r in records)
    cancelled: list[dict[str, Any]] = []
    assert cancel_log_dir_moves(broker, [A, B, C], lambda action, **e: cancelled.append(e)) == 1
    assert broker.asked[-1] == {A.replica: "/d1"}  # B never moved, C is gone


def test_arrivals_are_named_before_they_exist_and_one_that_landed_elsewhere_moves_after() -> None:
    from kafka_rebalancer.execute.arrival_dirs import misplaced_arrivals, name_arrival_dirs

    class Receiving(FakeBroker):
        def alter_replica_log_dirs(self, targets: Mapping[tuple[str, int, int], str]) -> dict:
            hosted = {r: p for r, p in targets.items() if r in self.dirs}
            super().alter_replica_log_dirs(hosted)
            return {r: "NotLeaderForPartitionError" if r[1] == 7 else "KafkaStorageError"
                    for r in targets if r not in hosted}

    broker = Receiving()
    records: list[dict[str, Any]] = []
    name_arrival_dirs(broker, {("t", 7, 1): "/d2", ("t", 8, 1): "/d9"}, lambda a, **e: records.append({"action": a,
                                                                                                       **e}))
    # Not hosted yet is what a broker answers when it records the directory; an offline one is named.
    assert records == [{"action": "log_dirs_named", "replicas": 2, "refused": {"t-8 on broker 1": "KafkaStorageError"}}]
    broker.dirs[("t", 7, 1)] = "/d1"  # arrived, but in the other directory (the broker restarted in between)
    targets = {("t", 7, 1): "/d2", A.replica: "/d1", ("t", 9, 2): "/d2"}  # A is where it should be; t-9 not there
    assert misplaced_arrivals(broker, targets, {("t", 7, 1): 300}) == [LogDirMove("t", 7, 1, "/d1", "/d2", 300)]
    assert misplaced_arrivals(broker, {}, {}) == []
