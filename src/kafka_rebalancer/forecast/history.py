"""Each topic's log size over the last `forecast.history_days`, one point an hour, from Prometheus (TOPIC_HISTORY).

The brokers' JMX exporter exports every replica's size (`kafka_log_log_size{topic, partition}`); the largest replica
of a partition is its size (a follower catching up holds less), summed per topic in Prometheus so the answer is one
series per topic. One range query, asked of the live brokers (the connection, credentials and timeouts of
`metrics.prometheus`, the errors of `snapshot.prometheus_http`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from kafka_rebalancer.config import PrometheusSettings
from kafka_rebalancer.forecast.trend import DAY_S
from kafka_rebalancer.forecast_settings import ForecastSettings
from kafka_rebalancer.model.schemas import TOPIC_HISTORY
from kafka_rebalancer.snapshot.prometheus import RangeQueries, parse_matrix, render_query
from kafka_rebalancer.snapshot.prometheus_http import QueryWindow

STEP_S = 3600.0
LOG_SIZE_QUERY = ('sum by (topic) (max by (topic, partition) '
                  '(kafka_log_log_size{job="kafka", topic!="", $brokers}))')


@dataclass(frozen=True)
class History:
    """TOPIC_HISTORY rows, the window asked for, and what is short about it (empty: nothing)."""

    samples: pd.DataFrame
    window: QueryWindow
    notes: list[str]


def query_history(client: RangeQueries, prometheus: PrometheusSettings, forecast: ForecastSettings,
                  broker_ids: Sequence[int], now: float) -> History:
    """One point an hour per topic over the last `history_days` ending `now`."""
    window = QueryWindow.ending_at(now, forecast.history_days * DAY_S, STEP_S)
    shown_as = f"log size per topic ({len(broker_ids)} brokers, {forecast.history_days} days): {LOG_SIZE_QUERY}"
    data = client.query_range(render_query(LOG_SIZE_QUERY, prometheus, sorted(broker_ids)), window, shown_as)
    series = parse_matrix(data, ("topic",), prometheus.broker_label, f"Prometheus at {client.url}, query {shown_as}")
    empty = np.empty(0)
    samples = pd.DataFrame({
        "topic": np.concatenate([empty.astype(object)] + [np.full(len(s.times), s.key[0], dtype=object)
                                                          for s in series]),
        "time_s": np.concatenate([empty] + [s.times for s in series]),
        "size_bytes": np.concatenate([empty] + [s.values for s in series]),
    })[TOPIC_HISTORY.names]
    return History(samples, window, history_notes(samples, window, forecast.history_days))


def history_notes(samples: pd.DataFrame, window: QueryWindow, history_days: int) -> list[str]:
    """What the forecast should say of the history as a whole: none at all, or shorter than asked."""
    if samples.empty:
        return [f"Prometheus has no kafka_log_log_size over the last {history_days} days: no topic is forecast"]
    held_days = (window.end - float(samples["time_s"].min())) / DAY_S
    if held_days < history_days - 1:
        return [f"Prometheus holds {held_days:.1f} of the {history_days} days asked (forecast.history_days): "
                f"every trend is from the days it has"]
    return []
