"""Snapshot tables from what the cluster reports, atomic stages, and the reassignment JSON format."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kafka_rebalancer.errors import ConfigError, RunFolderError
from kafka_rebalancer.kafka_admin import BrokerInfo, PartitionInfo
from kafka_rebalancer.model.reassignment import (
    dumps,
    parse_reassignment,
    plan_hash,
    read_reassignment,
    reassignment_document,
)
from kafka_rebalancer.run_folder import SNAPSHOT, RunFolder
from kafka_rebalancer.snapshot import read_snapshot, write_snapshot
from kafka_rebalancer.snapshot.build import SnapshotTables, build_snapshot_tables
from kafka_rebalancer.snapshot.store import content_hash
from tests.helpers import FIXTURES

CONFIG = {"cluster": {"name": "c1"}, "pools": {"a": {"brokers": [1, 2, 3]}},
          "topic_pools": [{"topics": "t*", "pool": "a"}], "capacity": {"default": {"disk_bytes": 1000}}}


def reported(config_factory: Callable[..., Any]) -> tuple[Any, SnapshotTables]:
    config = config_factory(CONFIG)
    brokers = [BrokerInfo(1, "r1", "h", 1), BrokerInfo(2, "r2", "h", 2), BrokerInfo(4, "r1", "h", 4)]
    partitions = [PartitionInfo("t1", 0, [1, 2], [1, 2], 1), PartitionInfo("t1", 1, [2, 3], [2], 2),
                  PartitionInfo("__consumer_offsets", 0, [1, 2], [1, 2], 1)]
    log_dirs = {1: {"replicas": {("t1", 0): 100, ("__consumer_offsets", 0): 7}, "total_bytes": 5000},
                2: {"replicas": {("t1", 0): 90, ("t1", 1): 50, ("__consumer_offsets", 0): 7}, "total_bytes": 5000},
                4: {"replicas": {}, "total_bytes": 5000}}
    return config, build_snapshot_tables(config, brokers, partitions, log_dirs)


def test_snapshot_tables(config_factory: Callable[..., Any]) -> None:
    _, tables = reported(config_factory)
    brokers = tables.brokers.set_index("broker_id")
    assert brokers.loc[3, "alive"] == False  # noqa: E712 - pool broker 3 is not in the cluster: dead
    assert brokers.loc[4, "broker_pool"] is None and brokers.loc[4, "alive"]
    assert brokers.loc[1, "disk_used_bytes"] == 107 and brokers.loc[2, "disk_used_bytes"] == 147
    assert any("broker 3 of pool 'a' is not in the cluster" in w for w in tables.warnings)
    assert any("broker 4 is in the cluster but in no pool" in w for w in tables.warnings)
    replicas = tables.replicas.set_index(["topic", "partition", "broker_id"])
    assert replicas.loc[("t1", 1, 3), "size_bytes"] == 50  # the dead broker's replica: the leader's size
    assert not replicas.loc[("t1", 1, 3), "in_isr"]
    parts = tables.partitions.set_index(["topic", "partition"])
    assert parts.loc[("t1", 0), "size_bytes"] == 100  # moving copies the leader's log
    internal = parts.loc[("__consumer_offsets", 0)]
    assert internal["excluded"] and internal["topic_pool"] is None


def test_snapshot_round_trip_and_hash(config_factory: Callable[..., Any], tmp_path: Path) -> None:
    _, tables = reported(config_factory)
    run = RunFolder(tmp_path / "run")
    manifest = write_snapshot(run, tables, {"cluster": "c1"})
    again, read_manifest = read_snapshot(run)
    assert read_manifest["content_hash"] == manifest["content_hash"] == content_hash(again)
    assert tables.log_dirs is not None and tables.replica_log_dirs is not None
    reordered = SnapshotTables(tables.brokers.iloc[::-1], tables.replicas.iloc[::-1], tables.partitions.iloc[::-1],
                               [], tables.log_dirs.iloc[::-1], tables.replica_log_dirs.iloc[::-1])
    assert write_snapshot(RunFolder(tmp_path / "again"), reordered, {})["content_hash"] == manifest["content_hash"]


def test_failed_stage_leaves_nothing_readable(tmp_path: Path) -> None:
    run = RunFolder(tmp_path / "run")
    with pytest.raises(RuntimeError), run.stage(SNAPSHOT) as folder:
        (folder / "brokers.parquet").write_text("half")
        raise RuntimeError("broker went away")
    assert not run.has(SNAPSHOT)
    assert list((tmp_path / "run").iterdir()) == []
    with pytest.raises(RunFolderError, match="run the 'snapshot' step first"):
        run.require(SNAPSHOT)


def test_retried_stage_replaces_the_old_one(tmp_path: Path) -> None:
    run = RunFolder(tmp_path / "run")
    for text in ("first", "second"):
        with run.stage("plan") as folder:
            (folder / "plan.json").write_text(text)
    assert (run.stage_path("plan") / "plan.json").read_text() == "second"
    assert sorted(p.name for p in run.path.iterdir()) == ["plan"]


def test_reassignment_document_is_kafkas_format_and_stable() -> None:
    import pandas as pd

    changes = pd.DataFrame({"topic": ["b", "a"], "partition": [0, 3], "old_replicas": [[1, 2], [2, 3]],
                            "new_replicas": [[1, 4], [5, 3]]})
    doc = reassignment_document(changes)
    assert doc == {"version": 1, "partitions": [{"topic": "a", "partition": 3, "replicas": [5, 3]},
                                                {"topic": "b", "partition": 0, "replicas": [1, 4]}]}
    assert reassignment_document(changes, "old_replicas")["partitions"][0]["replicas"] == [2, 3]
    assert dumps(doc) == dumps(json.loads(dumps(doc)))
    assert plan_hash(dumps(doc), "s", "c") != plan_hash(dumps(doc), "s", "d")


@pytest.mark.parametrize("name", ["three_brokers.json", "nine_brokers.json", "optimize_input.json",
                                  "optimize_output.json"])
def test_reads_kafka_kit_reassignment_files(name: str) -> None:
    entries = read_reassignment(FIXTURES / "kafka-kit" / name)
    assert entries and all(e.replicas for e in entries)


@pytest.mark.parametrize(("text", "field", "message"), [
    ('{"version": 2, "partitions": []}', "", "version"),
    ('{"version": 1, "partitions": [{"topic": "t", "partition": -1, "replicas": [1]}]}', "partitions[0].partition",
     "partition number"),
    ('{"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 1]}]}',
     "partitions[0].replicas", "appears twice"),
    ('{"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1]},'
     ' {"topic": "t", "partition": 0, "replicas": [2]}]}', "partitions[1]", "appears twice"),
])
def test_bad_reassignment_json(text: str, field: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_reassignment(text, "plan.json")
    assert err.value.field == field and message in err.value.message


def test_verify_judges_only_what_the_plan_balanced() -> None:
    import pandas as pd

    from kafka_rebalancer.plan.balance.pool_bands import unbalanced_as_planned

    plan_bands = pd.DataFrame({"broker_pool": ["a", "a", "b"], "resource": ["disk", "cpu", "disk"],
                               "balanced": [True, False, False]})
    after = pd.DataFrame({"broker_pool": ["a", "a", "b", "c"], "resource": ["disk", "cpu", "disk", "disk"],
                          "balanced": [True, True, True, True]})
    assert unbalanced_as_planned(after, plan_bands)["balanced"].tolist() == [True, False, False, True]
