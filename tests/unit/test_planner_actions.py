"""Each action on its own: what it proposes, and what it changes through the state when the constraints accept."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from kafka_rebalancer.model.resources import DISK, LEADER_COUNT, REPLICA_COUNT
from kafka_rebalancer.plan.balance.bands import Band
from kafka_rebalancer.plan.balance.model import PoolModel
from kafka_rebalancer.plan.balance.planner import Budgets
from kafka_rebalancer.plan.balance.planner.actions import (
    CountExchange,
    LeadershipTransfer,
    ReplicaMove,
    ReplicaSwap,
)
from kafka_rebalancer.plan.balance.planner.constraints import Constraints
from kafka_rebalancer.plan.balance.planner.forced import ForcedPlacement
from kafka_rebalancer.plan.balance.planner.hot_spread import HotPartitionSpread
from kafka_rebalancer.plan.balance.planner.ranking import Ranking
from kafka_rebalancer.plan.balance.planner.state import LEADERSHIP, REPLICA, PlanState
from tests.unit.test_planner import bands_of, pool, traffic_pool


def action(kind: type, model: PoolModel, bands: dict[str, Band] | None = None, budgets: Budgets | None = None) -> Any:
    """An action of this kind over a fresh state of the model (bands_of's bands; a budget of 100 moves)."""
    state = PlanState(model, [r.name for r in model.resources])
    constraints = Constraints(state, bands or bands_of(model), budgets or Budgets(100))
    return kind(state, constraints, Ranking(model, constraints.acceptance, candidate_limit=48))


def test_a_leadership_transfer_changes_leader_loads_but_no_replica() -> None:
    model = traffic_pool(leaders=[1] * 4, brokers=2)  # replica_count, leader_count, network_out (30 per leader)
    brokers = model.r_broker.copy()
    transfer = action(LeadershipTransfer, model)
    assert transfer.hand_over(0, 1, need=1.0, most=2.0)
    (mv,) = transfer.state.plan.moves
    assert (mv.action, mv.source, mv.target, int(model.r_broker[mv.replica])) == (LEADERSHIP, 0, 1, 1)
    assert model.r_is_leader[mv.replica]
    assert np.array_equal(model.r_broker, brokers)
    assert model.load.tolist() == [[4, 3, 90], [4, 1, 30]]
    assert transfer.state.replica_moves == 0 and transfer.state.moved_bytes == 0


def test_taking_over_a_leadership_and_the_acceptance_veto() -> None:
    model = traffic_pool(leaders=[1] * 4, brokers=2)
    transfer = action(LeadershipTransfer, model)
    assert transfer.take_over(1, 1, need=1.0, most=2.0)
    assert model.load[:, 1].tolist() == [3, 1]
    # Broker 1 now leads 3 of the band's [2, 2]: taking another would leave it at 2, fine; a third would take it
    # under the lower edge, which the rule vetoes however much broker 2 wants it.
    assert transfer.take_over(1, 1, need=1.0, most=2.0)
    assert not transfer.take_over(1, 1, need=1.0, most=2.0)
    assert model.load[:, 1].tolist() == [2, 2]


def test_a_swap_moves_its_net_transfer_in_one_action() -> None:
    # Loads 60 / 40 of 100, band [0.45, 0.55]: broker 1's replicas (30, 30) are too large to move alone; a 30
    # for broker 2's 20 moves a net 10.
    model = pool([(1, "a", 100), (2, "b", 100)],
                 [("t", 0, 1, 0, 30), ("t", 1, 1, 0, 30), ("u", 0, 2, 0, 20), ("u", 1, 2, 0, 20)],
                 resources=(DISK, REPLICA_COUNT))
    swap = action(ReplicaSwap, model)
    assert swap.swap(0, 1, 0, need=5.5, most=15.0)
    moves = swap.state.plan.moves
    assert [(mv.action, mv.source, mv.target, int(model.r_size[mv.replica])) for mv in moves] == [
        (REPLICA, 0, 1, 30), (REPLICA, 1, 0, 20)]
    assert {mv.seq for mv in moves} == {0}
    assert model.load.tolist() == [[50, 2], [50, 2]]
    assert swap.state.replica_moves == 2 and swap.state.moved_bytes == 50


def test_a_swap_reaching_the_need_copies_the_fewest_bytes() -> None:
    # Loads 60 / 40 of 100, band [0.45, 0.55]: 30 for 20 and 12 for 2 both move a net 10; the second copies 14
    # bytes instead of 50.
    model = pool([(1, "a", 100), (2, "b", 100)],
                 [("t", 0, 1, 0, 30), ("t", 1, 1, 0, 12), ("t", 2, 1, 0, 18),
                  ("u", 0, 2, 0, 20), ("u", 1, 2, 0, 2), ("u", 2, 2, 0, 18)],
                 resources=(DISK, REPLICA_COUNT))
    swap = action(ReplicaSwap, model)
    assert swap.swap(0, 1, 0, need=5.5, most=15.0)
    assert [(mv.source, mv.target, int(model.r_size[mv.replica])) for mv in swap.state.plan.moves] == [
        (0, 1, 12), (1, 0, 2)]
    assert model.load.tolist() == [[50, 3], [50, 3]]
    assert swap.state.moved_bytes == 14


def test_a_swap_needs_two_moves_of_budget() -> None:
    model = pool([(1, "a", 100), (2, "b", 100)],
                 [("t", 0, 1, 0, 30), ("t", 1, 1, 0, 30), ("u", 0, 2, 0, 20), ("u", 1, 2, 0, 20)])
    assert not action(ReplicaSwap, model, budgets=Budgets(1)).swap(0, 1, 0, need=5.5, most=15.0)
    assert model.load[:, 0].tolist() == [60, 40]


def many_small_beside_few_large() -> PoolModel:
    """Disk 80 / 80 of 1000 (band [0.072, 0.088]): broker 1 holds eight replicas of 10, broker 2 four of 20;
    replica count 8 / 4, band [6, 6]. No single replica can leave broker 1 (its disk would drop to 0.070)."""
    return pool([(1, "a", 1000), (2, "b", 1000)],
                 [("s", p, 1, 0, 10) for p in range(8)] + [("l", p, 2, 0, 20) for p in range(4)],
                 resources=(DISK, REPLICA_COUNT))


def test_a_count_exchange_moves_one_unit_of_count_and_no_disk() -> None:
    model = many_small_beside_few_large()
    exchange = action(CountExchange, model)
    assert exchange.exchange(0, 1, 1)
    moves = exchange.state.plan.moves
    assert sorted((mv.source, mv.target, int(model.r_size[mv.replica])) for mv in moves) == [
        (0, 1, 10), (0, 1, 10), (1, 0, 20)]
    assert {mv.seq for mv in moves} == {0}  # one action
    assert model.load.tolist() == [[80, 7], [80, 5]]
    assert exchange.state.replica_moves == 3 and exchange.state.moved_bytes == 40


def test_a_count_exchange_needs_three_moves_of_budget_and_a_triple_the_rules_allow() -> None:
    assert not action(CountExchange, many_small_beside_few_large(), budgets=Budgets(2)).exchange(0, 1, 1)
    # Broker 2's replicas of 20 are partitions broker 1 already holds (RF 2): none may come back to it.
    model = pool([(1, "a", 1000), (2, "b", 1000)],
                 [("s", p, 1, 0, 10) for p in range(8)] + [("s", p, 2, 1, 20) for p in range(4)],
                 resources=(DISK, REPLICA_COUNT))
    assert not action(CountExchange, model).exchange(0, 1, 1)
    assert model.load[:, 1].tolist() == [8, 4]


def test_a_count_exchange_may_take_back_a_replica_of_the_pairs_size_not_only_the_smallest() -> None:
    # Broker 2 holds 70 replicas of 1 and one of 20; broker 1 gives two of 10. Of the 64 smallest only ones of 1
    # could come back (19 more disk to broker 2 each time: a broker full on disk and short of replicas never got
    # one); the one of 20 is among the candidates too.
    model = pool([(1, "a", 1000), (2, "b", 1000)],
                 [("s", p, 1, 0, 10) for p in range(2)] + [("u", p, 2, 0, 1) for p in range(70)]
                 + [("v", 0, 2, 0, 20)], resources=(DISK, REPLICA_COUNT))
    exchange = action(CountExchange, model)
    a, b, c = exchange._triples(np.array([0]), np.array([1]), np.arange(2, 73))
    assert len(a) == len(b) == len(c) == CountExchange.RETURNED + CountExchange.NEAREST
    assert 72 in c.tolist() and set(model.r_size[c[: CountExchange.RETURNED]].tolist()) == {1}


def test_a_replica_move_gives_the_best_fit_to_the_least_used_broker_that_accepts_it() -> None:
    # Capacities 100 / 200 / 100, loads 80 / 60 / 40, band [0.405, 0.495]: broker 1 must shed [30.95, 39.5]. 35
    # does alone, 28 + 5 = 33 for less data: broker 1 sheds 28 first, to broker 2 (0.30, the least used).
    model = pool([(1, "a", 100), (2, "b", 200), (3, "c", 100)],
                 [("t", 0, 1, 0, 5), ("t", 1, 1, 0, 12), ("t", 2, 1, 0, 28), ("t", 3, 1, 0, 35),
                  ("t", 4, 2, 0, 60), ("t", 5, 3, 0, 40)])
    move = action(ReplicaMove, model)
    assert move.give(0, 0, need=30.95, most=39.5)
    (mv,) = move.state.plan.moves
    assert (mv.replica, mv.source, mv.target) == (2, 0, 1)
    assert model.load[:, 0].tolist() == [52, 88, 40]


def test_a_replica_move_takes_from_the_first_giver_with_a_replica_that_fits() -> None:
    # Loads 10 / 150 / 60 of 100 / 200 / 100, band [0.495, 0.605]: broker 1 needs [40.05, 50.5]; of broker 2's
    # 75, 45 and 30 only 45 fits and leaves broker 2 inside.
    model = pool([(1, "a", 100), (2, "b", 200), (3, "c", 100)],
                 [("t", 0, 1, 0, 10), ("t", 1, 2, 0, 75), ("t", 2, 2, 0, 45), ("t", 3, 2, 0, 30),
                  ("t", 4, 3, 0, 60)])
    move = action(ReplicaMove, model)
    assert move.take(0, 0, need=40.05, most=50.5, givers=np.array([1, 2]))
    assert [(mv.replica, mv.source, mv.target) for mv in move.state.plan.moves] == [(2, 1, 0)]
    assert model.load[:, 0].tolist() == [55, 105, 60]


def test_a_replica_move_takes_the_least_data_of_the_first_givers_that_reach_the_need() -> None:
    # Broker 1 (0.10) needs [45, 75]. The most used giver, broker 2 (0.92), reaches it with 70 at the least; the
    # next, broker 3 (0.85), with 50: broker 1 takes 50 from broker 3 (both givers stay above the band's 0.675).
    model = pool([(1, "a", 100), (2, "b", 300), (3, "c", 300), (4, "d", 100)],
                 [("t", 0, 1, 0, 10), ("t", 1, 2, 0, 70), ("t", 2, 2, 0, 205), ("t", 3, 3, 0, 50),
                  ("t", 4, 3, 0, 205), ("t", 5, 4, 0, 60)])
    move = action(ReplicaMove, model)
    assert move.take(0, 0, need=45, most=75, givers=np.array([1, 2]))
    assert [(mv.replica, mv.source, mv.target) for mv in move.state.plan.moves] == [(3, 2, 0)]
    assert model.load[:, 0].tolist() == [60, 275, 205, 60]


def test_a_need_beyond_two_of_the_first_givers_replicas_takes_its_largest_without_comparing() -> None:
    # Broker 1 needs [45, 75]; the most used giver's fitting replicas (20, 15) cannot reach 45 even together (240
    # is too large): its 20 moves, and the next giver (whose 50 would reach it) is not searched (a new broker's
    # deficit: every giver's largest does about as well, and searching them all cost seconds at 1,000 brokers).
    model = pool([(1, "a", 100), (2, "b", 300), (3, "c", 300), (4, "d", 100)],
                 [("t", 0, 1, 0, 10), ("t", 1, 2, 0, 20), ("t", 2, 2, 0, 15), ("t", 3, 2, 0, 240),
                  ("t", 4, 3, 0, 50), ("t", 5, 3, 0, 200), ("t", 6, 4, 0, 60)])
    move = action(ReplicaMove, model)
    assert move.take(0, 0, need=45, most=75, givers=np.array([1, 2]))
    assert [(mv.replica, mv.source, mv.target) for mv in move.state.plan.moves] == [(1, 1, 0)]


def hot_pool(hot: list[int]) -> PoolModel:
    """Brokers 1..3 of 1000; broker 1 holds partitions of the `hot` sizes, brokers 2 and 3 twenty of 20 each."""
    small = [("s", 20 * b + i, b, 0, 20) for b in (2, 3) for i in range(20)]
    return pool([(1, "a", 1000), (2, "b", 1000), (3, "c", 1000)],
                [("h", i, 1, 0, size) for i, size in enumerate(hot)] + small)


def test_hot_partition_spread_hands_the_smallest_hot_partition_to_the_least_loaded_broker() -> None:
    # Band [0.405, 0.495], 90 wide: 300 and 250 are both hot and together keep broker 1 over the band.
    model = hot_pool([300, 250])
    spread = action(HotPartitionSpread, model)
    hot, total = spread.hot_load(0, 0)
    assert (hot.tolist(), total) == ([0, 1], 550.0)
    assert spread.spread(0, 0)
    (mv,) = spread.state.plan.moves
    assert (int(model.r_size[mv.replica]), mv.source, mv.target) == (250, 0, 1)
    assert model.load[:, 0].tolist() == [300, 650, 400]


def test_hot_partition_spread_leaves_a_single_hot_partition_alone() -> None:
    model = hot_pool([500, 40])
    assert not action(HotPartitionSpread, model).spread(0, 0)
    assert model.load[:, 0].tolist() == [540, 400, 400]


def test_forced_placement_goes_where_the_replica_sits_most_centrally_in_the_bands() -> None:
    # Broker 4 is dead: its replica (10) goes to a live broker not holding its partition, the one where it lands
    # lowest in the band: broker 3 (20 + 10 of 100) rather than broker 2 (35 + 10).
    frame = pd.DataFrame([{"broker_id": b, "rack": rack, "alive": b != 4, "excluded": False,
                           "disk_capacity_bytes": 100.0} for b, rack in zip(range(1, 5), "abcd", strict=True)])
    rows = [("t", 0, 1, 0, 10), ("t", 0, 4, 1, 10), ("u", 0, 1, 0, 40), ("v", 0, 2, 0, 35), ("w", 0, 3, 0, 20)]
    model = PoolModel(frame, pd.DataFrame([{"topic": t, "partition": p, "broker_id": b, "position": pos,
                                            "size_bytes": size, "movable": True, "must_move": b == 4}
                                           for t, p, b, pos, size in rows]), [DISK])
    forced = action(ForcedPlacement, model)
    assert forced.place(1)
    (mv,) = forced.state.plan.moves
    assert (mv.source, mv.target, mv.forced, mv.resource) == (3, 2, True, "hard")


def test_rack_spread_moves_a_duplicate_to_the_rack_the_partition_lacks() -> None:
    # t-0 on brokers 1, 2, 3, 4 of racks a, a, b, a (four racks in the pool): of the replicas repeating rack a
    # (on brokers 2 and 4), the one on the busier broker (2, at 40) spreads, to broker 5 on rack c.
    model = pool([(1, "a", 100), (2, "a", 100), (3, "b", 100), (4, "a", 100), (5, "c", 100), (6, "d", 100)],
                 [("t", 0, 1, 0, 5), ("t", 0, 2, 1, 5), ("t", 0, 3, 2, 5), ("t", 0, 4, 3, 5), ("u", 0, 2, 0, 35),
                  ("v", 0, 6, 0, 30)])
    forced = action(ForcedPlacement, model)
    r = forced.rack_duplicate(0, 0)
    assert int(model.r_broker[r]) == 1
    assert forced.place(r, spread=True)
    assert forced.state.plan.moves[0].target == 4  # rack c or d, the emptiest


def test_a_replica_move_takes_from_the_first_givers_that_can_give_however_many_cannot() -> None:
    # Disk band [0.2925, 0.3575] (mean 130/400), replica count [4, 5]. Brokers 1 and 2 hold the most replicas
    # (6 of 5 each) but sit at 0.30 of disk: any replica they gave would take them under its lower edge. Broker 3
    # (5 of 12, 0.60) can give. A search that tries one giver must skip the two that cannot, not stop at them.
    model = pool([(1, "a", 100), (2, "b", 100), (3, "c", 100), (4, "d", 100)],
                 [("t", 0, 1, 0, 10)] + [("u", i, 2 + i // 6, 0, 5) for i in range(12)]
                 + [("v", i, 4, 0, 12) for i in range(5)], resources=(DISK, REPLICA_COUNT))
    bands = bands_of(model)
    assert (bands["replica_count"].lower, bands["replica_count"].upper) == (4, 5)
    state = PlanState(model, [r.name for r in model.resources])
    constraints = Constraints(state, bands, Budgets(100))
    move = ReplicaMove(state, constraints, Ranking(model, constraints.acceptance, candidate_limit=2))
    assert move.take(0, 1, need=3.0, most=4.0, givers=np.array([1, 2, 3]))
    assert [(mv.source, mv.target, int(model.r_size[mv.replica])) for mv in state.plan.moves] == [(3, 0, 12)]


def test_a_giver_under_another_resources_band_gives_a_replica_without_load_there() -> None:
    # Broker 2 leads five partitions: over the replica-count band [3, 3], under the disk band [0.1665, 0.2035]
    # with 12 of 100. It may give only its two empty replicas (any other takes it further under the disk band).
    # For broker 1, empty and short of disk too, those rank after the two with load, the two the search looks at
    # (candidate_limit 2): only the replicas the giver may give are ranked, so an empty one is found.
    replicas = [("t", 0, 2, 0, 5), ("t", 0, 3, 1, 5), ("t", 1, 4, 0, 20), ("t", 1, 3, 1, 20), ("t", 2, 2, 0, 0),
                ("t", 3, 2, 0, 2), ("t", 3, 3, 1, 2), ("t", 4, 2, 0, 5), ("t", 4, 3, 1, 5), ("t", 5, 3, 0, 5),
                ("t", 5, 4, 1, 5), ("t", 6, 2, 0, 0)]
    model = pool([(1, "a", 100), (2, "b", 100), (3, "c", 100), (4, "d", 100)], replicas,
                 resources=(DISK, REPLICA_COUNT, LEADER_COUNT))
    bands = bands_of(model)
    assert (bands["replica_count"].lower, bands["replica_count"].upper) == (3, 3)
    assert model.load[1, 0] < bands["disk"].lower * 100
    state = PlanState(model, [r.name for r in model.resources])
    constraints = Constraints(state, bands, Budgets(100))
    move = ReplicaMove(state, constraints, Ranking(model, constraints.acceptance, candidate_limit=2))
    assert move.take(0, 1, need=3.0, most=3.0, givers=np.array([1]))
    assert [(mv.source, mv.target, int(model.r_size[mv.replica])) for mv in state.plan.moves] == [(1, 0, 0)]


def count_pool() -> PoolModel:
    """Replica counts 40 / 40 / 0 (a new broker), one replica per partition, sizes 1..40 on each giver."""
    replicas = [("t", 100 * b + i, b, 0, i + 1) for b in (1, 2) for i in range(40)]
    return pool([(1, "a", 1000), (2, "b", 1000), (3, "c", 1000)], replicas, resources=(REPLICA_COUNT,))


def test_a_new_broker_takes_several_replicas_of_one_giver_in_one_search() -> None:
    # Mean 26.7 replicas: band [24, 29]. The new broker needs 25; the first giver (40, room 16 above its lower
    # edge) gives its smallest replica, then the next ones while it keeps half its room: 7 more, each its own
    # action, so pruning and the budgets see them one by one.
    model = count_pool()
    move = action(ReplicaMove, model)
    assert move.take(2, 0, need=25.0, most=29.0, givers=np.array([0, 1]))
    moves = move.state.plan.moves
    assert [(mv.source, mv.target, int(model.r_size[mv.replica])) for mv in moves] == [(0, 2, i) for i in range(1, 9)]
    assert [mv.seq for mv in moves] == list(range(8))
    assert model.load[:, 0].tolist() == [32, 40, 8]
    assert move.state.replica_moves == 8 and move.state.moved_bytes == sum(range(1, 9))


def test_a_search_takes_no_more_than_the_budget_and_the_need() -> None:
    budget = action(ReplicaMove, count_pool(), budgets=Budgets(5))
    assert budget.take(2, 0, need=25.0, most=29.0, givers=np.array([0, 1]))
    assert budget.state.replica_moves == 5
    need = action(ReplicaMove, count_pool())
    assert need.take(2, 0, need=3.0, most=29.0, givers=np.array([0, 1]))
    assert need.state.replica_moves == 3


def test_an_overloaded_broker_gives_several_replicas_in_one_search_each_to_the_least_used() -> None:
    # Counts 40 / 10 / 10, band [18, 22], target band [19, 21]: broker 1 sheds 19, its smallest first, each to
    # whichever receiver is least used at the time (they alternate), `batch` (16) in one search.
    replicas = [("t", i, 1, 0, i + 1) for i in range(40)] + [("u", 100 * b + i, b, 0, 1) for b in (2, 3)
                                                                for i in range(10)]
    model = pool([(1, "a", 1000), (2, "b", 1000), (3, "c", 1000)], replicas, resources=(REPLICA_COUNT,))
    move = action(ReplicaMove, model)
    assert move.give(0, 0, need=19.0, most=22.0)
    moves = move.state.plan.moves
    assert [int(model.r_size[mv.replica]) for mv in moves] == list(range(1, ReplicaMove.batch + 1))
    assert [mv.target for mv in moves[:4]] == [1, 2, 1, 2]
    assert model.load[:, 0].tolist() == [40 - ReplicaMove.batch, 10 + ReplicaMove.batch // 2,
                                         10 + ReplicaMove.batch // 2]
