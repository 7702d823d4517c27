"""The synthetic generator's shape factors (issue 36): each changes what it claims, and a spec that sets none of
them generates the same cluster as before they existed."""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from dataclasses import replace

import numpy as np
import pytest

from kafka_rebalancer.assignment import rack_alternated_broker_list
from kafka_rebalancer.snapshot.synthetic import SyntheticSpec, generate

BASE = SyntheticSpec(n_brokers=24, n_racks=3, n_pools=1, n_partitions=4_000, hot_brokers_per_pool=1, seed=36)


def digest(spec: SyntheticSpec) -> str:
    tables, config = generate(spec)
    h = hashlib.sha256()
    for frame in (tables.brokers, tables.replicas, tables.partitions):
        h.update(frame.to_csv(index=False).encode())
    h.update(json.dumps(config, sort_keys=True).encode())
    return h.hexdigest()


@pytest.mark.parametrize(("spec", "expected"), [
    (SyntheticSpec(), "56791cdf7f39a84e8cadbf365a3eb07a40b6b8f02e0b081a24c947a15c29d2cf"),
    (SyntheticSpec(n_brokers=30, n_racks=4, n_pools=2, n_partitions=2000, hot_brokers_per_pool=2, hot_weight=1.6,
                   empty_brokers_per_pool=1, leader_skew=0.2, out_of_pool_fraction=0.01, dead_broker=True,
                   mixed_hardware=True, seed=7),
     "47c4c2c5a95599e34d5aa67be7c0cdcc96d190f2829bf970352bee32892f42a6"),
])
def test_specs_without_the_new_factors_generate_what_they_did(spec: SyntheticSpec, expected: str) -> None:
    # The hashes were taken with the generator before the shape factors were added (synthetic.py as of cc04657).
    assert digest(spec) == expected


def sizes(spec: SyntheticSpec) -> np.ndarray:
    return generate(spec)[0].partitions["size_bytes"].to_numpy(dtype=float)


def tail(values: np.ndarray) -> float:
    """The top 1 % of the values' share of their sum."""
    top = np.sort(values)[-max(1, len(values) // 100):]
    return float(top.sum() / values.sum())


def test_size_distributions_keep_the_mean_and_differ_in_the_tail() -> None:
    drawn = {d: sizes(replace(BASE, size_distribution=d)) for d in ("uniform", "lognormal", "pareto", "giants")}
    mean = BASE.mean_bytes_in_per_s * BASE.retention_s
    for d, values in drawn.items():
        assert values.mean() == pytest.approx(mean, rel=0.2 if d == "giants" else 1e-3), d
    assert values.min() >= 0
    assert tail(drawn["uniform"]) < tail(drawn["lognormal"]) < tail(drawn["pareto"])
    assert drawn["uniform"].max() <= 2 * mean


def test_giants_are_a_few_partitions_far_larger_than_the_rest() -> None:
    values = np.sort(sizes(replace(BASE, size_distribution="giants")))
    mean = BASE.mean_bytes_in_per_s * BASE.retention_s  # the mean of the others, before the giants are set
    broker_load = mean * BASE.n_partitions * BASE.replication_factor / BASE.n_brokers
    assert values[-3:] / broker_load == pytest.approx([0.3] * 3, rel=0.1)
    assert values[-4] < values[-3] / 20


def test_only_the_sizes_change_with_the_size_distribution() -> None:
    (zipf, _), (pareto, _) = generate(BASE), generate(replace(BASE, size_distribution="pareto"))
    assert (zipf.partitions["replicas"] == pareto.partitions["replicas"]).all()
    assert (zipf.partitions["isr"] == pareto.partitions["isr"]).all()
    assert not (zipf.partitions["size_bytes"] == pareto.partitions["size_bytes"]).all()


def test_uneven_racks_have_unequal_broker_counts_and_every_pool_spans_them() -> None:
    spec = replace(BASE, n_brokers=48, n_racks=5, n_pools=2, rack_weights=(1.5, 1.25, 1.0, 0.75, 0.5))
    brokers = generate(spec)[0].brokers
    counts = brokers["rack"].value_counts().sort_index().tolist()
    assert counts == [14, 12, 10, 7, 5]
    assert (brokers.groupby("broker_pool")["rack"].nunique() == 5).all()


def test_rack_weights_must_name_every_rack() -> None:
    with pytest.raises(ValueError, match="rack_weights"):
        SyntheticSpec(n_racks=3, rack_weights=(1.0, 2.0))


@pytest.mark.parametrize("rf", [2, 3, 4])
def test_replication_factor(rf: int) -> None:
    tables, _ = generate(replace(BASE, replication_factor=rf))
    assert (tables.partitions["replicas"].map(len) == rf).all()
    assert (tables.replicas.groupby(["topic", "partition"]).size() == rf).all()
    rack_of = dict(zip(tables.brokers["broker_id"], tables.brokers["rack"], strict=True))
    spans = tables.partitions["replicas"].map(lambda r: len({rack_of[b] for b in r}))
    assert (spans == min(rf, BASE.n_racks)).all()  # more replicas than racks: every rack holds one


@pytest.mark.parametrize("fraction", [0.0, 0.01, 0.04, 0.10])
def test_empty_broker_fraction(fraction: float) -> None:
    spec = replace(BASE, n_brokers=100, n_pools=2, empty_broker_fraction=fraction)
    brokers = generate(spec)[0].brokers
    empty = brokers[brokers["disk_used_bytes"] == 0].groupby("broker_pool").size()
    assert empty.reindex(["pool-0", "pool-1"], fill_value=0).tolist() == [math.ceil(fraction * 50)] * 2


def test_a_dead_broker_is_dead_and_out_of_every_isr() -> None:
    tables, _ = generate(replace(BASE, dead_broker=True))
    dead = tables.brokers.loc[~tables.brokers["alive"], "broker_id"].tolist()
    assert len(dead) == 1
    on_dead = tables.replicas[tables.replicas["broker_id"] == dead[0]]
    assert len(on_dead) > 0 and not on_dead["in_isr"].any()


def test_capacity_spread_varies_disks_only_and_keeps_the_pool_total() -> None:
    (even, _), (spread, _) = generate(BASE), generate(replace(BASE, capacity_spread=0.3))
    ratio = spread.brokers["disk_capacity_bytes"] / even.brokers["disk_capacity_bytes"]
    assert ratio.max() / ratio.min() > 1.3
    assert spread.brokers["disk_capacity_bytes"].sum() == pytest.approx(even.brokers["disk_capacity_bytes"].sum())
    assert (spread.brokers["cpu_capacity_cores"] == even.brokers["cpu_capacity_cores"]).all()


def test_kafka_placement_is_kafkas_rack_aware_assignment_over_the_brokers_that_are_not_new() -> None:
    spec = replace(BASE, placement="kafka", hot_brokers_per_pool=0, empty_broker_fraction=0.1)
    tables, _ = generate(spec)
    brokers, partitions = tables.brokers, tables.partitions
    new = set(brokers.loc[brokers["disk_used_bytes"] == 0, "broker_id"])
    assert len(new) == math.ceil(0.1 * spec.n_brokers)
    rack_of = dict(zip(brokers["broker_id"], brokers["rack"], strict=True))
    old = {b: r for b, r in rack_of.items() if b not in new}
    # Every topic is one call of Kafka's algorithm: the brokers in the rack-alternated order, walked round robin
    # from the topic's start index, so consecutive partitions lead on consecutive brokers of that order.
    order = rack_alternated_broker_list(old)
    for _, topic in partitions.groupby("topic"):
        leaders = [order.index(int(r[0])) for r in topic.sort_values("partition")["replicas"]]
        assert all((b - a) % len(order) == 1 for a, b in itertools.pairwise(leaders))
    assert all(len({rack_of[b] for b in r}) == spec.n_racks for r in partitions["replicas"])
    preferred = partitions["replicas"].map(lambda r: int(r[0])).value_counts()
    assert preferred.max() - preferred.min() <= spec.n_partitions / len(old) * 0.2


def test_placement_must_be_known() -> None:
    with pytest.raises(ValueError, match="placement"):
        SyntheticSpec(placement="cruise-control")


# -- issue 52's shape: a size median, new brokers per rack, hot brokers as a share whose led partitions are larger --
ISSUE_52 = replace(BASE, n_brokers=60, n_racks=5, n_partitions=6_000, partitions_per_topic=60, placement="kafka",
                   hot_brokers_per_pool=0, size_distribution="lognormal", size_median_bytes=2 * 2**30)


def test_lognormal_sizes_have_the_given_median() -> None:
    sizes = generate(ISSUE_52)[0].partitions["size_bytes"]
    assert sizes.median() == pytest.approx(2 * 2**30, rel=0.05)
    with pytest.raises(ValueError, match="size_median_bytes"):
        SyntheticSpec(size_median_bytes=1.0)  # zipf-traffic sizes have no median to set


def test_new_brokers_per_rack_are_an_equal_count_from_every_rack() -> None:
    brokers = generate(replace(ISSUE_52, empty_broker_fraction=0.1, new_brokers_per_rack=True))[0].brokers
    per_rack = brokers[brokers["disk_used_bytes"] == 0].groupby("rack").size()
    assert per_rack.tolist() == [math.ceil(0.1 * 12)] * 5


def test_hot_brokers_as_a_share_lead_larger_partitions_and_capacity_is_mean_use_over_target_usage() -> None:
    plain, _ = generate(ISSUE_52)
    hot_spec = replace(ISSUE_52, hot_broker_fraction=0.05, hot_leader_size_factor=3.0)
    tables, _ = generate(hot_spec)
    ratio = tables.partitions["size_bytes"] / plain.partitions["size_bytes"]
    enlarged = tables.partitions.loc[ratio > 1.5, "replicas"].map(lambda r: int(r[0]))
    assert enlarged.nunique() == math.ceil(0.05 * 60)  # the hot brokers, the preferred leaders of those partitions
    assert ratio[ratio > 1.5].round(3).eq(3.0).all() and ratio[ratio <= 1.5].eq(1.0).all()
    brokers = tables.brokers
    assert brokers["disk_capacity_bytes"].mean() == pytest.approx(brokers["disk_used_bytes"].mean() / 0.45, rel=1e-6)
