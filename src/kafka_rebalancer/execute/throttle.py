"""The replication throttle for a set of moves, as Kafka's own reassignment tool sets it (README: Execution): the rate
on every broker a move touches, and per moving topic the replicas it applies to: the existing replicas on the
leader side (they serve the copy) and the new replicas on the follower side (they fetch it)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol


class MoveLike(Protocol):
    """A move's partition and its replicas before and after (read-only: the moves are frozen dataclasses)."""

    @property
    def topic(self) -> str: ...

    @property
    def partition(self) -> int: ...

    @property
    def old(self) -> tuple[int, ...]: ...

    @property
    def new(self) -> tuple[int, ...]: ...


@dataclass(frozen=True)
class Throttle:
    rate_bytes_per_s: int | None
    brokers: frozenset[int] = frozenset()
    topic_replicas: dict[str, tuple[str, str]] = field(default_factory=dict)  # topic -> (leader, follower)

    @property
    def empty(self) -> bool:
        return not self.brokers

    def set_configs(self) -> tuple[dict[int, int | None], dict[str, tuple[str, str] | None]]:
        """The configs to set, in the shape ClusterAdmin.alter_throttles takes."""
        return {b: self.rate_bytes_per_s for b in self.brokers}, dict(self.topic_replicas)

    def clear_configs(self) -> tuple[dict[int, int | None], dict[str, tuple[str, str] | None]]:
        return {b: None for b in self.brokers}, {t: None for t in self.topic_replicas}


def throttle_for(moves: Iterable[MoveLike], rate_bytes_per_s: int | None) -> Throttle:
    """The throttle covering the data-copying moves (leadership-only changes copy nothing)."""
    brokers: set[int] = set()
    leader: dict[str, set[str]] = {}
    follower: dict[str, set[str]] = {}
    for m in moves:
        adding = set(m.new) - set(m.old)
        if not adding:
            continue
        brokers |= set(m.old) | set(m.new)
        leader.setdefault(m.topic, set()).update(f"{m.partition}:{b}" for b in m.old)
        follower.setdefault(m.topic, set()).update(f"{m.partition}:{b}" for b in adding)

    def joined(entries: set[str]) -> str:
        return ",".join(sorted(entries, key=lambda e: tuple(int(x) for x in e.split(":"))))

    return Throttle(rate_bytes_per_s, frozenset(brokers),
                    {t: (joined(leader[t]), joined(follower[t])) for t in sorted(leader)})
