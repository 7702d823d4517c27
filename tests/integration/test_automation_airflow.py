"""The cluster calls the pipeline, on a real Airflow (scheduler, triggerer, DAG processor, API server) and the
real local cluster: with the events DAG unpaused, the watcher in the triggerer sees broker 6 registered in no
pool, pool-b's claim takes it, and the events DAG starts a run of the manual DAG (add-brokers of broker 6 into
pool-b, in the mode the config gives: here dry-run), whose trigger says which event and what was observed; the
decision is in the events log."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from kafka_rebalancer.automation.store import read_events
from kafka_rebalancer.config import load_config
from tests.integration.conftest import demo_config
from tools.airflow_run import connections
from tools.airflow_services import AirflowServices

pytestmark = [pytest.mark.kafka, pytest.mark.airflow]
EVENTS, MANUAL = "kafka_rebalance_events", "kafka_rebalance_manual"


def _runs_of(services: AirflowServices, dag_id: str, timeout_s: float) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        runs = services.runs(dag_id)
        if runs:
            return runs
        time.sleep(2)
    raise AssertionError(f"no run of {dag_id} within {timeout_s:.0f}s")


def test_a_new_broker_a_pool_claims_starts_an_add_brokers_run_of_the_manual_dag(kafka_cluster: Any,
                                                                                 tmp_path: Path) -> None:
    bootstrap = kafka_cluster.load().bootstrap_servers
    config_path = demo_config(
        tmp_path, cluster={"name": "watched", "bootstrap_servers": bootstrap},
        pools={"pool-a": {"brokers": [1, 2, 3]}, "pool-b": {"brokers": [4, 5], "claim": {"broker_ids": ["6"]}}},
        automation={"poll_interval_s": 2, "broker_added": {"mode": "dry-run"}})
    config = load_config(config_path)
    services = AirflowServices(tmp_path / "airflow", config_path,
                               connections(config.cluster.airflow_connection_id, bootstrap))
    services.start()
    try:
        for dag_id in (EVENTS, MANUAL):
            services.wait_for_dag(dag_id)
        services.set_paused(MANUAL, False)
        services.set_paused(EVENTS, False)  # the watcher starts with it
        (event_run,) = _runs_of(services, EVENTS, 240)
        assert event_run["run_type"] == "asset_triggered", event_run
        assert services.wait_for_run(EVENTS, event_run["dag_run_id"], 300) == "success", \
            services.task_states(EVENTS, event_run["dag_run_id"])
        (manual_run,) = _runs_of(services, MANUAL, 60)
        conf = manual_run["conf"]
        assert (conf["action"], conf["broker_pool"], conf["brokers"], conf["mode"]) == (
            "add-brokers", "pool-b", [6], "dry-run"), conf
        assert "broker 6 (rack" in conf["reason"] and "pool pool-b's claim takes it" in conf["reason"]
        assert services.wait_for_run(MANUAL, manual_run["dag_run_id"], 600) == "success", \
            services.task_states(MANUAL, manual_run["dag_run_id"])
    finally:
        services.stop()
    request = json.loads((config.run_dir(manual_run["dag_run_id"]) / "request.json").read_text())
    assert request["action"] == "add-brokers" and request["reason"] == conf["reason"], request
    decisions = [(e["kind"], e["broker_id"], e["decision"]) for e in read_events(config)]
    assert ("broker_added", 6, "observed") in decisions and ("broker_added", 6, "started") in decisions, decisions
    assert [d for d in decisions if d[2] == "started"] == [("broker_added", 6, "started")]  # once
