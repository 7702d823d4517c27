"""A small cluster's plan worked out on the driver (pandas, no Spark job: `planner_input.DriverInput`) is the plan
Spark works out (`SparkInput`, what a large cluster gets): the same plan.json, rollback.json, every table of the
plan stage byte for byte, and the same summary (but for its duration), on snapshots with every kind of partition
and for the manual actions that plan differently."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from kafka_rebalancer.model.schemas import BROKERS, CANDIDATES, LOAD_PARTS, PARTITIONS, REPLICAS, SKIPPED
from kafka_rebalancer.operations.request import make_request, run_config, write_request
from kafka_rebalancer.plan.balance import local
from kafka_rebalancer.plan.balance.transforms import load_parts, planner_replicas, skipped_partitions
from kafka_rebalancer.plan.job import run_plan
from kafka_rebalancer.plan.planner_input import DriverInput, SparkInput
from kafka_rebalancer.run_folder import PLAN, SNAPSHOT, RunFolder, read_json, read_table
from kafka_rebalancer.snapshot import write_snapshot
from kafka_rebalancer.snapshot.build import SnapshotTables
from kafka_rebalancer.snapshot.store import snapshot_topics
from kafka_rebalancer.snapshot.synthetic import SyntheticSpec, generate
from kafka_rebalancer.spark_settings import DRIVER_MAX_REPLICAS_ENV
from tests.helpers import REPO, write_config

pytestmark = pytest.mark.spark

SPEC = SyntheticSpec(n_brokers=12, n_racks=3, n_pools=2, n_partitions=600, replication_factor=3,
                     under_replicated_fraction=0.03, out_of_pool_fraction=0.03, dead_broker=True, seed=17)
TAKEN_AT = "2026-11-27T00:00:00+00:00"  # one snapshot, written twice
PATHS = {"spark": "0", "driver": None}  # $KAFKA_REBALANCER_DRIVER_MAX_REPLICAS of each path (None: the default)


def _odd_partitions(tables: SnapshotTables) -> SnapshotTables:
    """Every kind of partition the plan job tells apart: an excluded topic, a topic of no pool, an offline one
    (no leader), one with a replica on an excluded broker (beside the generator's dead broker, replicas outside
    their pool and under-replicated partitions)."""
    parts, brokers = tables.partitions.copy(), tables.brokers.copy()
    topics = sorted(parts["topic"].unique())
    parts.loc[parts["topic"] == topics[0], "excluded"] = True
    parts.loc[parts["topic"] == topics[1], "topic_pool"] = None
    offline = parts.index[parts["topic"] == topics[2]][:3]
    parts.loc[offline, "leader"] = -1
    brokers.loc[brokers["broker_id"] == int(brokers["broker_id"].max()), "excluded"] = True
    return SnapshotTables(brokers, tables.replicas, parts, tables.warnings)


def _plan_both_ways(spark: Any, config_path: Path, tables: SnapshotTables, monkeypatch: pytest.MonkeyPatch,
                    caplog: pytest.LogCaptureFixture, **request: Any) -> dict[str, RunFolder]:
    runs = {}
    for path, limit in PATHS.items():
        if limit is None:
            monkeypatch.delenv(DRIVER_MAX_REPLICAS_ENV, raising=False)
        else:
            monkeypatch.setenv(DRIVER_MAX_REPLICAS_ENV, limit)
        config = run_config(config_path)
        run = RunFolder(config.run_dir(path))
        if request:
            write_request(run, make_request(config, **request))
            config = run_config(config_path, run)
        write_snapshot(run, tables, {"cluster": config.cluster.name, "taken_at": TAKEN_AT})
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="kafka_rebalancer.plan.job"):
            run_plan(spark, config, run)
        assert ("its tables are worked out and its pools are planned on the driver"
                in caplog.records[0].getMessage()) is (path == "driver")
        runs[path] = run
    return runs


def _assert_same_plan_stage(runs: dict[str, RunFolder]) -> None:
    folders = {path: run.stage_path(PLAN) for path, run in runs.items()}
    names = {path: sorted(p.name for p in folder.iterdir() if p.name != "files.json")
             for path, folder in folders.items()}
    assert names["driver"] == names["spark"]
    for name in names["driver"]:
        driver, spark = folders["driver"] / name, folders["spark"] / name
        if name == "summary.json":
            summaries = [read_json(f) for f in (driver, spark)]
            for summary in summaries:
                summary.pop("plan_seconds")
            assert summaries[0] == summaries[1]
        else:
            assert driver.read_bytes() == spark.read_bytes(), f"{name} differs"


@pytest.fixture
def cluster(tmp_path: Path) -> tuple[Path, SnapshotTables]:
    tables, body = generate(SPEC)
    config_path = write_config(tmp_path / "config.yaml", {**body, "run_root": str(tmp_path / "runs")})
    return config_path, _odd_partitions(tables)


SCENARIOS: dict[str, Callable[[SnapshotTables], dict[str, Any]]] = {
    "nightly": lambda _: {},
    "drain": lambda t: {"action": "drain-brokers", "brokers": [int(t.brokers["broker_id"].min())], "reason": "test"},
    "demote": lambda t: {"action": "demote-brokers", "brokers": [int(t.partitions["leader"].max())]},
    "elect-leaders": lambda _: {"action": "elect-leaders"},
    "rebalance-pool": lambda t: {"action": "rebalance-pool", "broker_pool": sorted(t.partitions["topic_pool"]
                                                                                   .dropna().unique())[0]},
}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_the_driver_plans_a_small_cluster_as_spark_does(spark: Any, cluster: tuple[Path, SnapshotTables],
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        caplog: pytest.LogCaptureFixture, scenario: str) -> None:
    config_path, tables = cluster
    runs = _plan_both_ways(spark, config_path, tables, monkeypatch, caplog, **SCENARIOS[scenario](tables))
    _assert_same_plan_stage(runs)
    summary = read_json(runs["driver"].stage_path(PLAN) / "summary.json")
    if scenario == "nightly":  # the snapshot has every kind of partition, and the plan moves replicas
        assert summary["totals"]["replica_moves"] > 0
        assert len(read_table(runs["driver"].stage_path(PLAN), CANDIDATES)) > 0
        assert {"skip", "drain", "home", "move"} <= set(summary["partition_status"])
        assert len(summary["skipped"]["by_reason"]) >= 4


def test_budgets_cut_both_plans_alike(spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      caplog: pytest.LogCaptureFixture) -> None:
    tables, body = generate(dataclasses.replace(SPEC, hot_brokers_per_pool=2, empty_brokers_per_pool=1))
    config_path = write_config(tmp_path / "config.yaml", {**body, "run_root": str(tmp_path / "runs"),
                                                          "budgets": {"max_replica_moves": 20}})
    runs = _plan_both_ways(spark, config_path, tables, monkeypatch, caplog)
    _assert_same_plan_stage(runs)
    assert read_json(runs["driver"].stage_path(PLAN) / "summary.json")["budgets"]["moves_dropped_by_budget"] > 0


def test_the_bench_s_small_cluster_is_planned_alike(spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    """9,000 replicas in two pools, with dozens of pre-check candidates (their order is part of the bytes)."""
    from bench.scales import SCALES

    tables, body = generate(SCALES["small"].spec)
    config_path = write_config(tmp_path / "config.yaml", {**body, "run_root": str(tmp_path / "runs")})
    runs = _plan_both_ways(spark, config_path, tables, monkeypatch, caplog)
    _assert_same_plan_stage(runs)
    assert len(read_table(runs["driver"].stage_path(PLAN), CANDIDATES)) > 20


def test_the_driver_tables_are_sparks(spark: Any, cluster: tuple[Path, SnapshotTables], tmp_path: Path) -> None:
    """The planner's input and the tables worked out from it, one by one, against their Spark twins."""
    config_path, tables = cluster
    config = run_config(config_path)
    run = RunFolder(config.run_dir("tables"))
    write_snapshot(run, tables, {"cluster": config.cluster.name})
    folder = run.stage_path(SNAPSHOT)
    topics = snapshot_topics(folder)
    brokers = read_table(folder, BROKERS)
    frames = {name: spark.read.parquet(str(folder / f"{name}.parquet")) for name in ("replicas", "partitions",
                                                                                      "brokers")}
    on_spark = SparkInput(planner_replicas(frames["replicas"], frames["partitions"], frames["brokers"], brokers,
                                           topics).localCheckpoint(), 0, 1)
    on_driver = DriverInput.of(read_table(folder, REPLICAS), read_table(folder, PARTITIONS), brokers, topics, (),
                               None)
    keys = ["topic", "partition", "broker_id"]
    columns = ["topic", "partition", "broker_id", "position", "topic_id", "topic_pool", "leader", "skip_reason",
               "status", "broker_pool", "broker_alive", "movable", "must_move", "plan_pool"]
    expected = on_spark.frame.select(*columns).toPandas().sort_values(keys).reset_index(drop=True)
    got = on_driver.frame[columns].sort_values(keys).reset_index(drop=True)
    pd.testing.assert_frame_equal(got, expected, check_dtype=False)
    assert set(expected["status"]) == {"skip", "drain", "move"} and expected["must_move"].any()
    resources = config.resource_list()
    parts_keys = ["broker_id", "plan_pool", "must_move", "resource"]
    pd.testing.assert_frame_equal(
        local.load_parts(on_driver.frame, resources).sort_values(parts_keys).reset_index(drop=True),
        load_parts(on_spark.frame, resources).toPandas().sort_values(parts_keys).reset_index(drop=True)[
            LOAD_PARTS.names], check_dtype=False)
    skipped, statuses = on_driver.skipped_and_statuses()
    assert statuses == on_spark.skipped_and_statuses()[1]
    pd.testing.assert_frame_equal(skipped, skipped_partitions(on_spark.frame).orderBy("topic", "partition")
                                  .toPandas()[SKIPPED.names], check_dtype=False)
    assert skipped["reason"].nunique() >= 4


def test_the_cli_plans_the_same_with_and_without_the_driver_path(tmp_path: Path) -> None:
    """`kafka-rebalancer plan` end to end, as an operator runs it: the same plan.json either way."""
    tables, body = generate(SPEC)
    config_path = write_config(tmp_path / "config.yaml", {**body, "run_root": str(tmp_path / "runs")})
    config = run_config(config_path)
    plans = {}
    for path, limit in PATHS.items():
        run = RunFolder(config.run_dir(f"cli-{path}"))
        write_snapshot(run, tables, {"cluster": config.cluster.name})
        env = {k: v for k, v in os.environ.items() if k != DRIVER_MAX_REPLICAS_ENV}
        if limit is not None:
            env[DRIVER_MAX_REPLICAS_ENV] = limit
        result = subprocess.run([sys.executable, "-m", "kafka_rebalancer.cli", "plan", "--config", str(config_path),
                                 "--run-id", f"cli-{path}"], cwd=REPO, env=env, capture_output=True, text=True)
        assert result.returncode == 0, result.stderr[-2000:]
        assert ("planned on the driver" in result.stderr) is (path == "driver")
        plans[path] = (run.stage_path(PLAN) / "plan.json").read_bytes()
    assert plans["driver"] == plans["spark"] and json.loads(plans["driver"])["partitions"]


def test_a_small_cluster_runs_no_spark_job_and_releases_the_session_first(
        spark: Any, cluster: tuple[Path, SnapshotTables], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DRIVER_MAX_REPLICAS_ENV, raising=False)
    config_path, tables = cluster
    config = run_config(config_path)
    run = RunFolder(config.run_dir("no-jobs"))
    write_snapshot(run, tables, {"cluster": config.cluster.name})
    tracker = spark.sparkContext.statusTracker()
    jobs_before = len(tracker.getJobIdsForGroup())
    released: list[bool] = []
    run_plan(spark, config, run, release=lambda: released.append(run.has(PLAN)))
    assert released == [False]  # once, before the plan stage was written
    assert len(tracker.getJobIdsForGroup()) == jobs_before
