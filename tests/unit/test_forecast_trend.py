"""The growth trend per topic (issue 55) on synthetic hourly series of known growth: within 5 % of it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from kafka_rebalancer.forecast.trend import series_trend, topic_growth
from kafka_rebalancer.model.units import DAY_S

HOUR = 3600.0
DAYS = 14
GIB = 2**30
RATE = 5 * GIB  # bytes a day


def hours(days: float = DAYS) -> np.ndarray:
    return np.arange(0, days * 24 + 1) * HOUR


def growth(times: np.ndarray, values: np.ndarray) -> float | None:
    return series_trend(times, values, HOUR, DAYS).growth_bytes_per_day


def test_forecast_linear_growth() -> None:
    t = hours()
    assert growth(t, 100 * GIB + RATE * t / DAY_S) == pytest.approx(RATE, rel=0.05)


def test_forecast_flat_at_retention_grows_by_nothing() -> None:
    # Filled at RATE, a 1 GiB segment deleted whenever the log passes 200 GiB: a sawtooth under a flat limit.
    t = hours()
    values = 199 * GIB + (RATE * t / DAY_S) % GIB
    trend = series_trend(t, values, HOUR, DAYS)
    assert trend.method == "peaks"
    assert abs(trend.growth_bytes_per_day or 0.0) < 0.05 * RATE


def test_forecast_topic_created_mid_window_from_the_days_it_has() -> None:
    t = hours()[24 * 9:]  # five days old
    trend = series_trend(t, RATE * (t - t[0]) / DAY_S, HOUR, DAYS)
    assert trend.growth_bytes_per_day == pytest.approx(RATE, rel=0.05)
    assert trend.note and "5.0 of 14 days" in trend.note


def test_forecast_restart_gap_is_cut_out() -> None:
    t = hours()
    values = 100 * GIB + RATE * t / DAY_S
    present = (t < 5 * DAY_S) | (t > 5.5 * DAY_S)  # twelve hours without scrapes
    values = np.where(t > 5.5 * DAY_S, values + 3 * GIB, values)  # and the level after it off the line
    assert growth(t[present], values[present]) == pytest.approx(RATE, rel=0.05)


def test_forecast_outliers_ignored() -> None:
    t = hours()
    values = 100 * GIB + RATE * t / DAY_S
    values[[30, 31, 100, 200]] = [0.0, 0.0, 5 * values[100], 3 * values[200]]
    assert growth(t, values) == pytest.approx(RATE, rel=0.05)


def test_forecast_compaction_drop() -> None:
    t = hours()
    values = 100 * GIB + RATE * t / DAY_S
    values[t >= 7 * DAY_S] -= 60 * GIB  # compaction halves the log once; it keeps growing as before
    trend = series_trend(t, values, HOUR, DAYS)
    assert trend.method == "segments"
    assert trend.growth_bytes_per_day == pytest.approx(RATE, rel=0.05)


def test_forecast_too_few_points_says_so() -> None:
    t = hours(0.5)
    trend = series_trend(t, RATE * t / DAY_S, HOUR, DAYS)
    assert trend.growth_bytes_per_day is None and trend.reason and "13 hourly points" in trend.reason


def test_forecast_mostly_gaps_says_so() -> None:
    t = hours()[::4]
    trend = series_trend(t, RATE * t / DAY_S, HOUR, DAYS)
    assert trend.growth_bytes_per_day is None and trend.reason and "mostly gaps" in trend.reason


def test_forecast_topic_growth_table() -> None:
    t = hours()
    history = pd.concat([pd.DataFrame({"topic": "a", "time_s": t, "size_bytes": RATE * t / DAY_S}),
                         pd.DataFrame({"topic": "b", "time_s": t[:5], "size_bytes": 1.0})])
    table = topic_growth(history, HOUR, DAYS, topics=["a", "c"]).set_index("topic")
    assert list(table.index) == ["a", "b", "c"] and table.loc["c", "reason"] == "no log size series in Prometheus"
    assert table.loc["a", "growth_bytes_per_day"] == pytest.approx(RATE, rel=0.05)
    assert np.isnan(table.loc["b", "growth_bytes_per_day"]) and "5 hourly points" in table.loc["b", "reason"]
