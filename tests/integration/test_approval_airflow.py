"""The approval step through a real Airflow (API server, scheduler, DAG processor, triggerer on loopback), driven
through Airflow's REST API as an operator's script would, on the real local cluster with the demo's workload:

- unpausing the nightly DAG starts its latest missed run: outside the execution window and over the
  auto-approval limit it waits at the gate, whose body names both; rejected, it leaves the cluster untouched;
- a manual operation waits at the gate; approved through the REST API, it executes exactly the approved plan;
- a manual pool change nobody answers times out: rejected, the cluster untouched, no pool override recorded;
- the plugin's runs page lists the runs and serves their reports, to logged-in users only.
The tests run in file order on the session's Airflow (tests/integration/shared_airflow.py)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from kafka_rebalancer.config import load_config
from kafka_rebalancer.kafka_admin import ClusterAdmin, KafkaConnection
from kafka_rebalancer.model.reassignment import read_reassignment
from kafka_rebalancer.operations.overrides import OverrideStore
from tests.integration.conftest import assert_untouched_by_execution, demo_config
from tests.integration.shared_airflow import MANUAL, NIGHTLY, SharedAirflow
from tools.airflow_services import AirflowServices

pytestmark = [pytest.mark.kafka, pytest.mark.airflow]
TOPICS = ["orders", "payments", "clicks", "logs"]


@pytest.fixture(scope="module")
def airflow(demo_workload: tuple[str, dict], shared_airflow: SharedAirflow,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    bootstrap, _ = demo_workload
    root = tmp_path_factory.mktemp("approval")
    # A window that does not hold the test's time of day, and a replica-move limit every demo plan passes.
    opens = datetime.now(UTC) + timedelta(hours=6)
    window = {"start": opens.strftime("%H:%M"), "end": (opens + timedelta(hours=1)).strftime("%H:%M"),
              "timezone": "UTC"}
    config_path = demo_config(root, approval={"auto_approve": {"max_replica_moves": 1}, "window": window})
    services = shared_airflow.use(config_path, bootstrap, unpaused=(MANUAL,))
    try:
        yield {"services": services, "config": load_config(config_path), "bootstrap": bootstrap}
    finally:
        shared_airflow.quiet()


def cluster_assignment(bootstrap: str) -> dict[tuple[str, int], list[int]]:
    with ClusterAdmin(KafkaConnection(bootstrap)) as admin:
        return {(p.topic, p.partition): p.replicas for p in admin.describe_partitions(TOPICS)}


def decision(config: Any, run_id: str) -> dict[str, Any]:
    return json.loads((config.run_dir(run_id) / "approval" / "decision.json").read_text())


def plan_digest(config: Any, run_id: str) -> str:
    from kafka_rebalancer.approve.approval import PlanFacts
    from kafka_rebalancer.run_folder import RunFolder

    return PlanFacts.read(config, RunFolder(config.run_dir(run_id))).plan_hash


def test_unpaused_nightly_outside_the_window_and_over_the_limit_waits_and_reject_touches_nothing(
        airflow: dict) -> None:
    services, config = airflow["services"], airflow["config"]
    before = cluster_assignment(airflow["bootstrap"])
    services.set_paused(NIGHTLY, False)  # Airflow starts the latest missed interval at once
    try:
        run_id = _first_run(services, NIGHTLY)
        waiting = services.wait_for_input(NIGHTLY, run_id)
        body = waiting["body"]
        assert "max_replica_moves" in body, body
        assert "outside the execution window" in body, body
        assert plan_digest(config, run_id) in body
        services.respond(NIGHTLY, run_id, "approve", ["Reject"])
        services.wait_for_run(NIGHTLY, run_id)
    finally:
        services.set_paused(NIGHTLY, True)
    states = services.task_states(NIGHTLY, run_id)
    assert states["approve"] == "success", (states, services.task_log(NIGHTLY, run_id, "approve")[-3000:])
    assert all(s == "skipped" for t, s in states.items() if t.startswith(("execute", "verify"))), states
    assert states["report"] == "success"  # a rejected run is reported too
    assert "rejected by approver" in (config.run_dir(run_id) / "report" / "index.html").read_text()
    task_log = services.task_log(NIGHTLY, run_id, "approve")
    assert re.search(r"waiting for a person: \d+ replica moves, over max_replica_moves 1", task_log), task_log[-3000:]
    answer = decision(config, run_id)
    assert answer["state"] == "rejected" and answer["by"] == "approver", answer
    assert not (config.run_dir(run_id) / "execute").exists()
    assert cluster_assignment(airflow["bootstrap"]) == before
    assert_untouched_by_execution(airflow["bootstrap"], TOPICS)


def test_manual_operation_waits_for_approval_then_executes_exactly_the_approved_plan(airflow: dict) -> None:
    services, config = airflow["services"], airflow["config"]
    run_id = services.trigger(MANUAL, {"action": "rebalance-pool", "broker_pool": "pool-b", "mode": "execute"})
    waiting = services.wait_for_input(MANUAL, run_id)
    digest = plan_digest(config, run_id)
    assert digest in waiting["body"] and "pool-b" in waiting["body"]
    assert f"/kafka-rebalancer/report/{run_id}" in waiting["body"]  # reviewed before the answer
    assert (config.run_dir(run_id) / "report" / "index.html").exists()
    assert services.task_states(MANUAL, run_id)["approve"] == "awaiting_input"
    services.respond(MANUAL, run_id, "approve", ["Approve"])
    assert services.wait_for_run(MANUAL, run_id) == "success", services.task_states(MANUAL, run_id)
    # After verify: a run that did not ask to unregister brokers (only a drain may) leaves no unregister stage.
    assert services.task_states(MANUAL, run_id)["unregister"] == "success"
    assert not (config.run_dir(run_id) / "unregister").exists()
    answer = decision(config, run_id)
    assert (answer["state"], answer["plan_hash"], answer["by"]) == ("approved", digest, "approver")
    run_dir: Path = config.run_dir(run_id)
    executed = json.loads((run_dir / "execute" / "pool-b" / "result.json").read_text())
    assert executed["plan_hash"] == digest
    plan = read_reassignment(run_dir / "plan" / "plan.json")
    assert plan, "the demo's pool-b is skewed: rebalancing it moves replicas"
    now = cluster_assignment(airflow["bootstrap"])
    for entry in plan:
        assert now[(entry.topic, entry.partition)] == entry.replicas
    assert_untouched_by_execution(airflow["bootstrap"], TOPICS)
    # The task logs are the product's account of each step, not its libraries' chatter.
    for task_id, chatter in (("snapshot", "Closing transport"), ("validate", "Skipping registering function"),
                             ("plan", "resolves to a loopback address")):
        task_log = services.task_log(MANUAL, run_id, task_id)
        assert chatter not in task_log, (task_id, task_log[-3000:])
    assert "partitions change" in services.task_log(MANUAL, run_id, "plan")


def test_manual_pool_change_nobody_answers_times_out_and_leaves_nothing(airflow: dict) -> None:
    services, config = airflow["services"], airflow["config"]
    before = cluster_assignment(airflow["bootstrap"])
    run_id = services.trigger(MANUAL, {"action": "drain-brokers", "brokers": [6], "mode": "execute",
                                       "reason": "timeout test", "approval_timeout": "5s"})
    assert services.wait_for_run(MANUAL, run_id) == "success", services.task_states(MANUAL, run_id)
    answer = decision(config, run_id)
    assert answer["state"] == "rejected" and "no answer within 0:00:05" in answer["why"][0], answer
    assert services.task_states(MANUAL, run_id)["verify"] == "skipped"
    assert OverrideStore.of(config).read() == []
    assert cluster_assignment(airflow["bootstrap"]) == before
    assert_untouched_by_execution(airflow["bootstrap"], TOPICS)


def test_runs_page_lists_the_runs_and_serves_their_reports_to_logged_in_users_only(airflow: dict) -> None:
    services, config = airflow["services"], airflow["config"]
    plugins = services.request("GET", "/api/v2/plugins")["plugins"]
    views = [v for p in plugins if p["name"] == "kafka_rebalancer_ui" for v in p["external_views"]]
    assert views and views[0]["href"] == "/kafka-rebalancer/" and views[0]["url_route"] == "kafka-rebalancer"
    page = services.request_text("GET", "/kafka-rebalancer/")
    run_ids = [p.name for p in (config.run_root / config.cluster.name).iterdir()
               if p.is_dir() and not p.name.startswith(".")]  # .claims: the pools the runs hold
    assert len(run_ids) == 3 and all(run_id in page for run_id in run_ids), page[-3000:]
    links = sorted(set(re.findall(r'href="(/kafka-rebalancer/report/[^"]+)"', page)))  # the glance links some again
    assert len(links) == 3, page[-3000:]
    report = services.request_text("GET", links[0])
    assert report.startswith("<!DOCTYPE html>") or report.lower().startswith("<!doctype html>")
    assert "plotly" in report
    nightly_run = services.runs(NIGHTLY)[0]["dag_run_id"]  # an Airflow run id (with ':'), as the task link uses
    task_links = services.request("GET", f"/api/v2/dags/{NIGHTLY}/dagRuns/{nightly_run}/taskInstances/plan/links")
    link = task_links["extra_links"]["Run report"]
    assert link == f"/kafka-rebalancer/report/{nightly_run}" and "plotly" in services.request_text("GET", link)
    # Without a login the page is refused exactly as the UI's own API is.
    ui_refusal = services.status_without_login("/api/v2/dags")
    assert ui_refusal in (401, 403)
    assert services.status_without_login("/kafka-rebalancer/") == ui_refusal
    assert services.status_without_login(links[0]) == ui_refusal


def _first_run(services: AirflowServices, dag_id: str, timeout_s: float = 120) -> str:
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        runs = services.runs(dag_id)
        if runs:
            assert runs[0]["run_type"] == "scheduled", runs[0]
            return runs[0]["dag_run_id"]
        time.sleep(2)
    raise AssertionError(f"unpausing {dag_id} started no run within {timeout_s:.0f} s")
