"""The live-traffic check the fault and manual-operation tests rely on: a message stored at two offsets fails it,
unless the client resent it to a new leader (two leader epochs, one partition: a warning); the same offset handed
over twice by the consumer does not, and an acknowledged message never consumed fails it."""

from __future__ import annotations

import pytest

from tests.live_traffic import LiveTraffic


def stopped(consumed: list[tuple[bytes, tuple[str, int, int, int | None]]], acked: list[bytes]) -> LiveTraffic:
    traffic = LiveTraffic("unused:9092", {"t": 1})  # threads never started: only the check is exercised
    traffic._stop.set()
    traffic.acked = acked
    traffic.consumed = [value for value, _ in consumed]
    traffic.offsets = [where for _, where in consumed]
    return traffic


@pytest.mark.parametrize("copies", [
    [("t", 0, 5, 3), ("t", 0, 9, 3)],  # one leader epoch: the log holds it twice
    [("t", 0, 5, None), ("t", 0, 9, 4)],  # an epoch unknown
    [("t", 0, 5, 3), ("t", 1, 9, 4)],  # two partitions
])
def test_a_message_stored_at_two_offsets_fails_the_check(copies: list[tuple[str, int, int, int | None]]) -> None:
    traffic = stopped([(b"live-1", where) for where in copies], [b"live-1"])
    with pytest.raises(AssertionError, match="written at more than one offset"):
        traffic.check(min_acked=1)


def test_a_message_the_client_resent_to_a_new_leader_is_a_warning() -> None:
    traffic = stopped([(b"live-1", ("t", 0, 2248, 3)), (b"live-1", ("t", 0, 2249, 4))], [b"live-1"])
    with pytest.warns(UserWarning, match=r"1 message\(s\) written again under a new leader epoch"):
        traffic.check(min_acked=1)


def test_the_same_offset_handed_over_twice_passes_the_check() -> None:
    stopped([(b"live-1", ("t", 0, 5, 3)), (b"live-1", ("t", 0, 5, 4))], [b"live-1"]).check(min_acked=1)


def test_an_acknowledged_message_never_consumed_fails_the_check() -> None:
    traffic = stopped([(b"live-1", ("t", 0, 5, 3))], [b"live-1", b"live-2"])
    with pytest.raises(AssertionError, match="1 acknowledged messages were not consumed"):
        traffic.check(min_acked=1)
