"""Notifications against real receivers: a local HTTP server (Slack's incoming-webhook format and the generic JSON
webhook) and a local SMTP server (aiosmtpd), through the providers' notifiers and Airflow connections given as
AIRFLOW_CONN_* variables, as a deployment's secrets backend would give them."""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Iterator
from email import message_from_bytes
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiosmtpd.controller import Controller

from kafka_rebalancer.config import load_config
from kafka_rebalancer.errors import ConfigError
from kafka_rebalancer.notification_settings import NotificationSettings
from kafka_rebalancer.notify import channels
from kafka_rebalancer.notify.messages import (
    Notice,
    WaitingPlan,
    approval_waiting_notice,
    run_failed_notice,
)
from kafka_rebalancer.notify.outbox import MAX_RETRIES, deliver, read_sends
from tools.ports import free_ports

SLACK_TOKEN = "T0NOTIFY/B0NOTIFY/slacksecrettoken42"
WEBHOOK_PASSWORD = "webhook-secret-password-42"
SMTP_PASSWORD = "smtp-secret-password-42"


class Receiver(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        super().__init__(("127.0.0.1", 0), _Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.server.requests.append({"path": self.path, "headers": dict(self.headers),  # type: ignore[attr-defined]
                                     "json": json.loads(body)})
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


class _Inbox:
    def __init__(self) -> None:
        self.messages: list[Any] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.messages.append((envelope.rcpt_tos, message_from_bytes(envelope.content)))
        return "250 OK"


@pytest.fixture
def smtp_inbox() -> Iterator[tuple[_Inbox, int]]:
    inbox = _Inbox()
    port = _free_port()
    controller = Controller(inbox, hostname="127.0.0.1", port=port)  # it checks itself by connecting to `port`
    controller.start()
    yield inbox, port
    controller.stop()


def _free_port() -> int:
    """A port nothing listens on (connections to it are refused), below the ephemeral range (tools/ports.py)."""
    return free_ports(1)[0]


def _connections(monkeypatch: pytest.MonkeyPatch, http_url: str, smtp_port: int) -> None:
    host, port = http_url.removeprefix("http://").split(":")
    monkeypatch.setenv("AIRFLOW_CONN_NOTIFY_SLACK", json.dumps(
        {"conn_type": "slackwebhook", "host": f"{http_url}/services", "password": SLACK_TOKEN}))
    monkeypatch.setenv("AIRFLOW_CONN_NOTIFY_HOOK", json.dumps(
        {"conn_type": "http", "host": host, "port": int(port), "schema": "http", "login": "rebalancer",
         "password": WEBHOOK_PASSWORD}))
    monkeypatch.setenv("AIRFLOW_CONN_NOTIFY_SMTP", json.dumps(
        {"conn_type": "smtp", "host": "127.0.0.1", "port": smtp_port,
         "extra": {"disable_tls": True, "disable_ssl": True, "from_email": "rebalancer@example.com",
                   "timeout": 5, "retry_limit": 0}}))


SETTINGS = NotificationSettings.model_validate({
    "channels": {"ops-slack": {"kind": "slack", "airflow_connection_id": "notify_slack"},
                 "pager": {"kind": "webhook", "airflow_connection_id": "notify_hook", "endpoint": "/hooks/kafka"},
                 "mail": {"kind": "smtp", "airflow_connection_id": "notify_smtp", "to": ["oncall@example.com"]}},
    "routes": [{"kinds": ["approval_waiting", "run_failed", "test"], "channels": ["ops-slack", "pager", "mail"]}]})

WAITING = approval_waiting_notice(
    WaitingPlan(cluster="prod-eu", run_id="manual__2026-11-28T10:00:00+00:00", action="drain-brokers",
                pool="pool-a", reason="broker 3 lost", replica_moves=42, moved_bytes=3 * 2**30, duration_s=3900,
                why_asked=["a manual operation: a person approves it"]),
    approval_link="http://airflow.example:8080/dags/kafka_rebalance_manual/runs/r/tasks/approve/required_actions",
    report="http://airflow.example:8080/kafka-rebalancer/report/r", timeout="12:00:00")


def test_notifications_reach_slack_webhook_and_smtp_receivers(
        monkeypatch: pytest.MonkeyPatch, receiver: Receiver, smtp_inbox: tuple[_Inbox, int], tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    inbox, smtp_port = smtp_inbox
    _connections(monkeypatch, receiver.url, smtp_port)
    caplog.set_level(logging.DEBUG)
    results = deliver(SETTINGS, WAITING, tmp_path / "notifications.json")

    assert [(r.channel, r.ok, r.error) for r in results] == [("ops-slack", True, None), ("pager", True, None),
                                                             ("mail", True, None)]
    [slack] = [r for r in receiver.requests if r["path"].startswith("/services/")]
    [hook] = [r for r in receiver.requests if not r["path"].startswith("/services/")]
    assert slack["path"] == f"/services/{SLACK_TOKEN}"
    blocks = slack["json"]["blocks"]
    assert blocks[0] == {"type": "header", "text": {"type": "plain_text", "text": "Approval waiting: drain-brokers "
                                                                                     "on prod-eu"}}
    fields = [f["text"] for f in blocks[2]["fields"]]
    assert "*moves*\n42 replica moves" in fields and "*bytes*\n3.0 GiB" in fields and "*pool*\npool-a" in fields
    assert "<http://airflow.example:8080/dags/kafka_rebalance_manual/runs/r/tasks/approve/required_actions|" \
           "approve or reject>" in json.dumps(blocks)
    assert hook["path"] == "/hooks/kafka"
    assert hook["json"]["kind"] == "approval_waiting" and hook["json"]["facts"]["estimated duration"] == "1h05m"
    assert hook["json"]["run_id"] == "manual__2026-11-28T10:00:00+00:00" and hook["json"]["pool"] == "pool-a"
    [(recipients, mail)] = inbox.messages
    assert recipients == ["oncall@example.com"]
    assert mail["Subject"] == "[kafka-rebalancer] Approval waiting: drain-brokers on prod-eu"
    text = mail.get_payload()[0].get_payload(decode=True).decode()
    assert "estimated duration: 1h05m" in text and "What to do: review the plan" in text
    assert read_sends(tmp_path / "notifications.json")["approval_waiting:waiting"]["mail"]["status"] == "sent"
    _assert_no_secret(json.dumps(receiver.requests[0]["json"]) + json.dumps(receiver.requests[1]["json"])
                      + text + caplog.text + (tmp_path / "notifications.json").read_text())


def _assert_no_secret(text: str) -> None:
    for secret in (SLACK_TOKEN, "slacksecrettoken42", WEBHOOK_PASSWORD, SMTP_PASSWORD):
        assert secret not in text


def test_notification_sent_once_per_run_and_state(monkeypatch: pytest.MonkeyPatch, receiver: Receiver,
                                                  tmp_path: Path) -> None:
    _connections(monkeypatch, receiver.url, _free_port())
    settings = SETTINGS.model_copy(update={"routes": [SETTINGS.routes[0].model_copy(
        update={"channels": ["ops-slack"]})]})
    record = tmp_path / "notifications.json"
    assert [r.ok for r in deliver(settings, WAITING, record)] == [True]
    assert deliver(settings, WAITING, record) == []  # a retried task, a second look: nothing sent again
    failed = run_failed_notice("prod-eu", "r", "execute", "ExecutionError: broker 3 unreachable\nTraceback...", "x")
    assert [r.ok for r in deliver(settings, failed, record)] == [True]
    assert len(receiver.requests) == 2
    assert "Task `execute` of run r failed: ExecutionError: broker 3 unreachable" in json.dumps(receiver.requests[1])


def test_notification_refused_connection_recorded_and_retried_three_times(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_NOTIFY_SLACK", json.dumps(
        {"conn_type": "slackwebhook", "host": f"http://127.0.0.1:{_free_port()}/services",
         "password": SLACK_TOKEN}))
    settings = NotificationSettings.model_validate({
        "channels": {"ops-slack": {"kind": "slack", "airflow_connection_id": "notify_slack"}},
        "routes": [{"kinds": ["approval_waiting"], "channels": ["ops-slack"]}]})
    record = tmp_path / "notifications.json"
    caplog.set_level(logging.DEBUG)
    outcomes = [deliver(settings, WAITING, record) for _ in range(MAX_RETRIES + 2)]
    assert [len(o) for o in outcomes] == [1] * (MAX_RETRIES + 1) + [0]  # then it gives up
    assert not any(r.ok for o in outcomes for r in o)
    entry = read_sends(record)["approval_waiting:waiting"]["ops-slack"]
    assert entry["status"] == "failed" and entry["attempts"] == MAX_RETRIES + 1
    assert "Connection refused" in entry["error"] or "ConnectionRefused" in entry["error"], entry["error"]
    _assert_no_secret(caplog.text + record.read_text())
    # The SDK's own retry is off: it logs the webhook's URL, token and all, where Airflow's masker does not look
    # (the worker's output; the real-Airflow test found it there).
    assert channels.provider_notifier(settings.channels["ops-slack"], WAITING).hook.retry_handlers == []


def test_notification_channel_that_never_answers_holds_at_most_10s(monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path) -> None:
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # accepts (the kernel completes the handshake) and never answers
    try:
        host, port = silent.getsockname()
        monkeypatch.setenv("AIRFLOW_CONN_NOTIFY_HOOK", json.dumps(
            {"conn_type": "http", "host": host, "port": port, "schema": "http"}))
        settings = NotificationSettings.model_validate({
            "channels": {"pager": {"kind": "webhook", "airflow_connection_id": "notify_hook"}},
            "routes": [{"kinds": ["run_failed"], "channels": ["pager"]}]})
        assert channels.SEND_TIMEOUT_S == 10.0
        started = time.monotonic()
        [result] = deliver(settings, run_failed_notice("c", "r", "plan", "boom", "x"), tmp_path / "n.json")
        assert time.monotonic() - started < 14  # 10 s and the machine's slack
        assert not result.ok and result.error
    finally:
        silent.close()


def test_notification_error_lines_carry_no_secret() -> None:
    exc = ConnectionError(f"HTTPSConnectionPool(host='hooks.slack.com', port=443): Max retries exceeded with url: "
                          f"/services/{SLACK_TOKEN} (Caused by ...)")
    line = channels.one_line_without_secrets(exc, [])
    assert "slacksecrettoken42" not in line and "with url: /***" in line
    assert WEBHOOK_PASSWORD not in channels.one_line_without_secrets(RuntimeError(f"bad {WEBHOOK_PASSWORD}"),
                                                                     [WEBHOOK_PASSWORD])


def test_notification_routes_per_pool_and_nothing_unconfigured(tmp_path: Path) -> None:
    settings = NotificationSettings.model_validate({
        "channels": {"a": {"kind": "webhook", "airflow_connection_id": "x"},
                     "b": {"kind": "webhook", "airflow_connection_id": "y"}},
        "routes": [{"kinds": ["run_failed"], "channels": ["a"]},
                   {"kinds": ["run_failed", "approval_waiting"], "channels": ["b", "a"], "pools": ["pool-b"]}]})
    assert settings.channels_for("run_failed", "pool-a") == ["a"]
    assert settings.channels_for("run_failed", "pool-b") == ["a", "b"]
    assert settings.channels_for("approval_waiting", "pool-a") == []
    assert deliver(NotificationSettings(), WAITING, tmp_path / "n.json") == []
    assert not (tmp_path / "n.json").exists()


def _demo_config() -> dict[str, Any]:
    """config/demo.yaml, its capacity file named by absolute path (the test writes the config elsewhere)."""
    config = yaml.safe_load(Path("config/demo.yaml").read_text())
    config["capacity"]["cruise_control_file"] = str(Path("config", config["capacity"]["cruise_control_file"])
                                                    .resolve())
    return config


@pytest.mark.parametrize(("section", "field", "message"), [
    ({"channels": {"m": {"kind": "smtp", "airflow_connection_id": "s"}}}, "notifications.channels.m",
     "needs 'to'"),
    ({"channels": {"m": {"kind": "teams", "airflow_connection_id": "s"}}}, "notifications.channels.m.kind",
     "'slack', 'smtp' or 'webhook'"),
    ({"routes": [{"kinds": ["approval_waiting"], "channels": ["nope"]}]}, "notifications",
     "routes[0] names channel 'nope'"),
    ({"routes": [{"kinds": ["paged"], "channels": ["x"]}]}, "notifications.routes[0].kinds[0]", "approval_waiting"),
    ({"channels": {"x": {"kind": "webhook", "airflow_connection_id": "x"}},
      "routes": [{"kinds": ["run_failed"], "channels": ["x"], "pools": ["pool-z"]}]},
     "notifications.routes[0].pools", "unknown pool 'pool-z'"),
    ({"remind_after": "soon"}, "notifications.remind_after", "expected a duration"),
])
def test_notifications_config_errors_name_the_field(tmp_path: Path, section: dict, field: str, message: str) -> None:
    config = _demo_config()
    config["notifications"] = section
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(ConfigError) as error:
        load_config(path)
    assert field in str(error.value) and message in str(error.value), str(error.value)


def test_notifications_config_default_sends_nothing_and_keeps_the_fingerprint(tmp_path: Path) -> None:
    config = _demo_config()
    plain = tmp_path / "plain.yaml"
    plain.write_text(yaml.safe_dump(config))
    config["notifications"] = {"channels": {"x": {"kind": "webhook", "airflow_connection_id": "x"}},
                               "routes": [{"kinds": ["run_failed"], "channels": ["x"]}], "remind_after": "2h"}
    configured = tmp_path / "configured.yaml"
    configured.write_text(yaml.safe_dump(config))
    assert load_config(plain).notifications.channels_for("run_failed", None) == []
    assert load_config(configured).notifications.remind_after == 7200
    assert load_config(plain).fingerprint() == load_config(configured).fingerprint()


def test_notification_message_without_base_url_says_so() -> None:
    from kafka_rebalancer.notify.messages import NO_BASE_URL, plain_text, report_link

    link = report_link(None, "r", "/runs/demo/r/report/index.html")
    notice = Notice(kind="run_failed", state="failed", title="t", happened="h", to_do="d", cluster="c",
                    links={"report": link})
    assert link.startswith("/runs/demo/r/report/index.html") and NO_BASE_URL in plain_text(notice)[1]
    assert report_link("http://af:8080/", "r", None) == "http://af:8080/kafka-rebalancer/report/r"


def _config_file(tmp_path: Path, notifications: dict[str, Any]) -> Path:
    config = _demo_config()
    config["run_root"] = str(tmp_path / "runs")
    config["notifications"] = notifications
    path = tmp_path / "notify.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_notify_test_command_says_which_channel_worked(monkeypatch: pytest.MonkeyPatch, receiver: Receiver,
                                                       tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from kafka_rebalancer.cli import main

    _connections(monkeypatch, receiver.url, _free_port())  # nothing listens where the SMTP connection points
    config = _config_file(tmp_path, {"channels": {
        "ops-slack": {"kind": "slack", "airflow_connection_id": "notify_slack"},
        "mail": {"kind": "smtp", "airflow_connection_id": "notify_smtp", "to": ["oncall@example.com"]}}})
    assert main(["notify-test", "--config", str(config)]) == 2
    out = capsys.readouterr().out
    assert "ops-slack (slack, connection notify_slack): sent" in out
    assert "mail (smtp, connection notify_smtp): FAILED: " in out
    [request] = receiver.requests
    assert request["json"]["blocks"][0]["text"]["text"] == "Test message to channel ops-slack"
    _assert_no_secret(out)


def test_notification_of_a_failed_task_once_per_run(monkeypatch: pytest.MonkeyPatch, receiver: Receiver,
                                                    tmp_path: Path) -> None:
    from types import SimpleNamespace

    from kafka_rebalancer.airflow.notifications import notify_task_failed

    _connections(monkeypatch, receiver.url, _free_port())
    monkeypatch.delenv("AIRFLOW__API__BASE_URL", raising=False)
    config = _config_file(tmp_path, {"channels": {"pager": {"kind": "webhook", "airflow_connection_id":
                                                            "notify_hook"}},
                                     "routes": [{"kinds": ["run_failed"], "channels": ["pager"]}]})
    run_dir = tmp_path / "runs" / "demo" / "manual__1"
    run_dir.mkdir(parents=True)

    def context(task_id: str, error: str) -> dict[str, Any]:
        return {"ti": SimpleNamespace(task_id=task_id), "exception": RuntimeError(error), "run_id": "manual__1",
                "params": {"config_path": str(config), "broker_pool": "pool-a"}}

    notify_task_failed(context("plan", "spark-submit exited with 1\nmore lines"))
    notify_task_failed(context("report", "the run failed at plan; what it did is in ..."))
    notify_task_failed(context("plan", "spark-submit exited with 1"))  # the same occasion: not again
    [request] = receiver.requests
    body = request["json"]
    assert body["kind"] == "run_failed" and body["pool"] == "pool-a" and body["facts"] == {"task": "plan"}
    assert body["happened"] == "Task `plan` of run manual__1 failed: RuntimeError: spark-submit exited with 1" \
        or body["happened"] == "Task `plan` of run manual__1 failed: spark-submit exited with 1"
    assert "[api] base_url is not set" in body["links"]["report"]
    assert read_sends(run_dir / "notifications.json")["run_failed:failed"]["pager"]["status"] == "sent"


def test_notification_of_an_approval_waiting_links_the_required_action(
        monkeypatch: pytest.MonkeyPatch, receiver: Receiver, tmp_path: Path) -> None:
    """The notifier as the HITL operator calls it: the link is the operator's own Required Actions link."""
    from types import SimpleNamespace

    from kafka_rebalancer.airflow.operators import PlanApprovalOperator

    _connections(monkeypatch, receiver.url, _free_port())
    monkeypatch.setenv("AIRFLOW__API__BASE_URL", "http://airflow.example:8080")
    config = _config_file(tmp_path, {"channels": {"pager": {"kind": "webhook", "airflow_connection_id":
                                                            "notify_hook"}},
                                     "routes": [{"kinds": ["approval_waiting"], "channels": ["pager"]}]})
    run_dir = tmp_path / "runs" / "demo" / "manual__2"
    run_dir.mkdir(parents=True)
    operator = PlanApprovalOperator(task_id="approve", run_dir=str(run_dir))
    operator.waiting = {"plan": {"cluster": "demo", "run_id": "manual__2", "action": "drain-brokers",
                                 "pool": "pool-a", "reason": "broker 3 lost", "replica_moves": 7,
                                 "moved_bytes": 2**20, "duration_s": 30.0, "why_asked": ["a manual operation"]},
                        "report_file": str(run_dir / "report" / "index.html"), "timeout": "12:00:00"}
    ti = SimpleNamespace(dag_id="kafka_rebalance_manual", run_id="manual__2", task_id="approve", map_index=-1)
    context = {"task": operator, "task_instance": ti, "ti": ti, "run_id": "manual__2",
               "params": {"config_path": str(config)}}
    for notifier in operator.notifiers * 2:  # a second call (a retried task) sends nothing more
        notifier(context)
    [request] = receiver.requests
    assert request["json"]["links"] == {
        "approve or reject": "http://airflow.example:8080/dags/kafka_rebalance_manual/runs/manual__2/tasks/approve/"
                             "required_actions?map_index=-1",
        "report": "http://airflow.example:8080/kafka-rebalancer/report/manual__2"}
    assert request["json"]["facts"]["moves"] == "7 replica moves" and request["json"]["pool"] == "pool-a"
