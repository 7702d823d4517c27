"""One run of the nightly DAG (dag.test) on the real local cluster with the demo's skewed workload: snapshot,
plan on Spark, validate, execute per pool, verify. Afterwards the cluster carries plan.json, the brokers are
inside their bands (or the summary says why not), and every message produced before the run is still there."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kafka_rebalancer.config import load_config
from kafka_rebalancer.kafka_admin import ClusterAdmin, KafkaConnection
from kafka_rebalancer.model.reassignment import read_reassignment
from tests.integration.conftest import assert_spread_kept, demo_config
from tools.airflow_run import airflow_env, ensure_database, run_dag, write_connections
from tools.demo_workload import consume_and_check
from tools.local_kafka import LIBS

pytestmark = [pytest.mark.kafka, pytest.mark.airflow]


@pytest.fixture(scope="module")
def dag_run(demo_workload: tuple[str, dict], airflow_database: Path,
            tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    bootstrap, manifest = demo_workload
    root = tmp_path_factory.mktemp("nightly")
    config_path = demo_config(root)
    config = load_config(config_path)
    env = airflow_env(root / "airflow", config_path)
    ensure_database(env, airflow_database)
    connections = write_connections(root / "connections.json", config.cluster.airflow_connection_id, bootstrap)
    result = run_dag(env, connections, {"mode": "execute"}, root / "dag-run.log")
    log = (root / "dag-run.log").read_text()
    assert result["state"] == "success", log[-6000:]
    return {"bootstrap": bootstrap, "manifest": manifest, "config": config, "log": log,
            "run_dir": config.run_dir(result["run_id"])}


def test_every_stage_left_its_artifacts(dag_run: dict) -> None:
    run_dir: Path = dag_run["run_dir"]
    for path in ("snapshot/manifest.json", "snapshot/replicas.parquet", "plan/plan.json", "plan/rollback.json",
                 "plan/summary.json", "plan/bands.parquet", "plan/candidates.parquet", "validation/report.json",
                 "execute/pool-a/execution_log.jsonl", "execute/pool-b/result.json", "verify/report.txt",
                 "report/index.html"):
        assert (run_dir / path).exists(), path
    assert json.loads((run_dir / "validation" / "report.json").read_text())["success"]
    assert "rendered_map_index='pool-a'" in dag_run["log"] and "rendered_map_index='pool-b'" in dag_run["log"]
    # No Prometheus here: the capacity forecast says so in its stage and the report, and the run goes on.
    forecast = json.loads((run_dir / "forecast" / "forecast.json").read_text())
    assert not forecast["made"] and "metrics.prometheus is not set" in forecast["notes"][0]
    assert 'id="section-forecast"' in (run_dir / "report" / "index.html").read_text()


def test_cluster_assignment_equals_the_plan(dag_run: dict) -> None:
    plan = read_reassignment(dag_run["run_dir"] / "plan" / "plan.json")
    assert len(plan) > 0
    with ClusterAdmin(KafkaConnection(dag_run["bootstrap"])) as admin:
        current = {(p.topic, p.partition): p for p in admin.describe_partitions(["orders", "payments", "clicks",
                                                                                  "logs"])}
        assert admin.list_reassignments() == {}
    for entry in plan:
        info = current[(entry.topic, entry.partition)]
        assert info.replicas == entry.replicas
        assert sorted(info.isr) == sorted(entry.replicas)
        assert info.leader == entry.replicas[0]  # preferred leader elected


def test_kafkas_own_tool_accepts_the_plan_and_sees_it_complete(dag_run: dict) -> None:
    plan = dag_run["run_dir"] / "plan" / "plan.json"
    result = subprocess.run(
        ["java", "-cp", f"{LIBS}/*", "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
         "--bootstrap-server", dag_run["bootstrap"], "--reassignment-json-file", str(plan), "--verify"],
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    entries = read_reassignment(plan)
    for entry in entries:
        assert f"Reassignment of partition {entry.topic}-{entry.partition} is completed" in result.stdout


def test_brokers_are_inside_their_bands_or_the_summary_says_why(dag_run: dict) -> None:
    run_dir: Path = dag_run["run_dir"]
    verify = json.loads((run_dir / "verify" / "summary.json").read_text())
    summary = json.loads((run_dir / "plan" / "summary.json").read_text())
    assert verify["out_of_band_before"] > 0
    assert verify["partitions_not_at_plan"] == []
    for pool, resources in verify["pools"].items():
        noted = {(n["resource"], n["broker_id"]) for n in summary["pools"][pool]["notes"]}
        for resource, status in resources.items():
            for broker in status["out_of_band_after"]:
                assert (resource, broker) in noted, (pool, resource, broker)
    assert "pool-a" in (run_dir / "verify" / "report.txt").read_text()


def test_the_run_ends_inside_the_topic_spread_target(dag_run: dict) -> None:
    assert_spread_kept(dag_run["run_dir"])
    assert "topic spread: per topic and broker" in (dag_run["run_dir"] / "verify" / "report.txt").read_text()


def test_every_message_is_still_consumable(dag_run: dict) -> None:
    total = consume_and_check(dag_run["bootstrap"], dag_run["manifest"])
    assert total == sum(p["count"] for t in dag_run["manifest"].values() for p in t.values())


def test_runs_and_show_read_the_dag_run_from_its_folder(dag_run: dict) -> None:
    config_path = str(dag_run["config"].source_file)
    binary = str(Path(sys.executable).parent / "kafka-rebalancer")
    runs = subprocess.run([binary, "runs", "--config", config_path], capture_output=True, text=True, timeout=120)
    assert runs.returncode == 0, runs.stderr
    line = next(row for row in runs.stdout.splitlines() if row.startswith(dag_run["run_dir"].name))
    summary = json.loads((dag_run["run_dir"] / "plan" / "summary.json").read_text())
    for cell in ("airflow", "nightly", "execute", "verified", "auto-approved", str(summary["totals"]["replica_moves"])):
        assert cell in line.split(), (cell, line)
    show = subprocess.run([binary, "show", "--config", config_path, dag_run["run_dir"].name], capture_output=True,
                          text=True, timeout=120)
    assert show.returncode == 0, show.stderr
    for text in ("pool pool-a:", "pool pool-b:", "largest moves", "validation: passed", "execution pool-a:",
                 f"plan {summary['plan_hash']}"):
        assert text in show.stdout, (text, show.stdout[-3000:])


@pytest.mark.browser
def test_the_runs_report_opens_in_a_real_browser(dag_run: dict) -> None:
    from tests.browser import check_report_in_browser, every_chart_drawn

    shown = check_report_in_browser(dag_run["run_dir"] / "report" / "index.html", "nightly-dag-run")
    assert shown["errors"] == [], shown["errors"]
    assert len(shown["charts"]) >= 4 and every_chart_drawn(shown), shown["charts"]
    planned = len(read_reassignment(dag_run["run_dir"] / "plan" / "plan.json"))
    assert shown["rows"] == planned and 0 < shown["filtered_rows"] <= planned
