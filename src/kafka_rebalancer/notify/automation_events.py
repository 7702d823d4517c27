"""Once per automation event: the events DAG's decision on each event reaches the channels once, however often the
watcher raises it again. A started run is told once (all the events it answers in one message). An event held back,
suppressed or reported is one episode while it keeps being decided the same way at most `rearm_s` apart (a held-back
event comes back at its retry_at, within the cooldown); a longer silence ends the episode, so a broker lost again a
week later is told again. The episodes are kept in the automation folder (SEEN_FILE), the sends in its
notifications.json (outbox.RECORD_FILE)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kafka_rebalancer.notification_settings import NotificationSettings
from kafka_rebalancer.notify.messages import Notice, automation_notice, automation_outcome, message_key
from kafka_rebalancer.notify.outbox import RECORD_FILE, deliver, prune
from kafka_rebalancer.run_folder import write_json

SEEN_FILE = "notified_events.json"  # subject -> {"first": epoch s, "last": epoch s} of its current episode
KIND = "automation_event"


def event_subject(record: dict[str, Any]) -> str:
    """What an event is about and what was decided, without the look's time or words: kind, broker (else pool),
    outcome."""
    about = record.get("broker_id") if record.get("broker_id") is not None else record.get("broker_pool") or "-"
    return f"{record.get('kind')}:{about}:{automation_outcome(record)}"


def episode_state(subject: str, first: float) -> str:
    """The state an episode's message is sent once for."""
    return f"{subject}@{first:.0f}"


def event_notices(cluster: str, records: list[dict[str, Any]], seen: dict[str, dict[str, float]], rearm_s: float,
                  report_of: Callable[[str], str]) -> tuple[list[Notice], dict[str, dict[str, float]]]:
    """The notices of one decision's records, each with the state it is sent once for, and the episodes after it
    (those silent for more than `rearm_s` dropped). `report_of(run_id)`: the link to a started run's report."""
    now = max((float(r.get("decided_at", 0.0)) for r in records), default=0.0)
    episodes = {s: e for s, e in seen.items() if now - e["last"] <= rearm_s}
    notices: list[Notice] = []
    started: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        if automation_outcome(record) == "started":
            started.setdefault(str(record.get("run_id")), []).append(record)
            continue
        subject, at = event_subject(record), float(record.get("decided_at", now))
        episode = episodes.get(subject)
        first = episode["first"] if episode is not None else at
        episodes[subject] = {"first": first, "last": at}
        notices.append(automation_notice(cluster, [record], episode_state(subject, first), None))
    notices += [automation_notice(cluster, answered, f"started:{run_id}", report_of(run_id))
                for run_id, answered in started.items()]
    return notices, episodes


def notify_events(settings: NotificationSettings, cluster: str, records: list[dict[str, Any]], folder: Path,
                  rearm_s: float, report_of: Callable[[str], str]) -> list[Notice]:
    """Send the notices of one decision's records (those not sent yet) and keep the episodes in `folder` (the
    automation folder); never raises for a channel (outbox.deliver). The sends' record keeps what this decision
    sent and the live episodes', and is pruned of the rest (outbox.prune). The notices built, sent or not."""
    if not records or not settings.channels_for(KIND, None):
        return []
    seen_path = folder / SEEN_FILE
    seen = json.loads(seen_path.read_text()) if seen_path.exists() else {}
    notices, episodes = event_notices(cluster, records, seen, rearm_s, report_of)
    folder.mkdir(parents=True, exist_ok=True)
    write_json(seen_path, episodes)
    for notice in notices:
        deliver(settings, notice, folder / RECORD_FILE)
    live = {notice.key for notice in notices} | {message_key(KIND, episode_state(subject, episode["first"]))
                                                  for subject, episode in episodes.items()}
    prune(folder / RECORD_FILE, live)
    return notices
