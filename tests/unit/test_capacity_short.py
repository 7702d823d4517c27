"""The capacity_short event (issue 55): a run's forecast finding a pool over its disk threshold within
forecast.warning_days is recorded in the events log (decision "reported": it starts no run) and reaches the channels
routing capacity_short once per episode."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafka_rebalancer.automation.capacity_short import capacity_short_records, report_capacity_short
from kafka_rebalancer.automation.events_log import automation_dir, event_line, read_events
from kafka_rebalancer.config import load_config
from kafka_rebalancer.run_folder import FORECAST, RunFolder, write_json
from tests.unit.test_notifications import Receiver, _config_file, _connections, _free_port

DAY = 86400.0
HOOK = {"pager": {"kind": "webhook", "airflow_connection_id": "notify_hook"}}


def _pool(name: str, first: float | None, total: float | None, short: bool) -> dict[str, Any]:
    return {"broker_pool": name, "threshold": 0.8, "first_broker": 3 if first is not None else None,
            "days_to_first_broker": first, "days_to_pool_total": total,
            "days_left": min((d for d in (first, total) if d is not None), default=None), "short": short}


FORECAST_FACTS = {"made": True, "warning_days": 14, "horizon_days": 90, "notes": [],
                  "pools": [_pool("pool-a", 9.5, 30.0, True), _pool("pool-b", 40.0, None, False)]}


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def test_capacity_short_records_only_the_short_pools() -> None:
    [record] = capacity_short_records(FORECAST_FACTS, "scheduled__1", 1000.0)
    assert record["kind"] == "capacity_short" and record["broker_pool"] == "pool-a" and record["broker_id"] == 3
    assert record["decision"] == "reported" and record["days_left"] == 9.5 and record["decided_in"] == "scheduled__1"
    assert "over 80% of its disk in 9.5 days (broker 3 in 9.5 days, the pool's total in 30.0 days)" in \
        record["observed"]
    assert "capacity_short" in event_line(record) and "starts no run" in event_line(record)
    assert capacity_short_records({"made": False, "pools": []}, "r", 1.0) == []


def test_capacity_short_recorded_and_told_once_per_episode(monkeypatch: pytest.MonkeyPatch, receiver: Receiver,
                                                           tmp_path: Path) -> None:
    _connections(monkeypatch, receiver.url, _free_port())
    config = load_config(_config_file(tmp_path, {"channels": HOOK, "routes": [{"kinds": ["capacity_short"],
                                                                               "channels": ["pager"]}]}))
    nights = []
    for n, at in enumerate((0.0, DAY, 2 * DAY, 6 * DAY)):  # three nights in a row, then again after four days
        run = RunFolder(config.run_dir(f"scheduled__{n}"))
        with run.stage(FORECAST) as out:
            write_json(out / "forecast.json", FORECAST_FACTS)
        nights.append(report_capacity_short(config, run, run.path.name, "http://airflow/report", now=1e9 + at))
    assert [len(records) for records in nights] == [1, 1, 1, 1]
    events = read_events(config)
    assert [e["kind"] for e in events] == ["capacity_short"] * 4 and {e["decision"] for e in events} == {"reported"}
    assert not (automation_dir(config) / "retry").exists()  # nothing held back to start later: it starts no run
    bodies = [r["json"] for r in receiver.requests]
    assert [b["kind"] for b in bodies] == ["capacity_short", "capacity_short"]  # the first night, and after the gap
    assert bodies[0]["pool"] == "pool-a" and bodies[0]["facts"]["days left"] == "9.5"
    assert "Capacity short: pool pool-a" in bodies[0]["title"]


def test_capacity_short_without_a_forecast_stage_or_a_route(tmp_path: Path) -> None:
    config = load_config(_config_file(tmp_path, {}))
    run = RunFolder(config.run_dir("r"))
    assert report_capacity_short(config, run, "r", None) == []
    with run.stage(FORECAST) as out:
        write_json(out / "forecast.json", FORECAST_FACTS)
    assert len(report_capacity_short(config, run, "r", None)) == 1  # recorded, with no channel to tell
    assert not (automation_dir(config) / "notifications.json").exists()
