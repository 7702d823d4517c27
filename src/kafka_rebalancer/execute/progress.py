"""An execution's progress: moves and bytes done, and the time left at the throttle (`model.copy_time`)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict
from datetime import datetime, timedelta
from typing import Any

from kafka_rebalancer import terminal_progress
from kafka_rebalancer.model.copy_time import ESTIMATE_POINTS, CopyBytes, CopyingMove, Estimate, estimate
from kafka_rebalancer.model.reassignment import Key

log = logging.getLogger(__name__)

# The execution log actions that end an attempt: it finished, failed (a timeout, an error), or was cancelled (the
# executor exits at its next loop). An attempt with one of them after its last execute_started is not in progress
# any more.
ENDED = frozenset({"execute_finished", "execute_failed", "timeout", "run_timeout", "isr_wait_timeout",
                   "cancel_requested", "cancel_observed", "cancel_finished"})


class Progress:
    """Moves and bytes done of the total with the time left, shown on the terminal, logged every `every_s` and
    recorded (`record`: the execution log's append) before the first move and at each of ESTIMATE_POINTS of the
    bytes (`record_due`). `completed`: the moves an earlier attempt finished (done, and outside this attempt's
    bound)."""

    def __init__(self, pool: str, moves: Sequence[CopyingMove], rate_bytes_per_s: int | None,
                 record: Callable[..., Any], completed: Iterable[Key] = (), every_s: float = 10.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.pool, self.rate, self.record = pool, rate_bytes_per_s, record
        self.total_moves = len(moves)
        self.total_bytes = sum(m.bytes_to_copy for m in moves)
        finished = set(completed)
        self.left = {m.key: m for m in moves if m.key not in finished}
        self.done_moves = len(moves) - len(self.left)
        self.done_bytes = self.total_bytes - sum(m.bytes_to_copy for m in self.left.values())
        self.bytes_at_start = self.done_bytes
        self.bound_s = CopyBytes.of(self.left.values()).seconds(rate_bytes_per_s)
        self.points = [p for p in ESTIMATE_POINTS if p * self.total_bytes > self.done_bytes]
        self.clock, self.every_s = clock, every_s
        self.started = self.last = clock()
        self.copied: dict[Key, int] = {}  # bytes already on the new replicas of moves in flight
        # (clock, the bound left) at the start and at each read of the copies' bytes: the recent slowdown's span
        self.reads: list[tuple[float, float]] = [] if self.bound_s is None else [(self.started, self.bound_s)]
        self.due = False  # a point of ESTIMATE_POINTS reached, its estimate not recorded yet

    def copying(self, copied: dict[Key, int]) -> None:
        """The bytes the new replicas of the moves in flight hold now (`stall.copied_bytes`): the estimate leaves
        them out of what is left (a move counted whole until it finished made a quarter of the bytes look like a
        sixth of the time at 25 %)."""
        self.copied = {k: n for k, n in copied.items() if k in self.left}
        if self.bound_s is not None:
            self.reads.append((self.clock(), self._remaining_bound()))
        self._reach()

    def begin(self) -> None:
        """Record the estimate before the first move."""
        self._record()

    def done(self, move: CopyingMove) -> None:
        if self.left.pop(move.key, None) is None:
            return
        self.copied.pop(move.key, None)
        self.done_moves += 1
        self.done_bytes += move.bytes_to_copy
        self.show()
        self._reach()

    def _reach(self) -> None:
        """A point of the bytes reached, the copies in flight counted (one large move may span several points)."""
        reached = [p for p in self.points if self.done_bytes + sum(self.copied.values()) >= p * self.total_bytes]
        if reached:
            self.points = self.points[len(reached):]
            self.due = True

    def record_due(self) -> None:
        """Record the estimate if a point was reached since the last call: after the executor has read the bytes
        the moves in flight copied (`copying`) afresh, a read up to 10 s old made the estimate a third too long."""
        if self.due:
            self.due = False
            self._record()

    def estimate(self) -> Estimate | None:
        """The time left at the throttle (None: unthrottled, see `line`), at the slowdown of the newer half of the
        time elapsed: from the newest read at least that old (the start at first) to now."""
        if self.bound_s is None:
            return None
        now, remaining = self.clock(), self._remaining_bound()
        half_way = now - (now - self.started) / 2
        older = [i for i, (at, _) in enumerate(self.reads) if at <= half_way]
        del self.reads[:older[-1]]  # the span only moves on: reads before its start are not needed again
        at, bound_left = self.reads[0]
        return estimate(now - self.started, self.bound_s, remaining, (now - at, bound_left - remaining))

    def _remaining_bound(self) -> float:
        return CopyBytes.of(self.left.values(), self.copied).seconds(self.rate) or 0.0

    def _record(self) -> None:
        figures = self.estimate()
        copied = sum(self.copied.values())
        self.record("estimate", done_fraction=round((self.done_bytes + copied) / self.total_bytes, 4)
                            if self.total_bytes else 1.0, done_bytes=self.done_bytes, copied_bytes=copied,
                            **({} if figures is None else {k: round(v, 3) for k, v in
                                                           {**asdict(figures), "finish_s": figures.finish_s}.items()}))
        log.info("estimate %s", self.line())

    def show(self) -> None:
        terminal_progress.show(f"execute {self.pool}", self.done_bytes, self.total_bytes or None,
                               f"{self.done_moves}/{self.total_moves} moves")

    def line(self) -> str:
        elapsed = self.clock() - self.started
        figures = self.estimate()
        if figures is not None:
            left = (f"about {figures.remaining_s:.0f}s left (throttle-bound {figures.remaining_bound_s:.0f}s of "
                    f"{figures.bound_s:.0f}s, running at {figures.slowdown:.2f}x it)")
        elif self.done_bytes > self.bytes_at_start:  # unthrottled: the rate so far
            rate = (self.done_bytes - self.bytes_at_start) / max(elapsed, 1e-3)
            left = f"about {(self.total_bytes - self.done_bytes) / rate:.0f}s left"
        else:
            left = "time left unknown"
        return (f"{self.pool}: {self.done_moves}/{self.total_moves} moves, {self.done_bytes / 2**20:.1f} of "
                f"{self.total_bytes / 2**20:.1f} MiB, {elapsed:.0f}s elapsed, {left}")

    def maybe_log(self, force: bool = False) -> None:
        if force or self.clock() - self.last >= self.every_s:
            self.last = self.clock()
            log.info("progress %s", self.line())


def progress_text(entries: list[dict[str, Any]]) -> str | None:
    """Where the execution log's last attempt stands by its last estimate: "42 % of the bytes at 12:03:10, finish
    about 12:31 UTC" (None: no estimate since the last start, or the attempt ended: finished, failed on a timeout or
    cancelled; a timed-out attempt kept its last estimate, "finish about" an hour that would never come)."""
    starts = [i for i, e in enumerate(entries) if e.get("action") == "execute_started"]
    if not starts:
        return None
    attempt = entries[starts[-1]:]
    if any(e.get("action") in ENDED for e in attempt):
        return None
    estimates = [e for e in attempt if e.get("action") == "estimate" and e.get("ts")]
    if not estimates:
        return None
    last = estimates[-1]
    at = datetime.fromisoformat(last["ts"])
    text = f"{100 * float(last.get('done_fraction', 0)):.0f} % of the bytes at {at:%H:%M:%S}"
    if last.get("remaining_s") is not None:
        text += f", finish about {at + timedelta(seconds=float(last['remaining_s'])):%H:%M} UTC"
    return text
