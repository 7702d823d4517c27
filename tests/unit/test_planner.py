"""The per-pool planner: seed 001's pre-check windows with heterogeneous capacities, the acceptance rule and
every hard constraint the planner owns (DESIGN §5)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from kafka_rebalancer.balance.bands import Band, band_for
from kafka_rebalancer.balance.model import PoolModel
from kafka_rebalancer.balance.planner import Budgets, Planner
from kafka_rebalancer.config import Budgets as ConfigBudgets
from kafka_rebalancer.model.resources import DISK, REPLICA_COUNT
from kafka_rebalancer.plan.changes import partition_changes, trim_to_budgets
from kafka_rebalancer.synthetic import SyntheticSpec, generate


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


def test_overloaded_broker_sheds_the_best_fit_replica_of_its_precheck_window() -> None:
    # Capacities 100 / 200 / 100, loads 80 / 60 / 40: m = 180/400 = 0.45, band [0.405, 0.495], target band
    # [0.4095, 0.4905]. Broker 1 must shed l in [80 - 49.05, 80 - 40.5] = [30.95, 39.5]: of 5, 12, 28, 35 only 35
    # lands it inside. Receivers: broker 2 ends at (60 + 35)/200 = 0.475 (inside); broker 3 at 0.75 (over).
    model = pool([(1, "a", 100), (2, "b", 200), (3, "c", 100)],
                 [("t", 0, 1, 0, 5), ("t", 1, 1, 0, 12), ("t", 2, 1, 0, 28), ("t", 3, 1, 0, 35),
                  ("t", 4, 2, 0, 60), ("t", 5, 3, 0, 40)])
    bands = bands_of(model)
    assert (bands["disk"].lower, bands["disk"].upper) == (pytest.approx(0.405), pytest.approx(0.495))
    assert first_move(model, bands)[:3] == (1, 2, 35)
    assert bands["disk"].contains(model.usage[0, 0]) and bands["disk"].contains(model.usage[1, 0])


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
                          "size_bytes": [10] * 6})
    kept = trim_to_budgets(moves, ConfigBudgets(max_replica_moves=4))
    assert sorted(zip(kept["broker_pool"], kept["seq"], strict=True)) == [("a", 0), ("a", 1), ("b", 0), ("b", 1)]
    kept = trim_to_budgets(moves, ConfigBudgets(max_replica_moves=10, max_moved_bytes=35))
    assert len(kept) == 3


def test_partition_changes_keep_positions() -> None:
    partitions = pd.DataFrame({"topic": ["t"], "partition": [0], "replicas": [[1, 2, 3]], "size_bytes": [5]})
    moves = pd.DataFrame({"broker_pool": ["p", "p"], "seq": [0, 1], "topic": ["t", "t"], "partition": [0, 0],
                          "source_broker": [1, 3], "target_broker": [4, 5], "size_bytes": [5, 5], "resource": "disk"})
    (change,) = partition_changes(partitions, moves).to_dict("records")
    assert change["old_replicas"] == [1, 2, 3] and change["new_replicas"] == [4, 2, 5]


@pytest.mark.parametrize("seed", range(12))
def test_random_pools_keep_every_invariant(seed: int) -> None:
    """On generated pools: RF and distinctness kept, rack diversity never reduced, only movable replicas and
    eligible targets, and no balanced resource pushed out of its band or further out."""
    spec = SyntheticSpec(n_brokers=9, n_racks=3, n_pools=1, n_partitions=150, replication_factor=int(2 + seed % 2),
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


def test_budget_trim_never_splits_a_swap() -> None:
    moves = pd.DataFrame({"broker_pool": ["a", "a", "a"], "seq": [0, 1, 1], "size_bytes": [10, 10, 10]})
    assert trim_to_budgets(moves, ConfigBudgets(max_replica_moves=2))["seq"].tolist() == [0]
