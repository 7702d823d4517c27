"""Tiered topics (issue 54): remote bytes per partition from the leaders' remote log metrics, and a move's cost."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from kafka_rebalancer.config import PrometheusSettings, load_config
from kafka_rebalancer.kafka_admin import BrokerInfo, KafkaConnection, PartitionInfo
from kafka_rebalancer.model.schemas import TIERED_PARTITIONS
from kafka_rebalancer.run_folder import RunFolder
from kafka_rebalancer.snapshot import read_snapshot, take_snapshot
from kafka_rebalancer.snapshot.prometheus import Series
from kafka_rebalancer.snapshot.tiered import (
    fetches_from_last_tiered,
    latest_by_pair,
    move_cost,
    query_remote_bytes,
    tiered_lines,
    tiered_partitions,
    tiered_summary,
    tiered_topics,
)
from tests.helpers import fake_admin


def _partitions() -> pd.DataFrame:
    # t: partitions 0 and 1 led by broker 1 (sizes 100 and 300), partition 2 by broker 2; u is not tiered
    return pd.DataFrame({"topic": ["t", "t", "t", "u"], "partition": [0, 1, 2, 0], "leader": [1, 1, 2, 1],
                         "size_bytes": [100, 300, 50, 999]})


def test_tiered_topics_from_configs() -> None:
    assert tiered_topics({"t": "true", "u": "false", "v": None, "w": "TRUE "}) == {"t", "w"}


def test_tiered_last_tiered_fetch_needs_every_live_broker() -> None:
    assert fetches_from_last_tiered({1: "true", 2: "true", 3: "false"}, [1, 2])
    assert not fetches_from_last_tiered({1: "true", 2: None}, [1, 2])
    assert not fetches_from_last_tiered({}, [])


def test_tiered_move_cost_rule() -> None:
    assert move_cost(1000, 200, last_tiered_fetch=True) == 200
    assert move_cost(1000, 5000, last_tiered_fetch=True) == 1000  # never more than the local log
    assert move_cost(1000, None, last_tiered_fetch=True) == 1000  # lag not reported: the local log
    assert move_cost(1000, 200, last_tiered_fetch=False) == 1000


def test_tiered_latest_sample_per_broker_and_topic() -> None:
    series = [Series((1, "t"), np.array([10.0, 30.0, 20.0]), np.array([5.0, 9.0, 7.0])),
              Series((2, "t"), np.array([]), np.array([]))]
    assert latest_by_pair(series) == {(1, "t"): 9.0}


def test_tiered_partitions_share_the_leaders_topic_value_by_local_size() -> None:
    table = tiered_partitions(_partitions(), {"t"}, {(1, "t"): 4000.0, (3, "t"): 7.0}, {(1, "t"): 40.0},
                              last_tiered_fetch=True)
    assert table.columns.tolist() == TIERED_PARTITIONS.names
    rows = table.set_index("partition")
    assert rows.loc[0, "remote_bytes"] == 1000 and rows.loc[1, "remote_bytes"] == 3000
    assert pd.isna(rows.loc[2, "remote_bytes"])  # its leader, broker 2, reports nothing
    assert rows.loc[0, "copy_lag_bytes"] == 10 and rows.loc[1, "copy_lag_bytes"] == 30
    # KIP-1023 on: the lag where reported, the local size where not (partition 2's leader reports nothing)
    assert rows["move_cost_bytes"].tolist() == [10, 30, 50]
    TIERED_PARTITIONS.to_arrow_table(table)


def test_tiered_without_kip1023_a_move_costs_the_local_size() -> None:
    table = tiered_partitions(_partitions(), {"t"}, None, {(1, "t"): 40.0}, last_tiered_fetch=False)
    assert table["move_cost_bytes"].tolist() == [100, 300, 50]
    assert table["remote_bytes"].isna().all()


def test_tiered_summary_and_lines() -> None:
    table = tiered_partitions(_partitions(), {"t"}, {(1, "t"): 4000.0}, {(1, "t"): 40.0}, last_tiered_fetch=True)
    summary = tiered_summary(table)
    assert summary == [{"topic": "t", "partitions": 3, "local_bytes": 450, "remote_bytes": 4000,
                        "move_cost_bytes": 90}]
    lines = tiered_lines(summary, last_tiered_fetch=True)
    assert lines[0].startswith("tiered topics (1): moves copy only what is past the last tiered offset")
    assert "t: 3 partitions, local 450, remote 4000" in lines[1]
    assert tiered_lines([], last_tiered_fetch=True) == []
    unreported = tiered_summary(tiered_partitions(_partitions(), {"t"}, None, None, last_tiered_fetch=False))
    assert "remote not reported" in tiered_lines(unreported, last_tiered_fetch=False)[1]


@pytest.mark.parametrize("tiered", [set(), {"absent"}])
def test_tiered_no_tiered_partitions_gives_an_empty_table(tiered: set[str]) -> None:
    table = tiered_partitions(_partitions(), tiered, {}, {}, last_tiered_fetch=False)
    assert table.empty and table.columns.tolist() == TIERED_PARTITIONS.names


class _Prometheus:
    """Answers each remote log query: broker 1 reports topic t, brokers 2 and 3 nothing."""

    url = "http://prometheus"

    def __init__(self) -> None:
        self.queries: list[str] = []

    def query_range(self, query: str, window: Any, shown_as: str) -> dict[str, Any]:
        self.queries.append(query)
        value = "4000" if "remotelogsizebytes" in query else "40"
        series = [{"metric": {"broker_id": "1", "topic": "t"}, "values": [[window.end, value]]}]
        return {"resultType": "matrix", "result": series if 'broker_id=~"1|2"' in query else []}


def test_tiered_remote_bytes_are_queried_per_broker_batch() -> None:
    settings = PrometheusSettings(url="http://prometheus", brokers_per_query=2)
    client = _Prometheus()
    found = query_remote_bytes(client, settings, [3, 1, 2], now=1000.0)
    assert found == {"remote_log_size_bytes": {(1, "t"): 4000.0}, "remote_copy_lag_bytes": {(1, "t"): 40.0}}
    assert len(client.queries) == 4 and 'broker_id=~"1|2"' in client.queries[0]
    assert "kafka_server_brokertopicmetrics_remotelogsizebytes" in client.queries[0]


GB = 10**9
BASE = ("cluster: {name: c, bootstrap_servers: 'localhost:9'}\npools: {a: {brokers: [1, 2, 3]}}\n"
        "capacity: {default: {disk_bytes: 100000000000}}\n")


@pytest.mark.parametrize("fetch", ["true", "false"])
def test_tiered_snapshot_records_the_tiered_topics_and_their_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   fetch: str) -> None:
    partitions = [PartitionInfo("t", 0, [1, 2], [1, 2], 1), PartitionInfo("u", 0, [2, 3], [2, 3], 2)]
    monkeypatch.setattr("kafka_rebalancer.snapshot.ClusterAdmin", fake_admin(
        [BrokerInfo(b, None, "h", b) for b in (1, 2, 3)], partitions, {("t", 0): 10 * GB, ("u", 0): GB},
        topic_configs={"t": {"remote.storage.enable": "true"}, "u": {"remote.storage.enable": "false"}},
        broker_configs={b: {"follower.fetch.last.tiered.offset.enable": fetch} for b in (1, 2, 3)}))
    path = tmp_path / "rebalancer.yaml"
    path.write_text(BASE + f"run_root: {tmp_path / 'runs'}\n")
    run = RunFolder(load_config(path).run_dir("r"))
    manifest = take_snapshot(load_config(path), KafkaConnection("localhost:9"), run)
    assert manifest["tiered"] == {"topics": ["t"], "last_tiered_fetch": fetch == "true",
                                  "brokers_fetching_last_tiered": [1, 2, 3] if fetch == "true" else []}
    tables, _ = read_snapshot(run)
    assert tables.tiered_partitions is not None
    row = tables.tiered_partitions.iloc[0]
    # no Prometheus: remote bytes and lag unknown, a move copies the local log either way
    assert (row["topic"], row["local_bytes"], row["move_cost_bytes"]) == ("t", 10 * GB, 10 * GB)
    assert pd.isna(row["remote_bytes"]) and pd.isna(row["copy_lag_bytes"])


def test_tiered_snapshot_without_tiered_topics_has_no_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("kafka_rebalancer.snapshot.ClusterAdmin", fake_admin(
        [BrokerInfo(b, None, "h", b) for b in (1, 2, 3)], [PartitionInfo("u", 0, [2, 3], [2, 3], 2)], {("u", 0): GB}))
    path = tmp_path / "rebalancer.yaml"
    path.write_text(BASE + f"run_root: {tmp_path / 'runs'}\n")
    run = RunFolder(load_config(path).run_dir("r"))
    manifest = take_snapshot(load_config(path), KafkaConnection("localhost:9"), run)
    assert "tiered" not in manifest
    assert read_snapshot(run)[0].tiered_partitions is None


def test_tiered_topics_are_in_show_and_the_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from io import StringIO

    from rich.console import Console

    from kafka_rebalancer.cli.tables import show_run
    from kafka_rebalancer.report.run_report import collect, render

    monkeypatch.setattr("kafka_rebalancer.snapshot.ClusterAdmin", fake_admin(
        [BrokerInfo(b, None, "h", b) for b in (1, 2, 3)], [PartitionInfo("t", 0, [1, 2], [1, 2], 1)],
        {("t", 0): 10 * GB}, topic_configs={"t": {"remote.storage.enable": "true"}}))
    path = tmp_path / "rebalancer.yaml"
    path.write_text(BASE + f"run_root: {tmp_path / 'runs'}\n")
    run = RunFolder(load_config(path).run_dir("r"))
    take_snapshot(load_config(path), KafkaConnection("localhost:9"), run)
    out = StringIO()
    show_run(Console(file=out, width=400), run)
    shown = out.getvalue()
    assert "tiered topics (1): moves copy the whole local log" in shown
    assert "t: 1 partitions, local 9.3 GiB, remote not reported" in shown
    page = render(collect(run))
    assert '<table id="tiered" class="sortable">' in page and "<td>t</td>" in page


def test_tiered_executor_moves_count_the_tiered_cost(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kafka_rebalancer.execute.moves import read_pool_plan
    from kafka_rebalancer.snapshot import capture, write_snapshot
    from tests.helpers import write_validated_plan

    monkeypatch.setattr("kafka_rebalancer.snapshot.ClusterAdmin", fake_admin(
        [BrokerInfo(b, None, "h", b) for b in (1, 2, 3)],
        [PartitionInfo("t", 0, [1, 2], [1, 2], 1), PartitionInfo("u", 0, [1, 2], [1, 2], 1)],
        {("t", 0): 10 * GB, ("u", 0): GB}, topic_configs={"t": {"remote.storage.enable": "true"}}))
    path = tmp_path / "rebalancer.yaml"
    path.write_text(BASE + f"run_root: {tmp_path / 'runs'}\n")
    config = load_config(path)
    run = RunFolder(config.run_dir("r"))
    tables, manifest = capture(config, KafkaConnection("localhost:9"))
    assert tables.tiered_partitions is not None
    # as with KIP-1023 on every broker and 2 GB of t's partition not yet tiered
    tables.tiered_partitions["move_cost_bytes"] = [2 * GB]
    manifest = write_snapshot(run, tables, manifest)
    digest = write_validated_plan(run, config, manifest["content_hash"],
                                  [("t", 0, [1, 2], [1, 3]), ("u", 0, [1, 2], [1, 3])])
    pool = tables.partitions["topic_pool"].iloc[0]
    moves = {m.key: m for m in read_pool_plan(run, pool, digest).moves}
    assert moves[("t", 0)].bytes_to_copy == 2 * GB and moves[("u", 0)].bytes_to_copy == GB
