"""A robust growth trend per topic from its hourly log sizes (pure numpy and pandas; TOPIC_HISTORY -> TOPIC_GROWTH).

A log's size only falls when Kafka deletes (retention) or compacts, or when a scrape is wrong. So:

1. points far from their neighbours' median (a scrape of 0 while a broker restarts, a spike) are dropped
   (a Hampel filter);
2. the series is cut into segments at every drop and every gap of more than `GAP_STEPS` missing steps
   (restarts: the level after one need not join the line before it);
3. a topic whose log keeps being cut back (at least `CYCLES` drops: at its retention limit, or compacted on a
   schedule) grows as its peaks do: the Theil-Sen slope of the last point before each drop, so a topic flat at its
   retention limit grows by nothing;
4. any other topic grows as its segments do: the Theil-Sen slope over the pairs of points inside one segment (a
   one-off compaction or a restart does not tilt it).

A topic created during the window is forecast from the days it has (the note says how many). Too few points, or a
series mostly gaps, gives no number but the reason.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from kafka_rebalancer.model.schemas import TOPIC_GROWTH
from kafka_rebalancer.model.units import DAY_S

MIN_POINTS = 24  # a day of hourly points: fewer give no trend
MIN_COVERAGE = 0.5  # of the hourly points since the topic's first one: fewer is mostly gaps
GAP_STEPS = 3  # more missing steps than this in a row cut the series (a restart)
DROP_SHARE = 0.002  # a fall of more than this share of the level is a deletion or compaction, not noise
CYCLES = 3  # this many drops make a topic "cycling": it grows as its peaks do
HAMPEL_HALF_WIDTH, HAMPEL_SIGMAS, HAMPEL_FLOOR = 3, 4.0, 0.01  # an outlier is off by both 4 sigma and 1 %
MAX_PAIRS = 20_000  # Theil-Sen over this many pairs at most (a longer series is thinned evenly: 14 days of hours to
# every second hour)


@dataclass(frozen=True)
class Trend:
    growth_bytes_per_day: float | None
    method: str | None  # "segments" or "peaks"; None: no trend
    points: int
    history_days: float
    reason: str | None = None
    note: str | None = None


def topic_growth(history: pd.DataFrame, step_s: float, window_days: float,
                 topics: Iterable[str] = ()) -> pd.DataFrame:
    """TOPIC_HISTORY rows (any order) -> one TOPIC_GROWTH row per topic of the history, and per topic of `topics`
    (the cluster's) without one. `window_days`: the history asked for."""
    rows = [{"topic": topic, **Trend(None, None, 0, 0.0, reason="no log size series in Prometheus").__dict__}
            for topic in sorted(set(topics) - set(history["topic"]))]
    for topic, series in history.sort_values(["topic", "time_s"]).groupby("topic", sort=True):
        trend = series_trend(series["time_s"].to_numpy(float), series["size_bytes"].to_numpy(float), step_s,
                             window_days)
        rows.append({"topic": topic, **trend.__dict__})
    frame = pd.DataFrame(rows, columns=TOPIC_GROWTH.names).sort_values("topic", ignore_index=True)
    return frame.astype({"points": "int32", "history_days": float})


def series_trend(times: np.ndarray, values: np.ndarray, step_s: float, window_days: float) -> Trend:
    """The trend of one topic's samples (times ascending, in seconds)."""
    finite = np.isfinite(values)
    times, values = times[finite], values[finite]
    span_days = float(times[-1] - times[0]) / DAY_S if len(times) else 0.0
    if len(times) < MIN_POINTS:
        return Trend(None, None, len(times), span_days,
                     reason=f"only {len(times)} hourly points, at least {MIN_POINTS} needed")
    coverage = len(times) / (round((times[-1] - times[0]) / step_s) + 1)
    if coverage < MIN_COVERAGE:
        return Trend(None, None, len(times), span_days,
                     reason=f"mostly gaps: {coverage:.0%} of the hourly points since it was first seen")
    keep = ~outliers(values)
    times, values = times[keep], values[keep]
    segment, peaks = segments(times, values, step_s)
    note = (f"history {span_days:.1f} of {window_days:g} days (created or first seen during the window)"
            if span_days < window_days - 1 else None)
    if len(peaks) >= CYCLES:
        slope, method = theil_sen(times[peaks], values[peaks], np.zeros(len(peaks), int)), "peaks"
    else:
        slope, method = theil_sen(times, values, segment), "segments"
    if slope is None:
        return Trend(None, None, len(times), span_days, reason="no two points inside one segment (a drop or a "
                                                                "gap every hour)")
    return Trend(slope * DAY_S, method, len(times), span_days, note=note)


def outliers(values: np.ndarray) -> np.ndarray:
    """True where a point is far from the median of its neighbours (HAMPEL_* above)."""
    width = 2 * HAMPEL_HALF_WIDTH + 1
    rolling = pd.Series(values).rolling(width, center=True, min_periods=1)
    median = rolling.median().to_numpy()
    # the rolling median of the deviations stands for each window's MAD (one pass, no per-window loop)
    mad = pd.Series(np.abs(values - median)).rolling(width, center=True, min_periods=1).median().to_numpy()
    off = np.abs(values - median)
    return (off > HAMPEL_SIGMAS * 1.4826 * mad) & (off > HAMPEL_FLOOR * np.abs(median))


def segments(times: np.ndarray, values: np.ndarray, step_s: float) -> tuple[np.ndarray, np.ndarray]:
    """Each point's segment number (a new one after each gap of more than GAP_STEPS steps and at each drop), and
    the peaks: the indexes of the last point before each drop."""
    drop = values[1:] < values[:-1] * (1 - DROP_SHARE)
    cut = drop | (np.diff(times) > (GAP_STEPS + 1) * step_s)
    return np.concatenate([[0], np.cumsum(cut)]), np.flatnonzero(drop)


def theil_sen(times: np.ndarray, values: np.ndarray, segment: np.ndarray) -> float | None:
    """The median slope (per second) over the pairs of points in the same segment; None without a pair."""
    n = len(times)
    if n < 2:
        return None
    stride = max(1, int(np.ceil(np.sqrt(n * (n - 1) / 2 / MAX_PAIRS))))
    i, j = _pairs(len(range(0, n, stride)))
    if stride > 1:
        i, j = i * stride, j * stride
    if segment[0] != segment[-1]:  # segments are numbered in order: one segment is every pair
        same = segment[i] == segment[j]
        i, j = i[same], j[same]
    if not len(i):
        return None
    return float(np.median((values[j] - values[i]) / (times[j] - times[i])))


@functools.lru_cache(maxsize=16)
def _pairs(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Every pair (i < j) of n points; the same few lengths come again and again (14 days of hours: 337)."""
    i, j = np.triu_indices(n, k=1)
    i.flags.writeable = j.flags.writeable = False
    return i, j
