"""The live-traffic check the fault and manual-operation tests rely on: a message stored at two offsets fails it,
the same offset handed over twice by the consumer does not, and an acknowledged message never consumed fails it."""

from __future__ import annotations

import pytest

from tests.live_traffic import LiveTraffic


def stopped(consumed: list[tuple[bytes, tuple[str, int, int]]], acked: list[bytes]) -> LiveTraffic:
    traffic = LiveTraffic("unused:9092", {"t": 1})  # threads never started: only the check is exercised
    traffic._stop.set()
    traffic.acked = acked
    traffic.consumed = [value for value, _ in consumed]
    traffic.offsets = [where for _, where in consumed]
    return traffic


def test_a_message_stored_at_two_offsets_fails_the_check() -> None:
    traffic = stopped([(b"live-1", ("t", 0, 5)), (b"live-1", ("t", 0, 9))], [b"live-1"])
    with pytest.raises(AssertionError, match="written at more than one offset"):
        traffic.check(min_acked=1)


def test_the_same_offset_handed_over_twice_passes_the_check() -> None:
    stopped([(b"live-1", ("t", 0, 5)), (b"live-1", ("t", 0, 5))], [b"live-1"]).check(min_acked=1)


def test_an_acknowledged_message_never_consumed_fails_the_check() -> None:
    traffic = stopped([(b"live-1", ("t", 0, 5))], [b"live-1", b"live-2"])
    with pytest.raises(AssertionError, match="1 acknowledged messages were not consumed"):
        traffic.check(min_acked=1)
