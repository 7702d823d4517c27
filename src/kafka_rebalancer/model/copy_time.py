"""How long a pool's moves take at the replication throttle, before they start and while they run.

A new replica copies its partition from the leader: the receiving broker fetches under its follower throttle, the
leader serves under its leader throttle, each throttle shared by every throttled replica on that broker (Kafka's
quota is per broker and direction). With every broker copying in parallel, the least time the copies can take is
the busiest broker's bytes in one direction over the throttle (`CopyBytes.seconds`): the throttle-bound minimum.
The leader serving a move is the partition's leader when the move runs: the snapshot's, since the executor elects
the planned leaders only once the copies are done.

While moves run, the time left is the throttle-bound minimum of what is left (the bytes moves in flight copied
already left out), times how much slower than that bound the execution ran lately (`Estimate`); before a twentieth
of the bound is done, the bound alone. The approval's estimated duration is the bound; the executor's progress
(`execute.progress`) records the estimate as the moves finish.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, overload

from kafka_rebalancer.model.reassignment import Key

# The fractions of the bytes at which the executor records its estimate (besides the one before the first move).
ESTIMATE_POINTS = (0.25, 0.5, 0.75)


class ReplicaCopy(Protocol):
    """What a move copies: its replicas before and after, the partition's size and the leader serving the copies
    (read-only: the moves are frozen dataclasses)."""

    @property
    def old(self) -> tuple[int, ...]: ...

    @property
    def new(self) -> tuple[int, ...]: ...

    @property
    def size_bytes(self) -> int: ...

    @property
    def leader(self) -> int: ...


class CopyingMove(ReplicaCopy, Protocol):
    """A move the executor follows: by its partition, with the bytes its new replicas copy."""

    @property
    def key(self) -> Key: ...

    @property
    def bytes_to_copy(self) -> int: ...


RECEIVES, SERVES = "receives", "serves"


def copy_loads(move: ReplicaCopy) -> list[tuple[int, str, int]]:
    """What a move copies, per broker: (broker, RECEIVES or SERVES, bytes). Each new replica receives the partition;
    the leader serves one copy per new replica (the first old replica when the snapshot's leader is not one of the
    old replicas). Nothing for a move that only reorders its replicas."""
    adding = sorted(set(move.new) - set(move.old))
    if not adding:
        return []
    leader = move.leader if move.leader in move.old else move.old[0]
    return [*((b, RECEIVES, move.size_bytes) for b in adding), (leader, SERVES, move.size_bytes * len(adding))]


@dataclass(frozen=True)
class CopyBytes:
    """Per broker: the bytes it receives as new replicas (follower side) and serves as the leader of partitions
    gaining replicas (leader side)."""

    received: Mapping[int, int]
    served: Mapping[int, int]

    @overload
    @classmethod
    def of(cls, moves: Iterable[ReplicaCopy]) -> CopyBytes: ...

    @overload
    @classmethod
    def of(cls, moves: Iterable[CopyingMove], copied: Mapping[Key, int] | None) -> CopyBytes: ...

    @classmethod
    def of(cls, moves: Iterable[Any], copied: Mapping[Key, int] | None = None) -> CopyBytes:
        """`copied`: per move in flight, the bytes its new replicas hold already (their share is left out; the
        moves are then CopyingMoves, known by their key)."""
        received: dict[int, int] = {}
        served: dict[int, int] = {}
        for move in moves:
            loads = copy_loads(move)
            done = copied.get(move.key, 0) if copied else 0
            left = max(0.0, 1.0 - done / (move.size_bytes * (len(loads) - 1))) if done and move.size_bytes else 1.0
            for broker, side, n in loads:
                totals = received if side == RECEIVES else served
                totals[broker] = totals.get(broker, 0) + round(n * left)
        return cls(received, served)

    def bottleneck(self) -> tuple[int, str, int] | None:
        """The busiest broker and direction: (broker id, "receives" or "serves", bytes); None: nothing copies."""
        sides = [(n, -b, RECEIVES) for b, n in self.received.items()] + \
                [(n, -b, SERVES) for b, n in self.served.items()]
        if not sides:
            return None
        most, broker, side = max(sides)
        return -broker, side, most

    def seconds(self, rate_bytes_per_s: int | None) -> float | None:
        """The throttle-bound minimum; None when unthrottled (the machine, not a rate, sets the time)."""
        if not rate_bytes_per_s:
            return None
        busiest = self.bottleneck()
        return busiest[2] / rate_bytes_per_s if busiest else 0.0


@dataclass(frozen=True)
class Estimate:
    """The time left of an execution at one moment."""

    elapsed_s: float
    bound_s: float  # the throttle-bound minimum of every move
    remaining_bound_s: float  # the same of the moves not finished
    remaining_s: float  # the estimate: remaining_bound_s times the slowdown measured lately (at least 1)
    slowdown: float  # seconds over the bound done in them, lately (1.0 before there is enough done)

    @property
    def finish_s(self) -> float:
        """The predicted time from the start to the last move's end."""
        return self.elapsed_s + self.remaining_s


def estimate(elapsed_s: float, bound_s: float, remaining_bound_s: float,
             recent: tuple[float, float] | None = None) -> Estimate:
    """The time left, from the bound of all the moves and of those not finished. The slowdown is measured only
    once a twentieth of the bound is done: before, a move finishing early or late would swing it widely. It is that
    of `recent` (seconds, the bound done in them: the newer part of the execution) where that did some, else of the
    whole elapsed time: the start (leadership-only batches, the throttle tuner's first window) runs slower than the
    rest, and counting it made the estimate at 25 % a fifth too long. The rest runs no faster than the throttle
    however fast the part done ran: Kafka lets a copy's first seconds through above the rate (its quota is an
    average over ~11 s windows), which made an early quarter look twice as fast."""
    done_bound = bound_s - remaining_bound_s
    if done_bound < 0.05 * bound_s or done_bound <= 0:
        slowdown = 1.0
    elif recent is not None and recent[1] > 0:
        slowdown = recent[0] / recent[1]
    else:
        slowdown = elapsed_s / done_bound
    return Estimate(elapsed_s, bound_s, remaining_bound_s, remaining_bound_s * max(slowdown, 1.0), slowdown)
