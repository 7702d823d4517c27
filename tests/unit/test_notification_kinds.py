"""Notifications beyond the first slice, each reaching a local webhook receiver once per run and state: verify failed
(the promises/cells not kept), execution stalled, timed out or cancelled, the approval's reminder and answer (the
approval task parking until the reminder and resumed by the scheduler's sweep), automation events (once per event
episode), and the channels' failures on the runs page and the CLI's runs table."""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from airflow.sdk.exceptions import AirflowFailException, TaskAwaitingInput
from airflow.sdk.timezone import utcnow
from rich.console import Console

from kafka_rebalancer.errors import ExecutionCancelled, ExecutionTimedOut, PromiseNotKept
from kafka_rebalancer.notification_settings import NotificationSettings
from kafka_rebalancer.notify.automation_events import SEEN_FILE, event_notices, notify_events
from kafka_rebalancer.notify.messages import (
    WaitingPlan,
    approval_answered_notice,
    approval_reminder_notice,
    automation_notice,
    plain_text,
)
from kafka_rebalancer.notify.outbox import RECORD_FILE, read_sends
from tests.unit.test_notifications import Receiver, _config_file, _connections, _free_port

HOOK = {"pager": {"kind": "webhook", "airflow_connection_id": "notify_hook"}}
PLAN = {"cluster": "demo", "run_id": "manual__3", "action": "drain-brokers", "pool": "pool-a",
        "reason": "broker 3 lost", "replica_moves": 7, "moved_bytes": 2**20, "duration_s": 30.0,
        "why_asked": ["a manual operation"]}


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def _configured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, receiver: Receiver, kinds: list[str],
                **extra: Any) -> Path:
    _connections(monkeypatch, receiver.url, _free_port())
    monkeypatch.setenv("AIRFLOW__API__BASE_URL", "http://airflow.example:8080")
    tmp_path.mkdir(parents=True, exist_ok=True)
    return _config_file(tmp_path, {"channels": HOOK, "routes": [{"kinds": kinds, "channels": ["pager"]}], **extra})


def _bodies(receiver: Receiver) -> list[dict[str, Any]]:
    return [r["json"] for r in receiver.requests]


def _failed(config: Path, run_dir: Path, task_id: str, exc: BaseException) -> None:
    from kafka_rebalancer.airflow.notifications import notify_task_failed

    notify_task_failed({"ti": SimpleNamespace(task_id=task_id), "exception": exc, "run_id": run_dir.name,
                        "params": {"config_path": str(config), "broker_pool": "pool-a"}})


def test_notification_verify_failed_names_the_promises_and_is_sent_once(
        monkeypatch: pytest.MonkeyPatch, receiver: Receiver, tmp_path: Path) -> None:
    config = _configured(tmp_path, monkeypatch, receiver, ["verify_failed"])
    run_dir = tmp_path / "runs" / "demo" / "manual__1"
    run_dir.mkdir(parents=True)
    broken = PromiseNotKept("the run is not verified: 2 promise(s) ...", not_kept=[
        "drained_empty: broker 3 still holds 4 replicas",
        "topic spread: broker 2 holds 3 replicas of orders (cap 2, 1 before)"])
    _failed(config, run_dir, "verify", broken)
    _failed(config, run_dir, "verify", broken)  # the same occasion again: nothing more
    _failed(config, run_dir, "report", RuntimeError("the run failed at verify; what it did is in ..."))
    [body] = _bodies(receiver)
    assert body["kind"] == "verify_failed" and body["run_id"] == "manual__1" and body["pool"] == "pool-a"
    assert "- drained_empty: broker 3 still holds 4 replicas" in body["happened"]
    assert "- topic spread: broker 2 holds 3 replicas of orders (cap 2, 1 before)" in body["happened"]
    assert body["facts"]["not kept"] == "2"
    assert body["links"]["report"] == "http://airflow.example:8080/kafka-rebalancer/report/manual__1"


def test_notification_execution_timed_out_and_cancelled_per_pool_not_as_run_failed(
        monkeypatch: pytest.MonkeyPatch, receiver: Receiver, tmp_path: Path) -> None:
    config = _configured(tmp_path, monkeypatch, receiver, ["execution_stalled"])
    run_dir = tmp_path / "runs" / "demo" / "manual__2"
    run_dir.mkdir(parents=True)
    timed_out = ExecutionTimedOut("pool-b: 2 move(s) not complete after 30s: ['t-0', 't-1']; stalled ...", "pool-b")
    _failed(config, run_dir, "execute", timed_out)
    cancelled = ExecutionCancelled("pool-a: execution cancelled by an operator (2026-11-28T10:00)", "pool-a")
    wrapped = AirflowFailException(str(cancelled))
    wrapped.__cause__ = cancelled  # as execute_task raises it: no retry
    _failed(config, run_dir, "execute", wrapped)
    _failed(config, run_dir, "execute", wrapped)  # a rerun refused by the cancel marker: not told again
    _failed(config, run_dir, "plan", RuntimeError("spark-submit exited with 1"))  # run_failed: not routed here
    first, second = _bodies(receiver)
    assert (first["state"], first["pool"], first["title"]) == (
        "timed out:pool-b", "pool-b", "Execution timed out in pool pool-b on demo")
    assert "not complete after 30s: ['t-0', 't-1']" in first["happened"] and "a rerun continues" in first["to_do"]
    assert (second["state"], second["pool"]) == ("cancelled:pool-a", "pool-a")
    assert "resume_cancelled" in second["to_do"]


def test_notification_execution_stalled_once_per_run_and_pool(
        monkeypatch: pytest.MonkeyPatch, receiver: Receiver, tmp_path: Path) -> None:
    from kafka_rebalancer.airflow.notifications import stall_notifier
    from kafka_rebalancer.config import load_config

    config = load_config(_configured(tmp_path, monkeypatch, receiver, ["execution_stalled"]))
    run_dir = config.run_dir("manual__4")
    run_dir.mkdir(parents=True)
    tell = stall_notifier(config, "manual__4", run_dir, "pool-a")
    tell(["orders-0"])
    tell(["orders-0", "orders-1"])  # one more stalled: the pool was told already
    stall_notifier(config, "manual__4", run_dir, "pool-b")(["clicks-3"])
    first, second = _bodies(receiver)
    assert first["state"] == "stalled:pool-a" and "copied no bytes" in first["happened"]
    assert "orders-0" in first["happened"] and first["facts"] == {"stalled moves": "1"}
    assert second["state"] == "stalled:pool-b"


def _approval(tmp_path: Path, config: Path) -> tuple[Any, dict[str, Any]]:
    from kafka_rebalancer.airflow.operators import PlanApprovalOperator

    run_dir = tmp_path / "runs" / "demo" / "manual__3"
    run_dir.mkdir(parents=True, exist_ok=True)
    operator = PlanApprovalOperator(task_id="approve", run_dir=str(run_dir))
    ti = SimpleNamespace(id="0190-ti", dag_id="kafka_rebalance_manual", run_id="manual__3", task_id="approve",
                         map_index=-1)
    context = {"task": operator, "task_instance": ti, "ti": ti, "run_id": "manual__3",
               "params": {"config_path": str(config)}}
    return operator, context


def _waiting(since_ago: timedelta, left: timedelta) -> dict[str, Any]:
    return {"waiting": {"plan": PLAN, "report_file": "/r/report/index.html", "timeout": "12:00:00"},
            "since": (utcnow() - since_ago).isoformat(), "deadline": (utcnow() + left).isoformat()}


def test_notification_approval_parks_until_the_reminder_only_when_one_is_routed(
        monkeypatch: pytest.MonkeyPatch, receiver: Receiver, tmp_path: Path) -> None:
    reminded = _configured(tmp_path / "a", monkeypatch, receiver, ["approval_reminder"], remind_after="4h")
    operator, context = _approval(tmp_path / "a", reminded)
    parked = operator._park(context, _waiting(timedelta(0), timedelta(hours=12)))
    assert isinstance(parked, TaskAwaitingInput) and parked.method_name == "execute_complete"
    assert abs(parked.timeout - timedelta(hours=4)) < timedelta(seconds=5)
    assert parked.kwargs["waiting"]["plan"] == PLAN
    late = operator._park(context, _waiting(timedelta(0), timedelta(hours=3)))  # remind_after after the deadline
    assert abs(late.timeout - timedelta(hours=3)) < timedelta(seconds=5)
    unrouted = _configured(tmp_path / "b", monkeypatch, receiver, ["approval_waiting"], remind_after="4h")
    operator, context = _approval(tmp_path / "b", unrouted)
    assert abs(operator._park(context, _waiting(timedelta(0), timedelta(hours=12))).timeout
               - timedelta(hours=12)) < timedelta(seconds=5)


def test_notification_approval_reminder_at_the_sweeps_resume_then_the_answer(
        monkeypatch: pytest.MonkeyPatch, receiver: Receiver, tmp_path: Path) -> None:
    import airflow.sdk.execution_time.hitl as hitl

    import kafka_rebalancer.airflow.tasks as tasks

    config = _configured(tmp_path, monkeypatch, receiver, ["approval_reminder", "approval_answered"],
                         remind_after="4h")
    operator, context = _approval(tmp_path, config)
    reopened: list[Any] = []
    monkeypatch.setattr(hitl, "upsert_hitl_detail", lambda **kw: reopened.append(kw["ti_id"]))
    answers: list[dict[str, Any]] = []
    monkeypatch.setattr(tasks, "record_answer", lambda context, run_dir, **kw: answers.append(kw))
    waiting = _waiting(timedelta(hours=4), timedelta(hours=8))
    # The scheduler's sweep at the reminder's time: the default answer (Reject), marked timed out.
    swept = {"chosen_options": ["Reject"], "params_input": {}, "responded_at": utcnow(), "responded_by_user": None,
             "timedout": True}
    with pytest.raises(TaskAwaitingInput) as parked:
        operator.execute_complete(context, swept, **waiting)
    assert reopened == ["0190-ti"] and not answers  # the default answer taken back, nothing recorded
    assert parked.value.kwargs["reminded"] is True
    assert abs(parked.value.timeout - timedelta(hours=8)) < timedelta(seconds=5)  # then until the deadline
    [reminder] = _bodies(receiver)
    assert reminder["kind"] == "approval_reminder" and reminder["title"] == \
        "Still waiting for approval: drain-brokers on demo"
    assert "has waited 4h00m" in reminder["happened"] and "rejected in 8h00m" in reminder["happened"]
    assert reminder["links"]["approve or reject"].startswith(
        "http://airflow.example:8080/dags/kafka_rebalance_manual/runs/manual__3/tasks/approve/required_actions")
    with pytest.raises(TaskAwaitingInput):  # a retried resume: no second reminder
        operator.execute_complete(context, swept, **waiting)
    assert len(receiver.requests) == 1

    answered = {"chosen_options": ["Approve"], "params_input": {}, "responded_at": utcnow(),
                "responded_by_user": {"id": "alice", "name": "alice"}, "timedout": False}
    operator.execute_complete(context, answered, **parked.value.kwargs)
    operator.execute_complete(context, answered, **parked.value.kwargs)  # a retry: recorded again, told once
    assert answers[0] == {"approved": True, "by": "alice", "timed_out": False}
    [_, answer] = _bodies(receiver)
    assert answer["kind"] == "approval_answered" and answer["facts"]["answer"] == "approved by alice"
    assert answer["title"] == "Approved by alice: drain-brokers on demo"
    assert read_sends(tmp_path / "runs" / "demo" / "manual__3" / RECORD_FILE).keys() == {
        "approval_reminder:reminder", "approval_answered:answered"}


def test_notification_approval_answer_and_timeout_messages() -> None:
    plan = WaitingPlan(**PLAN)
    rejected = approval_answered_notice(plan, False, "bob", False, "r")
    assert rejected.title == "Rejected by bob: drain-brokers on demo" and "not touched" in rejected.to_do
    timed_out = approval_answered_notice(plan, False, None, True, "r")
    assert timed_out.title == "Approval timed out: drain-brokers on demo"
    assert timed_out.facts["answer"] == "timed out (rejected)"
    subject, body = plain_text(approval_reminder_notice(plan, "link", "r", 4 * 3600, 3600))
    assert subject == "[kafka-rebalancer] Still waiting for approval: drain-brokers on demo"
    assert "waited:" in body and "rejected in 1h00m" in body and "run id:" in body


def _record(decision: str, at: float, **extra: Any) -> dict[str, Any]:
    return {"kind": "broker_lost", "broker_id": 3, "broker_pool": "pool-a", "decided_at": at,
            "observed": f"broker 3 of pool pool-a not registered for {at:.0f}s (grace period 300s)",
            "decision": decision, "action": "drain-brokers", **extra}


def test_notification_automation_event_is_one_episode_while_raised_again() -> None:
    held = [_record("suppressed", 1000.0, why="pool pool-a is held by run r", retry_at=4600.0)]
    notices, seen = event_notices("demo", held, {}, 7200.0, lambda run_id: f"report of {run_id}")
    again, seen = event_notices("demo", [_record("suppressed", 4600.0, why="held", retry_at=8200.0)], seen, 7200.0,
                                str)
    assert notices[0].key == again[0].key == "automation_event:broker_lost:3:held back@1000"
    later, _ = event_notices("demo", [_record("suppressed", 20000.0, why="held", retry_at=23600.0)], seen, 7200.0,
                             str)
    assert later[0].key == "automation_event:broker_lost:3:held back@20000"  # silent longer: a new episode
    started = [_record("started", 5000.0, run_id="automatic__pool-a__x", mode="approve", why="drain of [3, 4]"),
               {**_record("started", 5000.0, run_id="automatic__pool-a__x", mode="approve", why="drain of [3, 4]"),
                "broker_id": 4}]
    [run] = event_notices("demo", started, {}, 7200.0, lambda run_id: f"report of {run_id}")[0]
    assert run.key == "automation_event:started:automatic__pool-a__x" and run.run_id == "automatic__pool-a__x"
    assert run.links == {"report": "report of automatic__pool-a__x"} and run.facts["action"] == \
        "drain-brokers (mode approve)"


@pytest.mark.parametrize(("record", "title", "to_do"), [
    (_record("started", 1.0, run_id="r", mode="execute", why="drain of [3]"), "Automation started: broker_lost "
     "broker 3 on demo", "follow the run"),
    (_record("suppressed", 1.0, why="inside the cooldown", retry_at=10.0), "Automation held back: broker_lost "
     "broker 3 on demo", "looked at again"),
    (_record("suppressed", 1.0, why="automation.broker_lost.mode is off"), "Automation suppressed: broker_lost "
     "broker 3 on demo", "act yourself"),
    ({"kind": "broker_unclaimed", "broker_id": 9, "broker_pool": None, "observed": "broker 9 registered, in no pool",
      "decision": "reported", "why": "starts nothing", "decided_at": 1.0}, "Automation reported: broker_unclaimed "
     "broker 9 on demo", "check the broker"),
])
def test_notification_automation_event_messages(record: dict[str, Any], title: str, to_do: str) -> None:
    notice = automation_notice("demo", [record], "s", None)
    assert notice.title == title and to_do in notice.to_do and record["observed"] in notice.happened


def test_notification_automation_event_held_back_sent_once_through_the_events_folder(
        monkeypatch: pytest.MonkeyPatch, receiver: Receiver, tmp_path: Path) -> None:
    _connections(monkeypatch, receiver.url, _free_port())
    settings = NotificationSettings.model_validate({"channels": HOOK, "routes": [
        {"kinds": ["automation_event"], "channels": ["pager"]}]})
    folder = tmp_path / ".automation"
    first = _record("suppressed", 1000.0, why="pool pool-a is held by run r", retry_at=4600.0)
    notify_events(settings, "demo", [first], folder, 7200.0, str)
    notify_events(settings, "demo", [_record("suppressed", 4600.0, why="held", retry_at=8200.0)], folder, 7200.0,
                  str)  # raised again after the cooldown, held back again
    [body] = _bodies(receiver)
    assert body["kind"] == "automation_event" and body["facts"]["outcome"] == "held back"
    assert body["pool"] == "pool-a" and "pool pool-a is held by run r" in body["happened"]
    assert json.loads((folder / SEEN_FILE).read_text()) == {"broker_lost:3:held back": {"first": 1000.0,
                                                                                       "last": 4600.0}}
    assert notify_events(NotificationSettings(), "demo", [first], tmp_path / "off", 7200.0, str) == []
    assert not (tmp_path / "off").exists()  # nothing configured: nothing written


def test_notification_channel_failures_on_the_runs_page_and_the_runs_table(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from kafka_rebalancer.airflow.ui import runs_page
    from kafka_rebalancer.cli.tables import runs_table
    from kafka_rebalancer.report.overview import channel_failures, list_runs
    from kafka_rebalancer.run_folder import RunFolder, write_json

    config = _config_file(tmp_path, {})
    run = RunFolder(tmp_path / "runs" / "demo" / "manual__5")
    with run.stage("snapshot") as out:
        write_json(out / "manifest.json", {"taken_at": "2026-11-28T10:00:00+00:00"})
    write_json(run.path / RECORD_FILE, {
        "approval_waiting:waiting": {
            "pager": {"status": "sent", "attempts": 1, "at": "t", "error": None},
            "ops-slack": {"status": "failed", "attempts": 2, "at": "t",
                          "error": "ConnectionError: HTTPConnectionPool(host='127.0.0.1', port=9): refused <x>"}}})
    [line] = channel_failures(run.path)
    assert line == "ops-slack (approval_waiting:waiting): ConnectionError: HTTPConnectionPool(host='127.0.0.1', " \
                   "port=9): refused <x> (2 tries)"
    console = Console(file=io.StringIO(), width=400)
    runs_table(console, list_runs(tmp_path / "runs"))
    assert "ops-slack (approval_waiting:waiting)" in console.file.getvalue()  # type: ignore[attr-defined]
    monkeypatch.setenv("KAFKA_REBALANCER_CONFIG", str(config))
    page = runs_page()
    assert "<th>notifications failed</th>" in page and "refused &lt;x&gt; (2 tries)" in page


def test_notification_of_the_events_dags_decision_once_per_event(
        monkeypatch: pytest.MonkeyPatch, receiver: Receiver, tmp_path: Path) -> None:
    """As decide_task calls it: the automation folder beside the runs, re-armed after twice the cooldown."""
    from kafka_rebalancer.airflow.notifications import notify_automation_events
    from kafka_rebalancer.automation.events_log import automation_dir
    from kafka_rebalancer.config import load_config

    config = load_config(_configured(tmp_path, monkeypatch, receiver, ["automation_event"]))
    cooldown = config.automation.cooldown_s
    started = _record("started", 100.0, run_id="automatic__pool-a__1", mode="approve", why="drain of [3]")
    notify_automation_events(config, [started])
    held = _record("suppressed", 200.0, why="pool pool-a is held by run automatic__pool-a__1", retry_at=200 + cooldown)
    notify_automation_events(config, [held])
    notify_automation_events(config, [{**held, "decided_at": 200.0 + cooldown}])  # raised again: not told again
    first, second = _bodies(receiver)
    assert first["facts"]["outcome"] == "started" and first["links"]["report"] == \
        "http://airflow.example:8080/kafka-rebalancer/report/automatic__pool-a__1"
    assert second["facts"]["outcome"] == "held back"
    assert set(read_sends(automation_dir(config) / RECORD_FILE)) == {
        "automation_event:started:automatic__pool-a__1", "automation_event:broker_lost:3:held back@200"}


def test_notification_automatic_run_finding_its_pool_held_is_told_held_back_not_run_failed(
        monkeypatch: pytest.MonkeyPatch, receiver: Receiver, tmp_path: Path) -> None:
    """A person's run took the pool between the decision and the automatic run's snapshot: the run's events are
    held back (recorded, kept for the retry, told once as such), and its failed snapshot is no run failed."""
    from kafka_rebalancer.airflow.notifications import notify_task_failed
    from kafka_rebalancer.airflow.tasks import _claim_pools
    from kafka_rebalancer.automation.events_log import append_events, automation_dir, read_events
    from kafka_rebalancer.config import load_config
    from kafka_rebalancer.errors import PoolsHeld
    from kafka_rebalancer.holds.claims import claim_pools

    config_path = _configured(tmp_path, monkeypatch, receiver, ["automation_event", "run_failed"])
    config = load_config(config_path)
    run_id = "automatic__pool-a__x"
    append_events(config, [_record("started", 100.0, run_id=run_id, mode="approve", why="drain of [3]")])
    assert claim_pools(config, "kafka_rebalance_manual", "manual__person", ["pool-a"], lambda dag, run: True,
                       exclusive=False) == []
    ti = SimpleNamespace(task_id="snapshot", get_dr_count=lambda **kw: 1)  # every claim's run is live
    context = {"params": {"config_path": str(config_path)}, "run_id": run_id, "ti": ti,
               "dag_run": SimpleNamespace(dag_id="kafka_rebalance_manual")}
    with pytest.raises(AirflowFailException) as failed:
        _claim_pools(context)
    assert isinstance(failed.value.__cause__, PoolsHeld)
    held = read_events(config)[-1]
    assert held["decision"] == "suppressed" and held["retry_at"] > held["decided_at"] and "run_id" not in held
    assert held["why"] == f"pool(s) pool-a held by run manual__person of kafka_rebalance_manual (since " \
                          f"{held['why'].split('(since ')[1].split(')')[0]}): run {run_id} started nothing"
    assert (automation_dir(config) / "retry" / "broker_lost-3.json").exists()  # raised again after the cooldown
    notify_task_failed({**context, "exception": failed.value})
    [body] = _bodies(receiver)
    assert body["kind"] == "automation_event" and body["facts"]["outcome"] == "held back", body
    assert f"run {run_id} started nothing" in body["happened"]


def test_notification_record_of_the_automation_is_pruned(
        monkeypatch: pytest.MonkeyPatch, receiver: Receiver, tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from kafka_rebalancer.notify.outbox import pruned

    now = datetime(2026, 11, 29, tzinfo=UTC)

    def sends(days_ago: float) -> dict[str, Any]:
        at = (now - timedelta(days=days_ago)).isoformat(timespec="seconds")
        return {"pager": {"status": "sent", "attempts": 1, "at": at, "error": None}}

    record = {"old": sends(8), "live-but-old": sends(30), "recent": sends(1), "newest": sends(0), "bad": {}}
    assert set(pruned(record, {"live-but-old"}, now)) == {"live-but-old", "recent", "newest"}
    assert set(pruned(record, {"live-but-old"}, now, max_kept=2)) == {"live-but-old", "newest"}
    assert set(pruned(record, set(), now, max_kept=0)) == set()

    # As the events DAG's decisions write it: an episode over and a week old is dropped at the next decision.
    _connections(monkeypatch, receiver.url, _free_port())
    settings = NotificationSettings.model_validate({"channels": HOOK, "routes": [
        {"kinds": ["automation_event"], "channels": ["pager"]}]})
    folder = tmp_path / ".automation"
    folder.mkdir()
    (folder / RECORD_FILE).write_text(json.dumps({"automation_event:broker_lost:9:held back@1": sends(8)}))
    (folder / SEEN_FILE).write_text(json.dumps({"broker_lost:9:held back": {"first": 1.0, "last": 1.0}}))
    notify_events(settings, "demo", [_record("suppressed", 10000.0, why="held", retry_at=13600.0)], folder, 7200.0,
                  str)
    assert set(read_sends(folder / RECORD_FILE)) == {"automation_event:broker_lost:3:held back@10000"}


def test_notification_verify_task_fails_at_once_on_a_broken_promise_and_tells_it(
        monkeypatch: pytest.MonkeyPatch, receiver: Receiver, tmp_path: Path) -> None:
    """No retry (AirflowFailException) for a promise not kept; the callback still sees the promise under it."""
    import kafka_rebalancer.airflow.tasks as tasks
    import kafka_rebalancer.verify.verification as verification

    config = _configured(tmp_path, monkeypatch, receiver, ["verify_failed", "run_failed"])
    run_dir = tmp_path / "runs" / "demo" / "manual__6"
    run_dir.mkdir(parents=True)

    def broken(*args: Any) -> dict[str, Any]:
        raise PromiseNotKept("the run is not verified: ...", not_kept=["broken: t-0 still has a replica on broker 6"])

    monkeypatch.setattr(verification, "verify_run", broken)
    monkeypatch.setattr(tasks, "_connection", lambda config: None)
    with pytest.raises(AirflowFailException) as failed:
        tasks.verify_task({"params": {"config_path": str(config)}, "run_id": "manual__6"}, str(run_dir))
    _failed(config, run_dir, "verify", failed.value)
    [body] = _bodies(receiver)
    assert body["kind"] == "verify_failed" and "- broken: t-0 still has a replica on broker 6" in body["happened"]
