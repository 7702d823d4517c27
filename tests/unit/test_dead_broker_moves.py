"""Moves off a dead or drained broker (a drain, or the nightly run's forced moves): the partitions it held are
short of in-sync replicas, yet moving them is what restores them. Against the fake cluster of test_executor."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kafka_rebalancer.errors import ExecutionError
from kafka_rebalancer.execute.executor import dry_run_pool, execute_pool
from kafka_rebalancer.execute.moves import PartitionMove, SyncFacts, out_of_sync_reason, replaced_brokers
from kafka_rebalancer.operations.request import make_request, write_request
from kafka_rebalancer.run_folder import RunFolder
from tests.unit.test_executor import CONFIG, FakeCluster, actions, no_sleep, prepared_run

# Partition 0 loses its replica on broker 1 to broker 4; partition 1 is moved without touching broker 1.
MOVES = [("t", 0, [1, 2, 3], [4, 2, 3]), ("t", 1, [2, 3], [4, 3])]


def cluster_without_broker_1(moves: list = MOVES, unplanned: tuple = ()) -> FakeCluster:
    """Broker 1 dead: out of every ISR, leading nothing."""
    cluster = FakeCluster({(t, p): old for t, p, old, _ in [*moves, *unplanned]})
    cluster.dead = {1}
    for key, replicas in cluster.replicas.items():
        cluster.isr[key] = [b for b in replicas if b != 1]
        cluster.leader[key] = cluster.isr[key][0]
    return cluster


def run_log(run: RunFolder) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run.stage_path("execute/a") / "execution_log.jsonl").read_text().splitlines()]


def skip_reasons(result: dict[str, Any]) -> dict[tuple[str, int], str]:
    return {(s["topic"], s["partition"]): s["reason"] for s in result["skipped"]}


def test_a_partition_whose_only_lost_replica_is_the_dead_one_the_move_removes_moves_and_completes(
        config_factory: Callable[..., Any], tmp_path: Path) -> None:
    config = config_factory(CONFIG)
    run = prepared_run(config, tmp_path, moves=MOVES)
    cluster = cluster_without_broker_1()
    sleep, clock = no_sleep()
    result = execute_pool(config, cluster, run, "a", sleep=sleep, clock=clock)
    assert result["skipped"] == [] and result["completed"] == 2
    assert cluster.replicas[("t", 0)] == [4, 2, 3] and cluster.isr[("t", 0)] == [4, 2, 3]
    assert ("started", ("t", 0)) in actions(run) and ("completed", ("t", 0)) in actions(run)
    # A broker's config change goes to the broker: the throttle rate leaves out the dead one.
    assert [e["brokers"] for e in run_log(run) if e["action"] == "throttle_set"] == [[2, 3, 4]]
    assert cluster.broker_throttle == {}


@pytest.mark.parametrize(("dead", "isr", "min_isr", "reason"), [
    # A live replica out of sync blocks the move, as before, even one the move removes.
    (set(), [2, 3], 1, r"replica\(s\) \[1\] out of sync are not on a dead or drained broker"),
    # The dead replica is one the move keeps: it would stay lost.
    ({3}, [1, 2], 1, r"replica\(s\) \[3\] out of sync"),
    # The dead replica goes, but a live one the move keeps is out of sync too.
    ({1}, [3], 1, r"replica\(s\) \[2\] out of sync"),
    # Fewer live in-sync replicas than the topic's min.insync.replicas.
    ({1}, [2, 3], 3, r"2 live in-sync replica\(s\) \[2, 3\], fewer than the topic's min.insync.replicas 3"),
])
def test_everything_else_short_of_in_sync_replicas_is_skipped_naming_why(
        config_factory: Callable[..., Any], tmp_path: Path, dead: set[int], isr: list[int], min_isr: int,
        reason: str) -> None:
    config = config_factory(CONFIG)
    run = prepared_run(config, tmp_path, moves=MOVES[:1])
    cluster = FakeCluster({("t", 0): [1, 2, 3]})
    cluster.dead, cluster.isr[("t", 0)], cluster.leader[("t", 0)] = dead, isr, isr[0]
    cluster.min_isr["t"] = min_isr
    sleep, clock = no_sleep()
    result = execute_pool(config, cluster, run, "a", sleep=sleep, clock=clock)
    assert cluster.altered == [] and result["completed"] == 0
    assert skip_reasons(result)[("t", 0)].startswith("under-replicated now")
    assert re.search(reason, skip_reasons(result)[("t", 0)])


def test_a_live_broker_the_run_drains_may_be_out_of_sync(config_factory: Callable[..., Any], tmp_path: Path) -> None:
    config = config_factory(CONFIG)
    unplanned = ("t", 9, [1, 2, 3], [1, 2, 3])  # in the pool, not in the plan, lagging on broker 1 as well
    run = prepared_run(config, tmp_path, moves=MOVES[:1], unplanned=(unplanned,))
    write_request(run, make_request(config, action="drain-brokers", brokers=[1], reason="being replaced"))
    cluster = FakeCluster({(t, p): old for t, p, old, _ in [*MOVES[:1], unplanned]})
    cluster.isr[("t", 0)] = cluster.isr[("t", 9)] = [2, 3]  # broker 1 runs but lags
    sleep, clock = no_sleep()
    result = execute_pool(config, cluster, run, "a", sleep=sleep, clock=clock)
    assert result["completed"] == 1 and cluster.replicas[("t", 0)] == [4, 2, 3]
    assert ("under_replicated_by_replaced_brokers", (None, None)) in actions(run)
    assert ("waiting_for_isr", (None, None)) not in actions(run)


def test_the_gate_ignores_partitions_lost_with_a_dead_broker_the_plan_moves_replicas_off(
        config_factory: Callable[..., Any], tmp_path: Path) -> None:
    config = config_factory(CONFIG)
    unplanned = ("t", 9, [1, 2, 3], [1, 2, 3])  # its replica on broker 1 is lost too; this plan leaves it
    run = prepared_run(config, tmp_path, unplanned=(unplanned,), moves=MOVES)
    cluster = cluster_without_broker_1(unplanned=(unplanned,))
    sleep, clock = no_sleep()
    result = execute_pool(config, cluster, run, "a", sleep=sleep, clock=clock)
    assert result["completed"] == 2
    noted = [e for e in run_log(run) if e["action"] == "under_replicated_by_replaced_brokers"]
    assert [(e["brokers"], e["partitions"]) for e in noted] == [([1], ["t-9"])]


def test_the_gate_still_waits_for_a_dead_broker_the_plan_does_not_replace(
        config_factory: Callable[..., Any], tmp_path: Path) -> None:
    config = config_factory(CONFIG | {"execution": CONFIG["execution"] | {"urp_wait_timeout_s": 10}})
    unplanned = ("t", 8, [5, 2, 3], [5, 2, 3])  # broker 5 is dead too, and nothing moves off it
    run = prepared_run(config, tmp_path, unplanned=(unplanned,), moves=MOVES)
    cluster = cluster_without_broker_1(unplanned=(unplanned,))
    cluster.dead.add(5)
    cluster.isr[("t", 8)] = [2, 3]
    sleep, clock = no_sleep()
    with pytest.raises(ExecutionError, match=r"under-replicated for more than 10s.*'t-8'"):
        execute_pool(config, cluster, run, "a", sleep=sleep, clock=clock)
    assert cluster.altered == []


def test_the_dry_run_says_the_dead_brokers_moves_would_start(config_factory: Callable[..., Any],
                                                              tmp_path: Path) -> None:
    config = config_factory(CONFIG)
    run = prepared_run(config, tmp_path, moves=MOVES)
    cluster = cluster_without_broker_1()
    cluster.min_isr["t"] = 3
    would = {r["partition"]: r["would"] for r in dry_run_pool(config, cluster, run, "a")["moves"]}
    assert would[0].endswith("fewer than the topic's min.insync.replicas 3")
    cluster.min_isr["t"] = 2
    would = {r["partition"]: r["would"] for r in dry_run_pool(config, cluster, run, "a")["moves"]}
    assert would == {0: "start", 1: "start"}
    assert cluster.altered == []


def test_replaced_brokers_are_the_dead_sources_of_the_plan_and_the_drained_ones() -> None:
    moves = [PartitionMove("t", 0, (1, 2, 3), (4, 2, 3), 1), PartitionMove("t", 1, (5, 6), (6, 7), 1)]
    assert replaced_brokers(moves, live=[2, 3, 4, 5, 6, 7], drained=frozenset()) == {1}  # 5 runs
    assert replaced_brokers(moves, live=[2, 3, 4, 6, 7], drained=frozenset({9})) == {1, 5, 9}
    assert replaced_brokers(moves, live=[1, 2, 3, 4, 6, 7], drained=frozenset()) == {5}  # 8 is dead: no source


def test_out_of_sync_reason_counts_only_live_in_sync_replicas_against_min_insync() -> None:
    move = PartitionMove("t", 0, (1, 2, 3), (4, 2, 3), 1)
    # Broker 3 still in the ISR but gone (not yet fenced) while broker 1, drained, lags: one live in-sync replica.
    facts = SyncFacts(live=frozenset({1, 2, 4}), drained=frozenset({1}), min_isr={"t": 2})
    assert "1 live in-sync replica(s) [2]" in (out_of_sync_reason(move, [2, 3], facts) or "")
    assert out_of_sync_reason(move, [2, 3], SyncFacts(frozenset({1, 2, 3, 4}), frozenset({1}), {"t": 2})) is None
