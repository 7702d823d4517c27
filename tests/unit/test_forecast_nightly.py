"""The capacity forecast in a run (issue 55): the snapshot keeps the log size history or says why it has none (never
failing the run), the forecast stage says it too, the planned placement is what is projected, and the growth table
is checked at the plan step's boundary."""

from __future__ import annotations

import json
import socket
from concurrent.futures import Future
from pathlib import Path

import pandas as pd
import pytest

from kafka_rebalancer.config import load_config
from kafka_rebalancer.forecast.projection import replicas_after
from kafka_rebalancer.forecast.summary import forecast_summary, pool_line
from kafka_rebalancer.kafka_admin import BrokerInfo, KafkaConnection, PartitionInfo
from kafka_rebalancer.plan.forecast_step import Growth, check_growth, start_growth, write_forecast
from kafka_rebalancer.run_folder import FORECAST, SNAPSHOT, RunFolder
from kafka_rebalancer.snapshot import read_snapshot, take_snapshot
from tests.helpers import fake_admin

GB = 10**9
BASE = ("cluster: {name: c, bootstrap_servers: 'localhost:9'}\npools: {a: {brokers: [1, 2, 3]}}\n"
        "capacity: {default: {disk_bytes: 100000000000}}\n")


@pytest.fixture
def stand_in(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("kafka_rebalancer.snapshot.ClusterAdmin", fake_admin(
        [BrokerInfo(b, None, "h", b) for b in (1, 2, 3)], [PartitionInfo("t", 0, [1, 2], [1, 2], 1)],
        {("t", 0): 10 * GB}))


def _closed_port() -> int:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        return int(free.getsockname()[1])


@pytest.mark.parametrize(("metrics", "said"), [
    ("", "metrics.prometheus is not set: no capacity forecast"),
    ("metrics: {prometheus: {url: 'http://127.0.0.1:PORT', timeout_s: 2}}\n", "no log size history from Prometheus"),
])
def test_forecast_without_history_is_said_and_the_run_goes_on(tmp_path: Path, stand_in: None, metrics: str,
                                                              said: str) -> None:
    path = tmp_path / "rebalancer.yaml"
    path.write_text(BASE + metrics.replace("PORT", str(_closed_port())))
    config = load_config(path)
    run = RunFolder(config.run_dir("r"))
    manifest = take_snapshot(config, KafkaConnection("localhost:9"), run)
    assert said in manifest["forecast_history"]["notes"][0]
    assert not (run.require(SNAPSHOT) / "topic_history.parquet").exists()
    growth = start_growth(None, config, run, manifest, ["t"], on_driver=True)  # type: ignore[arg-type]  # no Spark
    assert growth.future is None
    tables, _ = read_snapshot(run)
    facts = write_forecast(config, run, tables, pd.DataFrame(), growth)
    assert facts == json.loads((run.require(FORECAST) / "forecast.json").read_text())
    assert not facts["made"] and said in facts["notes"][0] and facts["pools"] == []


def test_forecast_projects_the_planned_placement(tmp_path: Path, stand_in: None) -> None:
    """The growth on the driver from a history kept by the snapshot; the partition the plan moves from broker 2 to
    broker 3 grows on broker 3."""
    path = tmp_path / "rebalancer.yaml"
    path.write_text(BASE)
    config = load_config(path)
    run = RunFolder(config.run_dir("r"))
    take_snapshot(config, KafkaConnection("localhost:9"), run)
    tables, _ = read_snapshot(run)
    per_topic = pd.DataFrame({"topic": ["t"], "growth_bytes_per_day": [1 * GB], "method": ["segments"],
                              "points": [336], "history_days": [14.0], "reason": [None], "note": [None]})
    growth = Growth(_done(per_topic), {"notes": []}, None)
    changes = pd.DataFrame({"broker_pool": ["a"], "topic": ["t"], "partition": [0], "old_replicas": [[1, 2]],
                            "new_replicas": [[1, 3]], "size_bytes": [10 * GB]})
    facts = write_forecast(config, run, tables, changes, growth)
    pool = facts["pools"][0]
    assert facts["made"] and pool["used_bytes"] == 20 * GB and pool["used_30d_bytes"] == 80 * GB
    # 80 % of 100 GB: broker 1 and 3 at 10 GB + 1 GB a day cross on day 70, the pool's total (240 GB) never does
    assert pool["days_to_first_broker"] == pytest.approx(70.0) and pool["first_broker"] == 1
    assert pool["days_to_pool_total"] is None and pool["days_left"] == pytest.approx(70.0) and not pool["short"]
    assert "first broker over 80% in 70.0 days (broker 1), nor the pool's total" in pool_line(pool, 90, None)


def _done(frame: pd.DataFrame) -> Future[pd.DataFrame]:
    future: Future[pd.DataFrame] = Future()
    future.set_result(frame)
    return future


def test_forecast_replicas_after_a_plan() -> None:
    replicas = pd.DataFrame({"topic": ["t", "t", "u"], "partition": [0, 0, 0], "broker_id": [1, 2, 1],
                             "size_bytes": [5, 4, 7]})
    changes = pd.DataFrame({"topic": ["t"], "partition": [0], "new_replicas": [[3, 1]], "size_bytes": [5]})
    after = replicas_after(replicas, changes).sort_values(["topic", "broker_id"]).values.tolist()
    assert after == [["t", 0, 1, 5], ["t", 0, 3, 5], ["u", 0, 1, 7]]
    assert replicas_after(replicas, changes.iloc[:0]).equals(replicas)


def test_forecast_growth_checked_at_the_boundary() -> None:
    growth = pd.DataFrame({"topic": ["t", "t", "u"], "growth_bytes_per_day": [1.0, 1.0, None],
                           "reason": [None, None, None]})
    with pytest.raises(ValueError, match=r"topics given twice: \['t'\].*without a row: \['v'\].*neither a growth"):
        check_growth(growth, pd.Series(["t", "u", "v"]))


def test_forecast_short_within_warning_days() -> None:
    growth = pd.DataFrame({"topic": ["t"], "growth_bytes_per_day": [None], "reason": ["only 3 hourly points"],
                           "note": [None]})
    pools = pd.DataFrame({"broker_pool": ["a"], "days_to_first_broker": [12.0], "days_to_pool_total": [float("nan")]})
    facts = forecast_summary(growth, pools, [], 0.8, 90, 14, {})
    assert facts["pools"][0]["short"] and facts["pools"][0]["days_to_pool_total"] is None
    assert facts["topics"]["without_trend_listed"] == [{"topic": "t", "reason": "only 3 hourly points"}]
    assert not forecast_summary(growth, pools, [], 0.8, 90, 10, {})["pools"][0]["short"]


def test_forecast_failure_is_said_and_the_plan_goes_on(tmp_path: Path, stand_in: None) -> None:
    path = tmp_path / "rebalancer.yaml"
    path.write_text(BASE)
    config = load_config(path)
    run = RunFolder(config.run_dir("r"))
    take_snapshot(config, KafkaConnection("localhost:9"), run)
    tables, _ = read_snapshot(run)
    no_row_for_t = pd.DataFrame({"topic": ["u"], "growth_bytes_per_day": [1.0], "method": ["segments"],
                                 "points": [336], "history_days": [14.0], "reason": [None], "note": [None]})
    facts = write_forecast(config, run, tables, pd.DataFrame(), Growth(_done(no_row_for_t), {"notes": []}, None))
    assert not facts["made"] and "the forecast failed (ValueError: table topic_growth: topics of the snapshot " \
        "without a row: ['t'])" in facts["notes"][0]
