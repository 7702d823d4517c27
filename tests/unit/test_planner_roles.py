"""Broker roles of a manual operation: add-brokers lets only the new brokers receive and only the old ones give;
forced moves still go; without the roles the plan is unchanged."""

from __future__ import annotations

import pandas as pd

from kafka_rebalancer.balance.bands import Band, band_for
from kafka_rebalancer.balance.model import PoolModel
from kafka_rebalancer.balance.planner import Budgets, Planner
from kafka_rebalancer.model.resources import DISK, REPLICA_COUNT

RESOURCES = [DISK, REPLICA_COUNT]
OLD, NEW = [1, 2, 3], [4, 5]


def model(receives: dict[int, bool] | None = None, gives: dict[int, bool] | None = None,
          must_move: set[tuple[str, int, int]] = frozenset()) -> PoolModel:  # type: ignore[assignment]
    """Three loaded brokers (racks a, b, c) and two empty new ones (racks a, b); RF 2, 30 partitions."""
    brokers = pd.DataFrame([{"broker_id": b, "rack": "abcab"[b - 1], "alive": True, "excluded": False,
                             "disk_capacity_bytes": 1000.0} for b in OLD + NEW])
    if receives is not None:
        brokers["receives"] = [receives.get(b, True) for b in brokers["broker_id"]]
    if gives is not None:
        brokers["gives"] = [gives.get(b, True) for b in brokers["broker_id"]]
    rows = []
    for p in range(30):
        for position, b in enumerate((OLD[p % 3], OLD[(p + 1) % 3])):
            rows.append({"topic": "t", "partition": p, "broker_id": b, "position": position, "size_bytes": 10 + p,
                         "movable": True, "must_move": ("t", p, b) in must_move})
    return PoolModel(brokers, pd.DataFrame(rows), RESOURCES)


def bands(m: PoolModel) -> dict[str, Band]:
    return {r.name: band_for(r.name, r.is_count, list(m.load[:, k]), list(m.capacity[:, k]), 1.10, 0.9)
            for k, r in enumerate(RESOURCES)}


def plan(m: PoolModel) -> list[tuple[int, int, int]]:
    result = Planner(m, bands(m), [r.name for r in RESOURCES], Budgets(max_replica_moves=1000)).run()
    ids = m.broker_ids
    return [(int(ids[mv.source]), int(ids[mv.target]), mv.replica) for mv in result.moves if mv.action == "replica"]


def test_added_brokers_only_receive_and_old_brokers_only_give() -> None:
    roles = model(receives=dict.fromkeys(OLD, False), gives=dict.fromkeys(NEW, False))
    moves = plan(roles)
    assert moves
    assert all(s in OLD and t in NEW for s, t, _ in moves), moves
    b = bands(roles)
    count = roles.load[:, 1]
    assert all(b["replica_count"].lower - 1e-9 <= c <= b["replica_count"].upper + 1e-9 for c in count), count


def test_without_roles_the_plan_is_the_same_as_with_every_role_allowed() -> None:
    everyone = {b: True for b in OLD + NEW}
    assert plan(model()) == plan(model(receives=everyone, gives=everyone))


def test_a_broker_that_may_not_receive_never_receives_even_when_emptiest() -> None:
    moves = plan(model(receives={4: False}))
    assert moves and all(t != 4 for _, t, _ in moves)


def test_forced_moves_leave_a_broker_that_may_not_give() -> None:
    forced = {("t", 0, 1), ("t", 3, 1)}
    m = model(receives=dict.fromkeys(OLD, False), gives={1: False, 4: False, 5: False}, must_move=forced)
    moves = plan(m)
    from_1 = [(s, t) for s, t, _ in moves if s == 1]
    assert len(from_1) == 2 and all(t in NEW for _, t in from_1)


def test_a_broker_that_may_not_give_keeps_its_replicas_even_when_loaded() -> None:
    moves = plan(model(gives={1: False}))
    assert moves and all(s != 1 for s, _, _ in moves)
