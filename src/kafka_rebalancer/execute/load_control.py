"""Throttle control from measured load (README: Throttle control from measured load), as kafka-kit's autothrottle
does: every `interval_s` the executor asks Prometheus for each throttled broker's produce latency (p99) and network
bytes per second. A broker over a line has its replication throttle lowered (times `lower_by`, down to
`min_bytes_per_s`); once every measure is below `raise_below` of its line it is raised again by the same step, up to
the configured rate. Each change is a `throttle_lowered` / `throttle_raised` entry in the execution log with what was
measured; a broker without figures, or Prometheus unreachable, keeps its rate (`load_unknown`)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kafka_rebalancer.config import RebalancerConfig, ThrottleControlSettings
from kafka_rebalancer.errors import PrometheusQueryError, PrometheusUnreachableError
from kafka_rebalancer.snapshot.prometheus import query_metrics
from kafka_rebalancer.snapshot.prometheus_http import prometheus_http

log = logging.getLogger(__name__)

LINES = ("produce_latency_ms", "network_bytes_per_s")
Loads = dict[str, dict[int, float]]  # metric -> broker -> its value now


class LoadControl:
    def __init__(self, settings: ThrottleControlSettings, rate_bytes_per_s: int,
                 read: Callable[[list[int]], Loads], retarget: Callable[[dict[int, int]], None],
                 record: Callable[..., Any], clock: Callable[[], float]) -> None:
        """`read`: each line's metric for these brokers; `retarget`: the rates to hold those brokers' copies at."""
        self.settings, self.rate, self.read, self.retarget = settings, rate_bytes_per_s, read, retarget
        self.record, self.clock = record, clock
        self.lines = {m: float(getattr(settings, m)) for m in LINES if getattr(settings, m) is not None}
        self.rates: dict[int, int] = {}  # brokers held below the configured rate
        self.checked_at: float | None = None

    def check(self, brokers: Iterable[int]) -> dict[int, int]:
        """Every interval_s: lower or raise the brokers' rates by their load now; the rates changed."""
        now = self.clock()
        if self.checked_at is not None and now - self.checked_at < self.settings.interval_s:
            return {}
        self.checked_at = now
        ids = sorted(set(brokers) | set(self.rates))
        if not ids:
            return {}
        try:
            loads = self.read(ids)
        except (PrometheusUnreachableError, PrometheusQueryError) as exc:
            self.record("load_unknown", error=str(exc))
            log.warning("throttle control: the brokers' load is unknown, their throttles stay as they are: %s", exc)
            return {}
        changed: dict[int, int] = {}
        for broker in ids:
            measured = {m: loads.get(m, {}).get(broker) for m in self.lines}
            new = self._rate_for(broker, measured)
            if new is None:
                continue
            action = "throttle_lowered" if new < self.rates.get(broker, self.rate) else "throttle_raised"
            changed[broker] = new
            self.record(action, broker=broker, rate_bytes_per_s=new, measured=measured, lines=self.lines)
            log.info("throttle control: broker %d %s to %d B/s (measured %s, lines %s)", broker,
                     action.split("_")[1], new, measured, self.lines)
        if changed:
            self.retarget(changed)
            self.rates.update(changed)
            for broker in [b for b, r in self.rates.items() if r >= self.rate]:
                del self.rates[broker]
        return changed

    def _rate_for(self, broker: int, measured: Mapping[str, float | None]) -> int | None:
        """The broker's new rate, or None to keep it."""
        current = self.rates.get(broker, self.rate)
        if any(v is not None and v > self.lines[m] for m, v in measured.items()):
            new = max(min(self.settings.min_bytes_per_s, self.rate), round(current * self.settings.lower_by))
        elif current < self.rate and all(v is not None and v <= self.settings.raise_below * self.lines[m]
                                         for m, v in measured.items()):
            new = min(self.rate, round(current / self.settings.lower_by))
        else:
            return None
        return new if new != current else None


def prometheus_loads(config: RebalancerConfig) -> Callable[[list[int]], Loads]:
    """Each line's metric now, per broker, from metrics.prometheus (its queries, credentials and TLS)."""
    settings, control = config.metrics.prometheus, config.execution.throttle_control
    assert settings is not None and control is not None  # the config requires metrics.prometheus with it
    client = prometheus_http(settings, str(config.source_file or "the config"))
    metrics = [m for m in LINES if getattr(control, m) is not None]

    def read(brokers: list[int]) -> Loads:
        series = query_metrics(client, settings, brokers, metrics, time.time(), latest_over_s=control.interval_s)
        return {m: {s.key[0]: float(s.values[-1]) for s in found if len(s.values)} for m, found in series.items()}

    return read
