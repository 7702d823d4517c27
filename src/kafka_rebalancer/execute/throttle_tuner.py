"""The throttle's rate held as measured: Kafka's replication quota lets throttled copies run below the rate it is
given (on the execute bench's cluster 53 % of it for one partition, 74 % for several: the quota's windows stop a
follower's fetches for longer than its overshoot), so a plan took 1.4x its throttle-bound minimum. Each time the
executor reads the copies' bytes, the tuner works out each broker's copy rate since the last read (bytes received,
and served as the leader of copies, each side apart: Kafka's leader and follower rates) and, for a side copying the
whole time, scales the rate Kafka is given by how far the measured one fell short of or went over the configured
rate, within MAX_BOOST times it either way. The configured rate is what the copies run at; what Kafka is given is
in the execution log (`throttle_tuned`). A broker's rate to hold may be lowered for a while (`retarget`: the
throttle control from measured load); what Kafka is given moves with it."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kafka_rebalancer.model.copy_time import RECEIVES, SERVES, CopyBytes, CopyingMove, copy_loads
from kafka_rebalancer.model.reassignment import Key

MAX_BOOST = 2.0
# Within this share of the configured rate a broker's rate is left as it is (the measure is a few reads' worth).
TOLERANCE = 0.05


Side = tuple[int, str]  # (broker, RECEIVES or SERVES): a follower or a leader rate


class ThrottleTuner:
    def __init__(self, rate_bytes_per_s: int, apply: Callable[[dict[int, tuple[int, int]]], None],
                 record: Callable[..., Any], clock: Callable[[], float]) -> None:
        """`apply`: per broker, the (leader, follower) rates to give Kafka."""
        self.rate, self.apply, self.record, self.clock = rate_bytes_per_s, apply, record, clock
        self.targets: dict[int, int] = {}  # the rates to hold, where not the configured one
        self.given: dict[Side, int] = {}  # the rates Kafka has, where not the target
        self.last: tuple[float, dict[Key, int], dict[Side, int]] | None = None  # time, copied, bytes left per side

    def observe(self, in_flight: Iterable[CopyingMove], copied: Mapping[Key, int],
                finished: Iterable[CopyingMove]) -> dict[Side, int]:
        """Update with the bytes copied per move in flight now and the moves finished since the last call; the
        rates changed."""
        now, moves = self.clock(), list(in_flight)
        left = CopyBytes.of(moves, copied)
        last, self.last = self.last, (now, dict(copied), {**{(b, RECEIVES): n for b, n in left.received.items()},
                                                          **{(b, SERVES): n for b, n in left.served.items()}})
        if last is None or now <= last[0]:
            return {}
        since, before, work = last
        progress = [(m, copied.get(m.key, 0) - before.get(m.key, 0)) for m in moves] + \
                   [(m, _whole(m) - before.get(m.key, 0)) for m in finished]
        rates = _rates(progress, now - since)
        # A side is tuned where it could have copied at the configured rate the whole time (its copies in flight at
        # the last read had the bytes: one that ran out of work says nothing of the quota) and measured outside the
        # tolerance: lowered wherever it went over; raised only where it is the end its copies ran slowest at
        # (the other end, given more, would only copy more where the first is not holding it back).
        limiting = {max(((b, side) for b, side, _ in copy_loads(m)), key=lambda e: (rates.get(e, 0.0), e))
                    for m, n in progress if n > 0}
        changed = {}
        for end in (e for e, n in work.items() if n >= self.target(e[0]) * (now - since)):
            measured, target = rates.get(end, 0.0), self.target(end[0])
            if measured <= 0 or abs(measured - target) <= TOLERANCE * target or (
                    measured < target and end not in limiting):
                continue
            given = self.given.get(end, target)
            new = round(min(MAX_BOOST * target, max(target / MAX_BOOST, given * target / measured)))
            if new != given:
                changed[end] = new
        if changed:
            self.given.update(changed)
            self._apply({b for b, _ in changed})
            self.record("throttle_tuned", target_bytes_per_s=self.rate,
                        targets={b: self.targets[b] for b in sorted({b for b, _ in changed}) if b in self.targets},
                        rates={f"{b} {side}": r for (b, side), r in sorted(changed.items())},
                        measured={f"{b} {side}": round(rates.get((b, side), 0.0)) for b, side in sorted(changed)})
        return changed

    def target(self, broker: int) -> int:
        """The rate a broker's copies are held at."""
        return self.targets.get(broker, self.rate)

    def retarget(self, targets: Mapping[int, int]) -> None:
        """Hold these brokers' copies at these rates from now on: what Kafka is given scales with the target (the
        quota's shortfall measured so far stays)."""
        for broker, new in targets.items():
            old = self.target(broker)
            for side in (SERVES, RECEIVES):
                if (broker, side) in self.given:
                    self.given[(broker, side)] = round(self.given[(broker, side)] * new / old)
            self.targets[broker] = new
        self._apply(set(targets))

    def _apply(self, brokers: set[int]) -> None:
        self.apply({b: (self.given.get((b, SERVES), self.target(b)), self.given.get((b, RECEIVES), self.target(b)))
                    for b in sorted(brokers)})


def _whole(move: CopyingMove) -> int:
    """The bytes a move copies in all (its new replicas together)."""
    return sum(n for _, side, n in copy_loads(move) if side == RECEIVES)


def _rates(progress: list[tuple[CopyingMove, int]], seconds: float) -> dict[Side, float]:
    """Per broker and side, bytes per second received or served, from each move's bytes copied meanwhile."""
    rates: dict[Side, float] = {}
    for move, n in progress:
        loads = copy_loads(move)
        adding = len(loads) - 1
        if n <= 0 or not adding:
            continue
        for broker, side, _ in loads:
            share = n / adding if side == RECEIVES else n
            rates[(broker, side)] = rates.get((broker, side), 0.0) + share / seconds
    return rates
