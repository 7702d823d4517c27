"""The bench's exact optimum (bench/optimum_milp.py) on instances small enough to solve by hand: each test states
the optimum and why, so a MILP that drops or weakens a constraint, or miscounts the bytes, fails."""

from __future__ import annotations

from typing import Any

import pandas as pd

from bench.baselines import evaluate
from bench.optimum import disk_flows, placement_violations
from bench.optimum_milp import held_brokers, solve_optimum
from kafka_rebalancer.config import RebalancerConfig
from kafka_rebalancer.model.band_status import broker_load_frame
from kafka_rebalancer.model.reassignment import Reassignment
from kafka_rebalancer.model.resources import TRAFFIC_RESOURCES
from kafka_rebalancer.model.schemas import BANDS, BROKERS, PARTITIONS, REPLICAS
from kafka_rebalancer.plan.balance.pool_bands import bands_frame
from kafka_rebalancer.snapshot.build import SnapshotTables

Part = tuple[str, int, list[int], int]  # topic, partition, replicas, size


def cluster(brokers: list[tuple[int, str | None]], parts: list[Part], *, capacity: int = 100,
            dead: tuple[int, ...] = (), out_of_isr: dict[tuple[str, int], list[int]] | None = None,
            pools: dict[str, list[int]] | None = None, resources: tuple[str, ...] = ("disk", "replica_count"),
            leaders: dict[tuple[str, int], int] | None = None) -> tuple[SnapshotTables, RebalancerConfig]:
    """A snapshot of (broker, rack) and RF-any partitions; topic 't<pool>...' belongs to its pool (default: one
    pool 'p' of every broker, topics matched by '*'). The first in-sync replica leads unless `leaders` names
    another; the config balances `resources`."""
    pools = pools or {"p": [b for b, _ in brokers]}
    pool_of = {b: name for name, ids in pools.items() for b in ids}
    out_of_isr = out_of_isr or {}
    b = pd.DataFrame({
        "broker_id": [i for i, _ in brokers], "rack": [r for _, r in brokers],
        "broker_pool": [pool_of[i] for i, _ in brokers], "alive": [i not in dead for i, _ in brokers],
        "excluded": False, "host": "h", "port": 9092, "disk_capacity_bytes": capacity, "disk_used_bytes": 0,
        "log_dir_total_bytes": None, "log_dir_usable_bytes": None, "nw_in_capacity_bytes_per_s": 0.0,
        "nw_out_capacity_bytes_per_s": 0.0, "cpu_capacity_cores": 0.0})
    topic_pool = (lambda t: t.split(".")[0]) if len(pools) > 1 else (lambda t: "p")
    rows, prows = [], []
    for topic, p, replicas, size in parts:
        isr = [x for x in replicas if x not in dead and x not in out_of_isr.get((topic, p), [])]
        leader = (leaders or {}).get((topic, p), isr[0] if isr else -1)  # no replica in sync: offline
        for pos, x in enumerate(replicas):
            rows.append({"topic": topic, "partition": p, "broker_id": x, "position": pos, "is_leader": x == leader,
                         "in_isr": x in isr, "size_bytes": size, "nw_in_bytes_per_s": 0.0,
                         "nw_out_bytes_per_s": 0.0, "cpu_cores": 0.0})
        prows.append({"topic": topic, "partition": p, "replication_factor": len(replicas), "replicas": replicas,
                      "isr": isr, "leader": leader, "topic_pool": topic_pool(topic), "excluded": False,
                      "size_bytes": size, "bytes_in_per_s": 0.0, "bytes_out_per_s": 0.0, "cpu_leader_cores": 0.0,
                      "cpu_follower_cores": 0.0})
    snapshot = SnapshotTables(b[BROKERS.names], pd.DataFrame(rows)[REPLICAS.names],
                              pd.DataFrame(prows)[PARTITIONS.names])
    config = RebalancerConfig(
        cluster={"name": "t"}, pools={name: {"brokers": ids} for name, ids in pools.items()},
        topic_pools=[{"topics": f"{name}.*" if len(pools) > 1 else "*", "pool": name} for name in pools],
        resources={name: {} for name in resources}, exclude={"topics": []},
        **({"metrics": {"source": "sampled"}} if TRAFFIC_RESOURCES & set(resources) else {}))
    return snapshot, config


def bands(pools: dict[str, dict[str, tuple[float, float] | None]],
          targets: dict[tuple[str, str], tuple[float, float]] | None = None) -> pd.DataFrame:
    """Hand-made bands: per pool and resource (lower, upper), or None for a resource not balanced; the target band
    is the band unless `targets` gives it for (pool, resource)."""
    rows = []
    for pool, by_resource in pools.items():
        for resource, edges in by_resource.items():
            lower, upper = edges or (0.0, 0.0)
            target_lower, target_upper = (targets or {}).get((pool, resource), (lower, upper))
            rows.append((pool, resource, 0, 0.0, 1.1, lower, upper, target_lower, target_upper, None,
                         edges is not None, None))
    return pd.DataFrame(rows, columns=BANDS.names)


def check(snapshot: SnapshotTables, config: RebalancerConfig, band_table: pd.DataFrame, expected: int,
          **kwargs: Any) -> Any:
    """Solve; the optimum must be `expected`, proven, and its plan recounted by the bench's own evaluation must
    copy exactly that and land every broker in band."""
    result = solve_optimum(snapshot, config, band_table, time_limit=30, mip_rel_gap=0.0, **kwargs)
    assert result.proven, result.status
    assert result.bytes == expected
    assert result.bound_bytes is not None and abs(result.bound_bytes - expected) < 1e-3
    recount = evaluate(snapshot, config, band_table, result.plan)
    assert recount["moved_bytes"] == expected
    assert recount["out_of_band_after"] == 0
    return result


DISK_BAND = {"p": {"disk": (0.25, 0.35), "replica_count": None}}  # load 25..35 of capacity 100


def test_one_over_full_broker_sheds_its_smallest_partition_that_fits() -> None:
    # Broker 1 holds 40 (over by 5): shedding 8 lands it at 32 and broker 4 at 35 (2 and 3 would reach 38);
    # 12 would put broker 4 at 39. So the optimum is the 8.
    snapshot, config = cluster([(1, "a"), (2, "b"), (3, "c"), (4, "d")], [
        ("t", 0, [1], 20), ("t", 1, [1], 12), ("t", 2, [1], 8), ("t", 3, [2], 30), ("t", 4, [3], 30),
        ("t", 5, [4], 27)])
    result = check(snapshot, config, bands(DISK_BAND), 8)
    assert [(r.topic, r.partition, r.replicas) for r in result.plan] == [("t", 2, [4])]


def test_nothing_moves_when_every_broker_is_inside() -> None:
    snapshot, config = cluster([(1, "a"), (2, "b")], [("t", 0, [1], 30), ("t", 1, [2], 30)])
    assert check(snapshot, config, bands(DISK_BAND), 0).plan == []


RACK_PARTS: list[Part] = [
    ("t", 0, [1, 4], 5),  # P: racks a, c
    ("t", 1, [1, 2], 7),  # Q: racks a, b
    ("f", 0, [1], 26), ("f", 1, [2], 26), ("f", 2, [3], 25), ("f", 3, [4], 28)]  # loads 38, 33, 25, 33


def test_rack_diversity_forbids_the_cheapest_move() -> None:
    # Broker 1 (38) must shed 3..13; only broker 3 (25) has room for 5 or 7. P (5) on broker 3 would sit on rack c
    # twice (with broker 4), so the optimum moves Q (7); moving P as well off broker 4 would cost 10.
    snapshot, config = cluster([(1, "a"), (2, "b"), (3, "c"), (4, "c")], RACK_PARTS)
    result = check(snapshot, config, bands(DISK_BAND), 7)
    assert [(r.topic, r.partition, r.replicas) for r in result.plan] == [("t", 1, [3, 2])]


def test_without_rack_information_the_cheapest_move_is_allowed() -> None:
    # The same cluster with no racks (each broker a rack of its own): P (5) goes to broker 3.
    snapshot, config = cluster([(1, None), (2, None), (3, None), (4, None)], RACK_PARTS)
    result = check(snapshot, config, bands(DISK_BAND), 5)
    assert [(r.topic, r.partition, r.replicas) for r in result.plan] == [("t", 0, [3, 4])]


WIDE = {"p": {"disk": (0.0, 1.0), "replica_count": None}}


def test_replicas_on_a_dead_broker_must_move() -> None:
    # Broker 4 is dead: its replicas of t-0 (6) and t-1 (9) are copied elsewhere, and nothing else moves.
    snapshot, config = cluster([(1, "a"), (2, "b"), (3, "c"), (4, "d")], [
        ("t", 0, [1, 4], 6), ("t", 1, [4, 2], 9), ("t", 2, [1, 2], 50)], dead=(4,))
    result = check(snapshot, config, bands(WIDE), 15)
    assert all(4 not in r.replicas for r in result.plan)
    assert {(r.topic, r.partition) for r in result.plan} == {("t", 0), ("t", 1)}


def test_replicas_outside_their_pool_come_home() -> None:
    # x.0's replica on broker 3 (pool y) must move to pool x's other broker: 11 bytes.
    snapshot, config = cluster([(1, None), (2, None), (3, None), (4, None)], [
        ("x.t", 0, [1, 3], 11), ("x.t", 1, [1, 2], 40), ("y.t", 0, [3, 4], 40)],
        pools={"x": [1, 2], "y": [3, 4]})
    wide = bands({"x": {"disk": (0.0, 1.0), "replica_count": None}, "y": {"disk": (0.0, 1.0), "replica_count": None}})
    result = check(snapshot, config, wide, 11)
    assert [(r.topic, r.partition, r.replicas) for r in result.plan] == [("x.t", 0, [1, 2])]


def test_an_under_replicated_partition_stays_put() -> None:
    # The cheapest fix (t-2, 8) has a live replica out of the ISR: the planner may not move it, nor may the MILP.
    # Next cheapest: 12 from broker 1 (40 -> 28) to broker 4 (20 -> 32).
    snapshot, config = cluster([(1, "a"), (2, "b"), (3, "c"), (4, "d")], [
        ("t", 0, [1], 20), ("t", 1, [1], 12), ("t", 2, [1, 2], 8), ("t", 3, [2], 22), ("t", 4, [3], 30),
        ("t", 5, [4], 20)], out_of_isr={("t", 2): [2]})
    result = check(snapshot, config, bands(DISK_BAND), 12)
    assert [(r.topic, r.partition, r.replicas) for r in result.plan] == [("t", 1, [4])]


def test_replica_count_band_moves_the_smallest_replica() -> None:
    # Counts 4, 2, 3 with the band [3, 3]: one replica from broker 1 to broker 2, the smallest (3 bytes).
    snapshot, config = cluster([(1, None), (2, None), (3, None)], [
        ("t", 0, [1], 9), ("t", 1, [1], 3), ("t", 2, [1], 5), ("t", 3, [1], 4), ("t", 4, [2], 1), ("t", 5, [2], 1),
        ("t", 6, [3], 1), ("t", 7, [3], 1), ("t", 8, [3], 1)])
    result = check(snapshot, config, bands({"p": {"disk": None, "replica_count": (3, 3)}}), 3)
    assert [(r.topic, r.partition, r.replicas) for r in result.plan] == [("t", 1, [2])]


def test_a_held_broker_ends_inside_its_target_band() -> None:
    # Broker 1 holds 14 (4, 3, 7), broker 2 holds 6 (3, 3); band 8..12. Shedding the 3 lands them at 11 and 9,
    # inside the band: the optimum is 3. Held to the target band 10..10 (both were outside the band), only
    # shedding the 4 lands both inside it.
    snapshot, config = cluster([(1, None), (2, None)], [
        ("t", 0, [1], 4), ("t", 1, [1], 3), ("t", 2, [1], 7), ("t", 3, [2], 3), ("t", 4, [2], 3)])
    band_only = {"p": {"disk": (0.08, 0.12), "replica_count": None}}
    targeted = bands(band_only, {("p", "disk"): (0.10, 0.10)})
    held = {(1, "disk"), (2, "disk")}
    assert check(snapshot, config, targeted, 3, held=set()).plan == [Reassignment("t", 1, [2])]
    assert check(snapshot, config, targeted, 4, held=held).plan == [Reassignment("t", 0, [2])]
    # A broker not held keeps the band's edges: holding broker 2 alone leaves broker 1 free to end at 11.
    assert check(snapshot, config, targeted, 4, held={(2, "disk")}).bytes == 4


def test_a_broker_not_held_is_not_taken_out_of_its_target_band() -> None:
    # Replica counts 6 / 3 / 3 (band 3..5, target band 4..4): broker 1 is held and sheds two replicas. a and b (1
    # byte each) also have a replica on broker 3, so they can only go to broker 2, which would end at 5: inside
    # the band but further from its target band than its 3 before. Broker 2 may take one (to 4), and broker 3 one
    # of the 10-byte replicas: 11.
    snapshot, config = cluster([(1, None), (2, None), (3, None)], [
        ("a", 0, [1, 3], 1), ("b", 0, [1, 3], 1), *[("c", i, [1], 10) for i in range(4)],
        *[("g", i, [2], 10) for i in range(3)], ("j", 0, [3], 10)])
    counts = bands({"p": {"disk": None, "replica_count": (3, 5)}}, {("p", "replica_count"): (4, 4)})
    result = check(snapshot, config, counts, 11, held={(1, "replica_count")})
    assert {r.topic for r in result.plan} in ({"a", "c"}, {"b", "c"})


def test_the_held_brokers_are_those_out_of_band_before_the_plan() -> None:
    # Disk 40, 30, 30, 20 of 100 (mean 30, band 27..33 at the default threshold): brokers 1 and 4 are outside;
    # one replica each, so the replica count is inside its band everywhere.
    snapshot, config = cluster([(1, None), (2, None), (3, None), (4, None)], [
        ("t", 0, [1], 40), ("t", 1, [2], 30), ("t", 2, [3], 30), ("t", 3, [4], 20)])
    own = bands_frame(broker_load_frame(snapshot.brokers, snapshot.replicas, config.resource_list()), config)
    assert held_brokers(snapshot, config, own) == {(1, "disk"), (4, "disk")}


def test_an_unreachable_band_is_reported_infeasible() -> None:
    # Two partitions of 30 on two brokers cannot both be within 25..28.
    snapshot, config = cluster([(1, None), (2, None)], [("t", 0, [1], 30), ("t", 1, [1], 30)])
    result = solve_optimum(snapshot, config, bands({"p": {"disk": (0.25, 0.28), "replica_count": None}}),
                           time_limit=30)
    assert result.bytes is None and not result.proven
    assert "nfeasible" in result.status


def test_the_bench_recount_flags_broken_placement_rules() -> None:
    snapshot, config = cluster([(1, "a"), (2, "b"), (3, "c"), (4, "c")], RACK_PARTS, dead=(2,))
    assert placement_violations(snapshot, config, [Reassignment("t", 1, [1, 3])]) == 0  # Q off the dead broker
    assert placement_violations(snapshot, config, [Reassignment("f", 1, [1])]) == 1  # offline: may not move
    assert placement_violations(snapshot, config, [Reassignment("t", 0, [3, 4])]) == 1  # P twice on rack c
    assert placement_violations(snapshot, config, [Reassignment("f", 0, [2])]) == 1  # onto the dead broker
    assert placement_violations(snapshot, config, [Reassignment("t", 0, [1, 1])]) == 1  # a broker twice
    assert placement_violations(snapshot, config, [Reassignment("t", 0, [1, 4, 3])]) == 1  # RF changed


def test_disk_flows_add_up_to_the_bytes_moved() -> None:
    # Broker 1 (40, upper 35) is over by 5: shedding 12 to broker 4 overshoots by 7; a swap leg of 2 back onto it.
    snapshot, _ = cluster([(1, "a"), (2, "b"), (3, "c"), (4, "d")], [
        ("t", 0, [1], 20), ("t", 1, [1], 12), ("t", 2, [1], 8), ("t", 3, [2], 30), ("t", 4, [3], 28),
        ("t", 5, [4], 25), ("t", 6, [4], 2)])
    flows = disk_flows(snapshot, bands(DISK_BAND), [Reassignment("t", 1, [4]), Reassignment("t", 6, [1])])
    assert flows == {"moved": 14, "excess": 5, "deficit": 0, "overshoot": 5, "into_over": 2, "out_of_others": 2}
