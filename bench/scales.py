"""The benchmark's scales: generated clusters with hot brokers, a scale-out with empty brokers, skewed leadership,
under-replicated partitions, replicas outside their pool and (medium, large) a dead broker; small, medium and large
split their brokers into pools, single-200 and single-1000 put every broker in one pool.

The skew is a night's worth of drift plus a scale-out: hot brokers are 1.6-2x likelier to hold a replica and
about 2% of the brokers are new and empty (a far larger skew only multiplies the moves every plan must make).
"""

from __future__ import annotations

from dataclasses import dataclass

from kafka_rebalancer.snapshot.synthetic import SyntheticSpec


@dataclass(frozen=True)
class Scale:
    name: str
    spec: SyntheticSpec
    driver_memory: str


SCALES = {
    "small": Scale("small", SyntheticSpec(
        n_brokers=12, n_racks=3, n_pools=2, n_partitions=3_000, replication_factor=3, hot_brokers_per_pool=1,
        hot_weight=2.0, leader_skew=0.2, under_replicated_fraction=0.01, out_of_pool_fraction=0.005, seed=101), "2g"),
    "medium": Scale("medium", SyntheticSpec(
        n_brokers=200, n_racks=4, n_pools=4, n_partitions=100_000, replication_factor=3, hot_brokers_per_pool=5,
        hot_weight=1.6, empty_brokers_per_pool=1, leader_skew=0.2, under_replicated_fraction=0.01,
        out_of_pool_fraction=0.002, dead_broker=True, seed=202), "4g"),
    "large": Scale("large", SyntheticSpec(
        n_brokers=1_000, n_racks=4, n_pools=10, n_partitions=500_000, replication_factor=3, hot_brokers_per_pool=10,
        hot_weight=1.6, empty_brokers_per_pool=2, leader_skew=0.2, under_replicated_fraction=0.01,
        out_of_pool_fraction=0.002, dead_broker=True, seed=303), "5g"),
    # One pool of every broker (issue 15): the planner takes a pool at a time, so its cost per pool shows here;
    # 4% of the brokers were just added and are empty.
    "single-200": Scale("single-200", SyntheticSpec(
        n_brokers=200, n_racks=5, n_pools=1, n_partitions=100_000, replication_factor=3, hot_brokers_per_pool=5,
        hot_weight=1.6, empty_brokers_per_pool=8, leader_skew=0.2, under_replicated_fraction=0.01, seed=404), "4g"),
    "single-1000": Scale("single-1000", SyntheticSpec(
        n_brokers=1_000, n_racks=5, n_pools=1, n_partitions=500_000, replication_factor=3, hot_brokers_per_pool=10,
        hot_weight=1.6, empty_brokers_per_pool=40, leader_skew=0.2, under_replicated_fraction=0.01, seed=505),
        "6g"),
}
