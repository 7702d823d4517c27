"""Throttle control from measured load: a broker over a line has its throttle lowered, step by step down to the
floor; raised again only once every measure is below its share of the line; kept where the figures are missing or
Prometheus cannot be read; and at most once per interval."""

from __future__ import annotations

from typing import Any

import pytest

from kafka_rebalancer.config import ThrottleControlSettings
from kafka_rebalancer.errors import PrometheusUnreachableError
from kafka_rebalancer.execute.load_control import LoadControl, Loads

MIB = 2**20


class Controlled:
    def __init__(self, **settings: Any) -> None:
        self.now = 0.0
        self.loads: Loads | Exception = {}
        self.asked: list[list[int]] = []
        self.retargeted: list[dict[int, int]] = []
        self.records: list[dict[str, Any]] = []
        self.control = LoadControl(
            ThrottleControlSettings(**({"produce_latency_ms": 50, "network_bytes_per_s": 100 * MIB,
                                        "interval_s": 10, "min_bytes_per_s": 10 * MIB} | settings)),
            80 * MIB, self._read, self.retargeted.append,
            lambda action, **entry: self.records.append({"action": action, **entry}), lambda: self.now)

    def _read(self, brokers: list[int]) -> Loads:
        self.asked.append(brokers)
        if isinstance(self.loads, Exception):
            raise self.loads
        return self.loads

    def at(self, now: float, brokers: list[int], latency: dict[int, float], network: dict[int, float]
           ) -> dict[int, int]:
        self.now, self.loads = now, {"produce_latency_ms": latency, "network_bytes_per_s": network}
        return self.control.check(brokers)


def test_over_a_line_lowers_step_by_step_to_the_floor_then_below_raises_again() -> None:
    c = Controlled()
    assert c.at(0, [1, 2], {1: 80.0, 2: 5.0}, {1: 10.0 * MIB, 2: 10.0 * MIB}) == {1: 40 * MIB}
    assert c.retargeted == [{1: 40 * MIB}]
    entry = c.records[-1]
    assert entry["action"] == "throttle_lowered" and entry["broker"] == 1 and entry["rate_bytes_per_s"] == 40 * MIB
    assert entry["measured"] == {"produce_latency_ms": 80.0, "network_bytes_per_s": 10.0 * MIB}
    assert entry["lines"] == {"produce_latency_ms": 50.0, "network_bytes_per_s": 100.0 * MIB}
    assert c.at(5, [1, 2], {1: 90.0}, {}) == {} and len(c.asked) == 1  # within the interval: not even asked
    # The network line alone is enough; 40 -> 20 -> 10 (the floor), where it stays.
    assert c.at(10, [1], {1: 10.0}, {1: 120.0 * MIB}) == {1: 20 * MIB}
    assert c.at(20, [1], {1: 60.0}, {1: 10.0 * MIB}) == {1: 10 * MIB}
    assert c.at(30, [1], {1: 60.0}, {1: 10.0 * MIB}) == {}
    # Below the line but above 80 % of it: kept.
    assert c.at(40, [1], {1: 45.0}, {1: 10.0 * MIB}) == {}
    # Below 80 % of every line: raised a step at a time, up to the configured rate.
    assert c.at(50, [1], {1: 30.0}, {1: 10.0 * MIB}) == {1: 20 * MIB}
    assert c.records[-1]["action"] == "throttle_raised"
    assert c.at(60, [1], {1: 30.0}, {1: 10.0 * MIB}) == {1: 40 * MIB}
    assert c.at(70, [1], {1: 30.0}, {1: 10.0 * MIB}) == {1: 80 * MIB}
    assert c.at(80, [1], {1: 30.0}, {1: 10.0 * MIB}) == {}


def test_a_lowered_broker_is_still_asked_for_after_its_moves_finish_so_it_is_raised_again() -> None:
    c = Controlled()
    c.at(0, [3], {3: 99.0}, {3: 0.0})
    assert c.at(10, [], {3: 1.0}, {3: 0.0}) == {3: 80 * MIB} and c.asked[-1] == [3]
    assert c.at(20, [], {}, {}) == {} and len(c.asked) == 2  # nobody copying, nobody lowered: nothing to ask


def test_missing_figures_or_prometheus_down_keep_the_rates_and_say_so() -> None:
    c = Controlled()
    c.at(0, [1], {1: 99.0}, {1: 0.0})
    # No latency series for broker 1 (its exporter gone): not raised on half the figures.
    assert c.at(10, [1], {}, {1: 0.0}) == {}
    c.now, c.loads = 20, PrometheusUnreachableError("Prometheus at http://p:9090 is unreachable")
    assert c.control.check([1]) == {}
    assert c.records[-1] == {"action": "load_unknown", "error": "Prometheus at http://p:9090 is unreachable"}
    assert c.retargeted == [{1: 40 * MIB}]


def test_a_line_is_required_and_the_factors_are_shares() -> None:
    with pytest.raises(ValueError, match="no line set"):
        ThrottleControlSettings()
    with pytest.raises(ValueError, match="lower_by"):
        ThrottleControlSettings(network_bytes_per_s="100MiB", lower_by=1.5)
    assert ThrottleControlSettings(network_bytes_per_s="100MiB").network_bytes_per_s == 100 * MIB
