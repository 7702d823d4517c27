"""The LP lower bound on a pool's balance bytes (plan/balance/lp_bound.py, issue 36): hand-made pools whose least
balance bytes are known by hand, and generated clusters whose exact optimum (bench/optimum_milp.py) the bound must
not exceed, while it is at least the disk excess and the re-check reports the larger of it and the separate bound."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from bench.optimum_milp import solve_optimum
from kafka_rebalancer.config import RebalancerConfig
from kafka_rebalancer.model.band_status import broker_load_frame
from kafka_rebalancer.model.reassignment import Reassignment
from kafka_rebalancer.plan.balance import lp_bound
from kafka_rebalancer.plan.balance.bounds import fewest_bytes
from kafka_rebalancer.plan.balance.lp_bound import FREE, lp_lower_bound, size_classes
from kafka_rebalancer.plan.balance.pool_bands import bands_frame
from kafka_rebalancer.plan.recheck import current_placement, recheck_plan
from kafka_rebalancer.snapshot.build import SnapshotTables
from kafka_rebalancer.snapshot.synthetic import SyntheticSpec, generate

INF = math.inf
Edges = dict[str, tuple[float, float]]  # "disk" / "count": (lower, upper) in bytes / replicas


def hand_lp(holdings: list[list[float]], edges: list[Edges], *, forced: tuple[float, ...] = (),
            racks: list[int] | None = None, rack_bound: bool = False, **kwargs: object) -> float | None:
    """The LP of brokers holding replicas of the given sizes (all movable), balanced on disk and replica count with
    the given edges per broker (none where absent); `forced` replicas arrive (free to land anywhere); with
    `rack_bound`, every replica is replaced in its broker's rack (`racks`)."""
    broker = np.repeat(np.arange(len(holdings)), [len(h) for h in holdings])
    size = np.array([s for h in holdings for s in h], dtype=float)
    base = np.array([[sum(h), len(h)] for h in holdings], dtype=float)
    lower = np.array([[e.get(r, (-INF, INF))[0] for r in ("disk", "count")] for e in edges])
    upper = np.array([[e.get(r, (-INF, INF))[1] for r in ("disk", "count")] for e in edges])
    rack = np.array(racks if racks is not None else [-1] * len(holdings))
    result = lp_lower_bound(
        broker=broker, size=size, load=np.c_[size, np.ones(len(size))], is_count=np.array([False, True]),
        forced_size=np.array(forced, dtype=float), forced_load=np.c_[forced, np.ones(len(forced))],
        base=base, lower=lower, upper=upper, receives=np.ones(len(holdings), dtype=bool),
        commodity=rack[broker] if rack_bound else None,
        forced_commodity=np.full(len(forced), FREE), broker_rack=rack, **kwargs)
    return result.bytes


def hand_separate(holdings: list[list[float]], edges: list[Edges]) -> float:
    """The separate bound (bounds.fewest_bytes) of the same pool: per broker the largest of its minima, added up."""
    pool = np.array([s for h in holdings for s in h], dtype=float)
    gives, receives = np.zeros(len(holdings)), np.zeros(len(holdings))
    for k, (name, is_count) in enumerate((("disk", False), ("count", True))):
        load = np.array([[sum(h), len(h)][k] for h in holdings], dtype=float)
        lower = np.array([e.get(name, (-INF, INF))[0] for e in edges])
        upper = np.array([e.get(name, (-INF, INF))[1] for e in edges])

        def own(i: int, k: int = k) -> tuple[np.ndarray, np.ndarray]:
            sizes = np.array(holdings[i], dtype=float)
            return (sizes if k == 0 else np.ones(len(sizes))), sizes

        given, received = fewest_bytes(np.maximum(load - upper, 0.0), np.maximum(lower - load, 0.0), is_count, own,
                                       pool if k == 0 else np.ones(len(pool)), pool)
        gives, receives = np.maximum(gives, given), np.maximum(receives, received)
    return max(float(gives.sum()), float(receives.sum()))


def test_few_big_replicas_to_the_empty_broker_and_the_small_ones_elsewhere() -> None:
    # Broker 2 is empty and needs 20 bytes in exactly 2 replicas: only broker 0's 10-byte ones do it. Broker 1 must
    # shed 2 replicas, its 1-byte ones, and broker 2 has no room for them: they go to broker 0. 22 bytes at least;
    # the separate bound sees the 20 received and the 2 given, but not that they cannot be the same replicas.
    holdings = [[10, 10, 10], [1, 1, 1, 1], []]
    edges: list[Edges] = [{"disk": (10, INF), "count": (0, 5)}, {"count": (0, 2)}, {"disk": (20, INF), "count": (2, 2)}]
    assert hand_separate(holdings, edges) == 20
    assert hand_lp(holdings, edges) == pytest.approx(22, rel=1e-5)
    assert hand_lp(holdings, edges) <= 22


def test_a_rack_bound_replica_is_replaced_in_its_rack() -> None:
    # Broker 0 (rack 0) must shed 10 bytes and broker 2 (rack 1) needs 20. Anywhere: broker 0 gives 10 to broker
    # 2 and broker 3 the other 10 (20 bytes). When every partition keeps one replica per rack, broker 0's go to
    # broker 1 (its rack) and broker 2's 20 come from broker 3 (30 bytes).
    holdings = [[10, 10], [], [], [10, 10, 10]]
    edges: list[Edges] = [{"disk": (-INF, 10)}, {}, {"disk": (20, INF)}, {"disk": (10, INF)}]
    racks = [0, 0, 1, 1]
    assert hand_lp(holdings, edges, racks=racks) == pytest.approx(20, rel=1e-5)
    assert hand_lp(holdings, edges, racks=racks, rack_bound=True) == pytest.approx(30, rel=1e-5)


def test_forced_arrivals_do_balance_work_and_are_not_counted() -> None:
    # A dead broker's 10-byte replica must land in the pool. On broker 1 it leaves 5 bytes short of its band,
    # which one of broker 0's replicas fills (on broker 0 it would push it 10 over, and broker 1 would still be
    # short): 5 balance bytes.
    holdings = [[5, 5, 5], []]
    edges: list[Edges] = [{"disk": (5, 15)}, {"disk": (15, 25)}]
    assert hand_lp(holdings, edges, forced=(10,)) == pytest.approx(5, rel=1e-5)
    # Without the arrival broker 0 can spare 10 bytes, not the 15 broker 1 needs: no plan.
    assert hand_lp(holdings, edges) is None


def test_no_plan_inside_the_bands_gives_no_bound() -> None:
    # 20 bytes (10 of them forced) cannot fill broker 0 to 5 and broker 1 to 20.
    assert hand_lp([[5, 5], []], [{"disk": (5, 10)}, {"disk": (20, 25)}], forced=(10,)) is None
    # 4 replicas cannot give both brokers 3.
    assert hand_lp([[1, 1, 1, 1], []], [{"count": (3, 5)}, {"count": (3, 5)}]) is None
    # Nothing can move, and broker 1 is outside its band.
    assert hand_lp([[], []], [{}, {"disk": (1, 2)}]) is None


def test_a_load_carried_by_bytes_takes_the_replicas_with_the_most_load_per_byte() -> None:
    # Network in: broker 0 carries 2 and may keep 1; its 1-byte replica carries 1 of it, its 10-byte one the
    # other: 1 byte.
    size = np.array([10.0, 1.0, 1.0])
    load = np.c_[size, [1.0, 1.0, 0.0]]
    result = lp_lower_bound(broker=np.zeros(3, dtype=int), size=size, load=load, is_count=np.array([False, False]),
                            forced_size=np.zeros(0), forced_load=np.zeros((0, 2)),
                            base=np.array([[12.0, 2.0], [0.0, 0.0]]), lower=np.full((2, 2), -INF),
                            upper=np.array([[INF, 1.0], [INF, INF]]), receives=np.ones(2, dtype=bool))
    assert result.bytes == pytest.approx(1, rel=1e-5)


def test_tighter_edges_are_solved_on_the_same_lp() -> None:
    # Broker 0 holds 30 bytes in 1-byte replicas and may keep at most 25 (the band) or 22 (its target band, which a
    # plan fixing it aims at); broker 1 takes them. 5 bytes against the band, 8 against the tighter edges; a broker
    # alone outside the tighter edges (nothing can move) leaves them no bound, the band's still stands.
    holdings = [[1.0] * 30, []]
    broker = np.zeros(30, dtype=int)
    size = np.ones(30)
    kwargs = dict(broker=broker, size=size, load=np.c_[size, size], is_count=np.array([False, True]),
                  forced_size=np.zeros(0), forced_load=np.zeros((0, 2)), receives=np.ones(2, dtype=bool))
    base = np.array([[30.0, 30.0], [0.0, 0.0]])
    lower, upper = np.full((2, 2), -INF), np.array([[25.0, INF], [INF, INF]])
    result = lp_lower_bound(**kwargs, base=base, lower=lower, upper=upper,  # type: ignore[arg-type]
                            tight=(lower, np.array([[22.0, INF], [INF, INF]])))
    assert result.bytes == pytest.approx(5, rel=1e-5) and result.tight_bytes == pytest.approx(8, rel=1e-5)
    assert hand_lp(holdings, [{"disk": (-INF, 25)}, {}]) == pytest.approx(5, rel=1e-5)
    stuck = lp_lower_bound(**{**kwargs, "size": np.zeros(0), "broker": np.zeros(0, dtype=int),  # type: ignore[arg-type]
                              "load": np.zeros((0, 2))}, base=np.array([[24.0, 24.0], [0.0, 0.0]]), lower=lower,
                           upper=upper, tight=(lower, np.array([[22.0, INF], [INF, INF]])))
    assert stuck.bytes == 0.0 and stuck.tight_bytes is None


def test_no_band_enforced_needs_no_bytes() -> None:
    assert hand_lp([[5, 5], []], [{}, {}]) == 0.0


def test_size_classes_split_by_count_and_by_bytes() -> None:
    sizes = np.array([1.0] * 90 + [100.0] * 10)
    edges = size_classes(sizes, 4)
    # By count both quantiles are 1 (no class below the smallest); by bytes (the tenth of a byte at 1 byte each,
    # then the giants) the edge is at 100: the 1-byte and the 100-byte replicas fall in classes of their own.
    assert list(edges) == [100.0]
    assert list(np.searchsorted(edges, [1.0, 100.0], side="right")) == [0, 1]


# Generated clusters of 12 brokers (RF 3, one hot broker) whose configs balance disk and replica count, as the
# optimum bench's; their exact optimum comes from the MILP. Those it proves in a few seconds (others take a minute).
BASE = SyntheticSpec(n_brokers=12, n_racks=3, n_pools=1, n_partitions=300, replication_factor=3,
                     hot_brokers_per_pool=1, hot_weight=1.6, seed=36)
RESOURCES = {"disk": {}, "replica_count": {}}
# The LP's edges allow band_status' slack (1e-9 of the capacity per broker) and its optimum is reported less
# lp_bound.SAFETY (1e-6): against the disk excess, which has neither, it may read that much lower.
TOLERANCE = 1e-5


def cluster(spec: SyntheticSpec) -> tuple[SnapshotTables, RebalancerConfig, object]:
    tables, body = generate(spec)
    config = RebalancerConfig.model_validate({**body, "resources": RESOURCES})
    load = broker_load_frame(tables.brokers, tables.replicas, config.resource_list())
    # The plan's bands: the re-check derives them from the snapshot and what must leave, as the planner does.
    bands = current_placement(config, tables, bands_frame(load, config)).bands_after
    return tables, config, bands


def pool_bounds(tables: SnapshotTables, config: RebalancerConfig, bands: object) -> dict[str, float | None]:
    current = current_placement(config, tables, bands)  # type: ignore[arg-type]
    row = current.pool_bounds.iloc[0]
    disk = current.bounds[current.bounds["resource"] == "disk"]["lower_bound_bytes"].sum()
    lp = None if row["lp_bytes"] is None or np.isnan(row["lp_bytes"]) else float(row["lp_bytes"])
    return {"bytes": float(row["bytes"]), "separate": float(row["separate_bytes"]), "lp": lp, "disk": float(disk),
            "forced": float(current.must_leave["size_bytes"].sum()), "promise": float(row["promise_bytes"])}


@pytest.mark.parametrize("spec", [
    pytest.param(replace(BASE, size_distribution="giants"), id="giants"),
    pytest.param(replace(BASE, size_distribution="lognormal", n_partitions=120), id="lognormal-120-partitions"),
    pytest.param(replace(BASE, size_distribution="lognormal", empty_broker_fraction=0.1, seed=1), id="empty-brokers"),
    pytest.param(replace(BASE, size_distribution="uniform", dead_broker=True, n_racks=4), id="dead-broker-uniform"),
])
def test_the_bound_is_at_most_the_exact_optimum(spec: SyntheticSpec) -> None:
    tables, config, bands = cluster(spec)
    bounds = pool_bounds(tables, config, bands)
    optimum = solve_optimum(tables, config, bands, time_limit=60)  # type: ignore[arg-type]
    assert optimum.proven, optimum.status
    balance = optimum.bytes - bounds["forced"]  # type: ignore[operator]
    assert bounds["lp"] is not None
    assert bounds["lp"] <= balance and bounds["bytes"] <= balance
    # The optimum's plan keeps every promise (the brokers it fixes end in their target band): so does the bound
    # against the promised edges, at least the band's.
    assert bounds["bytes"] <= bounds["promise"] <= balance
    # The summary divides by it once the plan keeps them.
    plan = [Reassignment(topic, partition, replicas)
            for pool in optimum.pools for (topic, partition), replicas in pool.placement.items()]
    recheck = recheck_plan(config, tables, plan, bands)  # type: ignore[arg-type]
    assert recheck.keeps_promises("pool-0")
    figures = recheck.figures()
    assert figures["lower_bound_edges"] == "promised" and figures["lower_bound_bytes"] == bounds["promise"]
    assert figures["moved_over_lb"] >= 1 - TOLERANCE
    if bounds["forced"]:
        # The separate and the disk bound count the current placement's band and not where the forced replicas
        # land: here both are above the optimum, and the pool's bound is the LP's.
        assert bounds["separate"] > balance and bounds["disk"] > balance
        assert bounds["bytes"] == bounds["lp"]
    else:
        assert bounds["bytes"] == max(bounds["separate"], bounds["lp"])
        assert bounds["lp"] >= bounds["disk"] * (1 - TOLERANCE)
        assert bounds["lp"] > bounds["separate"]  # both bands at once, with the racks: tighter


@pytest.mark.parametrize("spec", [
    pytest.param(replace(BASE, size_distribution=d), id=d) for d in ("lognormal", "pareto", "uniform")] + [
    pytest.param(replace(BASE, size_distribution="lognormal", empty_broker_fraction=0.1), id="empty-brokers"),
    pytest.param(replace(BASE, size_distribution="lognormal", dead_broker=True), id="dead-broker-3-racks"),
])
def test_the_bound_is_at_least_the_disk_excess_and_the_separate_bound(spec: SyntheticSpec) -> None:
    tables, config, bands = cluster(spec)
    bounds = pool_bounds(tables, config, bands)
    if spec.dead_broker:
        # RF 3 on 3 racks: the dead broker's rack keeps a third of the replicas on 3 brokers, above the count band
        # whatever a plan does (the MILP proves it too). No bound: the separate one stands.
        assert bounds["lp"] is None and bounds["bytes"] == bounds["separate"]
        return
    assert bounds["lp"] is not None and bounds["lp"] >= bounds["disk"] * (1 - TOLERANCE)
    assert bounds["bytes"] == max(bounds["separate"], bounds["lp"])


def test_merging_brokers_inside_their_bands_only_lowers_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    tables, config, bands = cluster(replace(BASE, size_distribution="lognormal", n_brokers=24, n_partitions=400))
    exact = pool_bounds(tables, config, bands)["lp"]
    monkeypatch.setattr(lp_bound, "MAX_UNITS", 4)
    merged = pool_bounds(tables, config, bands)["lp"]
    assert exact is not None and merged is not None and merged <= exact * (1 + 1e-6)


def test_the_summary_figures_carry_every_bound() -> None:
    tables, config, bands = cluster(replace(BASE, size_distribution="giants"))
    recheck = recheck_plan(config, tables, [], bands)  # type: ignore[arg-type]
    for figures in (recheck.figures(), recheck.figures("pool-0")):
        assert figures["lower_bound_bytes"] == max(figures["separate_lower_bound_bytes"],
                                                   figures["lp_lower_bound_bytes"])
        assert figures["disk_lower_bound_bytes"] == pytest.approx(
            recheck.resource_figures("pool-0", "disk")["lower_bound_bytes"])
