"""Once per run and occasion: the record (`notifications.json` in the run folder) of each message's sends per
channel. A channel that took it is not sent it again (a retried task, a second look at the same state); one that
failed is tried again on the next occasion, at most MAX_RETRIES more times. Record:

    {"approval_waiting:waiting": {"ops-slack": {"status": "sent", "attempts": 1, "at": "...", "error": null}}}

A run's record ends with the run; the automation folder's would grow with every event, so it is pruned (`prune`):
a message no occasion can send again is dropped once its last attempt is KEEP_S old, and at most MAX_KEPT
messages are kept.
"""

from __future__ import annotations

import fcntl
import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kafka_rebalancer.notification_settings import NotificationSettings
from kafka_rebalancer.notify.channels import SendResult, send_on_channel
from kafka_rebalancer.notify.messages import Notice
from kafka_rebalancer.run_folder import NOTIFICATIONS_RECORD, write_json

log = logging.getLogger(__name__)
RECORD_FILE = NOTIFICATIONS_RECORD
MAX_RETRIES = 3  # after the first attempt
KEEP_S = 7 * 24 * 3600.0  # a week to read what was sent or failed
MAX_KEPT = 500


@contextmanager
def _locked(record: Path) -> Iterator[dict[str, Any]]:
    """The record, read and written under a lock: two tasks of a run (mapped executes) may fail at once."""
    with open(record.with_name(f".{record.name}.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        sends = json.loads(record.read_text()) if record.exists() else {}
        yield sends
        write_json(record, sends)


def read_sends(record: Path) -> dict[str, Any]:
    return json.loads(record.read_text()) if record.exists() else {}


def due(entry: dict[str, Any] | None) -> bool:
    """Whether a channel's send of a message is still to be tried."""
    return entry is None or (entry["status"] == "failed" and entry["attempts"] <= MAX_RETRIES)


def deliver(settings: NotificationSettings, notice: Notice, record: Path | None) -> list[SendResult]:
    """Send `notice` on every channel its route names that has not taken it yet; never raises. `record` None:
    no record (a test message, or a run that failed before it had a folder: such a failure happens once)."""
    names = settings.channels_for(notice.kind, notice.pool)
    if not names:
        return []
    if record is None:
        return [send_on_channel(name, settings.channels[name], notice) for name in names]
    try:
        with _locked(record) as sends:
            entries = sends.setdefault(notice.key, {})
            results = []
            for name in names:
                if not due(entries.get(name)):
                    continue
                result = send_on_channel(name, settings.channels[name], notice)
                attempts = (entries.get(name) or {}).get("attempts", 0) + 1
                entries[name] = {"status": "sent" if result.ok else "failed", "attempts": attempts,
                                 "at": datetime.now(UTC).isoformat(timespec="seconds"), "error": result.error}
                results.append(result)
            return results
    except OSError as exc:  # the record cannot be written: the run goes on, the log says so
        log.warning("notification %s: record %s not written (%s)", notice.key, record, exc)
        return []


def _last_attempt(entries: dict[str, Any]) -> datetime:
    """When a message was last tried on any channel (an entry without a readable time counts as long ago)."""
    times = []
    for entry in entries.values():
        try:
            times.append(datetime.fromisoformat(str(entry["at"])))
        except (TypeError, KeyError, ValueError):
            continue
    return max(times, default=datetime.min.replace(tzinfo=UTC))


def pruned(sends: dict[str, Any], keep: set[str], now: datetime, keep_s: float = KEEP_S,
           max_kept: int = MAX_KEPT) -> dict[str, Any]:
    """The record without the messages that need not be remembered: those not in `keep` (the keys an occasion may
    still send: a live episode's) last tried more than `keep_s` ago; then of the others the newest, so that at most
    `max_kept` messages are left beside those in `keep`."""
    kept = {key: entries for key, entries in sends.items()
            if key in keep or (now - _last_attempt(entries)).total_seconds() <= keep_s}
    others = sorted((key for key in kept if key not in keep), key=lambda k: _last_attempt(kept[k]), reverse=True)
    dropped = set(others[max(max_kept - len(keep & kept.keys()), 0):])
    return {key: entries for key, entries in kept.items() if key not in dropped}


def prune(record: Path, keep: set[str], now: datetime | None = None) -> None:
    """Prune the record (`pruned`) in place, under its lock; never raises (a record left long is no harm)."""
    if not record.exists():
        return
    try:
        with _locked(record) as sends:
            left = pruned(sends, keep, now or datetime.now(UTC))
            sends.clear()
            sends.update(left)
    except (OSError, ValueError) as exc:
        log.warning("notifications record %s not pruned (%s)", record, exc)
