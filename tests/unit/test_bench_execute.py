"""The execution bench's figures (bench/execute_figures.py) on small hand-written execution logs: efficiency against
the throttle-bound minimum with and without the leadership batches, the recorded estimates against the real finish,
the ISR gate's holds, the bottleneck broker's idle time, percentiles and windows of the traffic, the targets, and the
brokers' operator tuning in their properties and the report's header."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bench.execute import BROKER_TUNING, RESULTS, choose_throttle, report_block
from bench.execute_figures import (
    estimate_errors,
    execution_figures,
    gate_intervals,
    intake,
    last_attempt,
    leadership_seconds,
    percentile,
    table,
    targets,
    union_seconds,
    window,
)
from kafka_rebalancer.execute.moves import PartitionMove

MiB = 2**20
T0 = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


def at(t: float, action: str, key: tuple[str, int] | None = None, **details: Any) -> dict[str, Any]:
    """An entry as ExecutionLog.append writes it, t seconds after T0."""
    entry: dict[str, Any] = {"ts": (T0 + timedelta(seconds=t)).isoformat(timespec="milliseconds"), "pool": "p",
                             "plan_hash": "h", "action": action}
    if key is not None:
        entry["topic"], entry["partition"] = key
    return {**entry, **details}


# Broker 3 receives 1,000 MiB (the bound at 10 MiB/s: 100 s); partition 1 only changes its leader.
MOVES = [PartitionMove("t", 0, (1, 2), (3, 2), 600 * MiB, leader=1),
         PartitionMove("t", 2, (2, 1), (3, 1), 400 * MiB, leader=2),
         PartitionMove("t", 1, (1, 2), (2, 1), 5 * MiB, leader=1)]


def a_run(offset: float = 0.0) -> list[dict[str, Any]]:
    """Leadership 0.5 -> 4.5 s, data moves 4.5 -> 60 and 64 -> 118 s (4 s with broker 3 idle), finished at 120 s."""
    return [at(offset + t, *rest[:2], **(rest[2] if len(rest) > 2 else {})) for t, *rest in [
        (0.0, "execute_started", None, {"moves": 3}),
        (0.0, "estimate", None, {"done_fraction": 0.0, "finish_s": 100.0}),
        (0.2, "throttle_set", None),
        (0.5, "started", ("t", 1), {"leadership_only": True}),
        (2.5, "completed", ("t", 1)),
        (4.5, "started", ("t", 0), {"leadership_only": False}),
        (60.0, "completed", ("t", 0)),
        (60.0, "estimate", None, {"done_fraction": 0.6, "finish_s": 110.0}),
        (64.0, "started", ("t", 2), {"leadership_only": False}),
        (118.0, "completed", ("t", 2)),
        (118.0, "estimate", None, {"done_fraction": 1.0, "finish_s": 118.0}),
        (119.0, "leader_election", None),
        (120.0, "execute_finished", None, {"completed": 3})]]


def test_efficiency_is_the_wall_time_over_the_throttle_bound_with_and_without_the_leadership_batches() -> None:
    figures = execution_figures(a_run(), MOVES, 10 * MiB)
    assert figures["bound_s"] == 100.0 and figures["wall_s"] == 120.0
    assert figures["leadership_s"] == 4.0  # first leadership start to the first data start
    assert figures["efficiency"] == 1.2 and figures["efficiency_without_leadership"] == 1.16
    assert figures["bottleneck"] == {"broker": 3, "side": "receives", "bytes": 1000 * MiB}
    assert figures["data_phase_s"] == 113.5 and figures["bottleneck_idle_s"] == 4.0
    assert figures["before_first_data_s"] == 4.5 and figures["after_last_data_s"] == 2.0
    assert figures["efficiency_at_kafka_rate"] is None
    # Kafka alone copies at 8 MiB/s under this throttle: at that rate the bound is 125 s, the executor took 120.
    assert execution_figures(a_run(), MOVES, 10 * MiB, 8 * MiB)["efficiency_at_kafka_rate"] == 0.96


def test_a_run_without_leadership_changes_has_none_to_leave_out() -> None:
    entries = [e for e in a_run() if e.get("topic") != "t" or e["partition"] != 1]
    assert leadership_seconds(entries) == 0.0
    figures = execution_figures(entries, MOVES[:2], 10 * MiB)
    assert figures["efficiency"] == figures["efficiency_without_leadership"] == 1.2


def test_each_estimate_is_judged_at_its_point_against_the_real_finish() -> None:
    errors = estimate_errors(a_run(), 120.0)
    assert set(errors) == {"0", "50", "75"}  # one move passed 25 % and 50 %: one estimate, at 50 %
    assert errors["0"]["error"] == pytest.approx(100 / 120 - 1, abs=1e-4)
    assert errors["50"]["error"] == pytest.approx(110 / 120 - 1, abs=1e-4) and errors["50"]["done_fraction"] == 0.6
    assert errors["75"]["error"] == pytest.approx(118 / 120 - 1, abs=1e-4)


def test_an_unthrottled_estimate_has_no_error_and_a_resumed_run_starts_at_start() -> None:
    entries = [at(0, "estimate", done_fraction=0.3), at(5, "estimate", done_fraction=0.5, finish_s=20.0)]
    assert estimate_errors(entries, 10.0) == {
        "start": {"done_fraction": 0.3, "elapsed_s": None, "finish_s": None, "error": None},
        "50": {"done_fraction": 0.5, "elapsed_s": None, "finish_s": 20.0, "error": 1.0}}


def test_a_resumed_run_is_measured_from_its_last_attempt() -> None:
    first = [*a_run()[:6], at(10, "run_timeout")]
    entries = first + a_run(offset=1000)
    assert last_attempt(entries)[0]["ts"] == a_run(offset=1000)[0]["ts"]
    assert execution_figures(entries, MOVES, 10 * MiB)["wall_s"] == 120.0


def test_an_unfinished_execution_has_no_figures() -> None:
    with pytest.raises(ValueError, match="did not finish"):
        execution_figures(a_run()[:-1], MOVES, 10 * MiB)
    with pytest.raises(ValueError, match="no execute_started"):
        last_attempt(a_run()[1:])


def test_the_isr_gate_holds_from_waiting_to_recovered_or_timeout_and_an_open_one_to_the_end() -> None:
    entries = [at(0, "execute_started"), at(10, "waiting_for_isr", count=2), at(25, "isr_recovered"),
               at(50, "waiting_for_isr", count=1), at(60, "isr_wait_timeout"), at(70, "waiting_for_isr"),
               at(75, "cancel_observed")]
    holds = gate_intervals(entries)
    assert [(round(b - a, 3)) for a, b in holds] == [15.0, 10.0, 5.0]
    run = a_run()
    run.insert(7, at(61, "waiting_for_isr", count=1))
    run.insert(8, at(63.5, "isr_recovered"))
    figures = execution_figures(sorted(run, key=lambda e: e["ts"]), MOVES, 10 * MiB)
    assert figures["isr_gate_s"] == 2.5 and figures["isr_gate_holds"] == 1


def test_the_throttle_tuners_changes_are_counted_with_the_first_and_the_most_it_gave() -> None:
    run = a_run()
    assert execution_figures(run, MOVES, 10 * MiB)["throttle_tuned"] == {"changes": 0, "first_s": None,
                                                                          "max_given_bytes_per_s": None}
    run[7:7] = [at(20, "throttle_tuned", rates={"3 receives": 15 * MiB}),
                at(30, "throttle_tuned", rates={"3 receives": 12 * MiB, "1 serves": 11 * MiB})]
    assert execution_figures(run, MOVES, 10 * MiB)["throttle_tuned"] == {"changes": 2, "first_s": 20.0,
                                                                          "max_given_bytes_per_s": 15 * MiB}


def test_union_seconds_counts_overlaps_once_and_only_inside_the_window() -> None:
    assert union_seconds([(0, 10), (5, 15), (20, 30), (22, 25)], 0, 100) == 25
    assert union_seconds([(0, 10), (5, 15)], 8, 12) == 4
    assert union_seconds([], 0, 10) == 0


def test_percentile_is_the_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 99) == 99.0 and percentile(values, 100) == 100.0 and percentile(values, 50) == 50.0
    assert percentile([7.0], 99) == 7.0 and percentile([], 99) is None
    assert percentile([1.0] * 989 + [5.0] * 11, 99) == 5.0  # 11 slow of 1,000: past the 99th percentile


def test_a_window_takes_the_samples_of_its_own_time() -> None:
    samples = [(t, 0.001 * t) for t in range(100)]  # (wall time, seconds)
    assert window(samples, 10, 20) == {"n": 10, "p99_ms": 19.0, "max_ms": 19.0}
    assert window(samples, 200, 300) == {"n": 0, "p99_ms": None, "max_ms": None}


def result_row(efficiency: float, errors: dict[str, float | None]) -> dict[str, Any]:
    traffic = {"before": {"n": 10, "p99_ms": 5.0, "max_ms": 9.0}, "during": {"n": 10, "p99_ms": 50.0, "max_ms": 90.0}}
    return {"efficiency": efficiency, "efficiency_without_leadership": efficiency, "data_moves": 3,
            "leadership_moves": 1, "moved_bytes": 2**30, "bound_s": 10.0, "wall_s": 10 * efficiency,
            "leadership_s": 0.0, "isr_gate_s": 0.0, "isr_gate_holds": 0,
            "bottleneck": {"broker": 4, "side": "receives", "bytes": 2**30}, "bottleneck_idle_s": 1.0,
            "data_phase_s": 9.0, "estimates": {p: {"error": e} for p, e in errors.items()},
            "producer": traffic, "consumer": traffic}


def test_the_targets_hold_efficiency_and_every_estimate_from_25_percent_on() -> None:
    results = {"orders": {
        "smallest_first": result_row(1.1, {"0": -0.5, "25": 0.19, "50": -0.2, "75": 0.05}),  # 0 % is not judged
        "largest_first": result_row(1.16, {"0": 0.0, "25": 0.21, "75": 0.0}),
        "most_loaded_first": result_row(1.0, {"0": 0.0}),  # no estimate from 25 % on: not met
        "plan": {"error": "kafka-rebalancer execute exited 1"}}}
    results["orders"]["largest_first"]["other_benchmarks"] = ["bench.shapes"]
    results["orders"]["smallest_first"]["throttle_tuned"] = {"changes": 2, "first_s": 20.4,
                                                             "max_given_bytes_per_s": 70 * 2**20}
    assert [met for _, met in targets(results)] == [True, True, False, False, True, False, False]
    texts = [text for text, _ in targets(results)]
    assert texts[1] == "smallest_first estimate within ±20% from 25 % on (25 %: +19%, 50 %: -20%, 75 %: +5%)"
    assert "no estimate recorded" in texts[5] and texts[6].startswith("plan failed")
    rendered = table(results)
    assert rendered.count("\n") == 5 and "| smallest_first | 3 / 1 | 1.00 |" in rendered
    assert "| 2 (20, 70) |" in rendered
    assert "| largest_first (while bench.shapes ran) |" in rendered and "| 1.1 / 1.1 / – |" in rendered
    assert "-50% / +19% / -20% / +5%" in rendered and "5 → 50" in rendered and "failed: kafka-rebalancer" in rendered


def test_the_throttle_is_a_third_of_the_machine_rate_at_most_and_not_above_the_default() -> None:
    assert choose_throttle(750 * MiB, None) == 50 * MiB  # the product's default throttle
    assert choose_throttle(100 * MiB, None) == 33 * MiB  # a third, rounded down to a MiB/s
    assert choose_throttle(750 * MiB, 20) == 20 * MiB


def test_the_receiving_brokers_intake_is_its_copying_rate_and_the_seconds_it_stalled() -> None:
    # 10 MiB/s for 10 s, nothing for 4 s, 10 MiB/s for 6 s, then flat for 5 s (the executor noticing and finishing).
    sizes = [0] + [10 * i for i in range(1, 11)] + [100] * 4 + [100 + 10 * i for i in range(1, 7)] + [160] * 5
    samples = [(1000.0 + t, float(v * MiB)) for t, v in enumerate(sizes)]
    copied = intake(samples, 1000.0, 1000.0 + len(sizes) - 1, 10 * MiB)
    assert copied is not None and copied["bytes"] == 160 * MiB
    assert copied["copy_s"] == 20.0 and copied["stalled_s"] == 4.0 and copied["done_before_end_s"] == 5.0
    assert copied["rate_bytes_per_s"] == round(0.99 * 160 * MiB / 20)
    assert copied["timeline_mib_per_s"] == [10.0, 10.0, 2.0, 10.0, 0.0]
    assert intake(samples, 5000.0, 6000.0, 10 * MiB) is None


def test_the_brokers_operator_tuning_is_in_their_properties_and_the_reports_header(tmp_path: Any) -> None:
    from tools.local_kafka import ClusterState, LocalKafkaCluster, Node

    nodes = [Node(0, "controller", 9000, None), Node(1, "broker", 9001, "a")]
    tuned = ClusterState("bench", "id", "4", nodes, broker_configs=BROKER_TUNING)
    properties = LocalKafkaCluster("bench", tmp_path)._properties(tuned, nodes[1])
    assert "replica.fetch.backoff.ms=100\n" in properties and "replica.fetch.wait.max.ms=100\n" in properties
    assert "replica.fetch" not in LocalKafkaCluster("bench", tmp_path)._properties(tuned, nodes[0])  # the controller
    results = json.loads(RESULTS.read_text())
    results["cluster"]["broker_configs"] = {}  # Kafka's defaults (--kafka-fetch-defaults, or results before them)
    assert "Operator tuning: none" in report_block(results).split("\n")[3]
    results["cluster"]["broker_configs"] = BROKER_TUNING
    header = report_block(results).split("\n")[3]
    assert "Operator tuning: brokers started with replica.fetch.backoff.ms=100, replica.fetch.wait.max.ms=100" in header
