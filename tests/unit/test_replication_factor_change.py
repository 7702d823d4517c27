"""change-replication-factor without a cluster: its request and its checks against a snapshot (min.insync.replicas,
patterns, bad input), its placement (raising: new racks first, balanced; lowering: the leader kept, the rack spread
kept, the most loaded first; partitions left as they are, with why), the validation's RF expectation per action,
its promise, the topic spread's share after the change, and the CLI's and the manual DAG's wiring. The real cluster:
tests/integration/test_replication_factor.py."""

from __future__ import annotations

import argparse
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest

from kafka_rebalancer.cli import main
from kafka_rebalancer.cli.commands import COMMANDS, add_parsers, request_params
from kafka_rebalancer.config import RebalancerConfig
from kafka_rebalancer.execute.moves import PartitionMove
from kafka_rebalancer.execute.throttle import throttle_for
from kafka_rebalancer.kafka_admin import BrokerInfo, PartitionInfo
from kafka_rebalancer.model.band_status import band_status, broker_load_frame
from kafka_rebalancer.model.reassignment import Reassignment
from kafka_rebalancer.operations.replication_factor import check_target, requested_topics
from kafka_rebalancer.operations.request import RequestError, make_request, run_config
from kafka_rebalancer.plan.balance.pool_bands import bands_frame
from kafka_rebalancer.plan.balance.spread_violations import planned_spread
from kafka_rebalancer.plan.changes import replicas_of_changes
from kafka_rebalancer.plan.promises import BROKEN, CANNOT, KEPT, Excuses, placement_after, promise_rows
from kafka_rebalancer.plan.replication_factor import RESIZE_HEADER, replication_factor_plan, resize_rows
from kafka_rebalancer.snapshot.build import SnapshotTables, build_snapshot_tables
from kafka_rebalancer.snapshot.evacuation import as_planned
from kafka_rebalancer.validate.checks import build_checks
from kafka_rebalancer.validate.suite import run_suite
from tests.helpers import write_config

# One pool of six brokers on three racks (a: 1 and 4, b: 2 and 5, c: 3 and 6); broker 7 is in no pool.
BODY = {"cluster": {"name": "c1"}, "pools": {"all": {"brokers": [1, 2, 3, 4, 5, 6]}},
        "topic_pools": [{"topics": "orders*", "pool": "all"}, {"topics": "clicks*", "pool": "all"}],
        "capacity": {"default": {"disk_bytes": 10_000}}, "resources": {"disk": {}, "replica_count": {}}}
RACK = {1: "a", 4: "a", 2: "b", 5: "b", 3: "c", 6: "c", 7: "a"}


@pytest.fixture
def config_path(tmp_path: Path) -> Path:
    return write_config(tmp_path / "config.yaml", {**BODY, "run_root": str(tmp_path / "runs")})


@pytest.fixture
def config(config_path: Path) -> RebalancerConfig:
    return run_config(config_path)


def tables(config: RebalancerConfig, partitions: list[tuple[str, int, list[int], int]],
           out_of_sync: dict[tuple[str, int], list[int]] | None = None) -> SnapshotTables:
    """(topic, partition, replicas, size): the first replica leads; in sync but for `out_of_sync`."""
    cluster = [BrokerInfo(b, RACK[b], "h", 9090 + b) for b in range(1, 7)]
    infos = [PartitionInfo(t, p, r, [b for b in r if b not in (out_of_sync or {}).get((t, p), [])], r[0])
             for t, p, r, _ in partitions]
    log_dirs: dict[int, dict[str, Any]] = {b.broker_id: {"replicas": {}} for b in cluster}
    for t, p, r, size in partitions:
        for b in r:
            log_dirs[b]["replicas"][(t, p)] = size
    return build_snapshot_tables(config, cluster, infos, log_dirs)


def plan(config: RebalancerConfig, snap: SnapshotTables, patterns: list[str], target: int,
         min_insync: dict[str, int] | None = None, cordoned: frozenset[int] = frozenset()) -> Any:
    request = make_request(config, action="change-replication-factor", topics=patterns, replication_factor=target)
    parts = as_planned(snap.partitions, snap.brokers, request)
    load = broker_load_frame(snap.brokers, snap.replicas, config.resource_list())
    return replication_factor_plan(config, parts, snap.brokers, load, bands_frame(load, config), patterns, target,
                                   min_insync or {}, cordoned)


def racks(replicas: list[int]) -> set[str]:
    return {RACK[b] for b in replicas}


# -- the request and its checks ------------------------------------------------------------------------------
@pytest.mark.parametrize(("params", "message"), [
    ({"replication_factor": 3}, "'topics': at least one topic"),
    ({"topics": ["orders"]}, "'replication_factor': the target replication factor is required"),
    ({"topics": ["orders"], "replication_factor": 0}, "replication_factor"),
    ({"topics": ["orders"], "replication_factor": 3, "brokers": [1]}, "'brokers': not used"),
])
def test_replication_factor_request_names_a_missing_or_wrong_field(config: RebalancerConfig, params: dict,
                                                                   message: str) -> None:
    with pytest.raises(RequestError, match=message):
        make_request(config, action="change-replication-factor", **params)


def test_replication_factor_is_not_a_field_of_other_actions(config: RebalancerConfig) -> None:
    with pytest.raises(RequestError, match="'replication_factor': not used by rebalance-pool"):
        make_request(config, action="rebalance-pool", broker_pool="all", replication_factor=3)
    scope = make_request(config, action="change-replication-factor", topics=["orders*", "__consumer_offsets"],
                         replication_factor=3).scope
    # No pool is balanced or planned by the planner; the promise is the action's.
    assert (scope.pools, scope.balanced_pools, scope.replication_factor, scope.topics) == (
        frozenset(), frozenset(), 3, ("orders*", "__consumer_offsets"))
    assert scope.promise == "change-replication-factor"


def test_replication_factor_below_min_insync_is_refused_naming_what_to_change(config: RebalancerConfig) -> None:
    snap = tables(config, [("orders", 0, [1, 2, 3], 10), ("clicks", 0, [1, 2], 10)])
    request = make_request(config, action="change-replication-factor", topics=["orders", "clicks"],
                           replication_factor=2)
    with pytest.raises(RequestError) as refused:
        check_target(request, snap.partitions, snap.brokers, {"orders": 3, "clicks": 1})
    message = str(refused.value)
    assert "2 is below the min.insync.replicas of orders (min.insync.replicas=3)" in message
    assert "--entity-name <topic> --add-config min.insync.replicas=2" in message and "at least 3" in message
    warnings = check_target(request, snap.partitions, snap.brokers, {"orders": 2, "clicks": 1})
    assert len(warnings) == 1 and warnings[0].startswith("orders: the target replication factor 2 equals its "
                                                         "min.insync.replicas")


@pytest.mark.parametrize(("patterns", "target", "message"), [
    (["nope*"], 2, "nope\\* match no topic of the cluster"),
    (["orders"], 7, "7 replicas need 7 brokers; the cluster has 6 running"),
])
def test_replication_factor_bad_targets_are_refused(config: RebalancerConfig, patterns: list[str], target: int,
                                                    message: str) -> None:
    snap = tables(config, [("orders", 0, [1], 10)])
    request = make_request(config, action="change-replication-factor", topics=patterns, replication_factor=target)
    with pytest.raises(RequestError, match=message):
        check_target(request, snap.partitions, snap.brokers, {"orders": 1})


def test_replication_factor_patterns_match_names_and_globs() -> None:
    topics = ["orders", "orders-eu", "clicks", "__consumer_offsets"]
    assert requested_topics(["orders*", "__consumer_offsets"], topics) == ["__consumer_offsets", "orders",
                                                                            "orders-eu"]
    assert requested_topics(["order"], topics) == []


# -- the placement -------------------------------------------------------------------------------------------
def test_replication_factor_raised_on_new_racks_balanced_and_leader_first(config: RebalancerConfig) -> None:
    snap = tables(config, [("orders", p, [1 + p], 100) for p in range(6)] + [("clicks", 0, [1, 4], 50)])
    result = plan(config, snap, ["orders"], 3)
    assert len(result.changes) == 6 and result.cannot.empty
    held: dict[int, int] = {}
    for old, new in zip(result.changes["old_replicas"], result.changes["new_replicas"], strict=True):
        assert new[0] == old[0] and len(new) == len(set(new)) == 3  # the leader first, no broker twice
        assert racks(new) == {"a", "b", "c"}  # a new rack first
        for b in new:
            held[b] = held.get(b, 0) + 1
    assert sorted(held.values()) == [3] * 6  # balanced: 18 replicas on 6 brokers
    facts = result.summary["topics"]["orders"]
    assert (facts["rf_before"], facts["rf_after"], facts["copied_bytes"], facts["freed_bytes"]) == ("1", 3, 1200, 0)
    assert resize_rows(result.summary)[0][:4] == ["orders", "6", "1 → 3", "1.2 KiB"]
    assert len(RESIZE_HEADER) == len(resize_rows(result.summary)[0])


def test_replication_factor_lowered_keeps_leader_and_racks_from_the_most_loaded(config: RebalancerConfig) -> None:
    # orders-0 holds rack a twice (1 and 4): one of those goes, never the leader 1; broker 5 is the most loaded.
    snap = tables(config, [("orders", 0, [1, 4, 2], 100), ("orders", 1, [3, 5, 6], 100),
                           ("clicks", 0, [5, 2], 900)])
    result = plan(config, snap, ["orders"], 2)
    new = dict(zip(result.changes["partition"], result.changes["new_replicas"], strict=True))
    assert new[0] == [1, 2]  # 4 shares rack a with the leader
    assert new[1] == [3, 5]  # 6 shares rack c with the leader 3; the leader stays
    assert result.summary["topics"]["orders"]["freed_bytes"] == 200
    more = plan(config, tables(config, [("orders", 0, [1, 2, 3], 100), ("clicks", 0, [2, 5], 900)]), ["orders"], 2)
    assert list(more.changes["new_replicas"]) == [[1, 3]]  # 2 and 3 on racks of their own: the most loaded, 2, goes


def test_replication_factor_leaves_partitions_it_may_not_change_with_why(config: RebalancerConfig) -> None:
    snap = tables(config, [("orders", 0, [1, 2], 10), ("orders", 1, [3], 10), ("orders", 2, [4, 5, 6], 10)],
                  out_of_sync={("orders", 0): [2]})
    result = plan(config, snap, ["orders*"], 3)
    assert list(result.changes["partition"]) == [1]  # orders-2 already at 3
    (reason,) = result.cannot["reason"]
    assert reason.startswith("under-replicated: ISR [1] of replicas [1, 2]")
    assert result.summary["partitions_left"] == 1
    assert plan(config, tables(config, [("orders", 0, [1], 10)]), ["orders"], 6).cannot.empty  # six take six
    short = plan(config, tables(config, [("orders", 0, [1], 10)]), ["orders"], 6, cordoned=frozenset({6}))
    assert short.changes.empty and "has 4 broker(s) taking replicas besides the partition's 1: too few for 6" in \
        short.cannot["reason"].iloc[0]


@pytest.mark.parametrize(("budgets", "placed", "reason"), [
    ({"max_replica_moves": 6}, 3, "the run's budget max_replica_moves=6 is spent (config budgets)"),
    ({"max_moved_bytes": 650}, 3, "the run's budget max_moved_bytes=650 is spent (config budgets)"),
    # Eight new replicas, each of the six brokers may take one: the smallest partition finds one broker left.
    ({"max_moves_per_broker": 1}, 3, "too many are at max_moves_per_broker=1 (config budgets)"),
])
def test_replication_factor_keeps_within_the_runs_budgets(tmp_path: Path, budgets: dict, placed: int,
                                                          reason: str) -> None:
    config = run_config(write_config(tmp_path / "budgets.yaml", {**BODY, "run_root": str(tmp_path / "runs"),
                                                                  "budgets": budgets}))
    snap = tables(config, [("orders", p, [1 + p], 100 + p) for p in range(4)])
    result = plan(config, snap, ["orders"], 3)
    assert len(result.changes) == placed and result.cannot["partition"].tolist() == [0]  # the largest first
    assert result.cannot["reason"].str.contains(reason, regex=False).all(), result.cannot["reason"].tolist()


def test_replication_factor_of_an_internal_topic_goes_to_its_leaders_pool(config: RebalancerConfig) -> None:
    snap = tables(config, [("__consumer_offsets", p, [1 + p % 3], 10) for p in range(3)])
    assert snap.partitions["excluded"].all()  # internal topics are excluded from balancing by default
    result = plan(config, snap, ["__consumer_offsets"], 3, {"__consumer_offsets": 1})
    assert len(result.changes) == 3 and set(result.changes["broker_pool"]) == {"all"}
    assert all(racks(r) == {"a", "b", "c"} for r in result.changes["new_replicas"])


# -- the validation and the promise --------------------------------------------------------------------------
def _checks(config: RebalancerConfig, snap: SnapshotTables, plan_: list[Reassignment],
            resized: tuple[tuple[str, ...], int] | None) -> Any:
    rollback = [Reassignment(t, p, list(r)) for t, p, r in zip(snap.partitions["topic"], snap.partitions["partition"],
                                                                snap.partitions["replicas"], strict=True)
                if (t, p) in {(x.topic, x.partition) for x in plan_}]
    load = broker_load_frame(snap.brokers, snap.replicas, config.resource_list())
    # The run balances no pool (its scope); any other action here balances them all.
    bands = bands_frame(load, config).assign(balanced=resized is None)
    if resized is not None:  # the run's snapshot as it reads it: a topic of no pool in its leader's
        request = make_request(config, action="change-replication-factor", topics=list(resized[0]),
                               replication_factor=resized[1])
        snap = SnapshotTables(snap.brokers, snap.replicas, as_planned(snap.partitions, snap.brokers, request))
    return build_checks(config, snap, plan_, rollback, bands, resized=resized)


def test_replication_factor_validation_holds_every_other_action_to_the_rf(config: RebalancerConfig) -> None:
    snap = tables(config, [("orders", 0, [1, 2, 3], 100), ("clicks", 0, [1, 2], 100),
                           ("__consumer_offsets", 0, [1], 10)])
    plan_ = [Reassignment("orders", 0, [1, 2]), Reassignment("__consumer_offsets", 0, [1, 2, 3])]
    # Lowered to 2 keeps two racks (all two allow); the internal topic may change only because it was asked for.
    checks = _checks(config, snap, [plan_[0]], (("orders",), 2))
    assert checks.partitions[["rf_expected", "rf_after", "racks_kept"]].values.tolist() == [[2, 2, True]]
    ok, failures, _ = run_suite(checks, config)
    assert ok, failures
    internal = _checks(config, snap, [plan_[1]], (("__consumer_offsets",), 3))
    assert bool(internal.partitions["topic_not_excluded"].iloc[0]) and run_suite(internal, config)[0]
    # The same plans for any other action: the RF expectation (and the exclusion) fail them.
    ok, failures, _ = run_suite(_checks(config, snap, plan_, None), config)
    assert not ok and {f["kwargs"].get("column_A") for f in failures} >= {"rf_expected"}
    wrong = _checks(config, snap, [Reassignment("clicks", 0, [1, 2, 3])], (("orders",), 3))
    assert not run_suite(wrong, config)[0]  # clicks was not asked for


def test_replication_factor_promise_kept_broken_and_cannot(config_path: Path, config: RebalancerConfig) -> None:
    snap = tables(config, [("orders", 0, [1], 100), ("orders", 1, [2], 100)])
    request = make_request(config, action="change-replication-factor", topics=["orders"], replication_factor=3)
    status = band_status(broker_load_frame(snap.brokers, snap.replicas, config.resource_list()),
                         bands_frame(broker_load_frame(snap.brokers, snap.replicas, config.resource_list()), config))
    alive = [1, 2, 3, 4, 5, 6]
    good = placement_after(snap.partitions, [Reassignment("orders", 0, [1, 2, 3]),
                                             Reassignment("orders", 1, [2, 3, 4])])
    rows = promise_rows(request, config, good, status, alive, Excuses())
    assert rows["verdict"].tolist() == [KEPT]
    same_rack = placement_after(snap.partitions, [Reassignment("orders", 0, [1, 2, 3]),
                                                  Reassignment("orders", 1, [2, 5, 3])])
    rows = promise_rows(request, config, same_rack, status, alive, Excuses())
    assert rows["verdict"].tolist() == [BROKEN] and "on 2 rack(s), 3 possible" in rows["detail"].iloc[0]
    left = promise_rows(request, config, placement_after(snap.partitions, [Reassignment("orders", 0, [1, 2, 3])]),
                        status, alive, Excuses(partitions={("orders", 1): "under-replicated"}))
    assert left["verdict"].tolist() == [CANNOT] and "1 replicas [2]" in left["detail"].iloc[0]
    # After execution (verify): a replica still out of sync breaks it.
    after = good.assign(isr=[[1, 2], [2, 3, 4]])
    assert promise_rows(request, config, after, status, alive, Excuses())["verdict"].tolist() == [BROKEN]


def test_replication_factor_raised_widens_the_topics_spread_share(config: RebalancerConfig) -> None:
    snap = tables(config, [("orders", p, [1 + p % 6], 10) for p in range(12)])
    result = plan(config, snap, ["orders"], 3)
    plan_ = [Reassignment(t, p, list(r)) for t, p, r in zip(result.changes["topic"], result.changes["partition"],
                                                            result.changes["new_replicas"], strict=True)]
    cells = planned_spread(config, snap, plan_)
    replicas = cells[cells["kind"] == "replicas"]
    # 36 replicas on 6 brokers: a share of 6, target 7 (not the 3 of the 12 replicas before); each broker holds 6.
    assert set(replicas["target"]) == {7} and (replicas["held"] <= replicas["cap"]).all()


def test_replication_factor_raise_throttles_the_leader_and_the_added_replicas() -> None:
    raised = PartitionMove("orders", 0, (1,), (1, 2, 3), 100, leader=1)
    lowered = PartitionMove("orders", 1, (4, 5, 6), (4, 5), 100, leader=4)
    throttle = throttle_for([raised, lowered], 1000)
    # Kafka's own tool's lists: the existing replicas serve (leader side), the added ones fetch (follower side); a
    # removal copies nothing, so it is not throttled.
    assert throttle.brokers == {1, 2, 3} and throttle.topic_replicas == {"orders": ("0:1", "0:2,0:3")}
    assert (raised.bytes_to_copy, lowered.bytes_to_copy) == (200, 0)
    assert not lowered.leadership_only  # its replica set changes: a reassignment like any move, copying nothing


def test_replication_factor_after_loads_count_the_leaders_new_followers(config: RebalancerConfig) -> None:
    snap = tables(config, [("orders", 0, [1], 100)])
    parts = snap.partitions.assign(bytes_in_per_s=10.0, bytes_out_per_s=5.0)
    changes = pd.DataFrame({"broker_pool": ["all"], "topic": ["orders"], "partition": [0], "old_replicas": [[1]],
                            "new_replicas": [[1, 2, 3]], "size_bytes": [100]})
    rows = replicas_of_changes(changes, parts)
    # The leader's network out: its consumers' 5 plus 10 to each of its two new followers.
    assert rows.set_index("broker_id")["nw_out_bytes_per_s"].to_dict() == {1: 25.0, 2: 0.0, 3: 0.0}


# -- the CLI and the manual DAG ------------------------------------------------------------------------------
def test_replication_factor_cli_command_takes_topics_and_target(config_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    action = COMMANDS["change-replication-factor"]
    parser = argparse.ArgumentParser()
    add_parsers(parser.add_subparsers(dest="command"), lambda p: p.add_argument("--config"))
    args = parser.parse_args(["change-replication-factor", "--config", "c", "--topics", "__consumer_offsets,orders*",
                              "--replication-factor", "3"])
    assert request_params(action, args) == {"action": "change-replication-factor",
                                            "topics": ["__consumer_offsets", "orders*"], "replication_factor": 3,
                                            "reason": None}
    with pytest.raises(SystemExit) as exited:
        main(["change-replication-factor", "--config", str(config_path), "--topics", "orders",
              "--replication-factor", "three"])
    assert exited.value.code == 2 and "invalid int value" in capsys.readouterr().err


def test_replication_factor_manual_dag_snapshot_task_passes_the_param(monkeypatch: pytest.MonkeyPatch) -> None:
    from kafka_rebalancer.airflow import tasks
    from kafka_rebalancer.snapshot import start

    seen: dict[str, Any] = {}

    def start_run(config_path: str, run_id: str, params: dict[str, Any], connect: Any) -> Any:
        seen.update(params)
        return SimpleNamespace(path=Path("/runs") / run_id)

    monkeypatch.setattr(tasks, "_claim_pools", lambda context: False)
    monkeypatch.setattr(start, "start_run", start_run)
    params = {"action": "change-replication-factor", "topics": ["__consumer_offsets"], "replication_factor": 3,
              "config_path": "c.yaml", "mode": "dry-run"}
    tasks.snapshot_task({"params": params, "run_id": "manual__1", "dag_run": SimpleNamespace(
        triggering_user_name="ops")})  # type: ignore[arg-type]
    assert (seen["action"], seen["topics"], seen["replication_factor"]) == (
        "change-replication-factor", ["__consumer_offsets"], 3)


def test_replication_factor_plan_has_no_rows_for_topics_already_at_the_target(config: RebalancerConfig) -> None:
    result = plan(config, tables(config, [("orders", 0, [1, 2], 10)]), ["orders"], 2)
    assert result.changes.empty and result.cannot.empty
    assert result.summary["topics"]["orders"]["min_insync_replicas"] is None
