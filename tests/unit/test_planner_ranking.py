"""Best fit: the order in which the actions try their candidates (replicas, swap pairs), on its own."""

from __future__ import annotations

import numpy as np

from kafka_rebalancer.model.resources import DISK, REPLICA_COUNT
from kafka_rebalancer.plan.balance.model import PoolModel
from kafka_rebalancer.plan.balance.planner import Budgets
from kafka_rebalancer.plan.balance.planner.constraints import Constraints
from kafka_rebalancer.plan.balance.planner.ranking import Ranking
from kafka_rebalancer.plan.balance.planner.state import PlanState
from tests.unit.test_planner import bands_of, pool


def ranking(model: PoolModel, candidate_limit: int = 48) -> Ranking:
    """The ranking of a fresh state of the model, against bands_of's bands."""
    state = PlanState(model, [r.name for r in model.resources])
    return Ranking(model, Constraints(state, bands_of(model), Budgets(100)).acceptance, candidate_limit)


def four_on_broker_1() -> PoolModel:
    """Broker 1 holds t-0..t-3 of 5, 12, 28 and 35; brokers 2 and 3 one replica each."""
    return pool([(1, "a", 100), (2, "b", 200), (3, "c", 100)],
                [("t", 0, 1, 0, 5), ("t", 1, 1, 0, 12), ("t", 2, 1, 0, 28), ("t", 3, 1, 0, 35),
                 ("t", 4, 2, 0, 60), ("t", 5, 3, 0, 40)])


def test_replicas_rank_by_the_data_it_takes_to_reach_the_need_alone_or_with_one_other() -> None:
    # Need 30.95 from 5, 12, 28, 35: 28 (+5) and 5 (+28) reach it with 33 (the larger first), 35 alone with 35,
    # 12 (+28) with 40. Need 50: none alone; 35 (+28) and 28 (+35) with 63; 12 and 5 not even with another: last,
    # the larger first.
    model = four_on_broker_1()
    replicas = np.arange(4)
    best_fit = ranking(model)
    assert best_fit.replicas(replicas, model.r_load[replicas], 0, need=30.95, giver=0)[0].tolist() == [2, 0, 3, 1]
    assert best_fit.replicas(replicas, model.r_load[replicas], 0, need=50, giver=0)[0].tolist() == [3, 2, 1, 0]


def test_replicas_keep_the_candidate_limit_best_with_their_loads_and_cost() -> None:
    model = four_on_broker_1()
    replicas = np.arange(4)
    rows, loads, cost = ranking(model, candidate_limit=2).replicas(replicas, model.r_load[replicas], 0,
                                                                   need=30.95, giver=0)
    assert rows.tolist() == [2, 0]
    assert loads[:, 0].tolist() == [28, 5]
    assert cost.tolist() == [33, 33]


def test_bytes_to_need_pairs_a_replica_with_another_never_with_itself() -> None:
    loads = np.array([5.0, 5.0, 12.0])
    assert Ranking.bytes_to_need(loads, 10).tolist() == [10, 10, 12]  # the two 5s pair with each other
    assert Ranking.bytes_to_need(loads, 17).tolist() == [17, 17, 17]
    assert Ranking.bytes_to_need(loads, 20).tolist() == [np.inf] * 3  # 12 + 12 would be the same replica twice


def test_a_pair_counts_only_where_it_copies_less_than_the_smallest_replica_that_reaches_the_need_alone() -> None:
    # Need 30 from a giant of 100 and 4, 6, 8, 25: each small one reaches it with the giant (104, 106, 108), more
    # than the giant alone, but 8 and 6 also with 25 (33, 31). Without 25, paired with the giant, the smallest came
    # first after it (a broker holding a giant partition gave its smallest replicas and ran into its count's lower
    # edge): now the giant, then the rest largest first.
    loads = np.array([100.0, 4.0, 6.0, 8.0, 25.0])
    assert Ranking.bytes_to_need(loads, 30).tolist() == [100, np.inf, 31, 33, 31]
    model = pool([(1, "a", 1000), (2, "b", 1000)],
                 [("t", p, 1, 0, size) for p, size in enumerate([100, 4, 6, 8])] + [("t", 4, 2, 0, 10)])
    replicas = np.arange(4)
    assert ranking(model).replicas(replicas, model.r_load[replicas], 0, need=30, giver=0)[0].tolist() == [0, 3, 2, 1]


def count_and_disk(sizes: list[int], others: int) -> PoolModel:
    """Broker 1 holds four replicas of `sizes`, brokers 2 and 3 one of `others` each; capacity 1000 each. Counts
    4 / 1 / 1: the count band is [2, 2], broker 1 two replicas over its middle."""
    return pool([(1, "a", 1000), (2, "b", 1000), (3, "c", 1000)],
                [*[("t", p, 1, 0, size) for p, size in enumerate(sizes)], ("t", 4, 2, 0, others),
                 ("t", 5, 3, 0, others)], resources=(DISK, REPLICA_COUNT))


def test_a_count_ranks_first_the_replicas_that_carry_the_givers_disk_excess_per_replica() -> None:
    # Disk 520 / 100 / 100 of 1000: broker 1 is 280 over the band's middle (240) with two replicas too many, so
    # each replica it gives should carry about 140: 150 (off by 10), 60 (80), 10 (130), 300 (160).
    model = count_and_disk([10, 60, 150, 300], others=100)
    replicas = np.arange(4)
    rows, _, cost = ranking(model).replicas(replicas, model.r_load[replicas], 1, need=2, giver=0)
    assert rows.tolist() == [2, 1, 0, 3]
    assert np.isinf(cost).all()  # a count's candidates have no bytes-to-need


def test_a_count_ranks_first_the_least_data_where_the_giver_is_inside_on_disk() -> None:
    # Disk 240 / 240 / 240: inside, so the count's replicas should move as little data as they can.
    model = count_and_disk([100, 20, 50, 70], others=240)
    replicas = np.arange(4)
    assert ranking(model).replicas(replicas, model.r_load[replicas], 1, need=2, giver=0)[0].tolist() == [1, 2, 3, 0]


def test_fewest_bytes_first_puts_the_pairs_reaching_the_need_by_bytes_then_the_rest_by_net() -> None:
    net, copied = np.array([5.0, 12.0, 10.0, 3.0]), np.array([100.0, 50.0, 80.0, 10.0])
    assert Ranking.fewest_bytes_first(net, copied, need=10).tolist() == [1, 2, 0, 3]


def test_pairs_without_sizes_rank_the_least_overshoot_first_then_the_largest_net() -> None:
    # give 10 and 6 reach need 5 with take 4 (net 6) and take 1 (net 5): least overshoot first; give 3 reaches it
    # with none and comes last with its largest net (take 1, net 2). Nets above `most` (10 - 1) are never paired.
    best_fit = ranking(four_on_broker_1())
    give, take = np.array([10.0, 6.0, 3.0]), np.array([1.0, 4.0, 7.0])
    assert best_fit.pairs(give, take, need=5, most=8) == [(1, 0), (0, 1), (2, 0)]
    assert ranking(four_on_broker_1(), candidate_limit=1).pairs(give, take, need=5, most=8) == [(1, 0)]


def test_pairs_with_sizes_pair_each_give_with_the_smallest_take_allowed_and_rank_by_bytes_copied() -> None:
    # give 10 pairs with take 4 (net 6, 100 + 5 bytes copied), give 6 with take 1 (net 5, 10 + 50 bytes).
    best_fit = ranking(four_on_broker_1())
    give, take = np.array([10.0, 6.0]), np.array([1.0, 4.0, 7.0])
    sizes = (np.array([100.0, 10.0]), np.array([50.0, 5.0, 1.0]))
    assert best_fit.pairs(give, take, need=5, most=8, sizes=sizes) == [(1, 0), (0, 1)]  # both reach 5: by bytes
    assert best_fit.pairs(give, take, need=5.5, most=8, sizes=sizes) == [(0, 1), (1, 0)]  # only net 6 reaches 5.5
