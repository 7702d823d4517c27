"""The `capacity_short` message (issue 55): a run's forecast finds a pool over its disk threshold within
`forecast.warning_days`. Told once per episode: while every nightly run finds the pool short at most `REARM_S`
apart it is one episode (one message); a pool not found short for longer is told again when it is next. The
episodes are kept in the automation folder (SEEN_FILE), the sends in its notifications.json (outbox.RECORD_FILE)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kafka_rebalancer.notification_settings import NotificationSettings
from kafka_rebalancer.notify.messages import Notice
from kafka_rebalancer.notify.outbox import RECORD_FILE, deliver
from kafka_rebalancer.run_folder import write_json

KIND = "capacity_short"
SEEN_FILE = "notified_capacity.json"  # pool -> {"first": epoch s, "last": epoch s} of its current episode
REARM_S = 3 * 86400.0  # a nightly run missed (or two) does not end an episode
TO_DO = ("add brokers or disk to the pool before then, or shorten the retention of its fastest-growing topics (the "
         "run's report has the forecast per broker and topic); nothing starts on its own.")


def capacity_notice(cluster: str, record: dict[str, Any], state: str, report: str | None) -> Notice:
    """The message of one capacity_short event (automation.capacity_short's record)."""
    pool = record.get("broker_pool")
    facts = {"days left": f"{float(record['days_left']):.1f}", "warning days": str(record.get("warning_days"))}
    if record.get("broker_id") is not None:
        facts["first broker over"] = str(record["broker_id"])
    return Notice(kind=KIND, state=state, title=f"Capacity short: pool {pool or '(no pool)'} on {cluster}",
                  happened=str(record.get("observed")), to_do=TO_DO, cluster=cluster,
                  run_id=record.get("decided_in"), pool=pool, facts=facts,
                  links={"report": report} if report else {})


def notify_capacity_short(settings: NotificationSettings, cluster: str, records: list[dict[str, Any]], folder: Path,
                          report: str | None) -> list[Notice]:
    """Send each record's message unless its pool's episode was told already; never raises for a channel
    (outbox.deliver). The notices of the records, sent now or before."""
    if not records or not any(settings.channels_for(KIND, r.get("broker_pool")) for r in records):
        return []
    seen_path = folder / SEEN_FILE
    seen = json.loads(seen_path.read_text()) if seen_path.exists() else {}
    notices = []
    for record in records:
        pool, at = str(record.get("broker_pool")), float(record["at"])
        episode = seen.get(pool)
        first = episode["first"] if episode is not None and at - episode["last"] <= REARM_S else at
        seen[pool] = {"first": first, "last": at}
        notices.append(capacity_notice(cluster, record, f"{pool}@{first:.0f}", report))
    folder.mkdir(parents=True, exist_ok=True)
    write_json(seen_path, seen)
    for notice in notices:
        deliver(settings, notice, folder / RECORD_FILE)
    return notices
