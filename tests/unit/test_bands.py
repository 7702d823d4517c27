"""The balance band (README: How a plan is made) with the patent's worked numbers."""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_rebalancer.model.schemas import BANDS, BROKER_LOAD
from kafka_rebalancer.plan.balance.bands import band_edges, band_for, count_edges, spread, widening_note
from kafka_rebalancer.plan.balance.pool_bands import bands_frame, brokers_to_fix, precheck_pairs
from kafka_rebalancer.snapshot.synthetic import SyntheticSpec, generate


def test_patent_example_threshold_1_05() -> None:
    # u = 60 %, 81 %, 60 %: m = 67 %; x = 1.05 gives {63.65 %, 70.35 %}, all three brokers outside.
    band = band_for("disk", False, [60, 81, 60], [100, 100, 100], threshold=1.05, margin=1.0)
    assert band.mean == pytest.approx(0.67)
    assert band.lower == pytest.approx(0.6365)
    assert band.upper == pytest.approx(0.7035)
    assert [band.contains(u) for u in (0.60, 0.81, 0.60)] == [False, False, False]


def test_patent_example_threshold_1_10() -> None:
    # x = 1.10: {60.3 %, 73.7 %} (the patent prints 73.3 %, an arithmetic slip: 67 x 1.1 = 73.7).
    band = band_for("disk", False, [60, 81, 60], [100, 100, 100], threshold=1.10, margin=1.0)
    assert (band.lower, band.upper) == (pytest.approx(0.603), pytest.approx(0.737))
    assert [band.contains(u) for u in (0.60, 0.81, 0.60)] == [False, False, False]
    assert band.contains(0.67)


def test_hysteresis_target_band_is_tighter() -> None:
    lower, upper, t_lower, t_upper = band_edges(0.67, 1.10, 0.9)
    assert (t_lower, t_upper) == (pytest.approx(0.67 * 0.91), pytest.approx(0.67 * 1.09))
    assert lower < t_lower < 0.67 < t_upper < upper


def test_counts_are_the_integers_inside_the_band() -> None:
    # m = 32/3: [9.6, 11.73] holds 10 and 11 (rounding outward gave [9, 12], ±16 %); 32 over 3 brokers fits.
    band = band_for("replica_count", True, [10, 11, 11], [1, 1, 1], threshold=1.10, margin=0.9)
    assert (band.lower, band.upper, band.target_lower, band.target_upper) == (10, 11, 10, 11)
    assert not band.widened


def test_threshold_is_exact_so_integral_edges_stay_put() -> None:
    # 1.10 - 1.0 is 0.10000000000000009 in floats: mean 750 gave [674, 826].
    assert spread(1.10) == Fraction(1, 10)
    band = band_for("replica_count", True, [750] * 4, [1] * 4, threshold=1.10, margin=0.9)
    assert (band.lower, band.upper) == (675, 825)
    assert (band.target_lower, band.target_upper) == (683, 817)  # 750 * (1 ∓ 0.09) = 682.5, 817.5


def test_count_band_is_not_rounded_outward() -> None:
    # mean 25 at 1.10: [22.5, 27.5] -> [23, 27] (was [22, 28], ±12 %).
    band = band_for("leader_count", True, [20, 30], [1, 1], threshold=1.10, margin=0.9)
    assert (band.lower, band.upper) == (23, 27)
    assert (band.target_lower, band.target_upper) == (23, 27)  # [22.75, 27.25]


def test_target_band_with_margin_is_exact() -> None:
    # f*margin = 0.2 * 0.75 = 0.15 exactly: mean 100 gives the integral target [85, 115]. In floats f*margin is
    # 0.14999999999999997, whose edges 85.00000000000001 and 114.99999999999999 round inside to [86, 114].
    band = band_for("replica_count", True, [100, 100], [1, 1], threshold=1.2, margin=0.75)
    assert (band.lower, band.upper, band.target_lower, band.target_upper) == (80, 120, 85, 115)
    lower, upper, t_lower, t_upper = band_edges(100.0, 1.2, 0.75)
    assert (lower, upper, t_lower, t_upper) == (100 * 0.8, 100 * 1.2, 100 * 0.85, 100 * 1.15)


def test_band_widened_where_the_inside_integers_cannot_hold_the_total() -> None:
    # 4 items on 3 brokers: m = 1.33, [1.2, 1.47] holds no integer; [1, 2] is the narrowest band that holds 4.
    band = band_for("replica_count", True, [2, 1, 1], [1, 1, 1], threshold=1.10, margin=0.9)
    assert (band.lower, band.upper, band.target_lower, band.target_upper) == (1, 2, 1, 2)
    assert band.widened and band.target_widened
    assert widening_note(band, 1.10, 0.9) == (
        "band widened to [1, 2]: the integers inside ±10% of the mean cannot hold the pool's total; target band "
        "widened to [1, 2]: the integers inside ±9% of the mean cannot hold the pool's total")


def test_a_target_band_widened_alone_is_noted() -> None:
    # 30 items on 4 brokers: m = 7.5; ±20% holds [6, 9], but ±5% ([7.125, 7.875]) holds no integer: the target
    # band is widened to [7, 8] and the note says so; the band itself is not.
    band = band_for("replica_count", True, [9, 9, 6, 6], [1, 1, 1, 1], threshold=1.2, margin=0.25)
    assert (band.lower, band.upper, band.target_lower, band.target_upper) == (6, 9, 7, 8)
    assert not band.widened and band.target_widened
    assert widening_note(band, 1.2, 0.25) == ("target band widened to [7, 8]: the integers inside ±5% of the mean "
                                              "cannot hold the pool's total")


def test_band_widened_where_the_inside_integers_miss_the_mean() -> None:
    # m = 10.1 at 1.05: [9.595, 10.605] holds only 10, and 10 on each of 10 brokers cannot hold 101.
    assert count_edges(101, 10, 1, 20) == (10, 11, True)
    assert count_edges(100, 10, 1, 20) == (10, 10, False)


def test_mean_is_capacity_weighted_so_heterogeneous_pools_can_balance() -> None:
    # 184 MB on brokers of 256, 256 and 512 MB: every broker can reach 184/1024 = 18 %, not the 24 % mean of usages.
    band = band_for("disk", False, [92, 92, 0], [256, 256, 512], threshold=1.10, margin=0.9)
    assert band.mean == pytest.approx(184 / 1024)
    assert band.contains(46 / 256) and band.contains(92 / 512)


def test_equal_capacities_give_the_patents_plain_mean() -> None:
    usages = [0.2, 0.5, 0.8, 0.3]
    band = band_for("disk", False, [u * 1000 for u in usages], [1000] * 4, threshold=1.2, margin=1.0)
    assert band.mean == pytest.approx(np.mean(usages))


def test_low_utilisation_floor_turns_balancing_off() -> None:
    assert not band_for("disk", False, [1, 2], [100, 100], 1.1, 0.9, low_utilization=0.2).balanced
    assert band_for("disk", False, [30, 20], [100, 100], 1.1, 0.9, low_utilization=0.2).balanced


def inside_integers(total: int, n: int, f: Fraction) -> tuple[int, int]:
    m = Fraction(total, n)
    return math.ceil(m * (1 - f)), math.floor(m * (1 + f))


def fits(lower: int, upper: int, total: int, n: int) -> bool:
    return lower <= upper and n * lower <= total <= n * upper


def exact_count_band(total: int, n: int, f: Fraction) -> tuple[int, int]:
    """The specification, in fractions: the integers inside ±f of the mean, else [floor m, ceil m]."""
    lower, upper = inside_integers(total, n, f)
    return (lower, upper) if fits(lower, upper, total, n) else (math.floor(Fraction(total, n)),
                                                                 math.ceil(Fraction(total, n)))


@given(total=st.integers(0, 10**6), n=st.integers(1, 2000),
       threshold=st.decimals(min_value="1.001", max_value="3", places=3),
       margin=st.decimals(min_value="0.01", max_value="1", places=2))
def test_count_edges_are_the_exact_interval_or_the_narrowest_feasible(total: int, n: int, threshold: object,
                                                                       margin: object) -> None:
    f, target_f = Fraction(str(threshold)) - 1, (Fraction(str(threshold)) - 1) * Fraction(str(margin))
    band = band_for("replica_count", True, [0] * (n - 1) + [total], [1] * n, float(threshold), float(margin))
    assert (band.lower, band.upper) == exact_count_band(total, n, f)
    assert band.widened == (not fits(*inside_integers(total, n, f), total, n))
    assert (band.target_lower, band.target_upper) == exact_count_band(total, n, target_f)
    assert band.lower <= band.target_lower and band.target_upper <= band.upper
    assert fits(band.lower, band.upper, total, n) and fits(band.target_lower, band.target_upper, total, n)


def test_float_bands_use_the_exact_threshold() -> None:
    # 1 - (1.10 - 1.0) in floats is 0.8999999999999999; the exact factor is the double nearest 0.9.
    lower, upper, _, _ = band_edges(750.0, 1.10, 0.9)
    assert (lower, upper) == (750 * 0.9, 750 * 1.1)


def _load_rows(loads: dict[tuple[str, str], list[float]]) -> pd.DataFrame:
    rows = [{"broker_pool": pool, "broker_id": i + (1 if pool == "pool-0" else 4), "rack": None, "alive": True,
             "eligible": True, "resource": name, "load": float(v), "capacity": 1e12 if name == "disk" else 1.0,
             "usage": float(v) / (1e12 if name == "disk" else 1.0)}
            for (pool, name), values in loads.items() for i, v in enumerate(values)]
    return pd.DataFrame(rows, columns=BROKER_LOAD.names)


def _band_config(config_factory: Callable[..., Any]) -> Any:
    _, body = generate(SyntheticSpec(n_brokers=6, n_racks=3, n_pools=2, n_partitions=10, replication_factor=3))
    return config_factory({**body, "resources": {"disk": {"threshold": 1.2, "margin": 0.75},
                                                 "replica_count": {"threshold": 1.10, "margin": 0.9},
                                                 "leader_count": {"threshold": 1.10, "margin": 0.9}}})


def test_band_table_count_edges_are_exact_and_widened_with_the_note(config_factory: Callable[..., Any]) -> None:
    """1.10 at mean 750 gives [675, 825] (floats gave [674, 826]), mean 25 gives [23, 27] (rounded outward:
    [22, 28]), and 4 replicas on 3 brokers widen to [1, 2] with the note."""
    config = _band_config(config_factory)
    load = _load_rows({("pool-0", "replica_count"): [700, 800, 750], ("pool-0", "leader_count"): [20, 30, 25],
                       ("pool-1", "replica_count"): [2, 1, 1], ("pool-1", "leader_count"): [0, 0, 1],
                       ("pool-0", "disk"): [3e11, 1e11, 2e11], ("pool-1", "disk"): [1.0, 2.0, 3.0]})
    table = bands_frame(load, config)
    assert list(table.columns) == BANDS.names
    edges = {(r.broker_pool, r.resource): (r.lower, r.upper, r.target_lower, r.target_upper, r.note)
             for r in table.itertuples()}
    assert edges["pool-0", "replica_count"] == (675, 825, 683, 817, None)
    assert edges["pool-0", "leader_count"] == (23, 27, 23, 27, None)
    assert edges["pool-1", "replica_count"] == (1, 2, 1, 2, "band widened to [1, 2]: the integers inside ±10% of "
                                                "the mean cannot hold the pool's total; target band widened to "
                                                "[1, 2]: the integers inside ±9% of the mean cannot hold the pool's "
                                                "total")
    assert edges["pool-1", "leader_count"][:4] == (0, 1, 0, 1)
    mean = 6e11 / 3e12  # usage: bytes over capacity
    assert edges["pool-0", "disk"][:4] == (mean * 0.8, mean * 1.2, mean * 0.85, mean * 1.15)


def test_band_table_counts_the_load_that_must_move_and_not_the_brokers_order(
        config_factory: Callable[..., Any]) -> None:
    """Replicas that must arrive (from a dead broker or another pool) raise the pool's mean; the sums are
    exactly rounded, so the brokers' order cannot move an edge by a bit."""
    config = _band_config(config_factory)
    load = _load_rows({("pool-0", "replica_count"): [700, 800, 750],
                       ("pool-0", "disk"): [0.1 * 1e12, 0.2 * 1e12, 0.3 * 1e12 + 0.7]})
    incoming = pd.DataFrame({"broker_pool": ["pool-0", "pool-0"], "resource": ["replica_count", "disk"],
                             "incoming": [300.0, 2.5e-7]})
    table = bands_frame(load, config, incoming).set_index("resource")
    assert table.loc["replica_count", "mean"] == 850
    assert (table.loc["replica_count", "lower"], table.loc["replica_count", "upper"]) == (765, 935)
    shuffled = bands_frame(load.iloc[::-1], config, incoming).set_index("resource")
    assert shuffled.loc["disk", "mean"] == table.loc["disk", "mean"]
    assert table.loc["disk", "mean"] == math.fsum([0.1e12, 0.2e12, 0.3e12 + 0.7, 2.5e-7]) / 3e12


def test_precheck_pairs_give_to_the_most_room_and_take_from_the_most_spare(config_factory: Callable[..., Any]) -> None:
    """Seed 001's partners: an over-loaded broker tries the two brokers of its pool with the most room below the
    upper edge (capped by the capacity threshold), an under-loaded one the two with the most load above the lower
    edge; never itself, and ties go to the lower broker id."""
    config = _band_config(config_factory)
    load = _load_rows({("pool-0", "disk"): [0.10e12, 0.20e12, 0.30e12]})
    load = pd.concat([load, _load_rows({("pool-0", "disk"): [0.20e12]}).assign(broker_id=4)], ignore_index=True)
    bands = bands_frame(load, config)  # mean 0.2, band [0.16, 0.24]
    fix = brokers_to_fix(load, bands)
    assert sorted(zip(fix["broker_id"], fix["direction"], strict=True)) == [(1, "under"), (3, "over")]
    pairs = precheck_pairs(load, bands, fix)
    got = sorted(zip(pairs["direction"], pairs["broker_to_fix"], pairs["s_broker_id"], pairs["t_broker_id"],
                     strict=True))
    # Room below 0.24: broker 1 (0.14), then 2 and 4 (0.04 each: 2 by id). Spare above 0.16: broker 3 (0.14), then
    # 2 and 4 (0.04: 2 by id); broker 1 is not its own partner.
    assert got == [("over", 3, 3, 1), ("over", 3, 3, 2), ("under", 1, 2, 1), ("under", 1, 3, 1)]
    over = pairs[pairs["direction"] == "over"].iloc[0]
    assert (over["s_load"], over["s_capacity"]) == (0.30e12, 1e12)
    assert over["t_effective_upper"] == pytest.approx(0.24)
