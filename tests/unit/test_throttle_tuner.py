"""The throttle tuner holds the copies' measured rate at the configured throttle: it raises the rate Kafka is given
at the end that holds the copies back, lowers it where they went over, and leaves alone what says nothing."""

from __future__ import annotations

from typing import Any

from kafka_rebalancer.execute.moves import PartitionMove
from kafka_rebalancer.execute.throttle_tuner import ThrottleTuner

A = PartitionMove("t", 0, (1,), (9,), 1000, leader=1)
B = PartitionMove("t", 1, (2,), (9,), 1000, leader=2)


class Tuned:
    def __init__(self) -> None:
        self.now = 0.0
        self.applied: list[dict[int, tuple[int, int]]] = []
        self.records: list[dict[str, Any]] = []
        self.tuner = ThrottleTuner(10, self.applied.append,
                                   lambda action, **entry: self.records.append({"action": action, **entry}),
                                   lambda: self.now)

    def at(self, now: float, in_flight: list[PartitionMove], copied: dict, finished: tuple = ()) -> dict:
        self.now = now
        return self.tuner.observe(in_flight, copied, list(finished))


def test_the_receiving_end_that_holds_the_copies_back_is_raised_then_lowered_when_it_goes_over() -> None:
    tuned = Tuned()
    assert tuned.at(0, [A, B], {}) == {}  # the first read only sets the start
    # Broker 9 received 74 bytes in 10 s (7.4/s of 10): raised by 10/7.4. Its leaders served 3.7/s each, held back
    # by broker 9: left alone.
    assert tuned.at(10, [A, B], {A.key: 37, B.key: 37}) == {(9, "receives"): 14}
    assert tuned.applied == [{9: (10, 14)}]  # (leader rate, follower rate)
    assert tuned.records[-1]["rates"] == {"9 receives": 14} and tuned.records[-1]["measured"] == {"9 receives": 7}
    # Then 120 bytes in 10 s: over by a fifth, lowered.
    assert tuned.at(20, [A, B], {A.key: 97, B.key: 97}) == {(9, "receives"): 12}
    # Within 5 % of the rate: left as it is.
    assert tuned.at(30, [A, B], {A.key: 147, B.key: 148}) == {}


def test_a_move_finished_between_reads_counts_its_bytes_and_a_side_short_of_work_is_not_tuned() -> None:
    tuned = Tuned()
    tuned.at(0, [A, B], {A.key: 950, B.key: 980})
    # A finished (its last 50 bytes), B copied 10: 6/s into broker 9, but it had only 70 bytes left for 10 s at
    # 10/s: its rate says nothing of the quota.
    assert tuned.at(10, [B], {B.key: 990}, finished=(A,)) == {}
    tuned.at(20, [A, B], {A.key: 800, B.key: 800})
    # With work enough, a finished move's last bytes count: A's 200 and B's 20 in 10 s, 22/s: lowered.
    assert tuned.at(30, [B], {B.key: 820}, finished=(A,))[(9, "receives")] == 5


def test_the_rate_given_stays_within_twice_the_configured_one_either_way() -> None:
    tuned = Tuned()
    tuned.at(0, [A, B], {})
    assert tuned.at(10, [A, B], {A.key: 5, B.key: 5}) == {(9, "receives"): 20}
    tuned = Tuned()
    tuned.at(0, [A, B], {})
    # 80/s into broker 9, 40/s out of each leader: every side over the rate is lowered.
    assert tuned.at(10, [A, B], {A.key: 400, B.key: 400}) == {(9, "receives"): 5, (1, "serves"): 5,
                                                             (2, "serves"): 5}


def test_a_lowered_target_scales_what_kafka_is_given_and_the_tuner_holds_the_new_one() -> None:
    tuned = Tuned()
    tuned.at(0, [A, B], {})
    tuned.at(10, [A, B], {A.key: 37, B.key: 37})  # broker 9's follower rate raised to 14 for a target of 10
    tuned.tuner.retarget({9: 5})
    # Kafka is given half of both sides: the shortfall measured (10 -> 14) stays.
    assert tuned.applied[-1] == {9: (5, 7)} and tuned.tuner.target(9) == 5
    # 5/s into broker 9 now meets its target: left alone; brokers 1 and 2 keep the configured rate.
    assert tuned.at(20, [A, B], {A.key: 62, B.key: 62}) == {}
    assert tuned.tuner.target(1) == 10
