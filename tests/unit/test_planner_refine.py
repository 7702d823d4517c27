"""Refining a finished plan: reverting actions it does not need, and moving smaller replicas for the same result."""

from __future__ import annotations

from kafka_rebalancer.balance.planner import Budgets, Planner
from kafka_rebalancer.balance.planner.refine import prune, substitute
from tests.unit.test_planner import bands_of, pool


def test_prune_reverts_actions_the_plan_does_not_need() -> None:
    # Loads 50 / 30 / 40 of 100: band [0.36, 0.44]. Moving t-0 (10) from broker 1 to 2 fixes both; moving v-0 (2)
    # from broker 3 to 2 as well changes nothing that matters: prune reverts it and keeps the first.
    model = pool([(1, "a", 100), (2, "b", 100), (3, "c", 100)],
                 [("t", i, 1, 0, 10) for i in range(5)] + [("u", 0, 2, 0, 30), ("v", 0, 3, 0, 2), ("v", 1, 3, 0, 38)])
    planner = Planner(model, bands_of(model), ["disk"], Budgets(100))
    planner.state.apply([(0, 1)], 0)
    planner.state.apply([(6, 1)], 0)
    prune(planner.state, planner.constraints)
    assert [(m.replica, m.target) for m in planner.plan.moves] == [(0, 1)]
    assert model.usage[:, 0].tolist() == [0.4, 0.4, 0.4]
    assert (planner.state.replica_moves, planner.state.moved_bytes) == (1, 10)
    assert planner.state.moved.tolist() == [True] + [False] * 7


def test_prune_keeps_forced_moves() -> None:
    model = pool([(1, "a", 100), (2, "b", 100)], [("t", 0, 1, 0, 10), ("u", 0, 2, 0, 10)])
    planner = Planner(model, bands_of(model), ["disk"], Budgets(100))
    planner.state.apply([(0, 1)], None, forced=True)  # pushes broker 2 out of the band; a forced move stays
    prune(planner.state, planner.constraints)
    assert [(m.replica, m.forced) for m in planner.plan.moves] == [(0, True)]


def test_substitute_moves_a_smaller_replica_that_does_as_well() -> None:
    # Loads 50 / 30 of 100: band [0.36, 0.44]. Moving the 12 lands both at 0.38 / 0.42; the 8 lands them at
    # 0.42 / 0.38, as good, for fewer bytes: the plan moves the 8 instead, under the same sequence number.
    model = pool([(1, "a", 100), (2, "b", 100)],
                 [("t", 0, 1, 0, 30), ("t", 1, 1, 0, 12), ("t", 2, 1, 0, 8), ("u", 0, 2, 0, 30)])
    planner = Planner(model, bands_of(model), ["disk"], Budgets(100))
    planner.state.apply([(1, 1)], 0)
    substitute(planner.state, planner.constraints)
    assert [(m.seq, m.replica, m.source, m.target) for m in planner.plan.moves] == [(0, 2, 0, 1)]
    assert model.load[:, 0].tolist() == [42, 38]
    assert model.r_broker.tolist() == [0, 0, 1, 1]
    assert planner.state.moved_bytes == 8 and planner.state.moved.tolist() == [False, False, True, False]
