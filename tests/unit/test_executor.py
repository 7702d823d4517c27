"""The executor's rules against a fake cluster (the real cluster is in tests/integration)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from kafka_rebalancer.errors import (
    ExecutionCancelled,
    ExecutionError,
    ExecutionTimedOut,
    RunFolderError,
    ValidationFailed,
)
from kafka_rebalancer.execute.cancel import cancel_pool
from kafka_rebalancer.execute.executor import execute_pool
from kafka_rebalancer.execute.log import ExecutionLog
from kafka_rebalancer.execute.moves import Limits, PartitionMove, bottleneck_first, order_moves, pick_batch
from kafka_rebalancer.execute.stall import StallWatch, copied_bytes
from kafka_rebalancer.execute.throttle import throttle_for
from kafka_rebalancer.holds.execution_lock import pool_lock
from kafka_rebalancer.kafka_admin import PartitionInfo
from kafka_rebalancer.model.reassignment import dumps
from kafka_rebalancer.run_folder import FILES_RECORD, PLAN, RunFolder, read_json
from kafka_rebalancer.snapshot import write_snapshot
from kafka_rebalancer.snapshot.build import SnapshotTables
from tests.helpers import write_validated_plan

Key = tuple[str, int]
CONFIG = {"cluster": {"name": "c1"}, "pools": {"a": {"brokers": [1, 2, 3, 4]}},
          "topic_pools": [{"topics": "t*", "pool": "a"}], "capacity": {"default": {"disk_bytes": 1000}},
          "execution": {"max_moves_per_broker": 2, "max_moves_cluster": 3, "poll_interval_s": 1,
                        "move_timeout_s": 30, "order": "smallest_first"}}


class FakeCluster:
    """Partitions with replicas and ISR; a started reassignment finishes after `polls` list calls."""

    def __init__(self, assignment: dict[Key, list[int]], polls: int = 2) -> None:
        self.replicas = {k: list(v) for k, v in assignment.items()}
        self.isr = {k: list(v) for k, v in assignment.items()}
        self.leader = {k: v[0] for k, v in assignment.items()}
        self.ongoing: dict[Key, list[int]] = {}
        self.remaining: dict[Key, int] = {}
        self.polls = polls
        self.altered: list[Key] = []
        self.elected: list[Key] = []
        self.frozen = False  # a stuck move never finishes
        self.broker_throttle: dict[int, int] = {}
        self.topic_throttle: dict[str, tuple[str, str]] = {}
        self.throttle_calls = 0
        self.on_list: Callable[[FakeCluster], None] = lambda cluster: None
        self.dead: set[int] = set()  # brokers 1 to 9 run unless listed here
        self.min_isr: dict[str, int] = {}  # topic -> min.insync.replicas (Kafka's default: 1)
        self.copied: dict[Key, int] = {}  # bytes on each new replica of a move in flight: 10 more per list call

    def list_reassignments(self) -> dict[Key, dict[str, list[int]]]:
        self.on_list(self)
        for key in list(self.ongoing):
            if not self.frozen:
                self.copied[key] = self.copied.get(key, 0) + 10
            self.remaining[key] -= 1
            if self.remaining[key] <= 0 and not self.frozen:
                self.replicas[key] = self.isr[key] = self.ongoing.pop(key)
        return {k: {"replicas": v, "adding_replicas": [], "removing_replicas": []} for k, v in self.ongoing.items()}

    def live_broker_ids(self) -> frozenset[int]:
        return frozenset(range(1, 10)) - self.dead

    def describe_partitions(self, topics: Iterable[str] | None = None) -> list[PartitionInfo]:
        return [PartitionInfo(t, p, list(r), list(self.isr[(t, p)]), self.leader[(t, p)])
                for (t, p), r in sorted(self.replicas.items()) if topics is None or t in topics]

    def min_insync_replicas(self, topics: Iterable[str]) -> dict[str, int]:
        return {t: self.min_isr.get(t, 1) for t in topics}

    def alter_reassignments(self, targets: Mapping[Key, list[int] | None]) -> dict[Key, str]:
        for key, target in targets.items():
            if target is None:  # a cancel: the partition keeps its original replicas
                self.ongoing.pop(key, None)
                continue
            self.altered.append(key)
            self.ongoing[key] = list(target)
            self.remaining[key] = self.polls
        return {}

    def alter_throttles(self, broker_rate: Mapping[int, int | None],
                        topic_replicas: Mapping[str, tuple[str, str] | None]) -> None:
        self.throttle_calls += 1
        for b, rate in broker_rate.items():
            self.broker_throttle.pop(b, None) if rate is None else self.broker_throttle.__setitem__(b, rate)
        for t, value in topic_replicas.items():
            self.topic_throttle.pop(t, None) if value is None else self.topic_throttle.__setitem__(t, value)

    def throttle_configs(self, broker_ids: Iterable[int], topics: Iterable[str]) -> dict[str, dict[str, str]]:
        """As the brokers report them: applied at once."""
        return {**{f"broker {b}": {"rate": str(self.broker_throttle[b])} for b in broker_ids
                   if b in self.broker_throttle},
                **{f"topic {t}": {"replicas": str(self.topic_throttle[t])} for t in topics if t in self.topic_throttle}}

    def describe_log_dirs(self, broker_ids: Iterable[int]) -> dict[int, dict[str, Any]]:
        return {b: {"replicas": {k: self.copied.get(k, 0) for k, target in self.ongoing.items()
                                 if b in set(target) - set(self.replicas[k])}} for b in broker_ids}

    def elect_preferred_leaders(self, partitions: Iterable[Key]) -> dict[Key, str | None]:
        for key in partitions:
            self.elected.append(key)
            self.leader[key] = self.replicas[key][0]
        return {}


MOVES = [("t", 0, [1, 2], [3, 2]), ("t", 1, [1, 2], [1, 4]), ("t", 2, [2, 1], [2, 3]), ("t", 3, [1, 3], [4, 3])]


def prepared_run(config: Any, root: Path, moves: list = MOVES, validated: bool = True,
                 unplanned: tuple = ()) -> RunFolder:
    """A run folder with a snapshot, a plan of `moves` (topic, partition, old, new) and its validation; the
    `unplanned` partitions (topic, partition, replicas, replicas) are in the snapshot only."""
    run = RunFolder(root / "run")
    planned, moves = moves, [*moves, *unplanned]
    brokers = pd.DataFrame([{"broker_id": b, "rack": None, "broker_pool": "a", "alive": True, "excluded": False,
                             "host": "h", "port": 1, "disk_capacity_bytes": 1000, "disk_used_bytes": 0,
                             "log_dir_total_bytes": None, "log_dir_usable_bytes": None,
                             "nw_in_capacity_bytes_per_s": 0.0, "nw_out_capacity_bytes_per_s": 0.0,
                             "cpu_capacity_cores": 0.0}
                            for b in sorted({b for m in moves for b in (*m[2], *m[3])} | {1, 2, 3, 4})])
    replicas = pd.DataFrame([{"topic": t, "partition": p, "broker_id": b, "position": i, "is_leader": i == 0,
                              "in_isr": True, "size_bytes": 10, "nw_in_bytes_per_s": 0.0, "nw_out_bytes_per_s": 0.0,
                              "cpu_cores": 0.0} for t, p, old, _ in moves for i, b in enumerate(old)])
    partitions = pd.DataFrame([{"topic": t, "partition": p, "replication_factor": len(old), "replicas": old,
                                "isr": old, "leader": old[0], "topic_pool": "b" if t.startswith("s") else "a",
                                "excluded": False, "size_bytes": 10,
                                "bytes_in_per_s": 0.0, "bytes_out_per_s": 0.0, "cpu_leader_cores": 0.0,
                                "cpu_follower_cores": 0.0} for t, p, old, _ in moves])
    manifest = write_snapshot(run, SnapshotTables(brokers, replicas, partitions), {})
    write_validated_plan(run, config, manifest["content_hash"], planned, validated)
    return run


def no_sleep() -> tuple[Callable[[float], None], Callable[[], float]]:
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds
    return sleep, lambda: now[0]


def actions(run: RunFolder, pool: str = "a") -> list[tuple[str, Any]]:
    log = ExecutionLog(run.stage_path(f"execute/{pool}") / "execution_log.jsonl", pool, "")
    return [(e["action"], (e.get("topic"), e.get("partition"))) for e in log.read()]


def test_pick_batch_respects_per_broker_and_cluster_limits() -> None:
    moves = [PartitionMove("t", i, (1, 2), (3, 2), 10) for i in range(4)] + [PartitionMove("u", 0, (5,), (6,), 1)]
    batch = pick_batch(moves, [], Limits(2, 10, 1, 1))
    assert [m.key for m in batch] == [("t", 0), ("t", 1), ("u", 0)]  # brokers 1 and 3 are in every t move
    assert len(pick_batch(moves, [], Limits(5, 2, 1, 1))) == 2
    waiting = [m for m in moves if m not in batch]
    assert pick_batch(waiting, batch, Limits(2, 10, 1, 1)) == []  # brokers 1 and 3 are busy with two moves


def test_a_broker_copying_less_than_its_buffer_takes_moves_beyond_its_count() -> None:
    # Broker 9 receives every move; the leaders 1..6 serve one each. Count limit 2, buffer 100 bytes.
    small = [PartitionMove("t", i, (i,), (9,), 30, leader=i) for i in range(1, 7)]
    limits = Limits(2, 10, 1, 1, buffer_bytes=100)
    assert [m.partition for m in pick_batch(small, [], limits)] == [1, 2, 3, 4]  # 2 by count, then 60 and 90 < 100
    assert pick_batch(small, [], Limits(2, 10, 1, 1)) == small[:2]  # no buffer: the count alone
    large = [PartitionMove("u", i, (i,), (9,), 100, leader=i) for i in range(1, 4)]
    assert pick_batch(large, [], limits) == large[:2]
    # The leader serving the copies is loaded too, though it keeps its replica.
    served = [PartitionMove("v", i, (1, 2), (1, 2 + i), 100, leader=1) for i in range(1, 4)]
    assert pick_batch(served, [], Limits(2, 10, 1, 1)) == served[:2]


def test_bottleneck_first_starts_the_busiest_brokers_moves_largest_first_and_keeps_it_up() -> None:
    # Broker 9 receives 300 bytes, broker 8 150: 9's moves first, largest first.
    moves = [PartitionMove("t", 0, (1,), (8,), 100, leader=1), PartitionMove("t", 1, (2,), (9,), 100, leader=2),
             PartitionMove("t", 2, (3,), (9,), 200, leader=3), PartitionMove("t", 3, (4,), (8,), 50, leader=4),
             PartitionMove("t", 4, (5, 6), (6, 5), 10**9, leader=5)]
    ordered = order_moves(moves, "bottleneck_first", {})
    assert [m.partition for m in ordered] == [4, 2, 1, 0, 3]  # the leadership change stays in front
    # With broker 9's large move in flight its work left is still the most: its other move next.
    assert [m.partition for m in bottleneck_first([moves[0], moves[1], moves[3]], [moves[2]])] == [1, 0, 3]
    # Once 9 is done, 8's.
    assert [m.partition for m in bottleneck_first([moves[0], moves[3]], [])] == [0, 3]


def test_executes_every_move_and_elects_leaders(config_factory: Callable[..., Any], tmp_path: Path) -> None:
    config = config_factory(CONFIG)
    run = prepared_run(config, tmp_path)
    cluster = FakeCluster({(t, p): old for t, p, old, _ in MOVES})
    sleep, clock = no_sleep()
    result = execute_pool(config, cluster, run, "a", sleep=sleep, clock=clock)
    assert result["completed"] == 4 and result["skipped"] == []
    assert {k: cluster.replicas[k] for k in cluster.replicas} == {(t, p): new for t, p, _, new in MOVES}
    assert sorted(cluster.elected) == sorted((t, p) for t, p, _, _ in MOVES)
    assert [a for a, _ in actions(run)].count("started") == 4
    assert read_json(run.stage_path("execute/a") / "result.json")["completed"] == 4


def test_drifted_and_under_replicated_partitions_are_skipped_never_overwritten(
        config_factory: Callable[..., Any], tmp_path: Path) -> None:
    config = config_factory(CONFIG)
    run = prepared_run(config, tmp_path)
    cluster = FakeCluster({(t, p): old for t, p, old, _ in MOVES})
    cluster.replicas[("t", 1)] = [2, 3]  # reassigned by hand since the snapshot
    cluster.isr[("t", 2)] = [2]  # lost an in-sync replica since the snapshot
    sleep, clock = no_sleep()
    result = execute_pool(config, cluster, run, "a", sleep=sleep, clock=clock)
    reasons = {(s["topic"], s["partition"]): s["reason"] for s in result["skipped"]}
    assert reasons[("t", 1)].startswith("drifted: replicas are [2, 3]")
    assert reasons[("t", 2)].startswith("under-replicated now")
    assert ("t", 1) not in cluster.altered and ("t", 2) not in cluster.altered
    assert cluster.replicas[("t", 1)] == [2, 3] and result["completed"] == 2


def test_rerun_continues_from_the_log_without_repeating(config_factory: Callable[..., Any], tmp_path: Path) -> None:
    config = config_factory(CONFIG)
    run = prepared_run(config, tmp_path)
    cluster = FakeCluster({(t, p): old for t, p, old, _ in MOVES}, polls=3)
    sleep, clock = no_sleep()
    crash_after = {"n": 0}

    def crashing_sleep(seconds: float) -> None:
        crash_after["n"] += 1
        if crash_after["n"] == 2:
            raise KeyboardInterrupt("executor killed")
        sleep(seconds)

    with pytest.raises(KeyboardInterrupt):
        execute_pool(config, cluster, run, "a", sleep=crashing_sleep, clock=clock)
    first = list(cluster.altered)
    assert first and len(first) < 4
    result = execute_pool(config, cluster, run, "a", sleep=sleep, clock=clock)
    assert result["completed"] == 4
    assert sorted(cluster.altered) == sorted((t, p) for t, p, _, _ in MOVES)  # each partition altered once
    again = execute_pool(config, cluster, run, "a", sleep=sleep, clock=clock)
    assert again["completed"] == 4 and again["completed_this_attempt"] == 0 and len(cluster.altered) == 4


def test_refuses_while_a_foreign_reassignment_runs(config_factory: Callable[..., Any], tmp_path: Path) -> None:
    config = config_factory(CONFIG)
    run = prepared_run(config, tmp_path)
    cluster = FakeCluster({(t, p): old for t, p, old, _ in MOVES} | {("other", 0): [1]})
    cluster.alter_reassignments({("other", 0): [2]})
    cluster.remaining[("other", 0)] = 10**6
    cluster.altered.clear()
    with pytest.raises(ExecutionError, match=r"did not start, e.g. \['other-0'\]"):
        execute_pool(config, cluster, run, "a")
    assert cluster.altered == []


def test_refuses_a_plan_that_is_not_the_validated_one(config_factory: Callable[..., Any], tmp_path: Path) -> None:
    config = config_factory(CONFIG)
    run = prepared_run(config, tmp_path, validated=False)
    with pytest.raises(ValidationFailed, match="failed validation"):
        execute_pool(config, FakeCluster({}), run, "a")
    run = prepared_run(config, tmp_path / "edited")
    plan = run.stage_path(PLAN) / "plan.json"
    edited = json.loads(plan.read_text())
    first = edited["partitions"][0]["replicas"]
    first[0] = max(first) + 1  # a broker the validated plan did not name
    plan.write_text(dumps(edited))
    with pytest.raises(RunFolderError, match=r"plan\.json: changed since the plan step wrote it \(same size, other "
                       r"content\); plan again"):
        execute_pool(config, FakeCluster({}), run, "a")
    # A plan written before integrity records began: the hash of the validated plan is the guard.
    (run.stage_path(PLAN) / FILES_RECORD).unlink()
    with pytest.raises(ValidationFailed, match="is not the validated one"):
        execute_pool(config, FakeCluster({}), RunFolder(run.path), "a")


def test_stuck_moves_fail_with_their_names(config_factory: Callable[..., Any], tmp_path: Path) -> None:
    config = config_factory(CONFIG)
    run = prepared_run(config, tmp_path)
    cluster = FakeCluster({(t, p): old for t, p, old, _ in MOVES})
    cluster.frozen = True
    sleep, clock = no_sleep()
    with pytest.raises(ExecutionError, match=r"not complete after 30s: \['t-0', 't-1'"):
        execute_pool(config, cluster, run, "a", sleep=sleep, clock=clock)
    assert ("timeout", (None, None)) in actions(run)


def test_a_move_whose_replicas_gain_no_bytes_is_named_stalled_and_the_timeout_names_it(
        config_factory: Callable[..., Any], tmp_path: Path) -> None:
    config = config_factory(CONFIG | {"execution": CONFIG["execution"] | {"stall_after_s": 8}})
    run = prepared_run(config, tmp_path)
    cluster = FakeCluster({(t, p): old for t, p, old, _ in MOVES}, polls=10**6)  # copies that never end
    cluster.on_list = lambda c: setattr(c, "frozen", c.copied.get(("t", 0), 0) >= 30)  # t-0 stops at 30 bytes
    sleep, clock = no_sleep()
    told: list[list[str]] = []  # what the notification is told: the moves stalled, each time one more stalls
    with pytest.raises(ExecutionTimedOut, match=r"stalled \(no bytes copied for 8s\): \['t-0', 't-1'") as error:
        execute_pool(config, cluster, run, "a", sleep=sleep, clock=clock, on_stalled=told.append)
    assert error.value.pool == "a"
    log = ExecutionLog(run.stage_path("execute/a") / "execution_log.jsonl", "a", "").read()
    stalled = [e for e in log if e["action"] == "stalled"]
    # Every move in flight stopped with t-0 (the fake freezes them all): each named once, with its bytes.
    names = [f"{e['topic']}-{e['partition']}" for e in stalled]
    assert names[0] == "t-0" and len(set(names)) == len(names) >= 2
    assert stalled[0]["copied_bytes"] == 30 and stalled[0]["since_s"] >= 8
    assert stalled[0]["receiving"] == sorted(set(MOVES[0][3]) - set(MOVES[0][2]))
    assert next(e for e in log if e["action"] == "timeout")["stalled"] == sorted(names)
    assert told and told[0][0] == "t-0" and told[-1] == sorted(names)


def test_the_stall_watch_forgets_finished_moves_and_says_when_a_stall_ends() -> None:
    now = [0.0]
    records: list[tuple[str, Any]] = []
    watch = StallWatch(10, lambda action, key, **entry: records.append((action, key)), lambda: now[0])
    watch.check({("t", 0): 5, ("t", 1): 5}, {("t", 1): False})
    now[0] = 12
    assert watch.check({("t", 0): 5, ("t", 1): 5}, {("t", 1): False}) == [("t", 0)]  # t-1's receiver is dead
    now[0] = 14
    assert watch.check({("t", 0): 9}, {}) == [] and records == [("stalled", ("t", 0)), ("stall_ended", ("t", 0))]
    assert copied_bytes({("t", 0): [3, 4]}, {3: {"replicas": {("t", 0): 7}}}) == {("t", 0): 7}


def test_throttle_is_kafkas_leader_and_follower_replica_lists() -> None:
    moves = [PartitionMove("t", 0, (1, 2), (3, 2), 10), PartitionMove("t", 1, (2, 1), (1, 2), 10),
             PartitionMove("u", 3, (4, 5), (4, 6), 10)]
    throttle = throttle_for(moves, 1000)
    assert throttle.brokers == {1, 2, 3, 4, 5, 6}  # t-1 only swaps leadership: it copies nothing
    assert throttle.topic_replicas == {"t": ("0:1,0:2", "0:3"), "u": ("3:4,3:5", "3:6")}
    assert throttle.set_configs()[0] == {b: 1000 for b in range(1, 7)}
    assert throttle.clear_configs() == ({b: None for b in range(1, 7)}, {"t": None, "u": None})


def test_throttle_is_set_while_moving_and_removed_after_and_on_failure(
        config_factory: Callable[..., Any], tmp_path: Path) -> None:
    config = config_factory(CONFIG | {"execution": CONFIG["execution"] | {"throttle_bytes_per_s": 5000}})
    run = prepared_run(config, tmp_path)
    cluster = FakeCluster({(t, p): old for t, p, old, _ in MOVES})
    seen: list[dict] = []
    cluster.on_list = lambda c: seen.append(dict(c.broker_throttle))
    sleep, clock = no_sleep()
    execute_pool(config, cluster, run, "a", sleep=sleep, clock=clock)
    assert seen[-1] == {b: 5000 for b in (1, 2, 3, 4)}  # on while the moves ran
    assert cluster.broker_throttle == {} and cluster.topic_throttle == {}
    assert [a for a, _ in actions(run)].count("throttle_cleared") == 1

    run = prepared_run(config, tmp_path / "stuck")
    cluster = FakeCluster({(t, p): old for t, p, old, _ in MOVES})
    cluster.frozen = True
    with pytest.raises(ExecutionError, match="not complete after"):
        execute_pool(config, cluster, run, "a", throttle_bytes_per_s=777, sleep=sleep, clock=clock)
    assert cluster.throttle_calls == 2 and cluster.broker_throttle == {} and cluster.topic_throttle == {}


def test_no_move_starts_before_every_broker_and_topic_reports_the_throttle(
        config_factory: Callable[..., Any], tmp_path: Path) -> None:
    config = config_factory(CONFIG | {"execution": CONFIG["execution"] | {"throttle_bytes_per_s": 5000}})
    run = prepared_run(config, tmp_path)
    cluster = FakeCluster({(t, p): old for t, p, old, _ in MOVES})
    reported = FakeCluster.throttle_configs
    reads: list[int] = []

    def lagging(self: FakeCluster, broker_ids: Any, topics: Any) -> dict:
        reads.append(len(self.altered))
        return {} if len(reads) < 3 else reported(self, broker_ids, topics)  # applied by the third read

    cluster.throttle_configs = lagging.__get__(cluster)  # type: ignore[method-assign]
    sleep, clock = no_sleep()
    execute_pool(config, cluster, run, "a", sleep=sleep, clock=clock)
    assert reads == [0, 0, 0]  # nothing altered until the throttle was reported

    run = prepared_run(config, tmp_path / "never")
    cluster = FakeCluster({(t, p): old for t, p, old, _ in MOVES})
    cluster.throttle_configs = lambda broker_ids, topics: {}  # type: ignore[method-assign]
    assert execute_pool(config, cluster, run, "a", sleep=sleep, clock=clock)["completed"] == 4
    assert [a for a, _ in actions(run)].count("throttle_unconfirmed") == 1


def test_leadership_changes_go_first_in_batches_of_their_own() -> None:
    leader_swap = PartitionMove("t", 9, (1, 2), (2, 1), 10**9)
    data = [PartitionMove("t", 0, (1, 2), (3, 2), 30), PartitionMove("t", 1, (5, 2), (4, 2), 20)]
    ordered = order_moves([*data, leader_swap], "smallest_first", {})
    assert [m.key for m in ordered] == [("t", 9), ("t", 1), ("t", 0)]
    assert pick_batch(ordered, [], Limits(5, 10, 1, 1)) == [leader_swap]
    assert pick_batch(ordered[1:], [leader_swap], Limits(5, 10, 1, 1)) == []  # waits for the leadership batch
    assert pick_batch(ordered[1:], [], Limits(5, 10, 1, 1)) == ordered[1:]


def test_move_order_is_configurable() -> None:
    moves = [PartitionMove("t", 0, (1, 2), (3, 2), 30), PartitionMove("t", 1, (5, 2), (4, 2), 20),
             PartitionMove("t", 2, (6, 2), (4, 2), 40)]
    utilisation = {1: 0.5, 5: 0.9, 6: 0.7}

    def keys(order: str) -> list[int]:
        return [m.partition for m in order_moves(moves, order, utilisation)]

    assert keys("smallest_first") == [1, 0, 2]
    assert keys("largest_first") == [2, 0, 1]
    assert keys("most_loaded_first") == [1, 2, 0]  # broker 5 is the fullest, then 6
    assert keys("bottleneck_first") == [2, 1, 0]  # broker 4 receives 60 bytes (40 first), broker 3 30
    assert keys("plan") == [0, 1, 2]


def test_waits_while_the_pool_has_other_under_replicated_partitions(
        config_factory: Callable[..., Any], tmp_path: Path) -> None:
    config = config_factory(CONFIG | {"execution": CONFIG["execution"] | {"urp_wait_timeout_s": 10}})
    still = ("t", 7, [3, 4], [3, 4])  # in the pool, not in the plan
    run = prepared_run(config, tmp_path, unplanned=(still,))
    cluster = FakeCluster({(t, p): old for t, p, old, _ in [*MOVES, still]})
    cluster.isr[("t", 7)] = [3]
    sleep, clock = no_sleep()
    with pytest.raises(ExecutionError, match=r"under-replicated for more than 10s.*'t-7'"):
        execute_pool(config, cluster, run, "a", sleep=sleep, clock=clock)
    assert cluster.altered == []  # nothing started while t-7 was short of replicas

    def isr_recovers(seconds: float) -> None:
        sleep(seconds)
        if clock() >= 100 + 3:
            cluster.isr[("t", 7)] = [3, 4]

    sleep, clock = no_sleep()
    sleep(100)
    result = execute_pool(config, cluster, run, "a", sleep=isr_recovers, clock=clock)
    assert result["completed"] == 4
    assert ("waiting_for_isr", (None, None)) in actions(run) and ("isr_recovered", (None, None)) in actions(run)


def test_run_timeout_names_what_is_in_flight(config_factory: Callable[..., Any], tmp_path: Path) -> None:
    config = config_factory(CONFIG | {"execution": CONFIG["execution"] | {"run_timeout_s": 5, "move_timeout_s": 99}})
    run = prepared_run(config, tmp_path)
    cluster = FakeCluster({(t, p): old for t, p, old, _ in MOVES}, polls=100)
    sleep, clock = no_sleep()
    with pytest.raises(ExecutionError, match=r"run timeout of 5s reached with 3 move\(s\) in flight \['t-0'"):
        execute_pool(config, cluster, run, "a", sleep=sleep, clock=clock)


def test_cancel_stops_the_executor_reverts_in_flight_moves_and_clears_throttles(
        config_factory: Callable[..., Any], tmp_path: Path) -> None:
    config = config_factory(CONFIG)
    run = prepared_run(config, tmp_path)
    cluster = FakeCluster({(t, p): old for t, p, old, _ in MOVES}, polls=100)
    sleep, clock = no_sleep()

    def operator_cancels(seconds: float) -> None:  # the operator runs `cancel` while the executor waits
        sleep(seconds)
        if clock() == 2:
            result = cancel_pool(config, cluster, run, "a", sleep=sleep, clock=clock)
            assert result["cancelled"] == ["t-0", "t-1", "t-2"]

    with pytest.raises(ExecutionCancelled, match="cancelled by an operator"):
        execute_pool(config, cluster, run, "a", sleep=operator_cancels, clock=clock)
    assert cluster.ongoing == {} and cluster.broker_throttle == {} and cluster.topic_throttle == {}
    assert cluster.replicas == {(t, p): old for t, p, old, _ in MOVES}  # Kafka kept the original replicas
    assert len(cluster.altered) == 3  # the fourth move never started
    with pytest.raises(ExecutionCancelled, match="--resume-cancelled"):  # a retry does not undo the cancel
        execute_pool(config, cluster, run, "a", sleep=sleep, clock=clock)
    cluster.polls = 1
    assert execute_pool(config, cluster, run, "a", resume_cancelled=True, sleep=sleep, clock=clock)["completed"] == 4


class UntouchableCluster:
    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the cluster was touched: {name}")


def test_a_second_execution_of_the_pool_refuses_before_touching_the_cluster(
        config_factory: Callable[..., Any], tmp_path: Path) -> None:
    config = config_factory(CONFIG)
    run = prepared_run(config, tmp_path)
    refusal = r"another execution for pool 'a' of cluster 'c1' is running.*first-run"
    with pool_lock(config.run_root / ".locks", "c1", "a", "first-run"), pytest.raises(ExecutionError, match=refusal):
        execute_pool(config, UntouchableCluster(), run, "a")  # type: ignore[arg-type]
    cluster = FakeCluster({(t, p): old for t, p, old, _ in MOVES})
    sleep, clock = no_sleep()
    assert execute_pool(config, cluster, run, "a", sleep=sleep, clock=clock)["completed"] == 4  # lock released


def test_reassignments_of_a_sibling_pool_of_the_same_plan_are_not_foreign(
        config_factory: Callable[..., Any], tmp_path: Path) -> None:
    body = CONFIG | {"pools": {"a": {"brokers": [1, 2, 3, 4]}, "b": {"brokers": [5, 6]}},
                     "topic_pools": [{"topics": "t*", "pool": "a"}, {"topics": "s*", "pool": "b"}]}
    config = config_factory(body)
    moves = [*MOVES, ("s", 0, [5], [6])]
    run = prepared_run(config, tmp_path, moves=moves)
    cluster = FakeCluster({(t, p): old for t, p, old, _ in moves})
    cluster.alter_reassignments({("s", 0): [6]})  # pool b's task of the same run is moving s-0
    cluster.remaining[("s", 0)] = 10**6
    sleep, clock = no_sleep()
    assert execute_pool(config, cluster, run, "a", sleep=sleep, clock=clock)["completed"] == 4


def test_a_failed_status_read_is_retried_at_the_next_poll(config_factory: Callable[..., Any], tmp_path: Path) -> None:
    config = config_factory(CONFIG)
    run = prepared_run(config, tmp_path)
    cluster = FakeCluster({(t, p): old for t, p, old, _ in MOVES})
    calls = {"n": 0}

    def broker_dies_once(c: FakeCluster) -> None:
        calls["n"] += 1
        if calls["n"] == 2:  # the first poll after the moves started
            raise RuntimeError("Failed while waiting for controller: Local: Timed out")

    cluster.on_list = broker_dies_once
    sleep, clock = no_sleep()
    assert execute_pool(config, cluster, run, "a", sleep=sleep, clock=clock)["completed"] == 4
    assert ("read_failed", (None, None)) in actions(run)


def test_metadata_lagging_behind_the_controller_is_not_taken_for_drift(
        config_factory: Callable[..., Any], tmp_path: Path) -> None:
    config = config_factory(CONFIG)
    run = prepared_run(config, tmp_path, moves=MOVES[:1])  # t-0: [1, 2] -> [3, 2]
    cluster = FakeCluster({("t", 0): [1, 2]}, polls=1)
    described = cluster.describe_partitions
    stale = {"left": 2}

    def lagging(topics: Iterable[str] | None = None) -> list[PartitionInfo]:
        infos = described(topics)
        if cluster.altered and not cluster.ongoing and stale["left"]:  # the controller is done, a broker is not
            stale["left"] -= 1
            return [PartitionInfo(i.topic, i.partition, [3, 2, 1], [1, 2, 3], 1) for i in infos]
        return infos

    cluster.describe_partitions = lagging  # type: ignore[method-assign]
    sleep, clock = no_sleep()
    result = execute_pool(config, cluster, run, "a", sleep=sleep, clock=clock)
    assert result["completed"] == 1 and result["skipped"] == []


def test_a_changed_partition_is_skipped_only_when_two_polls_agree(
        config_factory: Callable[..., Any], tmp_path: Path) -> None:
    config = config_factory(CONFIG)
    run = prepared_run(config, tmp_path, moves=MOVES[:1])
    cluster = FakeCluster({("t", 0): [1, 2]}, polls=1)

    def reassigned_by_hand(c: FakeCluster) -> None:
        if c.ongoing:
            c.ongoing.clear()
            c.replicas[("t", 0)] = [4, 2]

    cluster.on_list = reassigned_by_hand
    sleep, clock = no_sleep()
    result = execute_pool(config, cluster, run, "a", sleep=sleep, clock=clock)
    assert result["skipped"] == [{"topic": "t", "partition": 0, "reason": "drifted while moving"}]
    assert [a for a, _ in actions(run)].count("skipped") == 1


def test_an_attempt_that_ends_on_an_unexpected_error_says_so_and_is_not_in_progress(
        config_factory: Callable[..., Any], tmp_path: Path) -> None:
    from kafka_rebalancer.execute.progress import progress_text

    config = config_factory(CONFIG)
    run = prepared_run(config, tmp_path)
    cluster = FakeCluster({(t, p): old for t, p, old, _ in MOVES})

    def broken(*args: Any) -> Any:
        raise RuntimeError("the admin client broke")

    cluster.alter_reassignments = broken  # type: ignore[method-assign]
    sleep, clock = no_sleep()
    with pytest.raises(RuntimeError):
        execute_pool(config, cluster, run, "a", sleep=sleep, clock=clock)
    log = ExecutionLog(run.stage_path("execute/a") / "execution_log.jsonl", "a", "").read()
    assert [e["error"] for e in log if e["action"] == "execute_failed"] == ["RuntimeError: the admin client broke"]
    assert progress_text(log) is None
