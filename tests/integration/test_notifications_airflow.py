"""Notifications through a real Airflow (API server, scheduler, DAG processor, triggerer on loopback) on the real
local cluster with the demo's workload: a manual drain waiting for approval sends one message to a local webhook
receiver, with the link to its approval under Required Actions; a second channel that refuses connections leaves
the run going (rejected, it ends in success) with its failure recorded in the run folder; an approval left waiting
past remind_after sends one reminder (the scheduler's sweep resumes the approve step for it) and its answer one
message."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from kafka_rebalancer.config import load_config
from kafka_rebalancer.notify.outbox import RECORD_FILE, read_sends
from kafka_rebalancer.run_folder import APPROVAL
from tests.integration.conftest import demo_config
from tests.integration.shared_airflow import MANUAL, SharedAirflow
from tests.unit.test_notifications import Receiver
from tools.ports import free_ports

pytestmark = [pytest.mark.kafka, pytest.mark.airflow]


@pytest.fixture(scope="module")
def notified_airflow(demo_workload: tuple[str, dict], shared_airflow: SharedAirflow,
                     tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    bootstrap, _ = demo_workload
    root = tmp_path_factory.mktemp("notifications")
    receiver = Receiver()
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    host, port = receiver.server_address[:2]
    notifications = {
        "channels": {"pager": {"kind": "webhook", "airflow_connection_id": "notify_hook", "endpoint": "/kafka"},
                     "refused": {"kind": "slack", "airflow_connection_id": "notify_refused"}},
        "routes": [{"kinds": ["approval_waiting", "run_failed"], "channels": ["pager", "refused"]}]}
    config_path = demo_config(root, notifications=notifications)
    config = load_config(config_path)
    services = shared_airflow.use(config_path, bootstrap, unpaused=(MANUAL,))
    shared_airflow.put_connection("notify_hook", {"conn_type": "http", "host": host, "port": port, "schema": "http"})
    shared_airflow.put_connection("notify_refused", {"conn_type": "slackwebhook",
                                                     "host": f"http://127.0.0.1:{free_ports(1)[0]}",
                                                     "password": "T0/B0/refusedsecret"})
    try:
        yield {"services": services, "config": config, "receiver": receiver}
    finally:
        shared_airflow.quiet()
        receiver.shutdown()
        receiver.server_close()


def test_notification_of_a_manual_drain_waiting_for_approval_in_airflow(notified_airflow: dict) -> None:
    services, config, receiver = (notified_airflow[k] for k in ("services", "config", "receiver"))
    run_id = services.trigger(MANUAL, {"action": "drain-brokers", "brokers": [6], "mode": "execute",
                                       "reason": "notification test"})
    services.wait_for_input(MANUAL, run_id)
    deadline = time.monotonic() + 60
    while not receiver.requests and time.monotonic() < deadline:
        time.sleep(0.5)
    [request] = receiver.requests
    body = request["json"]
    assert request["path"] == "/kafka" and body["kind"] == "approval_waiting" and body["run_id"] == run_id
    assert body["facts"]["action"] == "drain-brokers" and body["facts"]["reason"] == "notification test"
    assert body["links"]["approve or reject"].startswith(
        f"{services.url}/dags/{MANUAL}/runs/{run_id}/tasks/approve/required_actions")
    assert body["links"]["report"] == f"{services.url}/kafka-rebalancer/report/{run_id}"
    services.respond(MANUAL, run_id, "approve", ["Reject"])
    assert services.wait_for_run(MANUAL, run_id) == "success", services.task_states(MANUAL, run_id)
    assert len(receiver.requests) == 1  # nothing more for this run: rejected is not a failure
    sends = read_sends(config.run_dir(run_id) / RECORD_FILE)["approval_waiting:waiting"]
    assert sends["pager"]["status"] == "sent" and sends["refused"]["status"] == "failed", sends
    assert "refusedsecret" not in json.dumps(sends) + services.task_log(MANUAL, run_id, "approve")


@pytest.fixture(scope="module")
def reminding_airflow(demo_workload: tuple[str, dict], shared_airflow: SharedAirflow,
                      tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The approval's messages beyond the first slice: reminded after 20 s, then answered."""
    bootstrap, _ = demo_workload
    root = tmp_path_factory.mktemp("reminders")
    receiver = Receiver()
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    host, port = receiver.server_address[:2]
    notifications = {
        "channels": {"pager": {"kind": "webhook", "airflow_connection_id": "notify_reminders", "endpoint": "/r"}},
        "routes": [{"kinds": ["approval_waiting", "approval_reminder", "approval_answered"], "channels": ["pager"]}],
        "remind_after": "20s"}
    config_path = demo_config(root, notifications=notifications)
    services = shared_airflow.use(config_path, bootstrap, unpaused=(MANUAL,))
    shared_airflow.put_connection("notify_reminders", {"conn_type": "http", "host": host, "port": port,
                                                       "schema": "http"})
    try:
        yield {"services": services, "config": load_config(config_path), "receiver": receiver}
    finally:
        shared_airflow.quiet()
        receiver.shutdown()
        receiver.server_close()


def _messages(receiver: Receiver, count: int, timeout_s: float) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout_s
    while len(receiver.requests) < count and time.monotonic() < deadline:
        time.sleep(0.5)
    return [r["json"] for r in receiver.requests]


def test_notification_of_an_approval_reminded_then_answered_in_airflow(reminding_airflow: dict) -> None:
    """The approve step parks until remind_after; the scheduler's sweep resumes it, it reminds once, takes the
    sweep's default answer back and waits on; the person's answer then is the answer, and is told."""
    services, config, receiver = (reminding_airflow[k] for k in ("services", "config", "receiver"))
    run_id = services.trigger(MANUAL, {"action": "drain-brokers", "brokers": [6], "mode": "execute",
                                       "reason": "reminder test"})
    services.wait_for_input(MANUAL, run_id)
    waiting, reminder = _messages(receiver, 2, 120)[:2]
    assert (waiting["kind"], reminder["kind"]) == ("approval_waiting", "approval_reminder"), receiver.requests
    assert reminder["run_id"] == run_id and reminder["facts"]["reason"] == "reminder test"
    assert reminder["links"]["approve or reject"].startswith(
        f"{services.url}/dags/{MANUAL}/runs/{run_id}/tasks/approve/required_actions")
    services.wait_for_input(MANUAL, run_id)  # still waiting for a person: the default answer was taken back
    services.respond(MANUAL, run_id, "approve", ["Reject"])
    assert services.wait_for_run(MANUAL, run_id) == "success", services.task_states(MANUAL, run_id)
    messages = _messages(receiver, 3, 30)
    assert [m["kind"] for m in messages] == ["approval_waiting", "approval_reminder", "approval_answered"]
    assert messages[2]["facts"]["answer"].startswith("rejected by "), messages[2]
    decision = json.loads((config.run_dir(run_id) / APPROVAL / "decision.json").read_text())
    # the person's answer, not the sweep's default at the reminder's time
    assert decision["state"] == "rejected" and not any("no answer within" in w for w in decision["why"]), decision
    assert set(read_sends(config.run_dir(run_id) / RECORD_FILE)) == {
        "approval_waiting:waiting", "approval_reminder:reminder", "approval_answered:answered"}
