"""The re-check of a plan (plan/recheck.py) on hand-made clusters whose figures are known by hand, and the
validation expectation that holds the planner's claim to it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from kafka_rebalancer.config import Budgets, load_config
from kafka_rebalancer.errors import ValidationFailed
from kafka_rebalancer.execute.moves import PartitionMove
from kafka_rebalancer.kafka_admin import BrokerInfo, PartitionInfo
from kafka_rebalancer.model import schemas
from kafka_rebalancer.model.band_status import broker_load_frame
from kafka_rebalancer.model.reassignment import Reassignment
from kafka_rebalancer.model.schemas import HARD
from kafka_rebalancer.operations.request import PlanningScope
from kafka_rebalancer.plan.balance.pool_bands import bands_frame
from kafka_rebalancer.plan.changes import budget_notes, load_after, partition_changes
from kafka_rebalancer.plan.recheck import (
    BAND_EDGES,
    band_rows,
    claim_rows,
    current_placement,
    end_edges,
    left_outside,
    recheck_plan,
)
from kafka_rebalancer.run_folder import VALIDATION, RunFolder, read_json
from kafka_rebalancer.snapshot import write_snapshot
from kafka_rebalancer.snapshot.build import SnapshotTables, build_snapshot_tables
from kafka_rebalancer.validate.checks import CheckTables, build_checks
from kafka_rebalancer.validate.suite import run_suite, validate_plan
from tests.helpers import write_config

# Pool a: brokers 1, 2, 3 and the dead broker 4; pool b: 5 and 6. Disk only, 1000 bytes each, band ±20%.
CONFIG = {"cluster": {"name": "c1"}, "pools": {"a": {"brokers": [1, 2, 3, 4]}, "b": {"brokers": [5, 6]}},
          "topic_pools": [{"topics": "t*", "pool": "a"}, {"topics": "u*", "pool": "b"}],
          "capacity": {"default": {"disk_bytes": 1000}}, "resources": {"disk": {"threshold": 1.2}}}


def snapshot(config: Any, partitions: list[tuple[str, int, list[int], int]], dead: set[int],
             behind: dict[tuple[str, int, int], int] | None = None) -> SnapshotTables:
    """(topic, partition, replicas, size): every replica in sync, the first one leading, on racks r1..r6; `behind`:
    (topic, partition, broker) -> bytes that follower's log is behind its leader's (in flight)."""
    cluster = [BrokerInfo(b, f"r{b}", "h", 9090 + b) for b in range(1, 7) if b not in dead]
    infos = [PartitionInfo(t, p, r, [b for b in r if b not in dead], r[0] if r[0] not in dead else r[1])
             for t, p, r, _ in partitions]
    log_dirs: dict[int, dict[str, Any]] = {b.broker_id: {"replicas": {}} for b in cluster}
    for t, p, r, size in partitions:
        for b in r:
            if b not in dead:
                log_dirs[b]["replicas"][(t, p)] = size - (behind or {}).get((t, p, b), 0)
    return build_snapshot_tables(config, cluster, infos, log_dirs)


def current_bands(config: Any, tables: SnapshotTables) -> pd.DataFrame:
    return bands_frame(broker_load_frame(tables.brokers, tables.replicas, config.resource_list()), config)


def test_forced_and_balance_bytes_and_both_lower_bounds_by_hand(config_factory: Callable[..., Any]) -> None:
    config = config_factory(CONFIG)
    # t0's replica on the dead broker 4 and t1's on broker 5 (pool b) must leave them: 100 + 50 forced bytes.
    tables = snapshot(config, [("t0", 0, [1, 4], 100), ("t1", 0, [1, 5], 50), ("t2", 0, [1, 2], 200),
                               ("t3", 0, [1, 2], 80), ("u0", 0, [5, 6], 10)], dead={4})
    # The current placement of pool a's live brokers: 1 holds 430, 2 holds 280, 3 nothing; mean 710 / 3000,
    # band [189.33, 284]: broker 1 is 146 above it, broker 3 189.33 below, so the balance LB is 568/3 bytes.
    plan = [Reassignment("t0", 0, [1, 3]), Reassignment("t1", 0, [1, 2]), Reassignment("t2", 0, [3, 2])]
    # The plan's band counts the forced bytes: pool a gains t0's 100 bytes from the dead broker and t1's 50 from
    # broker 5, which pool b loses: means 860 / 3000 and (60 + 10 - 50) / 2000; the target band's margin is 0.9.
    means = {"a": 860 / 3000, "b": 20 / 2000}
    plan_bands = current_bands(config, tables)
    for edge, factor in zip(BAND_EDGES, (1, 0.8, 1.2, 0.82, 1.18), strict=True):
        plan_bands[edge] = plan_bands["broker_pool"].map(means) * factor
    recheck = recheck_plan(config, tables, plan, plan_bands)
    # The re-check derives the same band from the snapshot and what must leave.
    assert band_rows(recheck, plan_bands)["agrees"].all()

    assert recheck.out_of_band("before", "a") == [1, 3]
    assert recheck.out_of_band("after", "a") == []  # 230, 330, 300 inside [229.33, 344]
    pool = recheck.figures("a")
    assert pool["forced_bytes_by_reason"] == {"dead_broker": 100, "draining_broker": 0, "pool_isolation": 50}
    assert (pool["forced_bytes"], pool["balance_bytes"], pool["moved_bytes"]) == (150, 200, 350)
    assert (pool["replica_moves"], pool["forced_moves"]) == (3, 2)
    assert pool["forced_lower_bound_bytes"] == 150 and pool["forced_moved_over_lb"] == 1.0
    # The separate bound, against the current placement's band, ignores where the forced replicas land: a plan
    # moving t1 and t3 off broker 1 (130 bytes) keeps every band. The LP's, against the plan's band: broker 1 must
    # shed 430 - 344 = 86 bytes, which with the 150 forced ones fill broker 3 (236 >= 229.33); with forced moves
    # the pool's bound is the LP's.
    assert pool["separate_lower_bound_bytes"] == pytest.approx(568 / 3)
    assert pool["lp_lower_bound_bytes"] == pytest.approx(86, rel=1e-5)
    assert pool["lower_bound_bytes"] == pool["lp_lower_bound_bytes"]
    assert pool["disk_lower_bound_bytes"] == pytest.approx(568 / 3)
    assert pool["moved_over_lb"] == pytest.approx(200 / 86, rel=1e-5)
    disk = recheck.resource_figures("a", "disk")
    assert disk["lower_bound"] == pytest.approx(568 / 3) and disk["lower_bound_bytes"] == pytest.approx(568 / 3)
    assert (disk["moved"], disk["forced_moved"]) == (200, 150)
    # The forced part per resource: by reason, against what must leave (in the resource's unit: bytes here).
    assert disk["forced_moved_by_reason"] == {"dead_broker": 100, "draining_broker": 0, "pool_isolation": 50}
    assert (disk["forced_lower_bound"], disk["forced_moved_over_lb"]) == (150, 1.0)
    assert recheck.figures()["moved_bytes"] == 350  # pool b moved nothing


def test_the_current_placement_worked_out_beforehand_gives_the_same_recheck(
        config_factory: Callable[..., Any]) -> None:
    # The plan job works out the plan-independent half while the planner runs; every figure must be the same.
    config = config_factory(CONFIG)
    tables = snapshot(config, [("t0", 0, [1, 4], 100), ("t1", 0, [1, 5], 50), ("t2", 0, [1, 2], 200),
                               ("t3", 0, [2, 1], 80)], dead={4})
    plan = [Reassignment("t0", 0, [1, 3]), Reassignment("t1", 0, [1, 2]), Reassignment("t3", 0, [1, 2])]
    bands = current_bands(config, tables)
    current = current_placement(config, tables, bands, draining=[2])
    beforehand = recheck_plan(config, tables, plan, bands, draining=[2], current=current)
    whole = recheck_plan(config, tables, plan, bands, draining=[2])
    assert beforehand.figures() == whole.figures() and beforehand.figures()["forced_bytes"] > 0
    assert beforehand.resource_figures("a", "disk") == whole.resource_figures("a", "disk")
    assert beforehand.after.equals(whole.after) and beforehand.before.equals(whole.before)


def test_a_drained_brokers_replicas_are_forced(config_factory: Callable[..., Any]) -> None:
    config = config_factory(CONFIG)
    tables = snapshot(config, [("t0", 0, [1, 2], 100), ("t1", 0, [2, 3], 40)], dead=set())
    plan = [Reassignment("t0", 0, [1, 3])]
    recheck = recheck_plan(config, tables, plan, current_bands(config, tables), draining=[2])
    assert recheck.figures("a")["forced_bytes_by_reason"]["draining_broker"] == 100
    assert recheck.figures("a")["forced_lower_bound_bytes"] == 140  # t1's replica on 2 must leave too


def test_in_a_partition_with_a_dead_brokers_replica_only_that_replica_must_leave(
        config_factory: Callable[..., Any]) -> None:
    # t0 is under-replicated (its replica on the dead broker 4): ISR safety lets a plan replace only that replica,
    # so its replica on broker 5 (pool b) stays this run: it is neither forced nor counted in pool a's band.
    config = config_factory(CONFIG)
    tables = snapshot(config, [("t0", 0, [1, 4, 5], 100), ("t1", 0, [1, 2], 200)], dead={4})
    recheck = recheck_plan(config, tables, [Reassignment("t0", 0, [1, 3, 5])], current_bands(config, tables))
    assert recheck.must_leave[["broker_id", "reason"]].values.tolist() == [[4, "dead_broker"]]
    assert recheck.figures("a")["forced_moved_over_lb"] == 1.0
    derived = recheck.bands_after.set_index("broker_pool")
    assert (derived.loc["a", "mean"], derived.loc["b", "mean"]) == pytest.approx((600 / 3000, 100 / 2000))


def test_validation_fails_when_the_plans_band_differs_from_the_rechecks(config_factory: Callable[..., Any]) -> None:
    config = config_factory(CONFIG)
    # The dead broker's 100 bytes must arrive in pool a: a plan whose band forgot them (the current placement's
    # band, mean 500 / 3000 instead of 600 / 3000) fails; pool b, with nothing forced, agrees.
    tables = snapshot(config, [("t0", 0, [1, 4], 100), ("t1", 0, [1, 2], 200), ("u0", 0, [5, 6], 10)], dead={4})
    forgot = current_bands(config, tables)
    recheck = recheck_plan(config, tables, [Reassignment("t0", 0, [1, 3])], forgot)
    rows = band_rows(recheck, forgot)
    assert rows.loc[~rows["agrees"], ["broker_pool", "resource"]].values.tolist() == [["a", "disk"]]
    empty = pd.DataFrame()
    success, failures, _ = run_suite(CheckTables(empty, empty, empty, bands=rows), config)
    (failure,) = failures
    assert not success and failure["table"] == "bands"
    (row,) = failure["rows"]
    assert (row["mean_planned"], row["mean_rechecked"]) == pytest.approx((500 / 3000, 600 / 3000))
    right = forgot.assign(**{edge: recheck.bands_after[edge] for edge in BAND_EDGES})
    assert run_suite(CheckTables(empty, empty, empty, bands=band_rows(recheck, right)), config)[0]


def test_one_replica_outside_the_count_band_is_out_of_band(config_factory: Callable[..., Any]) -> None:
    config = config_factory({**CONFIG, "resources": {"replica_count": {"threshold": 1.1}}})
    # Six replicas on brokers 1..3 of pool a (4 is dead and holds none): band [2, 2]; the plan leaves 3, 1, 2.
    tables = snapshot(config, [("t0", 0, [1, 2], 10), ("t1", 0, [2, 3], 10), ("t2", 0, [3, 1], 10)], dead={4})
    bands = current_bands(config, tables)
    assert bands.set_index("broker_pool").loc["a", ["lower", "upper"]].tolist() == [2.0, 2.0]
    recheck = recheck_plan(config, tables, [Reassignment("t1", 0, [1, 3])], bands)
    assert recheck.out_of_band("before") == []
    assert recheck.out_of_band("after", "a", "replica_count") == [1, 2]


def test_brokers_fixed_into_the_band_but_short_of_the_target_band_are_listed(
        config_factory: Callable[..., Any]) -> None:
    config = config_factory(CONFIG)
    # Pool a holds 400, 300, 200 of 1000 bytes: mean 300, band [240, 360], target band (margin 0.9) [246, 354].
    tables = snapshot(config, [("t0", 0, [1], 45), ("t1", 0, [1], 5), ("t2", 0, [1], 350), ("t3", 0, [2], 300),
                               ("t4", 0, [3], 200), ("u0", 0, [5, 6], 10)], dead={4})
    bands = current_bands(config, tables).set_index(["broker_pool", "resource"])
    assert bands.loc[("a", "disk"), ["target_lower", "target_upper"]].tolist() == pytest.approx([0.246, 0.354])
    bands = bands.reset_index()
    # Moving 45 lands broker 1 at 355 and broker 3 at 245: inside the band, outside the target band.
    short = recheck_plan(config, tables, [Reassignment("t0", 0, [3])], bands)
    assert short.out_of_band("before", "a") == [1, 3] and short.out_of_band("after") == []
    assert short.fixed_outside_target_band("a", "disk") == [1, 3] == short.resource_figures(
        "a", "disk")["fixed_outside_target_band"]
    # Moving 50 lands them at 350 and 250, inside the target band; broker 2 was never out of band.
    done = recheck_plan(config, tables, [Reassignment("t0", 0, [3]), Reassignment("t1", 0, [3])], bands)
    assert done.fixed_outside_target_band() == []


def test_counts_come_from_plan_json_against_the_snapshot(config_factory: Callable[..., Any]) -> None:
    config = config_factory(CONFIG)
    tables = snapshot(config, [("t0", 0, [1, 2], 10), ("t1", 0, [1, 2], 20), ("t2", 0, [3, 1], 30),
                               ("t3", 0, [2, 3], 40), ("t4", 0, [1, 2, 3], 5)], dead={4})
    # t0: order only (the preferred leader changes, nothing copied); t1: one replica moves, same leader; t2: one
    # moves and the leader changes; t3 as it is (listed for a leader election only); t4: its followers' order only.
    # Leadership-only: t0 and t4; the executor runs them, and t3, in its batches that copy nothing.
    plan = [Reassignment("t0", 0, [2, 1]), Reassignment("t1", 0, [1, 3]), Reassignment("t2", 0, [2, 1]),
            Reassignment("t3", 0, [2, 3]), Reassignment("t4", 0, [1, 3, 2])]
    figures = recheck_plan(config, tables, plan, current_bands(config, tables)).figures()
    assert {k: figures[k] for k in ("partitions_changed", "replica_moves", "preferred_leader_changes",
                                    "leadership_only_changes", "moved_bytes")} == {
        "partitions_changed": 5, "replica_moves": 2, "preferred_leader_changes": 2, "leadership_only_changes": 2,
        "moved_bytes": 50}
    executed = [PartitionMove(r.topic, r.partition, tuple(old), tuple(r.replicas), 0) for r, old in
                zip(plan, ([1, 2], [1, 2], [3, 1], [2, 3], [1, 2, 3]), strict=True)]
    assert [m.leadership_only for m in executed] == [True, False, False, True, True]


def _claims(config: Any, slip: float, broker: int = 3, behind: int = 0) -> pd.DataFrame:
    # Brokers 1, 2, 3 hold 600, 300, 300 (band [320, 480]); t0 moves from 1 to 3: 450, 300, 450. `slip` is added to
    # the claimed load of `broker`; broker 2's replica of t0 is `behind` bytes behind its leader's.
    tables = snapshot(config, [("t0", 0, [1, 2], 150), ("t1", 0, [1, 2], 150), ("t2", 0, [1, 3], 300)], dead={4},
                      behind={("t0", 0, 2): behind})
    moves = pd.DataFrame([{"broker_pool": "a", "seq": 0, "action": "replica", "topic": "t0", "partition": 0,
                           "source_broker": 1, "target_broker": 3, "size_bytes": 150, "resource": "disk",
                           "forced": False}])
    changes = partition_changes(tables.partitions, moves)
    load = broker_load_frame(tables.brokers, tables.replicas, config.resource_list())
    bands = bands_frame(load, config)
    claimed = load_after(load, changes, tables.partitions, config.resource_list())
    claimed.loc[claimed["broker_id"] == broker, "load"] += slip  # -150 on 3: a slip, its arrival not counted
    claimed["usage"] = claimed["load"] / claimed["capacity"]
    plan = [Reassignment(t, p, list(r)) for t, p, r in zip(changes["topic"], changes["partition"],
                                                            changes["new_replicas"], strict=True)]
    return claim_rows(claimed, recheck_plan(config, tables, plan, bands), bands)


@pytest.mark.parametrize(("behind", "slip", "agrees"), [(0, -1.0, False), (3, 0.0, True), (3, -1.0, False)])
def test_bytes_in_flight_between_replicas_are_no_disagreement(config_factory: Callable[..., Any], behind: int,
                                                               slip: float, agrees: bool) -> None:
    # The claim, as the planner does, counts broker 2's replica of t0, which stays, at its size as found (150 -
    # behind); the re-check at the partition's size (plan.json names only where t0's replicas end). That difference
    # is no disagreement; a byte more is, as is a byte where every replica is its partition's size.
    config = config_factory(CONFIG)
    assert bool(_claims(config, slip, broker=2, behind=behind)["agrees"].all()) is agrees


@pytest.mark.parametrize("tamper", [False, True])
def test_validation_fails_when_the_planners_claim_disagrees_with_the_recheck(
        config_factory: Callable[..., Any], tamper: bool) -> None:
    config = config_factory(CONFIG)
    empty = pd.DataFrame()
    claims = _claims(config, -150.0 if tamper else 0.0)
    success, failures, _ = run_suite(CheckTables(empty, empty, empty, claims), config)
    assert success is not tamper
    if tamper:
        (failure,) = failures
        assert failure["table"] == "claims"
        (row,) = failure["rows"]
        assert (row["broker_id"], row["resource"]) == (3, "disk")
        assert (row["load_claimed"], row["load_rechecked"]) == (300.0, 450.0)
        assert (row["inside_claimed"], row["inside_rechecked"]) == (False, True)


def _left_outside_of_one_move(config: Any, notes: pd.DataFrame, scope: PlanningScope | None = None) -> pd.DataFrame:
    # As in _claims: after t0 moves from 1 to 3, brokers hold 450, 300, 450 against the band [320, 480] (target band
    # [328, 472]): broker 2, under the band before, is still under it; 1 and 3 are inside their target band.
    tables = snapshot(config, [("t0", 0, [1, 2], 150), ("t1", 0, [1, 2], 150), ("t2", 0, [1, 3], 300)], dead={4})
    recheck = recheck_plan(config, tables, [Reassignment("t0", 0, [3, 2])], current_bands(config, tables))
    return left_outside(recheck, notes, pd.DataFrame(columns=schemas.INFEASIBLE.names), scope or PlanningScope())


def test_a_broker_left_outside_without_the_planners_reason_fails_validation(
        config_factory: Callable[..., Any]) -> None:
    config = config_factory(CONFIG)
    no_notes = pd.DataFrame(columns=schemas.PLANNER_NOTES.names)
    left = _left_outside_of_one_move(config, no_notes)
    assert left[["broker_id", "resource", "left", "explained"]].values.tolist() == [
        [2, "disk", "outside its band", False]]
    empty = pd.DataFrame()
    success, failures, _ = run_suite(CheckTables(empty, empty, empty, left_outside=left), config)
    (failure,) = failures
    assert not success and failure["table"] == "left_outside"
    assert [(r["broker_id"], r["left"]) for r in failure["rows"]] == [(2, "outside its band")]

    # The run's budgets dropped moves after planning: the broker is listed with that reason, and validation passes.
    notes = budget_notes(left, dropped=3, budgets=Budgets(max_replica_moves=1))
    assert notes[["broker_pool", "resource", "broker_id"]].values.tolist() == [["a", "disk", 2]]
    assert notes["note"].iloc[0] == ("outside its band after the plan: the run's budgets (max_replica_moves=1) "
                                     "dropped 3 of the planner's moves across pools")
    explained = _left_outside_of_one_move(config, notes)
    assert explained["explained"].all()
    assert run_suite(CheckTables(empty, empty, empty, left_outside=explained), config)[0]


@pytest.mark.parametrize("scope", [PlanningScope(pools=frozenset({"b"})), PlanningScope(leadership="elect")])
def test_a_pool_the_run_did_not_balance_is_not_held_to_its_reasons(config_factory: Callable[..., Any],
                                                                    scope: PlanningScope) -> None:
    # A manual action that plans only pool b, or leadership only: broker 2 of pool a, left as it was, is no
    # broker the planner had to explain.
    config = config_factory(CONFIG)
    assert _left_outside_of_one_move(config, pd.DataFrame(columns=schemas.PLANNER_NOTES.names), scope).empty


def test_a_replica_outside_the_pool_may_stay_only_in_an_under_replicated_partition(
        config_factory: Callable[..., Any]) -> None:
    # t0: broker 4 is dead and broker 5 is of pool b; ISR safety lets the plan replace only 4's replica, so 5's
    # stays. t1 is fully in sync: its replica on 5 must go home, and a plan that keeps it there fails.
    config = config_factory(CONFIG)
    tables = snapshot(config, [("t0", 0, [4, 1, 5], 100), ("t1", 0, [1, 5], 100)], dead={4})
    plan = [Reassignment("t0", 0, [1, 2, 5]), Reassignment("t1", 0, [2, 5])]
    rollback = [Reassignment("t0", 0, [4, 1, 5]), Reassignment("t1", 0, [1, 5])]
    checks = build_checks(config, tables, plan, rollback, current_bands(config, tables))
    assert checks.partitions.set_index("topic")["targets_in_pool"].to_dict() == {"t0": True, "t1": False}
    # Adding a replica outside the pool fails even in an under-replicated partition.
    onto_b = build_checks(config, tables, [Reassignment("t0", 0, [1, 6, 5])], rollback[:1],
                          current_bands(config, tables))
    assert onto_b.partitions["targets_in_pool"].tolist() == [False]


def test_a_replica_that_must_leave_its_broker_and_stays_must_be_listed(config_factory: Callable[..., Any]) -> None:
    # t0's replica on the dead broker 4 and t1's on broker 5 (pool b) must leave them; the plan moves only t1's.
    config = config_factory(CONFIG)
    tables = snapshot(config, [("t0", 0, [1, 4], 100), ("t1", 0, [2, 5], 100), ("t2", 0, [3, 1], 100),
                               ("u0", 0, [5, 6], 10)], dead={4})
    recheck = recheck_plan(config, tables, [Reassignment("t1", 0, [2, 3])], current_bands(config, tables))
    assert recheck.kept_must_leave()[["topic", "broker_id"]].values.tolist() == [["t0", 4]]
    infeasible = pd.DataFrame(columns=schemas.INFEASIBLE.names)
    no_notes = pd.DataFrame(columns=schemas.PLANNER_NOTES.names)
    left = left_outside(recheck, no_notes, infeasible, PlanningScope())
    kept = left[left["resource"] == HARD]
    assert kept[["broker_pool", "broker_id", "left", "explained"]].values.tolist() == [
        ["a", 4, "holding replicas that must leave it", False]]
    empty = pd.DataFrame()
    success, failures, _ = run_suite(CheckTables(empty, empty, empty, left_outside=kept), config)
    assert not success and [(r["broker_id"], r["resource"]) for r in failures[0]["rows"]] == [(4, HARD)]
    # The planner's note on the replica it could not place explains it; a plan of pool b only need not.
    note = pd.DataFrame([{"broker_pool": "a", "resource": HARD, "broker_id": 4,
                          "note": "t0-0: its replica on a dead broker could not be placed"}])
    assert left_outside(recheck, note, infeasible, PlanningScope()).query("resource == @HARD")["explained"].all()
    assert left_outside(recheck, no_notes, infeasible, PlanningScope(pools=frozenset({"b"}))).empty


def test_a_broker_taken_out_of_its_target_band_must_be_listed(config_factory: Callable[..., Any]) -> None:
    config = config_factory(CONFIG)
    # Pool a holds 300 / 300 / 300 of 1000 bytes: band [240, 360], target band [246, 354], every broker inside it.
    # Moving 55 from broker 1 to 2 ends them at 245 and 355: inside the band, but out of the target band.
    tables = snapshot(config, [("t0", 0, [1], 55), ("t1", 0, [1], 245), ("t2", 0, [2], 300), ("t3", 0, [3], 300),
                               ("u0", 0, [5, 6], 10)], dead={4})
    bands = current_bands(config, tables)
    taken = recheck_plan(config, tables, [Reassignment("t0", 0, [2])], bands)
    assert taken.out_of_band("after") == [] and taken.fixed_outside_target_band() == []
    assert taken.taken_outside_target_band("a", "disk") == [1, 2]
    left = left_outside(taken, pd.DataFrame(columns=schemas.PLANNER_NOTES.names),
                        pd.DataFrame(columns=schemas.INFEASIBLE.names), PlanningScope())
    assert left[["broker_id", "left", "explained"]].values.tolist() == [
        [1, "taken outside its target band", False], [2, "taken outside its target band", False]]
    edges = end_edges(taken.before, bands, taken.must_leave).set_index("broker_id")
    assert edges.loc[1, ["fixed", "end_lower", "end_upper"]].tolist() == [False, pytest.approx(0.246),
                                                                          pytest.approx(0.354)]


def test_a_broker_between_its_target_band_and_the_band_may_come_closer_but_not_go_further(
        config_factory: Callable[..., Any]) -> None:
    config = config_factory(CONFIG)
    # 356 / 300 / 244 of 1000 (mean 300): brokers 1 and 3 are inside the band [240, 360], outside the target band
    # [246, 354]. Moving t1 (3) from 1 to 3 brings both closer (353, 247); moving t3 (2) from 2 to 1 takes broker 1
    # further out (358).
    tables = snapshot(config, [("t0", 0, [1], 353), ("t1", 0, [1], 3), ("t2", 0, [2], 298), ("t3", 0, [2], 2),
                               ("t4", 0, [3], 244), ("u0", 0, [5, 6], 10)], dead={4})
    bands = current_bands(config, tables)
    unchanged = recheck_plan(config, tables, [], bands)
    edges = end_edges(unchanged.before, bands, unchanged.must_leave).set_index("broker_id")
    assert edges.loc[1, ["end_lower", "end_upper"]].tolist() == pytest.approx([0.246, 0.356])
    assert edges.loc[3, ["end_lower", "end_upper"]].tolist() == pytest.approx([0.244, 0.354])
    assert recheck_plan(config, tables, [Reassignment("t1", 0, [3])], bands).taken_outside_target_band() == []
    assert recheck_plan(config, tables, [Reassignment("t3", 0, [1])], bands).taken_outside_target_band() == [1]


def test_a_brokers_window_starts_from_what_it_keeps_once_forced_replicas_have_left(
        config_factory: Callable[..., Any]) -> None:
    config = config_factory(CONFIG)
    # Broker 1 holds t0 (243) and u0 (10) of pool b, which goes home: pool a's planner starts from 243 (of 1000).
    # The plan's band: mean (243 + 328 + 329) / 3000 = 0.3, band [240, 360], target band [246, 354]. Broker 1 ends
    # at 243: below its target band, as it was once u0 had left, so the plan took it no further out.
    tables = snapshot(config, [("t0", 0, [1], 243), ("u0", 0, [1, 5], 10), ("t1", 0, [2], 328),
                               ("t2", 0, [3], 329)], dead={4})
    recheck = recheck_plan(config, tables, [Reassignment("u0", 0, [6, 5])], current_bands(config, tables))
    assert recheck.bands_after.set_index("broker_pool").loc["a", "mean"] == pytest.approx(0.3)
    assert recheck.out_of_band("after", "a") == [] and recheck.fixed_outside_target_band() == []
    assert recheck.taken_outside_target_band() == []
    edges = end_edges(recheck.before, recheck.bands_after, recheck.must_leave).set_index("broker_id")
    assert edges.loc[1, "end_lower"] == pytest.approx(0.243)


def test_replicas_going_home_to_their_pool_pass_validation_where_the_planner_says_why(tmp_path: Path) -> None:
    """Pool a's broker 1 (below its band) holds u0 of pool b, which goes home to broker 6 (above pool b's band), the
    only broker that takes it here; t3's replica on broker 5 (pool b) finds no room at home and stays, while its
    other replica moves inside pool a. Each is forced, and the planner says why each broker stays outside: broker 1
    is judged once u0 has left it, broker 6 as a forced receiver, t3 as keeping a replica the planner could not
    bring home. A balance move taking broker 1 further out still fails."""
    from tests.unit.test_run_report import write_plan

    root = tmp_path
    config = load_config(write_config(root / "config.yaml", {**CONFIG, "run_root": str(root / "runs")}))
    tables = snapshot(config, [("t0", 0, [1], 200), ("t1", 0, [2], 350), ("t2", 0, [3], 330), ("t3", 0, [2, 5], 20),
                               ("u0", 0, [1, 5], 20), ("u1", 0, [6], 400), ("u2", 0, [5], 100)], dead={4})
    bands = current_placement(config, tables, current_bands(config, tables)).bands_after
    notes = pd.DataFrame([("a", "disk", 1, "outside its band"), ("b", "disk", 5, "outside its band"),
                          ("b", "disk", 6, "outside its band"),
                          ("a", HARD, 5, "t3-0: its replica outside its topic's pool could not be placed")],
                         columns=["broker_pool", "resource", "broker_id", "note"])

    def validated(moves: list[tuple[str, str, int, int, int]], name: str) -> dict[str, Any]:
        run = RunFolder(config.run_root / config.cluster.name / name)
        write_snapshot(run, tables, {"cluster": config.cluster.name})
        frame = pd.DataFrame([{"broker_pool": pool, "seq": i, "action": "replica", "topic": topic, "partition": 0,
                               "source_broker": source, "target_broker": target, "size_bytes": size,
                               "resource": "disk", "forced": False}
                              for i, (pool, topic, source, target, size) in enumerate(moves)])
        write_plan(run, config, tables, frame[schemas.MOVES.names], notes=notes, bands=bands)
        try:
            return validate_plan(config, run)
        except ValidationFailed:
            return read_json(run.stage_path(VALIDATION) / "report.json")

    home = [("b", "u0", 1, 6, 20), ("a", "t3", 2, 3, 20)]
    assert validated(home, "scheduled__2026-11-29T02_00_00_00_00")["success"]
    further = validated([*home, ("a", "t0", 1, 2, 200)], "scheduled__2026-11-30T02_00_00_00_00")
    (brokers,) = [f for f in further["failures"] if f["table"] == "brokers"]
    assert (1, "disk") in [(r["broker_id"], r["resource"]) for r in brokers["rows"]]
