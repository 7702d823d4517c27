"""The per-pool planner: seed 001's pre-check windows with heterogeneous capacities, the acceptance rule and
every hard constraint the planner owns (README: How a plan is made)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from kafka_rebalancer.config import Budgets as ConfigBudgets
from kafka_rebalancer.model.resources import DISK, LEADER_COUNT, NETWORK_OUT, REPLICA_COUNT
from kafka_rebalancer.model.topic_spread import TopicSpreadSettings
from kafka_rebalancer.plan.balance.bands import Band, band_for
from kafka_rebalancer.plan.balance.model import PoolModel, base_load_column
from kafka_rebalancer.plan.balance.per_broker import pool_brokers
from kafka_rebalancer.plan.balance.planner import Budgets, Planner
from kafka_rebalancer.plan.changes import partition_changes, trim_to_budgets
from kafka_rebalancer.snapshot.synthetic import SyntheticSpec, generate


def pool(brokers: list[tuple[int, str, float]], replicas: list[tuple[str, int, int, int, int]],
         alive: dict[int, bool] | None = None, movable: set[tuple[str, int]] | None = None,
         resources: tuple = (DISK,)) -> PoolModel:
    """brokers: (id, rack, disk capacity); replicas: (topic, partition, broker, position, size)."""
    alive = alive or {}
    b = pd.DataFrame([{"broker_id": i, "rack": r, "alive": alive.get(i, True), "excluded": False,
                       "disk_capacity_bytes": c} for i, r, c in brokers])
    r = pd.DataFrame([{"topic": t, "partition": p, "broker_id": br, "position": pos, "size_bytes": s,
                       "movable": movable is None or (t, p) in movable} for t, p, br, pos, s in replicas])
    return PoolModel(b, r, list(resources))


def bands_of(model: PoolModel, threshold: float = 1.10, margin: float = 0.9,
             capacity_threshold: float | None = None) -> dict[str, Band]:
    ok = model.eligible
    return {res.name: band_for(res.name, res.is_count, list(model.load[ok, k]), list(model.capacity[ok, k]),
                               threshold, margin, capacity_threshold=capacity_threshold if res is DISK else None)
            for k, res in enumerate(model.resources)}


def first_move(model: PoolModel, bands: dict[str, Band]) -> tuple[int, int, int, int]:
    plan = Planner(model, bands, [r.name for r in model.resources], Budgets(max_replica_moves=1)).run()
    (move,) = plan.moves
    return (int(model.broker_ids[move.source]), int(model.broker_ids[move.target]),
            int(model.r_size[move.replica]), move.replica)


def test_overloaded_broker_sheds_the_replicas_that_reach_its_window_with_the_least_data() -> None:
    # Capacities 100 / 200 / 100, loads 80 / 60 / 40: m = 180/400 = 0.45, band [0.405, 0.495], target band
    # [0.4095, 0.4905]. Broker 1 must shed l in [80 - 49.05, 80 - 40.5] = [30.95, 39.5]: of 5, 12, 28, 35 only 35
    # lands it inside alone, but 28 + 5 = 33 copies less. The larger goes first (it leaves the least to cover).
    # The whole plan copies the same 33 and the 5 lands on broker 3 (0.40 -> 0.45): with the 28 gone to broker 2,
    # broker 1 still ends inside (0.47), and so does broker 3.
    model = pool([(1, "a", 100), (2, "b", 200), (3, "c", 100)],
                 [("t", 0, 1, 0, 5), ("t", 1, 1, 0, 12), ("t", 2, 1, 0, 28), ("t", 3, 1, 0, 35),
                  ("t", 4, 2, 0, 60), ("t", 5, 3, 0, 40)])
    bands = bands_of(model)
    assert (bands["disk"].lower, bands["disk"].upper) == (pytest.approx(0.405), pytest.approx(0.495))
    assert first_move(model, bands)[:3] == (1, 2, 28)
    model = pool([(1, "a", 100), (2, "b", 200), (3, "c", 100)],
                 [("t", 0, 1, 0, 5), ("t", 1, 1, 0, 12), ("t", 2, 1, 0, 28), ("t", 3, 1, 0, 35),
                  ("t", 4, 2, 0, 60), ("t", 5, 3, 0, 40)])
    plan = Planner(model, bands, ["disk"], Budgets(max_replica_moves=100)).run()
    assert [(int(model.broker_ids[mv.source]), int(model.broker_ids[mv.target]), int(model.r_size[mv.replica]))
            for mv in plan.moves] == [(1, 3, 5), (1, 2, 28)]
    assert all(bands["disk"].contains(u) for u in model.usage[:, 0])


def test_underloaded_broker_takes_a_replica_that_lands_it_inside_from_a_broker_that_stays_inside() -> None:
    # Capacities 100 / 200 / 100, loads 10 / 150 / 60: m = 0.55, band [0.495, 0.605], target [0.5005, 0.5995].
    # Broker 1 (0.10) is furthest out: it needs g in [50.05 - 10, 60.5 - 10] = [40.05, 50.5]. The most loaded
    # candidate, broker 2 (0.75), has 75, 45 and 30: only 45 fits, and broker 2 stays inside at 105/200 = 0.525.
    model = pool([(1, "a", 100), (2, "b", 200), (3, "c", 100)],
                 [("t", 0, 1, 0, 10), ("t", 1, 2, 0, 75), ("t", 2, 2, 0, 45), ("t", 3, 2, 0, 30),
                  ("t", 4, 3, 0, 60)])
    bands = bands_of(model)
    assert first_move(model, bands)[:3] == (2, 1, 45)
    assert bands["disk"].contains(model.usage[0, 0]) and bands["disk"].contains(model.usage[1, 0])


def test_no_broker_twice_in_a_partition() -> None:
    # Loads 70 / 30 / 5 of 100 each: band [0.315, 0.385]. Broker 1 is furthest out; only t-0 may move. Broker 2
    # holds t-0 already, so the replica goes to broker 3 ((5 + 30)/100 = 0.35, inside).
    model = pool([(1, "a", 100), (2, "b", 100), (3, "c", 100)],
                 [("t", 0, 1, 0, 30), ("t", 0, 2, 1, 30), ("u", 0, 1, 0, 40), ("v", 0, 3, 0, 5)],
                 movable={("t", 0)})
    source, target, size, _ = first_move(model, bands_of(model))
    assert (source, target, size) == (1, 3, 30)


def test_rack_diversity_is_kept() -> None:
    # Loads 65 / 30 / 5 / 0: band [0.225, 0.275]. t-0 (20) is on racks a and b. The emptiest broker (4) is in
    # rack b too: the replica on broker 1 must go to broker 3 (rack c, (5 + 20)/100 = 0.25), never to broker 4.
    model = pool([(1, "a", 100), (2, "b", 100), (3, "c", 100), (4, "b", 100)],
                 [("t", 0, 1, 0, 20), ("t", 0, 2, 1, 20), ("x", 0, 1, 0, 45), ("w", 0, 2, 0, 10),
                  ("y", 0, 3, 0, 5)],
                 movable={("t", 0)})
    source, target, _, _ = first_move(model, bands_of(model))
    assert (source, target) == (1, 3)


def test_dead_brokers_receive_nothing() -> None:
    model = pool([(1, "a", 100), (2, "b", 100), (3, "c", 100)],
                 [("t", i, 1, 0, 10) for i in range(8)] + [("u", 0, 3, 0, 20)], alive={2: False})
    plan = Planner(model, bands_of(model), ["disk"], Budgets(100)).run()
    assert plan.moves and all(int(model.broker_ids[m.target]) != 2 for m in plan.moves)


def test_capacity_threshold_is_never_crossed() -> None:
    # Mean usage 0.75: the band's upper edge (0.825) is above the 0.8 capacity threshold, which wins.
    model = pool([(1, "a", 100), (2, "b", 100)], [("t", i, 1, 0, 10) for i in range(10)] + [("u", 0, 2, 0, 50)])
    bands = bands_of(model, capacity_threshold=0.8)
    Planner(model, bands, ["disk"], Budgets(100)).run()
    assert model.usage[:, 0].max() <= 0.8 + 1e-9


def test_unmovable_replicas_stay() -> None:
    model = pool([(1, "a", 100), (2, "b", 100)], [("t", i, 1, 0, 10) for i in range(6)], movable=set())
    assert Planner(model, bands_of(model), ["disk"], Budgets(100)).run().moves == []


@pytest.mark.parametrize("budgets", [Budgets(3), Budgets(100, max_moved_bytes=25),
                                     Budgets(100, max_moves_per_broker=2)])
def test_budgets_hold(budgets: Budgets) -> None:
    model = pool([(1, "a", 100), (2, "b", 100), (3, "c", 100)], [("t", i, 1, 0, 10) for i in range(9)])
    plan = Planner(model, bands_of(model), ["disk"], budgets).run()
    assert len(plan.moves) <= budgets.max_replica_moves
    if budgets.max_moved_bytes is not None:
        assert sum(int(model.r_size[m.replica]) for m in plan.moves) <= budgets.max_moved_bytes
    if budgets.max_moves_per_broker is not None:
        counts = np.bincount([b for m in plan.moves for b in (m.source, m.target)], minlength=3)
        assert counts.max() <= budgets.max_moves_per_broker


def test_global_budget_trim_keeps_a_prefix_of_every_pools_sequence() -> None:
    moves = pd.DataFrame({"broker_pool": ["a"] * 4 + ["b"] * 2, "seq": [0, 1, 2, 3, 0, 1],
                          "size_bytes": [10] * 6, "action": "replica"})
    kept = trim_to_budgets(moves, ConfigBudgets(max_replica_moves=4))
    assert sorted(zip(kept["broker_pool"], kept["seq"], strict=True)) == [("a", 0), ("a", 1), ("b", 0), ("b", 1)]
    kept = trim_to_budgets(moves, ConfigBudgets(max_replica_moves=10, max_moved_bytes=35))
    assert len(kept) == 3


def test_partition_changes_keep_positions() -> None:
    partitions = pd.DataFrame({"topic": ["t"], "partition": [0], "replicas": [[1, 2, 3]], "leader": [1],
                               "size_bytes": [5]})
    moves = pd.DataFrame({"broker_pool": ["p", "p"], "seq": [0, 1], "action": "replica", "topic": ["t", "t"],
                          "partition": [0, 0], "source_broker": [1, 3], "target_broker": [4, 5], "size_bytes": [5, 5],
                          "resource": "disk"})
    (change,) = partition_changes(partitions, moves).to_dict("records")
    assert change["old_replicas"] == [1, 2, 3] and change["new_replicas"] == [4, 2, 5]


@pytest.mark.parametrize("seed", range(12))
def test_random_pools_keep_every_invariant(seed: int) -> None:
    """On generated pools: RF and distinctness kept, rack diversity never reduced, only movable replicas and
    eligible targets, and no balanced resource pushed out of its band or further out."""
    spec = SyntheticSpec(n_brokers=9, n_racks=3, n_pools=1, n_partitions=600, replication_factor=int(2 + seed % 2),
                         hot_brokers_per_pool=1 + seed % 2, empty_brokers_per_pool=seed % 3,
                         under_replicated_fraction=0.05, dead_broker=seed % 4 == 0, seed=seed)
    tables, _ = generate(spec)
    parts = tables.partitions.set_index(["topic", "partition"])
    replicas = tables.replicas.assign(movable=[
        len(parts.at[(t, p), "isr"]) == len(parts.at[(t, p), "replicas"])
        for t, p in zip(tables.replicas["topic"], tables.replicas["partition"], strict=True)])
    model = PoolModel(tables.brokers.assign(excluded=False), replicas, [DISK, REPLICA_COUNT])
    bands = bands_of(model)
    before = model.usage.copy()
    rack_of = dict(zip(model.broker_ids, model.rack_names, strict=True))
    start = model.r_broker.copy()
    plan = Planner(model, bands, ["disk", "replica_count"], Budgets(10_000)).run()
    assert plan.moves
    after = model.usage
    for move in plan.moves:
        assert model.r_movable[move.replica] and model.eligible[move.target]
    for p in range(len(model.p_start)):
        rows = slice(model.p_start[p], model.p_start[p] + model.p_count[p])
        old, new = model.broker_ids[start[rows]], model.broker_ids[model.r_broker[rows]]
        assert len(set(new)) == len(new) == len(old)
        assert len({rack_of[b] for b in new}) >= len({rack_of[b] for b in old})
    for k, res in enumerate(model.resources):
        lower, upper = bands[res.name].lower, bands[res.name].upper
        dist_before = np.maximum(np.maximum(lower - before[:, k], before[:, k] - upper), 0.0)
        dist_after = np.maximum(np.maximum(lower - after[:, k], after[:, k] - upper), 0.0)
        ok = model.eligible
        assert np.all(dist_after[ok] <= dist_before[ok] + 1e-9), res.name


def test_swap_when_no_single_move_fits() -> None:
    # Loads 60 / 40 of 100: band [0.45, 0.55]. Broker 1 must shed 5.5..15, but its replicas are 30 and 30 (broker 2
    # would end at 0.70). Swapping a 30 for broker 2's 20 transfers a net 10: both end at 0.50.
    model = pool([(1, "a", 100), (2, "b", 100)],
                 [("t", 0, 1, 0, 30), ("t", 1, 1, 0, 30), ("u", 0, 2, 0, 20), ("u", 1, 2, 0, 20)],
                 resources=(DISK, REPLICA_COUNT))
    plan = Planner(model, bands_of(model), ["disk", "replica_count"], Budgets(10)).run()
    assert [(int(model.broker_ids[m.source]), int(model.broker_ids[m.target]), int(model.r_size[m.replica]))
            for m in plan.moves] == [(1, 2, 30), (2, 1, 20)]
    assert {m.seq for m in plan.moves} == {0}  # one action
    assert model.usage[:, 0].tolist() == [0.5, 0.5] and model.usage[:, 1].tolist() == [2, 2]


def test_budget_trim_never_splits_a_swap_and_counts_only_copies() -> None:
    moves = pd.DataFrame({"broker_pool": ["a", "a", "a", "a"], "seq": [0, 1, 1, 2], "size_bytes": [10, 10, 10, 0],
                          "action": ["replica", "replica", "replica", "leadership"]})
    assert trim_to_budgets(moves, ConfigBudgets(max_replica_moves=2))["seq"].tolist() == [0]
    assert trim_to_budgets(moves, ConfigBudgets(max_replica_moves=3))["seq"].tolist() == [0, 1, 1, 2]


def traffic_pool(leaders: list[int], brokers: int = 3) -> PoolModel:
    """Partitions of RF 2 on brokers 1 and 2 (and 3), equal traffic; `leaders` says which broker leads each."""
    b = pd.DataFrame([{"broker_id": i, "rack": f"r{i}", "alive": True, "excluded": False, "disk_capacity_bytes": 1000,
                       "nw_out_capacity_bytes_per_s": 1000.0} for i in range(1, brokers + 1)])
    rows = []
    for p, leader in enumerate(leaders):
        pair = [1, 2] if p % 2 else [2, 1]
        for pos, broker in enumerate(pair):
            rows.append({"topic": "t", "partition": p, "broker_id": broker, "position": pos,
                         "is_leader": broker == leader, "in_isr": True, "size_bytes": 10, "movable": True,
                         "replication_factor": 2, "bytes_in_per_s": 10.0, "bytes_out_per_s": 20.0,
                         "cpu_leader_cores": 0.0, "cpu_follower_cores": 0.0})
    return PoolModel(b, pd.DataFrame(rows), [REPLICA_COUNT, LEADER_COUNT, NETWORK_OUT])


def test_leadership_transfers_fix_leaders_without_moving_data() -> None:
    model = traffic_pool(leaders=[1] * 8, brokers=2)  # broker 1 leads all 8 partitions
    bands = bands_of(model)
    plan = Planner(model, bands, ["replica_count", "leader_count", "network_out"], Budgets(100)).run()
    assert plan.moves and {m.action for m in plan.moves} == {"leadership"}
    assert model.usage[:, 1].tolist() == [4, 4]  # leaders 4 and 4
    assert all(bands[r].contains(u) for r, u in zip(["leader_count", "network_out"], model.usage[0, 1:], strict=True))
    # The new leader goes first in the replica list, so the preferred leader election makes it the leader.
    for m in plan.moves:
        rows = model.partition_rows(m.replica)
        first = rows[model.r_position[rows] == 0][0]
        assert first == m.replica and model.r_is_leader[first]


@pytest.mark.parametrize("spec", [
    SyntheticSpec(n_brokers=6, n_pools=1, n_partitions=120, leader_skew=0.8, hot_weight=4.0, seed=3),
    SyntheticSpec(n_brokers=8, n_racks=4, n_pools=1, n_partitions=2000, leader_skew=0.3, hot_weight=1.6,
                  empty_brokers_per_pool=1, seed=9),
    SyntheticSpec(n_brokers=6, n_pools=1, n_partitions=1500, leader_skew=0.5, hot_weight=2.0, seed=101),
])
def test_replay_of_the_actions_gives_the_models_final_assignment(spec: SyntheticSpec) -> None:
    """The plan is replayed from the actions (plan.changes); whatever run() does (prune, substitution, compound
    actions), the replay must land on the model's final assignment with the first replica leading."""
    tables, _ = generate(spec)
    replicas = tables.replicas.merge(tables.partitions[["topic", "partition", "replication_factor", "bytes_in_per_s",
                                                        "bytes_out_per_s", "cpu_leader_cores", "cpu_follower_cores"]],
                                     on=["topic", "partition"]).assign(movable=True)
    resources = [REPLICA_COUNT, LEADER_COUNT, DISK, NETWORK_OUT]
    model = PoolModel(tables.brokers.assign(excluded=False), replicas, resources)
    plan = Planner(model, bands_of(model), [r.name for r in resources], Budgets(10_000)).run()
    assert {m.action for m in plan.moves} == {"replica", "leadership"}
    moves = pd.DataFrame([{"broker_pool": "p", "seq": m.seq, "action": m.action, "topic": model.r_topic[m.replica],
                           "partition": model.r_partition[m.replica], "source_broker": model.broker_ids[m.source],
                           "target_broker": model.broker_ids[m.target], "size_bytes": 0} for m in plan.moves])
    replayed = {(c.topic, c.partition): c.new_replicas
                for c in partition_changes(tables.partitions, moves).itertuples(index=False)}
    for p in np.flatnonzero(model.p_touched):
        rows = np.arange(model.p_start[p], model.p_start[p] + model.p_count[p])
        final = [int(model.broker_ids[b]) for b in model.r_broker[rows][np.argsort(model.r_position[rows])]]
        key = (model.r_topic[rows[0]], int(model.r_partition[rows[0]]))
        assert replayed.get(key, final) == final
        assert model.r_is_leader[rows][np.argsort(model.r_position[rows])][0]  # the first replica leads


def test_hard_constraints_come_first() -> None:
    # t-0 has a replica on dead broker 4 (must move); u-0 has a replica on foreign broker 5 (not in the pool, must
    # come home); v-0 has both replicas on rack a although the pool has three racks (must spread).
    b = pd.DataFrame([{"broker_id": i, "rack": r, "alive": i != 4, "excluded": i == 5, "disk_capacity_bytes": 100}
                      for i, r in ((1, "a"), (2, "b"), (3, "c"), (4, "c"), (5, "b"), (6, "a"))])
    rows = [("t", 0, 1, 0, True, False), ("t", 0, 4, 1, True, True), ("u", 0, 2, 0, True, False),
            ("u", 0, 5, 1, True, True), ("v", 0, 1, 0, True, False), ("v", 0, 6, 1, True, False),
            ("w", 0, 3, 0, False, False)]
    r = pd.DataFrame([{"topic": t, "partition": p, "broker_id": br, "position": pos, "size_bytes": 10,
                       "movable": mov, "must_move": must, "in_isr": br != 4} for t, p, br, pos, mov, must in rows])
    model = PoolModel(b, r, [DISK])
    plan = Planner(model, bands_of(model), ["disk"], Budgets(100)).run()
    forced = [(str(model.r_topic[m.replica]), int(model.broker_ids[m.source])) for m in plan.moves if m.forced]
    assert sorted(forced) == [("t", 4), ("u", 5), ("v", 1)] or sorted(forced) == [("t", 4), ("u", 5), ("v", 6)]
    where = {(str(model.r_topic[i]), int(model.broker_ids[model.r_broker[i]])) for i in range(len(rows))}
    assert not {b for t, b in where if b in (4, 5)}
    v_racks = {model.rack_names[model.r_broker[i]] for i in range(len(rows)) if model.r_topic[i] == "v"}
    assert len(v_racks) == 2


def test_rack_locked_pool_with_a_dead_broker_is_proven_infeasible() -> None:
    # RF 3 on 3 racks: each rack holds one replica of every partition. Broker 4 (rack c) is dead, so rack c's
    # surviving broker 3 must hold all of rack c's load: at least one broker of rack c stays over its band.
    spec = SyntheticSpec(n_brokers=6, n_pools=1, n_partitions=90, dead_broker=False, seed=4)
    tables, _ = generate(spec)
    brokers = tables.brokers.assign(excluded=False, alive=tables.brokers["broker_id"] != 6)
    replicas = tables.replicas.assign(movable=True, must_move=tables.replicas["broker_id"] == 6)
    model = PoolModel(brokers, replicas, [DISK])
    bands = {"disk": band_for("disk", False, [model.load[model.eligible, 0].sum() + model.load[~model.eligible, 0]
                                              .sum()], [model.capacity[model.eligible, 0].sum()], 1.1, 0.9)}
    plan = Planner(model, bands, ["disk"], Budgets(10_000)).run()
    assert sum(x.count for x in plan.infeasible) >= 1
    assert any("rack" in x.proof for x in plan.infeasible)
    outside = [b for b in range(len(model.broker_ids)) if model.eligible[b]
               and not bands["disk"].contains(model.usage[b, 0])]
    assert len(outside) == sum(x.count for x in plan.infeasible)


def test_broker_with_several_hot_partitions_hands_one_over_then_the_taker_sheds_ordinary_load() -> None:
    # Capacities 1000; broker 1 holds partitions of 300 and 250, both wider than the band (mean 0.45, band
    # [0.405, 0.495], width 90), brokers 2 and 3 twenty partitions of 20 each. No action that keeps the acceptance
    # rule helps broker 1 (any taker of the 250 would end at 0.65); handing it over anyway and letting the taker
    # shed ordinary partitions brings every broker inside.
    small = [("s", 20 * b + i, b, 0, 20) for b in (2, 3) for i in range(20)]
    model = pool([(1, "a", 1000), (2, "b", 1000), (3, "c", 1000)], [("h", 0, 1, 0, 300), ("h", 1, 1, 0, 250), *small])
    bands = bands_of(model)
    plan = Planner(model, bands, ["disk"], Budgets(100)).run()
    assert all(bands["disk"].contains(u) for u in model.usage[:, 0]), model.usage[:, 0]
    hot_moves = [m for m in plan.moves if model.r_topic[m.replica] == "h"]
    assert [(model.r_partition[m.replica], int(model.broker_ids[m.source])) for m in hot_moves] == [(1, 1)]
    assert not plan.notes


def test_a_pool_planned_from_topic_indexes_names_the_same_moves_as_from_names() -> None:
    """The planner's rows carry each topic's index in the sorted topic list (`planner_replicas`), and the worker
    turns them back into names: the plan names the same partitions and moves, in the same order, as the planner
    given the names, also where the names' order is not the obvious one (case, digits, underscores, non-ASCII)."""
    from kafka_rebalancer.plan.balance.transforms import POOL_MODEL_COLUMNS, PoolPlanningSettings

    tables, _ = generate(SyntheticSpec(n_brokers=6, n_racks=3, n_pools=1, n_partitions=150, replication_factor=3,
                                       hot_brokers_per_pool=1, seed=7))
    odd = ["Zeta", "alpha", "_x", "a10", "a9", "ä", "B", "b", "0", "topic-ü"]
    names = {t: f"{odd[i % len(odd)]}{i // len(odd)}" for i, t in enumerate(sorted(tables.partitions["topic"]))}
    replicas = tables.replicas.merge(tables.partitions[["topic", "partition", "replication_factor", "bytes_in_per_s",
                                                        "bytes_out_per_s", "cpu_leader_cores", "cpu_follower_cores"]],
                                     on=["topic", "partition"]).assign(movable=True, must_move=False)
    replicas["topic"] = replicas["topic"].map(names)
    brokers = tables.brokers.assign(excluded=False)
    resources = [DISK, REPLICA_COUNT]
    model = PoolModel(brokers, replicas, resources)
    bands = bands_of(model)
    # The workers plan with the topic spread (on by default): so does this planner.
    by_names = Planner(model, bands, [r.name for r in resources], Budgets(10_000),
                       topic_spread=TopicSpreadSettings()).run()
    expected = [(str(model.r_topic[mv.replica]), int(model.r_partition[mv.replica]),
                 int(model.broker_ids[mv.source]), int(model.broker_ids[mv.target])) for mv in by_names.moves]

    topics = sorted(names.values())
    rows = replicas.assign(topic_id=replicas["topic"].map({t: i for i, t in enumerate(topics)}).astype("int32"))
    settings = PoolPlanningSettings(resource_names=tuple(r.name for r in resources), bands={"p": bands},
                                    budgets=Budgets(10_000), brokers={"p": brokers}, topics=tuple(topics))
    output = settings.plan("p", rows[list(POOL_MODEL_COLUMNS)].sample(frac=1.0, random_state=1))
    moves = output[output["kind"] == "move"]
    assert expected and list(zip(moves["topic"], moves["partition"].astype(int), moves["source_broker"].astype(int),
                                 moves["target_broker"].astype(int), strict=True)) == expected


def test_the_planners_claimed_loads_are_its_models_and_match_its_moves_replayed() -> None:
    """The worker hands back the model's change of every broker's load (the claim validation holds to the re-check
    of plan.json); replaying the moves it returns on the loads before gives the same loads, leadership included."""
    from kafka_rebalancer.model.band_status import broker_load_frame
    from kafka_rebalancer.plan.balance.transforms import POOL_MODEL_COLUMNS, PoolPlanningSettings, split_planner_output
    from kafka_rebalancer.plan.changes import load_after, with_load_changes

    tables, _ = generate(SyntheticSpec(n_brokers=6, n_racks=3, n_pools=1, n_partitions=150, replication_factor=3,
                                       hot_brokers_per_pool=1, leader_skew=0.5, seed=11))
    facts = ["replication_factor", "bytes_in_per_s", "bytes_out_per_s", "cpu_leader_cores", "cpu_follower_cores"]
    replicas = tables.replicas.merge(tables.partitions[["topic", "partition", *facts]], on=["topic", "partition"])
    topics = sorted(tables.partitions["topic"].unique())
    rows = replicas.assign(movable=True, must_move=False,
                           topic_id=replicas["topic"].map({t: i for i, t in enumerate(topics)}).astype("int32"))
    brokers = tables.brokers.assign(excluded=False)
    resources = [DISK, REPLICA_COUNT, LEADER_COUNT, NETWORK_OUT]
    bands = bands_of(PoolModel(brokers, rows.drop(columns="topic_id"), resources))
    settings = PoolPlanningSettings(resource_names=tuple(r.name for r in resources), bands={"p": bands},
                                    budgets=Budgets(10_000), brokers={"p": brokers}, topics=tuple(topics))
    planned = split_planner_output(settings.plan("p", rows[list(POOL_MODEL_COLUMNS)]))
    moves = planned["moves"]
    assert (moves["action"] == "leadership").any() and (moves["action"] == "replica").any()
    assert set(planned["load_changes"]["resource"]) == {r.name for r in resources}

    load = broker_load_frame(tables.brokers.assign(broker_pool="p"), tables.replicas, resources)
    touched = tables.partitions.merge(moves[["topic", "partition"]].drop_duplicates(), on=["topic", "partition"])
    replayed = load_after(load, partition_changes(touched, moves), touched, resources)
    claimed = with_load_changes(load, planned["load_changes"])
    assert claimed["load"].to_numpy() == pytest.approx(replayed["load"].to_numpy(), rel=1e-9)
    assert not np.allclose(claimed["load"], load["load"])  # the plan changes something


def test_a_pool_sees_the_load_another_pool_plans_on_its_brokers_and_that_stays() -> None:
    # Broker 3 (pool a) holds a 30-byte replica of pool b's topic whose partition drains a dead broker: it stays
    # (only the dead broker's replica moves) and pool b plans it. Pool a's planner sees it as load it cannot
    # move; a replica of pool b's that must go home is not counted (it leaves).
    brokers = pd.DataFrame([{"broker_id": b, "broker_pool": pool_name, "rack": f"r{b}", "alive": True,
                             "excluded": False, "disk_capacity_bytes": 100.0}
                            for b, pool_name in ((1, "a"), (2, "a"), (3, "a"), (4, "b"))])
    parts = pd.DataFrame([
        # broker_id, plan_pool, must_move, resource, whole, fraction
        (1, "a", False, "disk", 30, 0), (2, "a", False, "disk", 30, 0), (3, "a", False, "disk", 30, 0),
        (3, "b", False, "disk", 30, 0), (2, "b", True, "disk", 7, 0), (4, "b", False, "disk", 50, 0)],
        columns=["broker_id", "plan_pool", "must_move", "resource", "whole", "fraction"])
    seen = pool_brokers(brokers, parts)
    assert seen["a"]["broker_id"].tolist() == [1, 2, 3]
    assert seen["a"][base_load_column("disk")].tolist() == [0.0, 0.0, 30.0]
    assert seen["b"]["broker_id"].tolist() == [2, 3, 4]  # 2 and 3 as guests, sources only
    assert seen["b"]["excluded"].tolist() == [True, True, False]

    # Each of brokers 1-3 holds three replicas of 10 of pool a: 30 / 30 / 60 with broker 3's base. Without the
    # base nothing would move; with it broker 3 gives one replica to each of the others.
    replicas = pd.DataFrame([{"topic": "t", "partition": 3 * (b - 1) + i, "broker_id": b, "position": 0,
                              "size_bytes": 10, "movable": True} for b in (1, 2, 3) for i in range(3)])
    model = PoolModel(seen["a"], replicas, [DISK])
    assert model.load[:, 0].tolist() == [30, 30, 60]
    plan = Planner(model, bands_of(model), ["disk"], Budgets(100)).run()
    assert sorted((int(model.broker_ids[m.source]), int(model.broker_ids[m.target])) for m in plan.moves) == [
        (3, 1), (3, 2)]
    assert model.load[:, 0].tolist() == [40, 40, 40]
