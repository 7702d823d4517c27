"""The exact optimum solved rack by rack (bench/optimum_highs.py `by_rack`): where every movable partition has one
replica on each rack (RF = racks), a replica never changes rack, so each rack is its own problem but for
leadership. The racks' optima add up to the pool's where leaders fit them; their bounds always bound it."""

from __future__ import annotations

import pytest

from bench.baselines import evaluate
from bench.optimum_milp import solve_optimum
from kafka_rebalancer.config import RebalancerConfig
from kafka_rebalancer.model.band_status import broker_load_frame
from kafka_rebalancer.plan.balance.pool_bands import bands_frame
from kafka_rebalancer.snapshot.synthetic import SyntheticSpec, generate
from tests.unit.test_optimum import DISK_BAND, bands, cluster


@pytest.mark.parametrize("seed", [3601, 3602])
def test_the_racks_optima_add_up_to_the_pools(seed: int) -> None:
    # 6 brokers on 3 racks, RF 3, balanced on disk, replica count and leader count (leadership couples the racks):
    # solved rack by rack the optimum is the pool's, proven, and the bench's recount keeps every band.
    spec = SyntheticSpec(n_brokers=6, n_partitions=60, replication_factor=3, n_racks=3, n_pools=1,
                         size_distribution="lognormal", empty_broker_fraction=0.1, hot_brokers_per_pool=1,
                         hot_weight=1.6, leader_skew=0.2, seed=seed)
    tables, body = generate(spec)
    config = RebalancerConfig(**{**body, "resources": {n: {} for n in ("disk", "replica_count", "leader_count")}})
    table = bands_frame(broker_load_frame(tables.brokers, tables.replicas, config.resource_list()), config)
    whole = solve_optimum(tables, config, table, time_limit=60, mip_rel_gap=1e-6)
    by_rack = solve_optimum(tables, config, table, time_limit=60, mip_rel_gap=1e-6, rack_time_limit=30)
    assert whole.proven and by_rack.proven and by_rack.status == "pool-0: Optimal (by rack)"
    assert whole.bytes is not None and by_rack.bytes is not None
    assert abs(by_rack.bytes - whole.bytes) <= 2e-6 * whole.bytes  # both within HiGHS' gap of the optimum
    rack_bound = by_rack.rack_bound_bytes
    assert rack_bound == by_rack.pools[0].rack_bound_bytes and whole.rack_bound_bytes is None
    assert rack_bound is not None and rack_bound <= min(whole.bytes, by_rack.bytes) + 1
    recount = evaluate(tables, config, table, by_rack.plan)
    assert recount["moved_bytes"] == by_rack.bytes and recount["out_of_band_after"] == 0


def test_a_pool_whose_partitions_do_not_span_every_rack_is_solved_whole() -> None:
    # RF 1 on two racks: a replica may change rack, the racks are no separate problems.
    snapshot, config = cluster([(1, "a"), (2, "b")], [("t", 0, [1], 20), ("t", 1, [1], 30), ("t", 2, [1], 10)])
    result = solve_optimum(snapshot, config, bands(DISK_BAND), time_limit=30, rack_time_limit=30)
    assert result.proven and "by rack" not in result.status and result.pools[0].rack_bound_bytes is None
    assert result.bytes == 30
