"""The balance band (README: How a plan is made) with the patent's worked numbers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kafka_rebalancer.balance.bands import band_edges, band_for


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
    lower, upper, t_lower, t_upper = band_edges(0.67, 1.10, 0.9, is_count=False)
    assert (t_lower, t_upper) == (pytest.approx(0.67 * 0.91), pytest.approx(0.67 * 1.09))
    assert lower < t_lower < 0.67 < t_upper < upper


def test_counts_round_upper_up_and_lower_down() -> None:
    lower, upper, t_lower, t_upper = band_edges(32 / 3, 1.10, 0.9, is_count=True)
    assert (lower, upper) == (math.floor(32 / 3 * 0.9), math.ceil(32 / 3 * 1.1)) == (9, 12)
    assert (t_lower, t_upper) == (9, 12)


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


def test_same_formula_on_numpy_arrays() -> None:
    means = np.array([0.67, 10.5])
    lower, upper, _, _ = band_edges(means, 1.1, 0.9, is_count=True, ceil=np.ceil, floor=np.floor)
    assert lower.tolist() == [0.0, 9.0] and upper.tolist() == [1.0, 12.0]
