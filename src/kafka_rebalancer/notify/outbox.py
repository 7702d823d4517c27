"""Once per run and occasion: the record (`notifications.json` in the run folder) of each message's sends per
channel. A channel that took it is not sent it again (a retried task, a second look at the same state); one that
failed is tried again on the next occasion, at most MAX_RETRIES more times. Record:

    {"approval_waiting:waiting": {"ops-slack": {"status": "sent", "attempts": 1, "at": "...", "error": null}}}
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
