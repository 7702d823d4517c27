"""The time a plan's copies take at the throttle, and the executor's estimate of the time left."""

from __future__ import annotations

from typing import Any

import pytest

from kafka_rebalancer.execute.moves import PartitionMove
from kafka_rebalancer.execute.progress import Progress
from kafka_rebalancer.model.copy_time import CopyBytes, estimate


def test_each_broker_receives_its_new_replicas_and_the_leader_serves_every_copy() -> None:
    moves = [PartitionMove("t", 0, (1, 2), (3, 4), 100, leader=2),  # two copies served by broker 2
             PartitionMove("t", 1, (1, 2), (1, 3), 50, leader=1),
             PartitionMove("t", 2, (5, 6), (6, 5), 10**9, leader=5),  # leadership only: copies nothing
             PartitionMove("t", 3, (6, 1), (6, 4), 30)]  # leader unknown: the first old replica serves
    copies = CopyBytes.of(moves)
    assert dict(copies.received) == {3: 150, 4: 130}
    assert dict(copies.served) == {2: 200, 1: 50, 6: 30}
    assert copies.bottleneck() == (2, "serves", 200)
    assert copies.seconds(20) == 10.0 and copies.seconds(None) is None
    assert CopyBytes.of([]).seconds(20) == 0.0 and CopyBytes.of([]).bottleneck() is None


def test_a_leader_that_is_not_an_old_replica_is_not_believed() -> None:
    # A snapshot leader outside the replicas (a stale row) would serve nothing: the first old replica does.
    assert dict(CopyBytes.of([PartitionMove("t", 0, (1, 2), (1, 3), 10, leader=7)]).served) == {1: 10}


def test_the_estimate_scales_what_is_left_by_the_slowdown_measured_so_far() -> None:
    assert estimate(5.0, 100.0, 98.0).remaining_s == 98.0  # under a twentieth done: the bound alone
    later = estimate(60.0, 100.0, 50.0)  # half the bound took 60 s
    assert later.slowdown == pytest.approx(1.2) and later.remaining_s == pytest.approx(60.0)
    assert later.finish_s == pytest.approx(120.0)
    assert estimate(40.0, 100.0, 50.0).slowdown == pytest.approx(0.8)  # a throttle letting more through


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_progress_records_its_estimate_before_the_first_move_and_at_each_quarter_of_the_bytes() -> None:
    # Broker 9 receives every copy: 8 moves of 100 bytes at 10 bytes/s are 80 s at the throttle.
    moves = [PartitionMove("t", i, (1,), (9,), 100, leader=1) for i in range(8)]
    records: list[dict[str, Any]] = []
    clock = Clock()
    progress = Progress("p", moves, 10, lambda action, **entry: records.append({"action": action, **entry}),
                        clock=clock)
    progress.begin()
    for i, move in enumerate(moves[:6]):
        clock.now = 12.5 * (i + 1)  # each move 12.5 s: 1.25x the throttle's 10 s
        progress.done(move)
        progress.record_due()
    assert [r["done_fraction"] for r in records] == [0.0, 0.25, 0.5, 0.75]
    assert records[0]["bound_s"] == 80.0 and records[0]["remaining_s"] == 80.0
    assert records[1]["slowdown"] == pytest.approx(1.25) and records[1]["finish_s"] == pytest.approx(100.0)
    assert records[3]["remaining_s"] == pytest.approx(25.0)  # two moves left at 1.25x
    assert "about 25s left" in progress.line()


def test_a_resumed_execution_bounds_only_the_moves_left_and_skips_the_quarters_passed() -> None:
    moves = [PartitionMove("t", i, (1,), (9,), 100, leader=1) for i in range(4)]
    records: list[dict[str, Any]] = []
    progress = Progress("p", moves, 10, lambda action, **entry: records.append(entry),
                        completed=[moves[0].key, moves[1].key], clock=Clock())
    progress.begin()
    assert records == [{"done_fraction": 0.5, "done_bytes": 200, "copied_bytes": 0, "elapsed_s": 0.0, "bound_s": 20.0,
                        "remaining_bound_s": 20.0, "remaining_s": 20.0, "slowdown": 1.0, "finish_s": 20.0}]
    progress.done(moves[0])  # an earlier attempt's move reported again changes nothing
    progress.done(moves[2])
    assert [r["done_fraction"] for r in records] == [0.5] and progress.due  # recorded once the bytes are read
    progress.record_due()
    progress.record_due()
    assert [r["done_fraction"] for r in records] == [0.5, 0.75]


def test_unthrottled_the_time_left_is_the_rate_so_far() -> None:
    moves = [PartitionMove("t", i, (1,), (9,), 100) for i in range(4)]
    clock = Clock()
    progress = Progress("p", moves, None, lambda action, **entry: None, clock=clock)
    assert "time left unknown" in progress.line()
    clock.now = 10.0
    progress.done(moves[0])
    assert "about 30s left" in progress.line()


def test_the_bytes_already_copied_by_moves_in_flight_are_not_left() -> None:
    # Two new replicas of 100 bytes: 50 copied of 200 leaves three quarters on each broker it loads.
    move = PartitionMove("t", 0, (1, 2), (3, 4), 100, leader=1)
    copies = CopyBytes.of([move], {move.key: 50})
    assert dict(copies.received) == {3: 75, 4: 75} and dict(copies.served) == {1: 150}
    moves = [PartitionMove("t", i, (1,), (9,), 100, leader=1) for i in range(4)]  # 40 s at 10 bytes/s
    clock = Clock()
    progress = Progress("p", moves, 10, lambda action, **entry: None, clock=clock)
    clock.now = 15.0
    progress.copying({moves[0].key: 60, moves[1].key: 60})  # 12 s of the bound done in 15 s
    figures = progress.estimate()
    assert figures is not None and figures.remaining_bound_s == pytest.approx(28.0)
    assert figures.slowdown == pytest.approx(1.25) and figures.remaining_s == pytest.approx(35.0)
    progress.done(moves[0])
    assert progress.copied == {moves[1].key: 60}


def test_the_estimate_runs_at_the_slowdown_of_the_newer_half_of_the_time_not_the_slow_start() -> None:
    moves = [PartitionMove("t", i, (1,), (9,), 100, leader=1) for i in range(8)]  # 80 s at 10 bytes/s
    clock = Clock()
    progress = Progress("p", moves, 10, lambda action, **entry: None, clock=clock)
    # Half the throttle for the first 20 s (the tuner's first window), then the throttle.
    for clock.now, copied in ((10.0, 50), (20.0, 100), (30.0, 200), (40.0, 300)):
        progress.copying({moves[0].key: min(copied, 100), moves[1].key: min(max(copied - 100, 0), 100),
                          moves[2].key: max(copied - 200, 0)})
    figures = progress.estimate()
    # Since the start: 30 s of the bound in 40 s, 1.33x, a finish at 107 s; the last 20 s ran at the throttle.
    assert figures is not None and figures.slowdown == pytest.approx(1.0)
    assert figures.finish_s == pytest.approx(90.0)
    assert progress.reads[0] == (20.0, 70.0)  # the reads before the newer half's start are dropped
    clock.now = 60.0  # nothing copied since 40 s: a stall shows at once (10 s of the bound in the last 30 s)
    later = progress.estimate()
    assert later is not None and later.slowdown == pytest.approx(3.0)


def test_a_quarter_reached_inside_one_large_move_is_recorded_with_its_copied_bytes() -> None:
    moves = [PartitionMove("t", 0, (1,), (9,), 800, leader=1), PartitionMove("t", 1, (1,), (9,), 200, leader=1)]
    records: list[dict[str, Any]] = []
    progress = Progress("p", moves, 10, lambda action, **entry: records.append(entry), clock=Clock())
    progress.begin()
    progress.copying({moves[0].key: 300})  # 30 % of the bytes, the large move still in flight
    assert progress.due
    progress.record_due()
    assert (records[-1]["done_fraction"], records[-1]["done_bytes"], records[-1]["copied_bytes"]) == (0.3, 0, 300)
    progress.copying({moves[0].key: 550})
    progress.record_due()
    assert [r["done_fraction"] for r in records] == [0.0, 0.3, 0.55]



def test_what_is_left_runs_no_faster_than_the_throttle_however_fast_the_first_part_ran() -> None:
    burst = estimate(elapsed_s=10.0, bound_s=100.0, remaining_bound_s=60.0)  # 40 s of bound done in 10 s
    assert burst.slowdown == pytest.approx(0.25) and burst.remaining_s == pytest.approx(60.0)
    slow = estimate(elapsed_s=60.0, bound_s=100.0, remaining_bound_s=60.0)
    assert slow.slowdown == pytest.approx(1.5) and slow.remaining_s == pytest.approx(90.0)
