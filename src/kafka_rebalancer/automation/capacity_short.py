"""The `capacity_short` event (issue 55): a run's capacity forecast (its forecast stage) finds a pool over its disk
threshold within `forecast.warning_days`. The event is recorded in the events log like the watcher's (decision
"reported": it starts no run) and told where notifications route `capacity_short` (once per episode:
notify.capacity_short). Never fails the run that raises it."""

from __future__ import annotations

import logging
import time
from typing import Any

from kafka_rebalancer.automation.events_log import append_events, automation_dir, event_line
from kafka_rebalancer.config import RebalancerConfig
from kafka_rebalancer.notify.capacity_short import KIND, notify_capacity_short
from kafka_rebalancer.run_folder import FORECAST, RunFolder, read_json

log = logging.getLogger(__name__)


def capacity_short_records(forecast: dict[str, Any], run_id: str, now: float) -> list[dict[str, Any]]:
    """An event per pool the forecast (forecast.json) marks short."""
    records = []
    for pool in forecast.get("pools") or []:
        if not pool.get("short"):
            continue
        first, total = pool["days_to_first_broker"], pool["days_to_pool_total"]
        crossings = ([f"broker {pool['first_broker']} in {first:.1f} days"] if first is not None else []) + (
            [f"the pool's total in {total:.1f} days"] if total is not None else [])
        observed = (f"pool {pool['broker_pool'] or '(no pool)'} over {pool['threshold']:.0%} of its disk in "
                    f"{pool['days_left']:.1f} days ({', '.join(crossings)}), under forecast.warning_days "
                    f"({forecast['warning_days']}); forecast of run {run_id}")
        records.append({"kind": KIND, "broker_pool": pool["broker_pool"], "broker_id": pool["first_broker"],
                        "at": now, "decided_at": now, "decided_in": run_id, "decision": "reported",
                        "observed": observed, "why": f"{observed}: a forecast starts no run",
                        "days_left": pool["days_left"], "warning_days": forecast["warning_days"]})
    return records


def report_capacity_short(config: RebalancerConfig, run: RunFolder, run_id: str, report: str | None,
                          now: float | None = None) -> list[dict[str, Any]]:
    """Record and tell the run's capacity_short events (none without a forecast stage); logs instead of raising."""
    try:
        folder = run.completed(FORECAST)
        if folder is None:
            return []
        records = capacity_short_records(read_json(folder / "forecast.json"), run_id,
                                         time.time() if now is None else now)
        append_events(config, records)
        for record in records:
            log.warning("capacity short: %s", event_line(record))
        notify_capacity_short(config.notifications, config.cluster.name, records, automation_dir(config), report)
        return records
    except Exception:  # the forecast's alarm must not stop the run's validation
        log.exception("the capacity_short events were not recorded or sent")
        return []
