"""Each topic's log size over the last `forecast.history_days`, one point an hour, from Prometheus (TOPIC_HISTORY).

The brokers' JMX exporter exports every replica's size (`kafka_log_log_size{topic, partition}`); the largest replica
of a partition is its size (a follower catching up holds less), summed per topic in Prometheus so the answer is one
series per topic. One range query, asked of the live brokers (the connection, credentials and timeouts of
`metrics.prometheus`, the errors of `snapshot.prometheus_http`). A run's snapshot keeps it beside its tables
(`snapshot_history`), out of its content hash: the plan does not depend on it, its forecast does.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from kafka_rebalancer.config import PrometheusSettings, RebalancerConfig
from kafka_rebalancer.errors import RebalancerError
from kafka_rebalancer.forecast_settings import ForecastSettings
from kafka_rebalancer.model.schemas import TOPIC_HISTORY
from kafka_rebalancer.model.units import DAY_S
from kafka_rebalancer.snapshot.prometheus import RangeQueries, parse_matrix, render_query
from kafka_rebalancer.snapshot.prometheus_http import QueryWindow, prometheus_http

log = logging.getLogger(__name__)

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


def snapshot_history(config: RebalancerConfig, live: Sequence[int], now: float
                     ) -> tuple[pd.DataFrame | None, dict[str, Any]]:
    """The run's log size history (TOPIC_HISTORY, None when there is none) and what its manifest says of it: the
    window, the topics and points, and `notes` on what is missing. Never raises for Prometheus: a run whose forecast
    cannot be made says so and goes on (README: Capacity forecast)."""
    settings = config.metrics.prometheus
    if settings is None:
        return None, {"notes": ["metrics.prometheus is not set: no capacity forecast (it reads each topic's log "
                                "size history from Prometheus)"]}
    try:
        client = prometheus_http(settings, str(config.source_file))
        history = query_history(client, settings, config.forecast, live, now)
    except RebalancerError as exc:
        log.warning("capacity forecast: no log size history: %s", exc)
        return None, {"url": settings.url, "notes": [f"no log size history from Prometheus ({exc}): no capacity "
                                                     f"forecast"]}
    samples = history.samples
    facts = {"url": settings.url, "history_days": config.forecast.history_days, "start": history.window.start,
             "end": history.window.end, "step_s": STEP_S, "topics": int(samples["topic"].nunique()),
             "points": len(samples), "query_seconds": round(client.seconds, 3), "notes": history.notes}
    for note in history.notes:
        log.warning("capacity forecast: %s", note)
    return samples, facts
