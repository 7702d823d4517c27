"""The config's `forecast` section and `kafka-rebalancer capacity`'s bad input (issue 55): clear errors, exit
code 2, no traceback; the section left at its default keeps the config fingerprint."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from kafka_rebalancer.cli import main
from kafka_rebalancer.config import load_config
from kafka_rebalancer.errors import ConfigError
from kafka_rebalancer.forecast_settings import ForecastSettings
from kafka_rebalancer.snapshot.log_size_history import query_history
from kafka_rebalancer.snapshot.prometheus_http import QueryWindow

BASE = "cluster: {name: c, bootstrap_servers: 'localhost:9'}\npools: {a: {brokers: [1, 2]}}\n"


def _config(tmp_path: Path, section: str) -> Path:
    path = tmp_path / "rebalancer.yaml"
    path.write_text(BASE + section)
    return path


def test_forecast_defaults_and_fingerprint(tmp_path: Path) -> None:
    plain = load_config(_config(tmp_path, ""))
    assert plain.forecast == ForecastSettings(history_days=14, horizon_days=90, warning_days=None)
    assert load_config(_config(tmp_path, "forecast: {history_days: 14}\n")).fingerprint() == plain.fingerprint()
    assert load_config(_config(tmp_path, "forecast: {horizon_days: 30}\n")).fingerprint() != plain.fingerprint()


@pytest.mark.parametrize(("section", "field", "message"), [
    ("forecast: {history_days: 1}", "forecast.history_days", "greater than or equal to 2"),
    ("forecast: {horizon_days: 0}", "forecast.horizon_days", "greater than or equal to 1"),
    ("forecast: {horizon_days: 30, warning_days: 40}", "forecast", "beyond horizon_days"),
    ("forecast: {history_day: 14}", "forecast.history_day", "unknown field"),
])
def test_forecast_bad_config_names_the_field(tmp_path: Path, section: str, field: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(_config(tmp_path, section + "\n"))
    assert f"{field}:" in str(caught.value) and message in str(caught.value)


def test_capacity_without_prometheus_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["capacity", "--config", str(_config(tmp_path, ""))]) == 2
    err = capsys.readouterr().err
    assert "metrics.prometheus" in err and "Traceback" not in err


def test_capacity_with_a_bad_config_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["capacity", "--config", str(_config(tmp_path, "forecast: {history_days: x}\n"))]) == 2
    err = capsys.readouterr().err
    assert "forecast.history_days" in err and "Traceback" not in err


class Answers:
    """A Prometheus client answering one canned `data`."""

    url = "http://prometheus.test"

    def __init__(self, data: dict) -> None:
        self.data = data

    def query_range(self, query: str, window: QueryWindow, shown_as: str) -> dict:
        assert 'kafka_log_log_size{job="kafka", topic!="", broker_id=~"1|2"}' in query and window.step == 3600
        return self.data


def test_forecast_history_bad_answer_is_a_clear_error(tmp_path: Path) -> None:
    config = load_config(_config(tmp_path, "metrics: {prometheus: {url: 'http://p:9090'}}\n"))
    settings = config.metrics.prometheus
    assert settings is not None
    with pytest.raises(Exception, match="expected a matrix"):
        query_history(Answers({"resultType": "vector", "result": []}), settings, config.forecast, [1, 2], 1e9)
    with pytest.raises(Exception, match="lacks the label 'topic'"):
        query_history(Answers({"resultType": "matrix", "result": [{"metric": {}, "values": [[1, "1"]]}]}),
                      settings, config.forecast, [1, 2], 1e9)
    empty = query_history(Answers({"resultType": "matrix", "result": []}), settings, config.forecast, [1, 2], 1e9)
    assert empty.samples.empty and "no topic is forecast" in empty.notes[0]
    short = query_history(Answers({"resultType": "matrix", "result": [
        {"metric": {"topic": "t"}, "values": [[1e9 - 3 * 86400 + 3600 * i, "5"] for i in range(72)]}]}),
        settings, config.forecast, [1, 2], 1e9)
    assert "holds 3.0 of the 14 days" in short.notes[0]


def test_capacity_prometheus_unreachable_exits_3(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    from kafka_rebalancer.kafka_admin import BrokerInfo, PartitionInfo
    from tests.helpers import fake_admin

    monkeypatch.setattr("kafka_rebalancer.snapshot.ClusterAdmin", fake_admin(
        [BrokerInfo(1, None, "h", 1), BrokerInfo(2, None, "h", 2)], [PartitionInfo("t", 0, [1, 2], [1, 2], 1)],
        {("t", 0): 10}))
    config = _config(tmp_path, f"metrics: {{prometheus: {{url: 'http://127.0.0.1:{port}', timeout_s: 2}}}}\n"
                               f"capacity: {{default: {{disk_bytes: 1000}}}}\n")
    assert main(["capacity", "--config", str(config)]) == 3
    err = capsys.readouterr().err
    assert "unreachable" in err and "Traceback" not in err
