"""The throttle tuner makes up Kafka's replication quota shortfall, measured over longer than the quota's memory, at
every quota a copy crosses, without the copies averaging over the configured rate and without ever giving Kafka less
than it: driven directly, and on a model of Kafka's quota (below) against what Kafka alone delivers."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest

from kafka_rebalancer.execute.moves import PartitionMove
from kafka_rebalancer.execute.throttle_tuner import MAX_BOOST, ThrottleTuner

MiB, GiB = 2**20, 2**30
RATE = 50 * MiB
A = PartitionMove("t", 0, (1,), (9,), 10_000, leader=1)
B = PartitionMove("t", 1, (2,), (9,), 10_000, leader=2)


class Tuned:
    def __init__(self, rate: int = 100) -> None:
        self.now = 0.0
        self.applied: list[dict[int, tuple[int, int]]] = []
        self.records: list[dict[str, Any]] = []
        self.tuner = ThrottleTuner(rate, self.applied.append,
                                   lambda action, **entry: self.records.append({"action": action, **entry}),
                                   lambda: self.now)

    def at(self, now: float, in_flight: list[PartitionMove], copied: dict, finished: tuple = ()) -> dict:
        self.now = now
        return self.tuner.observe(in_flight, copied, list(finished))

    def given(self) -> list[int]:
        return [r for applied in self.applied for pair in applied.values() for r in pair]


def test_a_shortfall_is_made_up_once_measured_over_the_quotas_window_whole_then_half_way_and_at_both_ends() -> None:
    tuned = Tuned()
    assert tuned.at(0, [A], {}) == {}  # the first read only sets the start
    # 90/s of 100 for 5 s, then 10 s: shorter than Kafka's quota window (11 s), nothing changes.
    assert tuned.at(5, [A], {A.key: 450}) == {}
    assert tuned.at(10, [A], {A.key: 900}) == {}
    # 15 s at 90/s: the first change makes up the whole shortfall, 100 / 0.9. Broker 1's leader rate is in the
    # same copy's path: it is given as much (the old tuner raised the receiver alone).
    assert tuned.at(15, [A], {A.key: 1350}) == {(9, "receives"): 111, (1, "serves"): 111}
    assert tuned.applied == [{1: (111, 100), 9: (100, 111)}]  # (leader rate, follower rate)
    assert tuned.records[-1]["rates"] == {"1 serves": 111, "9 receives": 111}
    assert tuned.records[-1]["measured"] == {"1 serves": 90, "9 receives": 90}
    # The next change waits for a window at the new rate: a change lets a burst through or stops the copies.
    assert tuned.at(20, [A], {A.key: 1800}) == {}
    # Still 90/s at 111 given: 0.81 of it; half the way from 111 to 100 / 0.81 (123) from now on.
    assert tuned.at(30, [A], {A.key: 2700}) == {(9, "receives"): 117, (1, "serves"): 117}


def test_a_side_over_the_rate_is_lowered_but_never_below_it_and_not_raised_while_it_averaged_over() -> None:
    tuned = Tuned()
    tuned.at(0, [A], {})
    # 180/s for 15 s at the configured rate: a burst the quota pays back itself; no cut below 100.
    assert tuned.at(15, [A], {A.key: 2700}) == {}
    # Then 40/s for 15 s, but 110/s on average since the copy began: not raised.
    assert tuned.at(30, [A], {A.key: 3300}) == {}
    tuned = Tuned()
    tuned.at(0, [A], {})
    tuned.at(15, [A], {A.key: 1275})  # 85/s: raised to 100 / 0.85
    tuned.at(30, [A], {A.key: 1275 + 15 * 118})  # then all of the 118/s given: over the rate, lowered half way
    tuned.at(45, [A], {A.key: 3045 + 15 * 120})  # 120/s: a burst; lowered again, to no less than 100
    assert [applied[9][1] for applied in tuned.applied] == [118, 109, 104]
    assert min(tuned.given()) == 100


def test_the_end_that_holds_a_copy_back_passes_its_factor_to_the_other_end() -> None:
    tuned = Tuned()
    tuned.at(0, [A, B], {})
    # Broker 9 received 85/s of 100 from leaders 1 and 2 serving 42.5/s each: broker 9 holds both copies back (its
    # efficiency is the highest); its leaders get its factor.
    changed = tuned.at(15, [A, B], {A.key: 637, B.key: 638})
    assert changed == {(9, "receives"): 118, (1, "serves"): 118, (2, "serves"): 118}


def test_the_rate_given_stays_within_max_boost() -> None:
    tuned = Tuned(1000)
    big = PartitionMove("t", 2, (1,), (9,), 10**6, leader=1)
    tuned.at(0, [big], {})
    for i in range(1, 6):
        tuned.at(15 * i, [big], {big.key: 1500 * i})  # a tenth of the rate
    # MAX_BOOST at once, and no further whatever the shortfall.
    assert [applied[9][1] for applied in tuned.applied] == [MAX_BOOST * 1000]
    assert max(tuned.given()) <= MAX_BOOST * 1000


def test_a_move_finished_between_reads_counts_its_bytes_and_a_side_short_of_work_is_not_tuned() -> None:
    tuned = Tuned()
    tuned.at(0, [A, B], {A.key: 9500, B.key: 9800})
    # A finished (its last 500 bytes), B copied 100: 40/s into broker 9 for 15 s, but it had only 700 bytes left
    # for 15 s at 100/s: its rate says nothing of the quota.
    assert tuned.at(15, [B], {B.key: 9900}, finished=(A,)) == {}
    assert not tuned.tuner.measures
    # With a move still to start on broker 9 (the executor starts it as B finishes) it had the work: measured.
    c = PartitionMove("t", 2, (1,), (9,), 10_000, leader=1)
    tuned = Tuned()
    tuned.tuner.observe([A, B], {A.key: 9500, B.key: 9800}, [], upcoming=[c])
    tuned.now = 15
    tuned.tuner.observe([B], {B.key: 9900}, [A], upcoming=[c])
    assert tuned.tuner.measures[(9, "receives")].copied == 600
    tuned = Tuned()
    tuned.at(0, [A, B], {A.key: 5000, B.key: 5000})
    tuned.at(10, [A, B], {A.key: 5200, B.key: 5200})
    # With work enough, a finished move's last bytes count: A's 4800 and B's 100.
    tuned.at(20, [B], {B.key: 5300}, finished=(A,))
    assert tuned.tuner.measures[(9, "receives")].copied == 400 + 4900


def test_a_lowered_target_scales_what_kafka_is_given_and_the_tuner_holds_the_new_one() -> None:
    tuned = Tuned()
    tuned.at(0, [A, B], {})
    tuned.at(15, [A, B], {A.key: 637, B.key: 638})  # broker 9's follower rate raised to 118 for a target of 100
    tuned.tuner.retarget({9: 50})
    # Kafka is given half: the shortfall measured (100 -> 118) stays.
    assert tuned.applied[-1] == {9: (50, 59)} and tuned.tuner.target(9) == 50
    assert tuned.tuner.target(1) == 100


# -- on a model of Kafka's replication quota --------------------------------------------------------------------------
class SimpleRate:
    """Kafka's SimpleRate over 11 one-second samples: a sample starts at a record a second or more after the last
    one began, a sample 11 s old is dropped, and the rate is over the time since the oldest sample began."""

    def __init__(self) -> None:
        self.samples: list[list[float]] = []  # [start, bytes]

    def record(self, n: int, now: float) -> None:
        if not self.samples or now - self.samples[-1][0] >= 1.0:
            self.samples.append([now, 0])
            del self.samples[:-12]
        self.samples[-1][1] += n

    def over(self, bound: int, now: float) -> bool:
        self.samples = [s for s in self.samples if now - s[0] < 11.0]
        return bool(self.samples) and sum(n for _, n in self.samples) / max(now - self.samples[0][0], 1.0) > bound


class Quotas:
    """Brokers copying under Kafka's replication quotas, in steps of 50 ms: one fetcher per source and receiver; a
    fetcher over its follower quota backs off (replica.fetch.backoff.ms), a leader over its leader quota answers
    empty after replica.fetch.wait.max.ms (500 ms); else a fetch takes 50 ms of the line's speed."""

    def __init__(self, moves: list[PartitionMove], backoff_s: float, line: int = 170 * MiB, step: float = 0.05):
        self.moves, self.backoff_s, self.step, self.chunk = moves, backoff_s, step, int(line * step)
        self.limits: dict[int, tuple[int, int]] = defaultdict(lambda: (RATE, RATE))
        self.applied: list[dict[int, tuple[int, int]]] = []
        self.leader: dict[int, SimpleRate] = defaultdict(SimpleRate)
        self.follower: dict[int, SimpleRate] = defaultdict(SimpleRate)
        self.copied = {m.key: 0 for m in moves}
        self.received: dict[int, int] = defaultdict(int)
        self.served: dict[int, int] = defaultdict(int)
        self.resume: dict[tuple[int, int], float] = defaultdict(float)
        self.now = 0.0

    def apply(self, rates: dict[int, tuple[int, int]]) -> None:
        self.applied.append(dict(rates))
        self.limits.update(rates)

    def tick(self) -> None:
        for source, receiver in sorted({(m.leader, m.new[0]) for m in self.moves}):
            fetching = [m for m in self.moves
                        if (m.leader, m.new[0]) == (source, receiver) and self.copied[m.key] < m.size_bytes]
            if not fetching or self.now < self.resume[(source, receiver)]:
                continue
            if self.follower[receiver].over(self.limits[receiver][1], self.now):
                self.resume[(source, receiver)] = self.now + self.backoff_s
                continue
            if self.leader[source].over(self.limits[source][0], self.now):
                self.resume[(source, receiver)] = self.now + 0.5
                continue
            for move in fetching:
                n = min(self.chunk // len(fetching), move.size_bytes - self.copied[move.key])
                self.copied[move.key] += n
                self.received[receiver] += n
                self.served[source] += n
                self.follower[receiver].record(n, self.now)
                self.leader[source].record(n, self.now)
        self.now = round(self.now + self.step, 6)


def on_quotas(moves: list[PartitionMove], tuned: bool, backoff_s: float = 1.0, seconds: float = 240.0) -> Quotas:
    """The moves copied for `seconds` under Kafka's quotas at RATE, the tuner (or none) reading every 5 s as the
    executor does."""
    kafka = Quotas(moves, backoff_s)
    tuner = ThrottleTuner(RATE, kafka.apply, lambda *_, **__: None, lambda: kafka.now) if tuned else None
    read_at = 0.0
    while kafka.now < seconds:
        if tuner is not None and kafka.now >= read_at:
            tuner.observe(moves, kafka.copied, [])
            read_at += 5.0
        kafka.tick()
    return kafka


def share(copied: dict[int, int], seconds: float = 240.0) -> dict[int, float]:
    return {b: n / (RATE * seconds) for b, n in copied.items()}


TWO_SOURCES = [PartitionMove("bulk", 0, (1,), (9,), 40 * GiB, leader=1),
               PartitionMove("bulk", 1, (2,), (9,), 40 * GiB, leader=2)]
ONE_SOURCE = TWO_SOURCES[:1]
TWO_RECEIVERS = [PartitionMove("bulk", 0, (1,), (8,), 40 * GiB, leader=1),
                 PartitionMove("bulk", 1, (1,), (9,), 40 * GiB, leader=1)]


# A follower pausing 3 s at each stop: about 77 % of the rate gets through, as on the execute bench's busy 2-core
# machine (75 %, BENCHMARKS.md), where the old tuner's half steps up to 1.25x left most of the execution short.
@pytest.mark.parametrize("backoff_s", [1.0, 3.0], ids=["default backoff", "busy machine"])
@pytest.mark.parametrize("moves", [TWO_SOURCES, ONE_SOURCE], ids=["two sources", "one source"])
def test_on_kafkas_quota_the_copies_average_closer_to_the_rate_and_not_above_it(moves: list[PartitionMove],
                                                                                backoff_s: float) -> None:
    alone = share(on_quotas(moves, tuned=False, backoff_s=backoff_s).received)[9]
    kafka = on_quotas(moves, tuned=True, backoff_s=backoff_s)
    tuned = share(kafka.received)[9]
    assert alone < 0.94  # Kafka's quota at its default backoff: about 92 % of the rate
    assert 0.97 <= tuned <= 1.02 and tuned - alone >= 0.04
    # Never less than the configured rate given (a cut after a burst stops every copy while the quota drains),
    # never more than MAX_BOOST of it.
    rates = [r for applied in kafka.applied for pair in applied.values() for r in pair]
    assert min(rates) >= RATE and max(rates) <= MAX_BOOST * RATE
    # The first change makes up the first window's shortfall whole (within 5 %: the window holds the start).
    first = kafka.applied[0][9][1] / RATE
    first_window = on_quotas(moves, tuned=False, backoff_s=backoff_s, seconds=15.0).received
    assert first == pytest.approx(min(MAX_BOOST, 1 / share(first_window, 15.0)[9]), rel=0.05)


def test_on_kafkas_quota_both_quotas_of_a_copy_are_raised() -> None:
    """One leader, one receiver: two quotas in series. Raising the receiver's alone leaves the leader's binding."""
    kafka = on_quotas(ONE_SOURCE, tuned=True)
    given = {}
    for applied in kafka.applied:
        given.update(applied)
    assert given[1][0] > RATE and given[9][1] > RATE  # broker 1's leader rate, broker 9's follower rate


def test_on_kafkas_quota_a_leader_serving_two_receivers_is_held_to_its_rate() -> None:
    alone = share(on_quotas(TWO_RECEIVERS, tuned=False).served)[1]
    tuned = share(on_quotas(TWO_RECEIVERS, tuned=True).served)[1]
    assert alone < 0.97 and alone < tuned <= 1.02


def test_on_kafkas_quota_with_a_short_follower_backoff_the_tuner_makes_up_the_little_left_once() -> None:
    """replica.fetch.backoff.ms=100 (README): Kafka's own quota delivers about 98 %; little to make up."""
    kafka = on_quotas(TWO_SOURCES, tuned=True, backoff_s=0.1)
    given = [r for applied in kafka.applied for pair in applied.values() for r in pair]
    assert len(kafka.applied) <= 1 and max(given, default=RATE) <= 1.03 * RATE
    assert 0.98 <= share(kafka.received)[9] <= 1.01
