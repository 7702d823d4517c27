"""Broker roles of a manual operation: add-brokers lets only the new brokers receive and only the old ones give;
forced moves still go; a broker that may not give hands nothing back in a swap; without the roles the plan is
unchanged."""

from __future__ import annotations

import pandas as pd

from kafka_rebalancer.model.resources import DISK, REPLICA_COUNT
from kafka_rebalancer.plan.balance.model import PoolModel
from kafka_rebalancer.plan.balance.planner import Budgets, ExactLimits, Planner
from tests.unit.test_planner import bands_of

RESOURCES = [DISK, REPLICA_COUNT]
OLD, NEW = [1, 2, 3], [4, 5]
# Old brokers 1, 2, 3 (racks a, b, c) hold 14, 22 and 8 replicas of 10 bytes (RF 2); new brokers 4, 5 (racks a,
# b) are empty. Broker 3 is the lightest old broker, below the band's target: without roles it takes a replica too.
ADD_BROKERS = [(1, 2)] * 14 + [(2, 3)] * 8


def model(layout: list[tuple[int, ...]] = ADD_BROKERS, receives: dict[int, bool] | None = None,
          gives: dict[int, bool] | None = None, must_move: frozenset[tuple[int, int]] = frozenset(),
          brokers: list[int] = OLD + NEW, sizes: dict[int, int] | None = None) -> PoolModel:
    """layout: the brokers of each partition (leader first); must_move: (partition, broker); sizes: bytes per
    replica by the broker it starts on (10 when absent). Role columns only when given."""
    frame = pd.DataFrame([{"broker_id": b, "rack": "abcab"[b - 1], "alive": True, "excluded": False,
                           "disk_capacity_bytes": 1000.0} for b in brokers])
    if receives is not None:
        frame["receives"] = [receives.get(b, True) for b in brokers]
    if gives is not None:
        frame["gives"] = [gives.get(b, True) for b in brokers]
    rows = [{"topic": "t", "partition": p, "broker_id": b, "position": position,
             "size_bytes": (sizes or {}).get(b, 10), "movable": True, "must_move": (p, b) in must_move}
            for p, members in enumerate(layout) for position, b in enumerate(members)]
    return PoolModel(frame, pd.DataFrame(rows), RESOURCES)


def plan(m: PoolModel) -> list[tuple[int, int, int]]:
    """The replica moves (source id, target id, row), in plan order; m ends in the planned state. The actions'
    roles, without the exact polish (which finds a plan without broker 3 here; its roles: test_planner_exact)."""
    result = Planner(m, bands_of(m), [r.name for r in RESOURCES], Budgets(max_replica_moves=1000),
                     exact=ExactLimits(max_columns=0)).run()
    ids = m.broker_ids
    return [(int(ids[mv.source]), int(ids[mv.target]), mv.replica) for mv in result.moves if mv.action == "replica"]


def add_brokers() -> PoolModel:
    return model(receives=dict.fromkeys(OLD, False), gives=dict.fromkeys(NEW, False))


def test_added_brokers_only_receive_and_old_brokers_only_give_until_the_pool_is_in_band() -> None:
    m = add_brokers()
    bands = bands_of(m)
    moves = plan(m)
    assert moves
    assert all(s in OLD and t in NEW for s, t, _ in moves), moves
    for k, res in enumerate(RESOURCES):
        assert all(bands[res.name].contains(u) for u in m.usage[:, k]), (res.name, m.usage[:, k])


def test_without_roles_the_plan_is_the_one_with_every_role_allowed_and_old_brokers_may_receive() -> None:
    everyone = dict.fromkeys(OLD + NEW, True)
    moves = plan(model())
    assert moves == plan(model(receives=everyone, gives=everyone))
    # The cluster exercises the roles: without them an old broker receives (so the first test can fail).
    assert any(t in OLD for _, t, _ in moves), moves


def test_a_broker_that_may_not_receive_never_receives_even_when_emptiest() -> None:
    assert any(t == 4 for _, t, _ in plan(model())), "without the role the empty broker 4 receives"
    moves = plan(model(receives={4: False}))
    assert moves and all(t != 4 for _, t, _ in moves), moves


def test_forced_moves_leave_a_broker_that_may_not_give() -> None:
    forced = frozenset({(0, 1), (3, 1)})
    m = model(receives=dict.fromkeys(OLD, False), gives={1: False, 4: False, 5: False}, must_move=forced)
    moves = plan(m)
    from_1 = sorted((int(m.r_partition[r]), t) for s, t, r in moves if s == 1)
    assert [p for p, _ in from_1] == [0, 3] and all(t in NEW for _, t in from_1), moves


def test_a_broker_that_may_not_give_keeps_its_replicas_even_when_loaded() -> None:
    moves = plan(model(gives={2: False}))
    assert moves and all(s != 2 for s, _, _ in moves), moves


def test_a_broker_that_may_not_give_hands_nothing_back_in_a_swap() -> None:
    # Three brokers of 10 replicas each (RF 1), of 30, 20 and 10 bytes: the count band holds at 9..11, so broker
    # 1 sheds disk to broker 3 by swaps, a 30 for a 10. With gives=False, broker 3 may still take but not return.
    layout = [(b,) for b in (1, 2, 3) for _ in range(10)]
    sizes = {1: 30, 2: 20, 3: 10}
    assert any(s == 3 for s, _, _ in plan(model(layout, brokers=OLD, sizes=sizes))), "swaps with broker 3"
    moves = plan(model(layout, gives={3: False}, brokers=OLD, sizes=sizes))
    assert moves and all(s != 3 for s, _, _ in moves), moves
