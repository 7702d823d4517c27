"""Moves whose copies make no progress: a move in flight whose new replicas have not grown (DescribeLogDirs of the
brokers receiving them) for `stall_after_s` while those brokers are alive is stalled. It is named once in the
execution log (`stalled`) and the task log, and again when its bytes grow (`stall_ended`); a timeout names the
moves stalled at the time. A dead receiving broker is not a stall: the cluster's own state says why."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kafka_rebalancer.model.reassignment import Key

log = logging.getLogger(__name__)


def copied_bytes(receivers: Mapping[Key, Iterable[int]],
                 log_dirs: Mapping[int, Mapping[str, Any]]) -> dict[Key, int]:
    """Per move: the bytes its new replicas hold now, from `describe_log_dirs` of the receiving brokers (a replica
    not yet created holds 0)."""
    return {key: sum(int(log_dirs.get(b, {}).get("replicas", {}).get(key, 0)) for b in brokers)
            for key, brokers in receivers.items()}


class StallWatch:
    """The last growth of each move in flight, judged at each `check`."""

    def __init__(self, stall_after_s: float, record: Callable[..., Any], clock: Callable[[], float]) -> None:
        self.stall_after_s, self.record, self.clock = stall_after_s, record, clock
        self.seen: dict[Key, tuple[int, float]] = {}  # bytes and when they last grew
        self.stalled: set[Key] = set()

    def check(self, copied: Mapping[Key, int], alive: Mapping[Key, bool],
              receiving: Mapping[Key, Iterable[int]] | None = None) -> list[Key]:
        """Update with the bytes copied per move in flight (`alive`: its receiving brokers, `receiving`, are); the
        moves stalled now. Moves no longer in flight are forgotten."""
        now = self.clock()
        for key in set(self.seen) - set(copied):
            del self.seen[key]
            self.stalled.discard(key)
        for key, n in copied.items():
            last = self.seen.get(key)
            if last is None or n > last[0] or not alive.get(key, True):
                self.seen[key] = (n, now)
                if key in self.stalled and last is not None and n > last[0]:
                    self.stalled.discard(key)
                    self.record("stall_ended", key, copied_bytes=n)
                continue
            if key not in self.stalled and now - last[1] >= self.stall_after_s:
                self.stalled.add(key)
                brokers = sorted((receiving or {}).get(key, ()))
                self.record("stalled", key, copied_bytes=n, since_s=round(now - last[1], 1), receiving=brokers)
                log.warning("%s-%s: no bytes copied for %.0fs (%d copied so far), its receiving brokers %s alive",
                            key[0], key[1], now - last[1], n, brokers)
        return sorted(self.stalled)
