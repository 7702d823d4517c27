"""Refining a finished plan: reverting actions it does not need, moving smaller replicas for the same result, and
sending a replica straight to where the plan takes another one."""

from __future__ import annotations

from kafka_rebalancer.model.resources import DISK, REPLICA_COUNT
from kafka_rebalancer.plan.balance.planner import Budgets, Planner
from kafka_rebalancer.plan.balance.planner.refine import drop_round_trips, prune, shortcut, substitute
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


def test_prune_judges_each_revert_after_the_reverts_before_it() -> None:
    # Disk 57 / 43 of 100 (band [45, 55]): x (8) then y (3) from broker 1 to 2 end them at 46 / 54. Either revert
    # alone would leave both inside the band (49 / 51, 54 / 46), but not both: y's goes (latest first), x's stays.
    model = pool([(1, "a", 100), (2, "b", 100)],
                 [("o", 0, 1, 0, 46), ("o", 1, 2, 0, 43), ("x", 0, 1, 0, 8), ("y", 0, 1, 0, 3)])
    planner = Planner(model, bands_of(model), ["disk"], Budgets(100))
    planner.state.apply([(2, 1)], 0)
    planner.state.apply([(3, 1)], 0)
    prune(planner.state, planner.constraints)
    assert [m.replica for m in planner.plan.moves] == [2]
    assert model.load[:, 0].tolist() == [49, 51]


def test_a_round_trip_leaves_the_log_unless_its_partitions_leader_moved() -> None:
    # t-0 (10) goes from broker 1 to 2 and, by a later action, back: nothing is copied, so both moves go and the
    # counters say so. u-0's follower goes from 3 to 2, takes the leadership there and goes back to 3: the
    # transfer's replay needs the replica on 2, so u-0's moves stay.
    model = pool([(1, "a", 100), (2, "b", 100), (3, "c", 100)],
                 [("t", 0, 1, 0, 10), ("u", 0, 1, 0, 5), ("u", 0, 3, 1, 5), ("v", 0, 2, 0, 20)])
    planner = Planner(model, bands_of(model), ["disk"], Budgets(100))
    state = planner.state

    def row(topic: str, broker: int) -> int:
        return int(next(r for r in range(len(model.r_topic))
                        if model.r_topic[r] == topic and model.broker_ids[model.r_broker[r]] == broker))

    t0, u_follower, v0 = row("t", 1), row("u", 3), row("v", 2)
    state.apply([(t0, 1)], 0)
    state.apply([(v0, 0)], 0)
    state.apply([(t0, 0)], 0)
    state.apply([(u_follower, 1)], 0)
    state.apply_leadership([u_follower], 0)
    state.apply([(u_follower, 2)], 0)
    assert (state.replica_moves, state.moved_bytes) == (5, 50)
    drop_round_trips(state)
    assert [(mv.action, mv.replica, mv.target) for mv in planner.plan.moves] == [
        ("replica", v0, 0), ("replica", u_follower, 1), ("leadership", u_follower, 1), ("replica", u_follower, 2)]
    assert (state.replica_moves, state.moved_bytes) == (3, 30)
    assert not state.moved[t0] and state.moved[v0]


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


def chain() -> Planner:
    """Disk 60 / 50 / 40 of 100 (band [0.45, 0.55]), one replica of 10 on broker 1 (x), one on broker 2 (y). The
    plan moves x from broker 1 to 2, then y from broker 2 to 3: every broker ends at 50, and 20 bytes are copied."""
    model = pool([(1, "a", 100), (2, "b", 100), (3, "c", 100)],
                 [("x", 0, 1, 0, 10), ("o", 0, 1, 0, 50), ("y", 0, 2, 0, 10), ("o", 1, 2, 0, 40), ("o", 2, 3, 0, 40)],
                 resources=(DISK, REPLICA_COUNT))
    planner = Planner(model, bands_of(model), ["disk"], Budgets(100))
    planner.state.apply([(3, 1)], 0)  # rows sorted by topic: o-0, o-1, o-2, x-0, y-0
    planner.state.apply([(4, 2)], 0)
    return planner


def test_shortcut_sends_a_replica_straight_on_and_keeps_the_one_it_replaced() -> None:
    planner = chain()
    model = planner.model
    shortcut(planner.state, planner.constraints)
    assert [(m.seq, m.replica, m.source, m.target) for m in planner.plan.moves] == [(0, 3, 0, 2)]
    assert model.load.tolist() == [[50, 1], [50, 2], [50, 2]]  # the replica counts end as the chain left them
    assert (planner.state.replica_moves, planner.state.moved_bytes) == (1, 10)
    assert planner.state.broker_moves.tolist() == [1, 0, 1]


def test_shortcut_leaves_a_chain_whose_brokers_would_leave_their_bands() -> None:
    # Disk 60 / 56 / 34: x (10) from broker 1 to 2 and y (16) from 2 to 3 end every broker at 50. Straight on, x
    # would leave broker 2 at 56 and broker 3 at 44, both outside [45, 55]: the chain stays.
    model = pool([(1, "a", 100), (2, "b", 100), (3, "c", 100)],
                 [("x", 0, 1, 0, 10), ("o", 0, 1, 0, 50), ("y", 0, 2, 0, 16), ("o", 1, 2, 0, 40), ("o", 2, 3, 0, 34)])
    planner = Planner(model, bands_of(model), ["disk"], Budgets(100))
    planner.state.apply([(3, 1)], 0)
    planner.state.apply([(4, 2)], 0)
    shortcut(planner.state, planner.constraints)
    assert [(m.replica, m.source, m.target) for m in planner.plan.moves] == [(3, 0, 1), (4, 1, 2)]
    assert model.load[:, 0].tolist() == [50, 50, 50]


def test_shortcut_sends_a_replica_home_when_the_plan_takes_one_back() -> None:
    # x goes from broker 1 to 2 and y of the same size from 2 to 1: nothing needs copying.
    model = pool([(1, "a", 100), (2, "b", 100)],
                 [("x", 0, 1, 0, 10), ("o", 0, 1, 0, 40), ("y", 0, 2, 0, 10), ("o", 1, 2, 0, 40)])
    planner = Planner(model, bands_of(model), ["disk"], Budgets(100))
    planner.state.apply([(2, 1)], 0)  # rows: o-0, o-1, x-0, y-0
    planner.state.apply([(3, 0)], 0)
    shortcut(planner.state, planner.constraints)
    assert planner.plan.moves == []
    assert model.r_broker.tolist() == model.original_broker.tolist()
    assert (planner.state.replica_moves, planner.state.moved_bytes) == (0, 0)
