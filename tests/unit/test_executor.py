"""The executor's rules against a fake cluster (the real cluster is in tests/integration)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from kafka_rebalancer.errors import ExecutionError, ValidationFailed
from kafka_rebalancer.execute.executor import Limits, PartitionMove, execute_pool, pick_batch
from kafka_rebalancer.execute.log import ExecutionLog
from kafka_rebalancer.kafka_admin import PartitionInfo
from kafka_rebalancer.plan.artifacts import dumps, plan_hash
from kafka_rebalancer.run_folder import PLAN, VALIDATION, RunFolder, read_json, write_json
from kafka_rebalancer.snapshot import write_snapshot
from kafka_rebalancer.snapshot.build import SnapshotTables

Key = tuple[str, int]
CONFIG = {"cluster": {"name": "c1"}, "pools": {"a": {"brokers": [1, 2, 3, 4]}},
          "topic_pools": [{"topics": "t*", "pool": "a"}], "capacity": {"default": {"disk_bytes": 1000}},
          "execution": {"max_moves_per_broker": 2, "max_moves_cluster": 3, "poll_interval_s": 1,
                        "move_timeout_s": 30}}


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

    def list_reassignments(self) -> dict[Key, dict[str, list[int]]]:
        for key in list(self.ongoing):
            self.remaining[key] -= 1
            if self.remaining[key] <= 0 and not self.frozen:
                self.replicas[key] = self.isr[key] = self.ongoing.pop(key)
        return {k: {"replicas": v, "adding_replicas": [], "removing_replicas": []} for k, v in self.ongoing.items()}

    def describe_partitions(self, topics: Iterable[str] | None = None) -> list[PartitionInfo]:
        return [PartitionInfo(t, p, list(r), list(self.isr[(t, p)]), self.leader[(t, p)])
                for (t, p), r in sorted(self.replicas.items()) if topics is None or t in topics]

    def alter_reassignments(self, targets: Mapping[Key, list[int] | None]) -> dict[Key, str]:
        for key, target in targets.items():
            self.altered.append(key)
            self.ongoing[key] = list(target)  # type: ignore[arg-type]
            self.remaining[key] = self.polls
        return {}

    def elect_preferred_leaders(self, partitions: Iterable[Key]) -> dict[Key, str | None]:
        for key in partitions:
            self.elected.append(key)
            self.leader[key] = self.replicas[key][0]
        return {}


MOVES = [("t", 0, [1, 2], [3, 2]), ("t", 1, [1, 2], [1, 4]), ("t", 2, [2, 1], [2, 3]), ("t", 3, [1, 3], [4, 3])]


def prepared_run(config: Any, root: Path, moves: list = MOVES, validated: bool = True) -> RunFolder:
    """A run folder with a snapshot, a plan of `moves` (topic, partition, old, new) and its validation."""
    run = RunFolder(root / "run")
    brokers = pd.DataFrame([{"broker_id": b, "rack": None, "broker_pool": "a", "alive": True, "excluded": False,
                             "host": "h", "port": 1, "disk_capacity_bytes": 1000, "disk_used_bytes": 0,
                             "log_dir_total_bytes": None, "log_dir_usable_bytes": None,
                             "nw_in_capacity_bytes_per_s": 0.0, "nw_out_capacity_bytes_per_s": 0.0,
                             "cpu_capacity_cores": 0.0} for b in (1, 2, 3, 4)])
    replicas = pd.DataFrame([{"topic": t, "partition": p, "broker_id": b, "position": i, "is_leader": i == 0,
                              "in_isr": True, "size_bytes": 10, "nw_in_bytes_per_s": 0.0, "nw_out_bytes_per_s": 0.0,
                              "cpu_cores": 0.0} for t, p, old, _ in moves for i, b in enumerate(old)])
    partitions = pd.DataFrame([{"topic": t, "partition": p, "replication_factor": len(old), "replicas": old,
                                "isr": old, "leader": old[0], "topic_pool": "a", "excluded": False, "size_bytes": 10,
                                "bytes_in_per_s": 0.0, "bytes_out_per_s": 0.0, "cpu_leader_cores": 0.0,
                                "cpu_follower_cores": 0.0} for t, p, old, _ in moves])
    manifest = write_snapshot(run, SnapshotTables(brokers, replicas, partitions), {})
    doc = lambda i: {"version": 1, "partitions": [  # noqa: E731
        {"topic": m[0], "partition": m[1], "replicas": m[i]} for m in moves]}
    text = dumps(doc(3))
    digest = plan_hash(text, manifest["content_hash"], config.fingerprint())
    with run.stage(PLAN) as out:
        (out / "plan.json").write_text(text)
        (out / "rollback.json").write_text(dumps(doc(2)))
        write_json(out / "summary.json", {"plan_hash": digest, "snapshot_hash": manifest["content_hash"]})
    with run.stage(VALIDATION) as out:
        write_json(out / "report.json", {"success": validated, "plan_hash": digest})
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
    plan.write_text(plan.read_text().replace("[\n        3,", "[\n        4,", 1))
    with pytest.raises(ValidationFailed, match="is not the validated one"):
        execute_pool(config, FakeCluster({}), run, "a")


def test_stuck_moves_fail_with_their_names(config_factory: Callable[..., Any], tmp_path: Path) -> None:
    config = config_factory(CONFIG)
    run = prepared_run(config, tmp_path)
    cluster = FakeCluster({(t, p): old for t, p, old, _ in MOVES})
    cluster.frozen = True
    sleep, clock = no_sleep()
    with pytest.raises(ExecutionError, match=r"not complete after 30s: \['t-0', 't-1'"):
        execute_pool(config, cluster, run, "a", sleep=sleep, clock=clock)
    assert ("timeout", (None, None)) in actions(run)
