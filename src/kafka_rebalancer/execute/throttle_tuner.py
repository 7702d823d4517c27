"""The throttle's rate held as an average: Kafka's replication quota lets throttled copies run below the rate it is
given. It measures a broker's rate over ~11 one-second samples and, once that is over the rate, stops the throttled
fetches in whole steps (a follower backs off `replica.fetch.backoff.ms`, 1 s by default; a leader answers empty after
`replica.fetch.wait.max.ms`), so at the default broker settings about 91 % of the rate gets through by a model of
that code, ~99 % with a 100 ms backoff (README: broker settings), less on a busy machine (the execute bench's 2-core
calibration: 70 %, BENCHMARKS.md).

The tuner makes up that shortfall at every quota a copy crosses. Each time the executor reads the copies' bytes it
adds, per broker and side (bytes received: the follower rate; served as the leader of copies: the leader rate), the
interval to the side's measure, if the side had the bytes to copy at its rate the whole interval (its moves in flight
and those not started yet; else the measure starts again). Over the newest reads covering at least WINDOW_S (longer
than the quota's memory: a shorter measure sees its bursts and pauses, not its rate) a side's efficiency is the bytes
it copied over the bytes its given rate allowed. Per copy, the end with the highest efficiency holds it back; that
end's factor (what Kafka is given over the configured rate) moves towards 1 / its efficiency, between 1 and
MAX_BOOST, once its measure covers WINDOW_S at the rate given now: the whole way the first time (half the way left
the bench's 60 s execution copying at 75-85 % of the rate most of the time, BENCHMARKS.md), GAIN of the way after
that (the window after a change holds its burst or pause). Every other end of its copies gets at least that factor
too (a leader serving a tuned receiver: two quotas in series, the lower one binds). The configured rate stays what
the copies average at most: a side measured above it is lowered (never below the configured rate: after a burst the
quota pays it back itself, a cut would only stop every copy for seconds while its memory drains), and a side whose
copies averaged above it since they began is not raised. Changes under STEP of the rate are not made: each change is
a burst or a pause of Kafka's. What Kafka is given is in the execution log (`throttle_tuned`). A broker's rate to
hold may be lowered for a while (`retarget`: the throttle control from measured load); what Kafka is given moves with
it."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka_rebalancer.model.copy_time import RECEIVES, SERVES, CopyBytes, CopyingMove, copy_loads
from kafka_rebalancer.model.reassignment import Key

WINDOW_S = 12.0  # Kafka's quota: 11 samples of 1 s (replication.quota.window.num / .size.seconds)
GAIN = 0.5
# Kafka's quota delivered 75 % of the rate on the execute bench's 2-core machine: 1 / 0.75 and some room.
MAX_BOOST = 1.5
STEP = 0.02  # a side's factor changes by this much at least
OVER = 0.02  # a side measured this share over its rate is lowered

Side = tuple[int, str]  # (broker, RECEIVES or SERVES): a follower or a leader rate


@dataclass
class _Measure:
    """A side's reads since it began copying the whole time: (seconds, bytes, bytes its given rate allowed) each,
    the newest last; and the bytes and its configured rate's bytes over all of them."""

    reads: list[tuple[float, int, float]] = field(default_factory=list)
    copied: int = 0
    allowed_at_target: float = 0.0
    unchanged_s: float = 0.0  # since the rate Kafka is given last changed

    def add(self, seconds: float, copied: int, given: float, target: float) -> None:
        self.reads.append((seconds, copied, given * seconds))
        self.copied += copied
        self.allowed_at_target += target * seconds
        self.unchanged_s += seconds
        while len(self.reads) > 1 and sum(s for s, _, _ in self.reads[1:]) >= WINDOW_S:
            del self.reads[0]

    def window(self) -> tuple[float, float] | None:
        """(efficiency: bytes over the bytes allowed, bytes per second) over the window; None before one."""
        seconds = sum(s for s, _, _ in self.reads)
        if seconds < WINDOW_S:
            return None
        copied, allowed = sum(n for _, n, _ in self.reads), sum(a for _, _, a in self.reads)
        return copied / allowed, copied / seconds


class ThrottleTuner:
    def __init__(self, rate_bytes_per_s: int, apply: Callable[[dict[int, tuple[int, int]]], None],
                 record: Callable[..., Any], clock: Callable[[], float]) -> None:
        """`apply`: per broker, the (leader, follower) rates to give Kafka."""
        self.rate, self.apply, self.record, self.clock = rate_bytes_per_s, apply, record, clock
        self.targets: dict[int, int] = {}  # the rates to hold, where not the configured one
        self.boosts: dict[Side, float] = {}  # what Kafka is given over the target, where not 1
        self.measures: dict[Side, _Measure] = {}
        self.last: tuple[float, dict[Key, int], dict[Side, int]] | None = None  # time, copied, bytes left per side

    def observe(self, in_flight: Iterable[CopyingMove], copied: Mapping[Key, int],
                finished: Iterable[CopyingMove], upcoming: Iterable[CopyingMove] = ()) -> dict[Side, int]:
        """Update with the bytes copied per move in flight now and the moves finished since the last call; the
        rates changed (what Kafka is given). `upcoming`: the moves not started yet, which the executor starts as
        those in flight finish: a side's work till the next read too (small moves in flight alone never held the
        bytes for a window, which left smallest_first untuned for half its execution)."""
        now, moves = self.clock(), list(in_flight)
        left = CopyBytes.of([*moves, *upcoming], copied)
        last, self.last = self.last, (now, dict(copied), {**{(b, RECEIVES): n for b, n in left.received.items()},
                                                          **{(b, SERVES): n for b, n in left.served.items()}})
        if last is None or now <= last[0]:
            return {}
        since, before, work = last
        progress = [(m, copied.get(m.key, 0) - before.get(m.key, 0)) for m in moves] + \
                   [(m, _whole(m) - before.get(m.key, 0)) for m in finished]
        windows = self._measure(now - since, _bytes(progress), work)
        boosts = self._boosts([m for m, n in progress if n > 0], windows)
        changed = {end: self.given(end, b) for end, b in boosts.items()
                   if abs(b - self.boosts.get(end, 1.0)) >= STEP - 1e-9 and self.given(end, b) != self.given(end)}
        if changed:
            self.boosts.update({end: boosts[end] for end in changed})
            for end in changed.keys() & self.measures.keys():
                self.measures[end].unchanged_s = 0.0
            self._apply({b for b, _ in changed})
            self.record("throttle_tuned", target_bytes_per_s=self.rate,
                        targets={b: self.targets[b] for b in sorted({b for b, _ in changed}) if b in self.targets},
                        rates={f"{b} {side}": r for (b, side), r in sorted(changed.items())},
                        measured={f"{b} {side}": round(windows[(b, side)][1]) for b, side in sorted(changed)
                                  if (b, side) in windows},
                        efficiency={f"{b} {side}": round(windows[(b, side)][0], 3) for b, side in sorted(changed)
                                    if (b, side) in windows})
        return changed

    def _measure(self, seconds: float, copied: Mapping[Side, int],
                 work: Mapping[Side, int]) -> dict[Side, tuple[float, float]]:
        """Add the interval to the measure of each side that copied the whole of it (its copies in flight and to
        start at the last read had the bytes for its given rate, and it copied some: a side that ran out of work, or
        was stopped by something else than its quota, says nothing of the quota); the windows measured, per side."""
        for end in list(self.measures):
            if end not in work:
                del self.measures[end]
        for end, n in work.items():
            if n < self.given(end) * seconds or copied.get(end, 0) <= 0:
                self.measures.pop(end, None)
                continue
            self.measures.setdefault(end, _Measure()).add(seconds, copied[end], self.given(end), self.target(end[0]))
        return {end: w for end, m in self.measures.items() if (w := m.window()) is not None}

    def _boosts(self, moving: list[CopyingMove], windows: Mapping[Side, tuple[float, float]]) -> dict[Side, float]:
        """The factors of the sides measured or copying with one measured: the end holding each copy back (the
        highest efficiency of its ends measured) moves towards making up its shortfall and passes its factor on to
        the copy's other ends."""
        holding = []
        for move in moving:
            ends = [(b, side) for b, side, _ in copy_loads(move)]
            measured = [e for e in ends if e in windows]
            if measured:
                holding.append((ends, [e for e in measured if windows[e][0] == max(windows[m][0] for m in measured)]))
        own = {end: self._kept(end, self._towards(end, 1.0 / windows[end][0]), windows)
               for _, held in holding for end in held}
        passed: dict[Side, float] = {}
        for ends, held in holding:
            for end in ends:
                passed[end] = max(passed.get(end, 1.0), *(own[e] for e in held))
        return {end: self._kept(end, max(own.get(end, 1.0), passed[end]), windows) for end in passed}

    def _kept(self, end: Side, boost: float, windows: Mapping[Side, tuple[float, float]]) -> float:
        """The factor within what keeps the side's copies at its rate on average: lowered where they ran over it
        over the window, not raised where they averaged over it since they began."""
        window, measure = windows.get(end), self.measures.get(end)
        if window is not None and window[1] > (1 + OVER) * self.target(end[0]):
            boost = min(boost, self._towards(end, 1.0 / window[0]))
        if measure is not None and measure.copied > measure.allowed_at_target:
            boost = min(boost, self.boosts.get(end, 1.0))
        return boost

    def _towards(self, end: Side, boost: float) -> float:
        """Towards this factor for a side (within 1 and MAX_BOOST) once its measure covers a window at the rate given
        now (a change lets a burst through, or stops copies for a while): the whole way the first time (its window
        at the configured rate is Kafka's steady shortfall), GAIN of the way after a change (that window holds the
        change's burst or pause: the whole way each time swung between 1 and MAX_BOOST on the quota model)."""
        current, measure = self.boosts.get(end, 1.0), self.measures.get(end)
        if measure is None or measure.unchanged_s < WINDOW_S:
            return current
        return current + (GAIN if end in self.boosts else 1.0) * (min(MAX_BOOST, max(1.0, boost)) - current)

    def given(self, end: Side, boost: float | None = None) -> int:
        """The rate Kafka is given for a side (with this factor)."""
        return round(self.target(end[0]) * (self.boosts.get(end, 1.0) if boost is None else boost))

    def target(self, broker: int) -> int:
        """The rate a broker's copies are held at."""
        return self.targets.get(broker, self.rate)

    def retarget(self, targets: Mapping[int, int]) -> None:
        """Hold these brokers' copies at these rates from now on: what Kafka is given scales with the target (the
        quota's shortfall measured so far stays)."""
        self.targets.update(targets)
        self._apply(set(targets))

    def _apply(self, brokers: set[int]) -> None:
        self.apply({b: (self.given((b, SERVES)), self.given((b, RECEIVES))) for b in sorted(brokers)})


def _whole(move: CopyingMove) -> int:
    """The bytes a move copies in all (its new replicas together)."""
    return sum(n for _, side, n in copy_loads(move) if side == RECEIVES)


def _bytes(progress: list[tuple[CopyingMove, int]]) -> dict[Side, int]:
    """Per broker and side, the bytes received or served, from each move's bytes copied meanwhile."""
    copied: dict[Side, int] = {}
    for move, n in progress:
        loads = copy_loads(move)
        adding = len(loads) - 1
        if n <= 0 or not adding:
            continue
        for broker, side, _ in loads:
            share = n // adding if side == RECEIVES else n
            copied[(broker, side)] = copied.get((broker, side), 0) + share
    return copied
