"""Notifications through a real Airflow (API server, scheduler, DAG processor, triggerer on loopback) on the real
local cluster with the demo's workload, received by a local webhook receiver:
- an approval left waiting past remind_after sends one reminder (the scheduler's sweep resumes the approve step for
  it) and its answer one message;
- a manual drain waiting for approval sends one message on each channel (the generic JSON webhook, Slack's blocks
  to the same local HTTP server, an e-mail to a local aiosmtpd server), whose link, opened in Chromium with a
  login, shows that approval under Required Actions; a channel that refuses connections leaves the run going
  (rejected, it ends in success) with its failure recorded in the run folder and on the runs page;
- a drain whose verify finds its promise broken (a topic put on the drained broker after the snapshot) sends one
  verify_failed message;
- an automation event held back (its pool held) sends one message, and the same event raised again none.
No connection's secret appears in any message, run folder or log of the Airflow's."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafka_rebalancer.automation.events_log import read_events
from kafka_rebalancer.config import load_config
from kafka_rebalancer.holds.claims import command_holds_pools
from kafka_rebalancer.notify.outbox import RECORD_FILE, read_sends
from kafka_rebalancer.run_folder import APPROVAL
from tests.browser import open_airflow_link_logged_in
from tests.integration.conftest import delete_topics, demo_config, wait_until
from tests.integration.shared_airflow import EVENTS, MANUAL, SharedAirflow
from tests.unit.test_notifications import Receiver, _Inbox
from tools.airflow_services import USER, AirflowServices
from tools.demo_workload import TopicSpec, create_topics
from tools.ports import free_ports

pytestmark = [pytest.mark.kafka, pytest.mark.airflow]
# The connections' secrets: the webhook's password (basic auth) and the Slack webhooks' tokens.
HOOK_SECRET, SLACK_SECRET, SLACK_REFUSED_SECRET = "hook-s3cret-notif", "T0/B0/slacksecret", "T0/B0/refusedsecret"
SECRETS = (HOOK_SECRET, SLACK_SECRET, SLACK_REFUSED_SECRET)
LATE = "notif-late"  # created on the drained broker after the drain's snapshot


def _receiver() -> Receiver:
    receiver = Receiver()
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    return receiver


def _webhook(receiver: Receiver) -> dict[str, Any]:
    host, port = receiver.server_address[:2]
    return {"conn_type": "http", "host": host, "port": port, "schema": "http", "login": "rebalancer",
            "password": HOOK_SECRET}


def _messages(receiver: Receiver, count: int, timeout_s: float) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout_s
    while len(receiver.requests) < count and time.monotonic() < deadline:
        time.sleep(0.5)
    return [r["json"] for r in receiver.requests]


def _assert_no_secret(services: AirflowServices, receiver: Receiver, run_root: Path, mails: str = "") -> None:
    """No secret in a message's body, a file of the run folders, or a log of the Airflow (its services' and every
    task's). (The Slack token is the path the local server was sent to: that is where it belongs.)"""
    bodies = json.dumps([r["json"] for r in receiver.requests]) + mails
    logs = [p for p in services.home.rglob("*") if p.is_file() and (p.suffix == ".log" or "logs" in p.parts)]
    files = [p for p in run_root.rglob("*") if p.is_file()]
    assert logs and files
    for secret in SECRETS:
        assert secret not in bodies
        leaked = [str(p) for p in logs + files if secret.encode() in p.read_bytes()]
        assert leaked == [], (secret, leaked)


@pytest.fixture(scope="module")
def reminding_airflow(demo_workload: tuple[str, dict], shared_airflow: SharedAirflow,
                      tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The approval's messages beyond the first: reminded after 20 s, then answered."""
    bootstrap, _ = demo_workload
    root = tmp_path_factory.mktemp("reminders")
    receiver = _receiver()
    notifications = {
        "channels": {"pager": {"kind": "webhook", "airflow_connection_id": "notify_reminders", "endpoint": "/r"}},
        "routes": [{"kinds": ["approval_waiting", "approval_reminder", "approval_answered"], "channels": ["pager"]}],
        "remind_after": "20s"}
    config_path = demo_config(root, notifications=notifications)
    shared_airflow.put_connection("notify_reminders", _webhook(receiver))
    services = shared_airflow.use(config_path, bootstrap, unpaused=(MANUAL,))
    try:
        yield {"services": services, "config": load_config(config_path), "receiver": receiver}
    finally:
        shared_airflow.quiet()
        receiver.shutdown()
        receiver.server_close()


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


@pytest.fixture(scope="module")
def notified_airflow(demo_workload: tuple[str, dict], shared_airflow: SharedAirflow,
                     tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The approval told on a webhook, Slack and e-mail, and on a Slack channel that refuses connections; a failed
    run and a broken promise on the webhook and the refusing one."""
    from aiosmtpd.controller import Controller

    bootstrap, _ = demo_workload
    root = tmp_path_factory.mktemp("notifications")
    receiver = _receiver()
    inbox, smtp_port = _Inbox(), free_ports(1)[0]
    smtp = Controller(inbox, hostname="127.0.0.1", port=smtp_port)
    smtp.start()
    notifications = {
        "channels": {"pager": {"kind": "webhook", "airflow_connection_id": "notify_hook", "endpoint": "/kafka"},
                     "slack": {"kind": "slack", "airflow_connection_id": "notify_slack"},
                     "mail": {"kind": "smtp", "airflow_connection_id": "notify_smtp", "to": ["oncall@example.com"]},
                     "refused": {"kind": "slack", "airflow_connection_id": "notify_refused"}},
        "routes": [{"kinds": ["approval_waiting"], "channels": ["pager", "slack", "mail", "refused"]},
                   {"kinds": ["run_failed", "verify_failed"], "channels": ["pager", "refused"]}]}
    config_path = demo_config(root, notifications=notifications)
    shared_airflow.put_connection("notify_hook", _webhook(receiver))
    shared_airflow.put_connection("notify_slack", {"conn_type": "slackwebhook", "host": f"{receiver.url}/services",
                                                   "password": SLACK_SECRET})
    shared_airflow.put_connection("notify_smtp", {"conn_type": "smtp", "host": "127.0.0.1", "port": smtp_port,
                                                  "extra": json.dumps({"disable_tls": True, "disable_ssl": True,
                                                                       "from_email": "rebalancer@example.com",
                                                                       "timeout": 5, "retry_limit": 0})})
    shared_airflow.put_connection("notify_refused", {"conn_type": "slackwebhook",
                                                     "host": f"http://127.0.0.1:{free_ports(1)[0]}",
                                                     "password": SLACK_REFUSED_SECRET})
    services = shared_airflow.use(config_path, bootstrap, unpaused=(MANUAL,))
    try:
        yield {"services": services, "config": load_config(config_path), "receiver": receiver, "inbox": inbox,
               "bootstrap": bootstrap}
    finally:
        shared_airflow.quiet()
        smtp.stop()
        receiver.shutdown()
        receiver.server_close()


def _mail_texts(inbox: _Inbox) -> list[str]:
    return [mail["Subject"] + "\n" + mail.get_payload()[0].get_payload(decode=True).decode()
            for _, mail in inbox.messages]


def test_notification_of_a_manual_drain_waiting_for_approval_in_airflow(notified_airflow: dict) -> None:
    services, config, receiver, inbox = (notified_airflow[k] for k in ("services", "config", "receiver", "inbox"))
    run_id = services.trigger(MANUAL, {"action": "drain-brokers", "brokers": [6], "mode": "execute",
                                       "reason": "notification test"})
    waiting = services.wait_for_input(MANUAL, run_id)
    _messages(receiver, 2, 60)
    [hook] = [r for r in receiver.requests if r["path"] == "/kafka"]
    [slack] = [r for r in receiver.requests if r["path"] == f"/services/{SLACK_SECRET}"]
    body = hook["json"]
    assert body["kind"] == "approval_waiting" and body["run_id"] == run_id
    assert body["facts"]["action"] == "drain-brokers" and body["facts"]["reason"] == "notification test"
    link = body["links"]["approve or reject"]
    assert link.startswith(f"{services.url}/dags/{MANUAL}/runs/{run_id}/tasks/approve/required_actions")
    assert body["links"]["report"] == f"{services.url}/kafka-rebalancer/report/{run_id}"
    assert slack["json"]["blocks"][0]["text"]["text"] == "Approval waiting: drain-brokers on demo"
    assert f"<{link}|approve or reject>" in json.dumps(slack["json"]["blocks"])
    [mail] = _mail_texts(inbox)
    assert mail.startswith("[kafka-rebalancer] Approval waiting: drain-brokers on demo\n") and \
        f"approve or reject: {link}\n" in mail and "reason: " in mail, mail
    # The link as a person opens it: the UI asks them to log in, then shows this run's approval, answerable.
    password = json.loads(services.password_file.read_text())[USER]
    shown = open_airflow_link_logged_in(link, USER, password,
                                        [waiting["subject"], "Reason: notification test", "Reject"],
                                        "notification-approval-link")
    assert "/required_actions" in shown["url"] and run_id in shown["url"], shown["url"]
    assert waiting["subject"] in shown["text"], shown["text"][:3000]
    services.respond(MANUAL, run_id, "approve", ["Reject"])
    assert services.wait_for_run(MANUAL, run_id) == "success", services.task_states(MANUAL, run_id)
    assert len(receiver.requests) == 2 and len(inbox.messages) == 1  # nothing more: rejected is not a failure
    sends = read_sends(config.run_dir(run_id) / RECORD_FILE)["approval_waiting:waiting"]
    assert {channel: s["status"] for channel, s in sends.items()} == {
        "pager": "sent", "slack": "sent", "mail": "sent", "refused": "failed"}, sends
    page = services.request_text("GET", "/kafka-rebalancer/")
    assert "refused (approval_waiting:waiting): " in page, page  # the channel's failure, on the runs page


def test_notification_of_a_verify_finding_a_promise_broken_in_airflow(notified_airflow: dict) -> None:
    """Approved, the drain empties broker 6 of what its snapshot saw; a topic created there meanwhile breaks its
    promise: verify fails at once (no retry) and says so in one message, the run's failure in no other."""
    services, config, receiver, bootstrap = (notified_airflow[k] for k in ("services", "config", "receiver",
                                                                           "bootstrap"))
    run_id = services.trigger(MANUAL, {"action": "drain-brokers", "brokers": [6], "mode": "execute",
                                       "reason": "verify test"})
    services.wait_for_input(MANUAL, run_id)
    create_topics(bootstrap, [TopicSpec(LATE, [[6, 1]], [0])])
    try:
        services.respond(MANUAL, run_id, "approve", ["Approve"])
        assert services.wait_for_run(MANUAL, run_id, 600) == "failed", services.task_states(MANUAL, run_id)
        assert services.task_states(MANUAL, run_id)["verify"] == "failed"

        def this_run() -> list[dict[str, Any]]:
            return [r["json"] for r in receiver.requests if r["path"] == "/kafka" and r["json"]["run_id"] == run_id]

        wait_until(lambda: len(this_run()) >= 2, 30, "the verify's message")
        waiting, broken = this_run()
        assert (waiting["kind"], broken["kind"]) == ("approval_waiting", "verify_failed"), this_run()
        # The late topic's row is listed, "broken" or, where the plan already said the drain cannot empty broker 6
        # (the shared cluster as earlier modules left it: __consumer_offsets with no room elsewhere), "cannot".
        assert f"{LATE}-0 still has a replica on broker 6 (its leader)" in broken["happened"], broken
        assert int(broken["facts"]["not kept"]) >= 1, broken
        time.sleep(2)  # the report task's failure came after it: nothing more
        assert len(this_run()) == 2, this_run()
    finally:
        delete_topics(bootstrap, [LATE])
    _assert_no_secret(services, receiver, config.run_root, "\n".join(_mail_texts(notified_airflow["inbox"])))


def test_notification_of_an_automation_event_held_back_once_in_airflow(
        demo_workload: tuple[str, dict], shared_airflow: SharedAirflow, tmp_path: Path) -> None:
    """The demo's pools are out of band at the first band check; a command holds both, so the events DAG holds the
    events back, and the band check raises them again every 10 s: one message each for the episode."""
    bootstrap, _ = demo_workload
    receiver = _receiver()
    config_path = demo_config(
        tmp_path, notifications={
            "channels": {"pager": {"kind": "webhook", "airflow_connection_id": "notify_events"}},
            "routes": [{"kinds": ["automation_event"], "channels": ["pager"]}]},
        automation={"poll_interval_s": 2, "cooldown_s": 30,
                    "out_of_band": {"mode": "dry-run", "share": 0.3, "sustained_s": 0, "check_interval_s": 10}})
    config = load_config(config_path)
    shared_airflow.put_connection("notify_events", _webhook(receiver))

    def held_back() -> list[dict[str, Any]]:
        return [e for e in read_events(config) if e["kind"] == "pool_out_of_band" and e["broker_pool"] == "pool-a"
                and e["decision"] == "suppressed" and "held by kafka-rebalancer notification test" in e["why"]]

    try:
        with command_holds_pools(config, "notification test", None, ["pool-a", "pool-b"]):
            services = shared_airflow.use(config_path, bootstrap, unpaused=(MANUAL, EVENTS))
            wait_until(lambda: len({e["decided_in"] for e in held_back()}) >= 2, 240,
                       "pool-a's out of band held back by two decisions", poll_s=1)
            # The second decision's notifications are sent after it is recorded: until its run ends.
            assert services.wait_for_run(EVENTS, held_back()[-1]["decided_in"], 60) == "success"
        messages = [r["json"] for r in receiver.requests]
    finally:
        shared_airflow.quiet()
        receiver.shutdown()
        receiver.server_close()
    assert not [e for e in read_events(config) if e["decision"] == "started"]  # the pools were held throughout
    titles = [m["title"] for m in messages]
    pool_a = [m for m in messages if m["title"] == "Automation held back: pool_out_of_band on demo"
              and m["pool"] == "pool-a"]
    assert len(pool_a) == 1, titles
    assert "pool pool-a is held by kafka-rebalancer notification test (pid " in pool_a[0]["happened"], pool_a
    assert f"pid {os.getpid()}" in pool_a[0]["happened"]
    assert len(titles) == len({(m["title"], m["pool"]) for m in messages}), titles  # each subject once
    _assert_no_secret(services, receiver, config.run_root)
