"""The planning state: every change goes through it, is logged and counted, and can be taken back exactly."""

from __future__ import annotations

import numpy as np

from kafka_rebalancer.plan.balance.planner.state import HARD, LEADERSHIP, REPLICA, Move, PlanState
from tests.unit.test_planner import pool, traffic_pool


def three_brokers():
    # Brokers 1, 2, 3 (racks a, b, c); t-0 (30) on 1, t-1 (20) on 1, u-0 (10) on 2, v-0 (7) on 3.
    return pool([(1, "a", 100), (2, "b", 100), (3, "c", 100)],
                [("t", 0, 1, 0, 30), ("t", 1, 1, 0, 20), ("u", 0, 2, 0, 10), ("v", 0, 3, 0, 7)])


def test_apply_moves_the_replica_logs_it_and_counts_the_budget() -> None:
    model = three_brokers()
    state = PlanState(model, ["disk"])
    state.apply([(0, 2)], 0)
    assert model.load[:, 0].tolist() == [20, 10, 37]
    assert state.plan.moves == [Move(0, REPLICA, 0, 0, 2, "disk")]
    assert (state.replica_moves, state.moved_bytes, state.broker_moves.tolist()) == (1, 30, [1, 0, 1])
    assert state.moved.tolist() == [True, False, False, False]
    state.apply([(1, 1)], None, forced=True)
    assert state.plan.moves[-1] == Move(1, REPLICA, 1, 0, 1, HARD, forced=True)


def test_apply_then_undo_restores_loads_assignment_and_counters_exactly() -> None:
    model = traffic_pool(leaders=[1, 1, 1, 2], brokers=3)
    load, broker, leader = model.load.copy(), model.r_broker.copy(), model.r_is_leader.copy()
    state = PlanState(model, [r.name for r in model.resources])
    state.apply([(0, 2), (3, 0)], 0)  # a swap: one action, two moves
    state.apply_leadership([2], 1)
    assert [mv.seq for mv in state.plan.moves] == [0, 0, 1]
    assert not np.array_equal(model.load, load)
    state.undo_last()
    state.undo_last()
    assert np.array_equal(model.load, load)
    assert np.array_equal(model.r_broker, broker) and np.array_equal(model.r_is_leader, leader)
    assert state.plan.moves == [] and state.replica_moves == 0 and state.moved_bytes == 0
    assert not state.moved.any() and not state.broker_moves.any()
    state.apply([(0, 2)], 0)
    assert state.plan.moves[0].seq == 0  # the undone actions' sequence numbers are free again


def test_restore_and_replay_leave_the_log_and_drop_gives_the_budget_back() -> None:
    model = three_brokers()
    state = PlanState(model, ["disk"])
    state.apply([(0, 2)], 0)
    state.apply([(1, 1)], 0)
    group = state.actions()[1]
    state.restore(group)
    assert model.load[:, 0].tolist() == [20, 10, 37] and len(state.plan.moves) == 2
    state.replay(group)
    assert model.load[:, 0].tolist() == [0, 30, 37]
    state.restore(group)
    state.drop({1})
    assert [mv.seq for mv in state.plan.moves] == [0]
    assert (state.replica_moves, state.moved_bytes, state.broker_moves.tolist()) == (1, 30, [1, 0, 1])


def test_movable_on_leaves_out_moved_replicas_and_those_without_load() -> None:
    model = pool([(1, "a", 100), (2, "b", 100)], [("t", 0, 1, 0, 30), ("t", 1, 1, 0, 0), ("t", 2, 1, 0, 5)])
    state = PlanState(model, ["disk"])
    assert state.movable_on(0, 0).tolist() == [0, 2]
    state.apply([(0, 1)], 0)
    assert state.movable_on(0, 0).tolist() == [2]
    assert state.movable_on(1, 0).tolist() == []  # an arrival never moves again


def test_leadership_is_logged_from_the_old_leaders_broker_to_the_new_ones() -> None:
    model = traffic_pool(leaders=[1, 1], brokers=2)  # partition 0: rows 0 (broker 2), 1 (broker 1, leader)
    state = PlanState(model, [r.name for r in model.resources])
    state.apply_leadership([0], 1)
    assert state.plan.moves == [Move(0, LEADERSHIP, 0, 0, 1, "leader_count")]
    assert state.replica_moves == 0 and not state.moved.any()
    assert state.actions_per_partition().tolist() == [1, 0]


def test_the_kept_answers_about_a_broker_follow_its_changes() -> None:
    # movable_on and the model's replicas_on are kept between changes: a move or its undo must show at once.
    model = three_brokers()
    state = PlanState(model, ["disk"])
    assert state.movable_on(0, 0).tolist() == [0, 1] and model.replicas_on(2).tolist() == [3]
    state.apply([(0, 2)], 0)
    assert state.movable_on(0, 0).tolist() == [1]
    assert sorted(model.replicas_on(2).tolist()) == [0, 3] and model.replicas_on(0).tolist() == [1]
    state.undo_last()
    assert state.movable_on(0, 0).tolist() == [0, 1] and model.replicas_on(2).tolist() == [3]
    assert not state.movable_on(0, 0).flags.writeable  # shared: no caller may change it in place


def test_the_loads_kept_beside_movable_replicas_follow_leadership_transfers() -> None:
    # Broker 2 (index 1) follows both partitions (rows 0 and 3); row 0 becoming the leader changes its loads.
    model = traffic_pool(leaders=[1, 1], brokers=2)
    state = PlanState(model, [r.name for r in model.resources])
    assert state.movable_on(1, 0).tolist() == [0, 3]
    before = state.movable_loads(1, 0).copy()
    state.apply_leadership([0], 1)
    assert not np.array_equal(state.movable_loads(1, 0), before)
    assert np.array_equal(state.movable_loads(1, 0), model.r_load[[0, 3]])
    assert np.array_equal(state.movable_columns(1, 0), model.r_load[[0, 3]].T)


def test_the_models_kept_answers_follow_moves_and_leadership_transfers() -> None:
    # Partition 0: rows 0 (broker 2), 1 (broker 1, leader); partition 1: rows 2 (broker 1, leader), 3 (broker 2).
    model = traffic_pool(leaders=[1, 1], brokers=3)
    usage = model.usage
    assert not usage.flags.writeable and model.usage is usage  # kept until the model changes
    assert model.leadership_rows(0, leaders=True)[0].tolist() == [1, 2]
    model.transfer_leadership(0)
    assert model.leadership_rows(0, leaders=True)[0].tolist() == [2]
    rows, deltas = model.leadership_rows(1, leaders=True)
    assert rows.tolist() == [0] and np.array_equal(deltas, model.r_lead[[0]] - model.r_follow[[0]])
    assert not np.array_equal(model.usage, usage)
    model.move(3, 2)
    assert model.by_partition(2)[0].tolist() == [3] and model.by_partition(1)[0].tolist() == [0]
    model.move(3, 1)  # back home, then away again: each arrival shows, a departure hides it
    assert model.replicas_on(1).tolist() == [0, 3] and model.replicas_on(2).tolist() == []
    model.move(3, 2)
    assert model.replicas_on(2).tolist() == [3] and model.by_partition(1)[0].tolist() == [0]
