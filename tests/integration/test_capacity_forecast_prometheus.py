"""The capacity forecast (issue 55) against a real Prometheus (Debian's package) whose history is backfilled with
promtool's `tsdb create-blocks-from openmetrics`: 30 days of every replica's `kafka_log_log_size` with known growth
(a topic growing steadily, one flat at its retention limit, one created mid-window, one with a restart gap). The
cluster itself is a stand-in (its admin calls answer the sizes at the history's end): the forecast's +30-day
projection per broker and pool is held within 5 % of the known sizes then."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kafka_rebalancer.cli import main
from kafka_rebalancer.config import load_config
from kafka_rebalancer.forecast import forecast_capacity
from kafka_rebalancer.kafka_admin import BrokerInfo, KafkaConnection, PartitionInfo
from kafka_rebalancer.model.schemas import BROKER_FORECAST, TOPIC_GROWTH
from kafka_rebalancer.plan.job import run_plan
from kafka_rebalancer.report.overview import run_overview
from kafka_rebalancer.report.run_report import write_report
from kafka_rebalancer.run_folder import FORECAST, RunFolder, read_table
from kafka_rebalancer.snapshot import capture, take_snapshot
from kafka_rebalancer.snapshot.prometheus_http import prometheus_http
from kafka_rebalancer.spark_settings import DRIVER_MAX_REPLICAS_ENV
from tests.browser import check_report_in_browser, every_chart_drawn
from tests.helpers import fake_admin, write_config
from tools.prometheus import backfill, serving

pytestmark = [pytest.mark.prometheus]

DAY, GB = 86400.0, 10**9
HISTORY_DAYS, STEP_S = 30, 1800.0
END = np.floor(time.time() / 3600) * 3600  # the last full hour: the command's window ends there too


@dataclass(frozen=True)
class Topic:
    name: str
    replicas: list[list[int]]  # per partition
    shares: list[float]  # of the topic's size, per partition
    size: Callable[[np.ndarray], np.ndarray]  # the topic's size at these times (NaN: not there)
    growth_per_day: float


def linear(base: float, per_day: float, born: float = -np.inf) -> Callable[[np.ndarray], np.ndarray]:
    return lambda t: np.where(t >= born, base + per_day * (t - np.maximum(born, END - HISTORY_DAYS * DAY)) / DAY,
                              np.nan)


def at_retention(t: np.ndarray) -> np.ndarray:
    """Filled at 4 GB a day, a 1 GB segment deleted each time it passes 100 GB: a sawtooth under a flat limit."""
    return 99 * GB + (4 * GB * (t - END) / DAY) % GB


def with_restart_gap(t: np.ndarray) -> np.ndarray:
    """Every broker down for twelve hours five days ago: no samples of any replica."""
    down = (t > END - 5 * DAY) & (t < END - 4.5 * DAY)
    return np.where(down, np.nan, linear(20 * GB, 1 * GB)(t))


TOPICS = [
    Topic("grow", [[1, 2], [2, 3], [3, 1]], [1 / 6, 2 / 6, 3 / 6], linear(50 * GB, 2 * GB), 2 * GB),
    Topic("flat", [[1, 2]], [1.0], at_retention, 0.0),
    Topic("young", [[2, 3], [3, 1]], [0.5, 0.5], linear(0.0, 5 * GB, born=END - 10 * DAY), 5 * GB),
    Topic("restart", [[1, 3], [2, 1]], [0.4, 0.6], with_restart_gap, 1 * GB),
]


def partition_size(topic: Topic, partition: int, t: np.ndarray) -> np.ndarray:
    return topic.size(t) * topic.shares[partition]


def known_in(days: float) -> dict[int, float]:
    """Each broker's bytes `days` after the history's end, as the known growth makes them (flat stays flat)."""
    out = {1: 0.0, 2: 0.0, 3: 0.0}
    for topic in TOPICS:
        for p, replicas in enumerate(topic.replicas):
            now = float(partition_size(topic, p, np.array([END]))[0])
            for b in replicas:
                out[b] += now + days * topic.growth_per_day * topic.shares[p]
    return out


def openmetrics() -> str:
    times = np.arange(END - HISTORY_DAYS * DAY, END + 1, STEP_S)
    lines = ["# TYPE kafka_log_log_size gauge"]
    for topic in TOPICS:
        for p, replicas in enumerate(topic.replicas):
            sizes = partition_size(topic, p, times)
            for b in replicas:
                labels = f'job="kafka",broker_id="{b}",topic="{topic.name}",partition="{p}"'
                lines += [f"kafka_log_log_size{{{labels}}} {v:.1f} {t:.0f}" for t, v in zip(times, sizes, strict=True)
                          if np.isfinite(v)]
    return "\n".join(lines) + "\n# EOF\n"


@pytest.fixture(scope="module")
def backfilled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("forecast-prometheus")
    source = folder / "history.om"
    source.write_text(openmetrics())
    backfill(source, folder / "data")
    with serving(folder / "data", retention="3650d") as url:  # longer than the history, up to END
        yield url


@pytest.fixture
def cluster(tmp_path: Path, backfilled: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A config for the stand-in cluster whose replicas are as large as at the history's end."""
    partitions = [PartitionInfo(t.name, p, r, r, r[0]) for t in TOPICS for p, r in enumerate(t.replicas)]
    sizes = {(t.name, p): int(partition_size(t, p, np.array([END]))[0]) for t in TOPICS for p in range(len(t.replicas))}
    brokers = [BrokerInfo(b, None, "localhost", 9092) for b in (1, 2, 3)]
    monkeypatch.setattr("kafka_rebalancer.snapshot.ClusterAdmin", fake_admin(brokers, partitions, sizes))
    body: dict[str, Any] = {"cluster": {"name": "forecast", "bootstrap_servers": "localhost:9"},
                            "pools": {"p": {"brokers": [1, 2, 3]}}, "default_pool": "p",
                            "capacity": {"default": {"disk_bytes": 600 * GB}},
                            "metrics": {"prometheus": {"url": backfilled}}, "forecast": {"history_days": 14}}
    return write_config(tmp_path / "rebalancer.yaml", body)


def test_capacity_forecast_from_backfilled_prometheus_within_5_percent(cluster: Path) -> None:
    config = load_config(cluster)
    tables, _ = capture(config, KafkaConnection("localhost:9"))
    client = prometheus_http(config.metrics.prometheus, str(cluster))  # type: ignore[arg-type]
    forecast = forecast_capacity(config, tables, client, END)
    growth = forecast.growth.set_index("topic")
    for topic in TOPICS:
        assert growth.loc[topic.name, "growth_bytes_per_day"] == pytest.approx(topic.growth_per_day, abs=0.05 * GB,
                                                                               rel=0.05), topic.name
    assert "10.0 of 14 days" in growth.loc["young", "note"]
    assert growth.loc["flat", "method"] == "peaks"
    known = known_in(30)
    projected = forecast.brokers.set_index("broker_id")["used_30d_bytes"]
    for broker, size in known.items():
        assert projected[broker] == pytest.approx(size, rel=0.05), broker
    pool = forecast.pools.iloc[0]
    assert pool["used_30d_bytes"] == pytest.approx(sum(known.values()), rel=0.05)
    assert pool["days_to_first_broker"] > 0 and forecast.notes == []


def test_capacity_command_prints_the_pool(cluster: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["capacity", "--config", str(cluster)]) == 0
    out = capsys.readouterr().out
    assert "pool p: 3 brokers" in out and "projected: +7d" in out and "first broker over the threshold" in out
    assert "no topic is forecast" not in out and "topics without a trend" not in out and "SHORT" not in out
    assert "rightsizing (the planner on the cluster as forecast at +90 days):" in out and "  pool p: " in out
    cluster.write_text(cluster.read_text().replace("history_days: 14", "history_days: 14\n  warning_days: 80"))
    assert main(["capacity", "--config", str(cluster)]) == 0
    assert "SHORT: over the threshold in" in capsys.readouterr().out


@pytest.mark.parametrize("where", ["driver", "spark"])
def test_forecast_in_the_nightly_plan_step(cluster: Path, spark: Any, where: str, monkeypatch: pytest.MonkeyPatch,
                                          caplog: pytest.LogCaptureFixture,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """The run's snapshot keeps the history; its plan step forecasts on the planned placement (growth on the driver
    for a small cluster, on Spark otherwise) and writes the forecast stage; the pool's +30-day use within 5 %."""
    if where == "spark":
        monkeypatch.setenv(DRIVER_MAX_REPLICAS_ENV, "0")
    config = load_config(cluster)
    run = RunFolder(config.run_dir(f"nightly-{where}"))
    manifest = take_snapshot(config, KafkaConnection("localhost:9"), run)
    history = manifest["forecast_history"]
    assert history["topics"] == len(TOPICS) and history["points"] > 0 and history["notes"] == []
    with caplog.at_level(logging.INFO):
        run_plan(spark, config, run)
    facts = json.loads((run.require(FORECAST) / "forecast.json").read_text())
    assert facts["made"] and facts["topics"] == {**facts["topics"], "with_trend": len(TOPICS), "without_trend": 0}
    pool = facts["pools"][0]
    assert pool["used_30d_bytes"] == pytest.approx(sum(known_in(30).values()), rel=0.05)
    assert pool["days_to_first_broker"] > 0 and not pool["short"]
    per_broker = read_table(run.require(FORECAST), BROKER_FORECAST)
    assert per_broker["used_bytes"].sum() == pytest.approx(pool["used_bytes"])
    growth = read_table(run.require(FORECAST), TOPIC_GROWTH).set_index("topic")
    for topic in TOPICS:
        assert growth.loc[topic.name, "growth_bytes_per_day"] == pytest.approx(topic.growth_per_day, abs=0.05 * GB,
                                                                               rel=0.05), topic.name
    lines = [r.getMessage() for r in caplog.records]
    forecast_lines = [i for i, line in enumerate(lines) if line.startswith("capacity forecast: pool p: disk")]
    account = max(i for i, line in enumerate(lines) if line.startswith("plan "))
    assert forecast_lines and forecast_lines[-1] < account  # the account stays the plan's last word
    if where == "driver":  # where it shows: the report, `show`, the runs list (one run is enough)
        report = write_report(run)
        page = report.read_text()
        assert 'id="section-forecast"' in page and 'id="forecast-0"' in page and "Pool p" in page
        assert "every broker." in page and "threshold 80%" in page
        opened = check_report_in_browser(report, "forecast-run")  # the section's chart drawn in Chromium
        assert opened["errors"] == [] and every_chart_drawn(opened), (opened["errors"], opened["charts"])
        assert main(["show", "--config", str(cluster), run.path.name]) == 0
        shown = capsys.readouterr().out
        assert "capacity forecast" in shown and "pool p: disk" in shown and "+30d" in shown
        overview = run_overview(run)
        assert overview.capacity.startswith("p over 80% in ") or overview.capacity == "no pool over 80% within 90 d"
