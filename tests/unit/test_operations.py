"""Manual operations without a cluster: requests checked per action, pool overrides applied, stored, reverted
and refused when they no longer fit, leadership-only plans, and the approval rules."""

from __future__ import annotations

import argparse
import ast
import contextlib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from pydantic import ValidationError

from kafka_rebalancer.approve.approval import (
    PlanFacts,
    assert_approved,
    estimated_seconds,
    limits_passed,
    unattended_refusals,
    write_decision,
)
from kafka_rebalancer.cli.commands import COMMANDS, OPTIONS, add_parsers, request_params
from kafka_rebalancer.config import load_config, parse_duration
from kafka_rebalancer.errors import ConfigError, ExecutionError, RebalancerError
from kafka_rebalancer.model.run_actions import ACTION_NAMES, BY_ACTION, MANUAL_ACTIONS, Action, RunAction
from kafka_rebalancer.operations.overrides import OverrideStore, PoolOverride, apply_overrides, layout
from kafka_rebalancer.operations.request import (
    RESOLVERS,
    ManualRequest,
    RequestError,
    check_brokers_in_cluster,
    make_request,
    read_request,
    record_override,
    run_config,
    scope_of,
    write_request,
)
from kafka_rebalancer.plan.balance.leadership import leadership_moves
from kafka_rebalancer.plan.changes import partition_changes
from kafka_rebalancer.run_folder import RunFolder
from kafka_rebalancer.snapshot import start
from tests.helpers import REPO, write_config

BODY = {"cluster": {"name": "c1"}, "pools": {"a": {"brokers": [1, 2, 3]}, "b": {"brokers": [4, 5, 6]}},
        "topic_pools": [{"topics": "orders*", "pool": "a"}, {"topics": "clicks*", "pool": "b"}],
        "resources": {"disk": {}, "replica_count": {}}, "exclude": {"brokers": [8]}}


@pytest.fixture
def config_path(tmp_path: Path) -> Path:
    return write_config(tmp_path / "config.yaml", {**BODY, "run_root": str(tmp_path / "runs")})


def _request_run(config_path: Path, name: str, **params: Any) -> tuple[Any, RunFolder]:
    base = run_config(config_path)
    request = make_request(base, **params)
    run = RunFolder(base.run_dir(name))
    write_request(run, request)
    return request, run


# -- requests ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("params", "names"), [
    ({"action": "isolate-topics", "broker_pool": "a", "reason": "x"}, "'topics'"),
    ({"action": "isolate-topics", "topics": ["pay*"], "broker_pool": "new", "reason": "x"}, "'brokers'"),
    ({"action": "isolate-topics", "topics": ["pay*"], "broker_pool": "a"}, "'reason'"),
    ({"action": "isolate-topics", "topics": ["pay*"], "broker_pool": "new", "brokers": [1, 2, 3], "reason": "x"},
     "every broker of pool 'a'"),
    ({"action": "drain-brokers", "reason": "x"}, "'brokers'"),
    ({"action": "drain-brokers", "brokers": [4, 5, 6], "reason": "x"}, "every broker of pool 'b'"),
    ({"action": "add-brokers", "brokers": [7], "broker_pool": "zz", "reason": "x"}, "unknown pool 'zz'"),
    ({"action": "add-brokers", "brokers": [4], "broker_pool": "b", "reason": "x"}, "already in pool 'b'"),
    ({"action": "rebalance-pool"}, "'broker_pool'"),
    ({"action": "rebalance-pool", "broker_pool": "a", "brokers": [1]}, "'brokers': not used"),
    ({"action": "demote-brokers", "brokers": [1, 1]}, "unique"),
    ({"action": "drain-brokers", "brokers": [-1], "reason": "x"}, "from 0 to 2147483647"),
    ({"action": "drain-brokers", "brokers": [8], "reason": "x"}, "exclude.brokers"),
    ({"action": "demote-brokers", "brokers": [2**31]}, "from 0 to 2147483647"),
    ({"action": "execute-reviewed"}, "'run_id'"),
    ({"action": "explode"}, "'action'"),
])
def test_a_wrong_or_missing_parameter_is_named(config_path: Path, params: dict, names: str) -> None:
    with pytest.raises(RequestError, match=re_escape(names)):
        make_request(run_config(config_path), **params)


@pytest.mark.parametrize(("params", "error"), [
    ({"action": "drain-brokers", "brokers": [9], "reason": "x"}, "broker(s) [9] unknown"),
    ({"action": "demote-brokers", "brokers": [9]}, "broker(s) [9] unknown"),
    ({"action": "add-brokers", "brokers": [7], "broker_pool": "b", "reason": "x"}, "broker(s) [7] not running"),
    ({"action": "isolate-topics", "topics": ["orders*"], "broker_pool": "new", "brokers": [3, 7], "reason": "x"},
     "broker(s) [7] not running; running brokers: 1, 2, 3, 4, 5"),
    ({"action": "drain-brokers", "brokers": [6, 7], "reason": "x"}, None),  # down brokers can be drained
])
def test_the_brokers_a_request_names_are_checked_against_the_snapshot(config_path: Path, params: dict,
                                                                      error: str | None) -> None:
    request = make_request(run_config(config_path), **params)
    # 6 is down but in pool b, 7 is down and outside every pool but still holds replicas; 9 is nowhere.
    brokers = pd.DataFrame({"broker_id": [1, 2, 3, 4, 5, 6, 7], "alive": [True] * 5 + [False, False]})
    if error is None:
        check_brokers_in_cluster(request, brokers)
    else:
        with pytest.raises(RequestError, match=re_escape(error)):
            check_brokers_in_cluster(request, brokers)


@pytest.mark.parametrize("action", MANUAL_ACTIONS, ids=ACTION_NAMES)
def test_a_field_the_action_does_not_take_is_refused(config_path: Path, action: RunAction) -> None:
    for field, value in {"broker_pool": "a", "brokers": [1], "topics": ["t"], "reviewed_run_id": "r",
                         "unregister": True, "replication_factor": 3}.items():
        if field not in action.fields:
            with pytest.raises(RequestError, match=re_escape(f"'{field}': not used by {action.name}")):
                make_request(run_config(config_path), action=action.name, **{field: value})


def re_escape(text: str) -> str:
    import re

    return re.escape(text)


def test_actions_turn_into_planner_scopes(config_path: Path) -> None:
    config = run_config(config_path)
    add = make_request(config, action="add-brokers", brokers=[7, 8], broker_pool="b", reason="new")
    scope = scope_of(add)
    assert scope.pools == {"b"} and scope.no_receive == {4, 5, 6} and scope.no_give == {7, 8}
    assert add.override is not None and add.override.from_pools == {7: None, 8: None}
    drain = make_request(config, action="drain-brokers", brokers=[2], reason="disk")
    assert scope_of(drain).balanced_pools == {"a"} and drain.override.kind == "drain-brokers"
    isolate = make_request(config, action="isolate-topics", topics=["pay*"], broker_pool="p", brokers=[3, 6],
                           reason="x")
    assert scope_of(isolate).balanced_pools == {"p", "a", "b"}
    assert scope_of(make_request(config, action="demote-brokers", brokers=[1])).leadership == "demote"
    assert make_request(config, action="rebalance-pool", broker_pool="a").override is None


# -- the table of manual actions, and a run's start -------------------------------------------------------------
def test_every_manual_action_is_defined_once_in_its_table() -> None:
    """The request's actions, their functions, the pool overrides' kinds and the CLI's commands are the table's
    (the manual DAG's `action` param: tests/dags)."""
    assert len(BY_ACTION) == len(Action) and len(COMMANDS) == len(MANUAL_ACTIONS)  # no action, no command twice
    assert ManualRequest.model_fields["action"].annotation is Action
    assert set(RESOLVERS) == set(Action) == {"nightly", *ACTION_NAMES}
    for action in Action:  # a pool override is made only by an action that changes pools
        fields = {"id": 1, "kind": action, "requested_by": "x", "created_at": "t", "reason": "r", "run_id": "run"}
        if BY_ACTION[action].changes_pools:
            assert PoolOverride(**fields).kind is action
        else:
            with pytest.raises(ValidationError, match="changes no pool"):
                PoolOverride(**fields)
    sub = argparse.ArgumentParser().add_subparsers(dest="command")
    add_parsers(sub, lambda p: p.add_argument("--config"))
    assert set(sub.choices) == {*COMMANDS, "overrides", "pools"}
    # Each command's options reach the request as its fields: (text given, value asked for); others: "x", "x".
    typed = {"topics": ("t1,t2", ["t1", "t2"]), "brokers": ("7,8", [7, 8]),
             "log_dirs": ("3:/d2,4:/d2", ["3:/d2", "4:/d2"]), "replication_factor": ("3", 3)}
    for action in MANUAL_ACTIONS:
        argv = ["--config", "c.yaml"]
        expected: dict[str, Any] = {"action": action.name}
        for field in action.fields:
            if OPTIONS[field].switch:  # a flag without a value
                argv, expected[field] = [*argv, f"--{OPTIONS[field].flag}"], True
                continue
            text, expected[field] = typed.get(field, ("x", "x"))
            argv += [f"--{OPTIONS[field].flag}", text]
        assert request_params(action, sub.choices[action.command].parse_args(argv)) == expected


def test_a_run_starts_with_its_request_then_its_snapshot_with_the_runs_pools(
        config_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Any] = []
    monkeypatch.setattr(start, "take_snapshot", lambda config, connection, run: calls.append(
        (connection, config.pools["a"].brokers, read_request(run).action)))
    monkeypatch.setattr(start, "check_brokers_in_snapshot", lambda run: calls.append("brokers checked"))
    run = start.start_run(config_path, "d1", {"action": "drain-brokers", "brokers": [2], "reason": "disk"},
                          lambda config: "connection")
    assert calls == [("connection", [1, 3], "drain-brokers"), "brokers checked"]
    assert run.path == run_config(config_path).run_dir("d1")

    def unreachable(config: Any) -> None:
        raise AssertionError("a wrong request must fail before the cluster is touched")

    with pytest.raises(RequestError, match="'brokers'"):
        start.start_run(config_path, "d2", {"action": "drain-brokers", "reason": "disk"}, unreachable)
    with pytest.raises(RebalancerError, match="no run 'nope'"):
        start.start_run(config_path, "r1", {"action": "execute-reviewed", "reviewed_run_id": "nope"}, unreachable)
    assert not run_config(config_path).run_dir("d2").exists() and not run_config(config_path).run_dir("r1").exists()


# -- overrides -------------------------------------------------------------------------------------------------
def test_a_pending_override_applies_to_its_own_run_only_until_approved(config_path: Path) -> None:
    _, run = _request_run(config_path, "iso", action="isolate-topics", topics=["pay*"], broker_pool="pay",
                          brokers=[3, 6], reason="own brokers")
    own = run_config(config_path, run)
    assert own.pools["pay"].brokers == [3, 6] and own.pools["a"].brokers == [1, 2] and own.topic_pool("pay.x") == "pay"
    assert run_config(config_path).pools.keys() == {"a", "b"}  # nobody else sees it before approval
    stored = record_override(own, run, approved_by="alice")
    assert stored is not None and stored.id == 1 and stored.run_id == "iso" and stored.approved_by == "alice"
    assert record_override(own, run, approved_by="alice") == stored  # retry-safe: one override per run
    after = run_config(config_path)
    assert after.pools["pay"].brokers == [3, 6] and after.topic_pool("pay.x") == "pay"
    assert run_config(config_path, run).fingerprint() == own.fingerprint()  # the plan hash survives approval
    assert after.topic_pool("orders.x") == "a"


def test_overrides_stack_and_revert(config_path: Path) -> None:
    _, drain = _request_run(config_path, "d1", action="drain-brokers", brokers=[2], reason="disk")
    record_override(run_config(config_path, drain), drain, None)
    _, add = _request_run(config_path, "a1", action="add-brokers", brokers=[7], broker_pool="a", reason="new")
    record_override(run_config(config_path, add), add, None)
    config = run_config(config_path)
    assert config.pools["a"].brokers == [1, 3, 7]
    result = layout(load_config(config_path), OverrideStore.of(config).active())  # the file's pools, layered
    assert result.broker_source[7] == "override #2"
    store = OverrideStore.of(config)
    store.revert(2, "bob")
    assert run_config(config_path).pools["a"].brokers == [1, 3]
    with pytest.raises(RebalancerError, match="already reverted"):
        store.revert(2, "bob")
    with pytest.raises(RebalancerError, match="no override #9"):
        store.revert(9, "bob")
    assert [o.state for o in store.read()] == ["active", "reverted"]


def test_an_override_that_no_longer_fits_the_config_is_an_error_naming_it(config_path: Path, tmp_path: Path) -> None:
    _, run = _request_run(config_path, "a1", action="add-brokers", brokers=[7], broker_pool="b", reason="new")
    record_override(run_config(config_path, run), run, None)
    write_config(config_path, {**BODY, "run_root": str(tmp_path / "runs"),
                               "pools": {"a": {"brokers": [1, 2, 3]}, "c": {"brokers": [4, 5, 6]}},
                               "topic_pools": [{"topics": "orders*", "pool": "a"}]})
    with pytest.raises(ConfigError, match=r"override #1 \(add-brokers, run a1\) no longer fits: pool 'b'"):
        run_config(config_path)
    write_config(config_path, {**BODY, "run_root": str(tmp_path / "runs"),
                               "pools": {"a": {"brokers": [1, 2, 3, 7]}, "b": {"brokers": [4, 5, 6]}}})
    with pytest.raises(ConfigError, match="broker 7 was in no pool when it was made and is in pool 'a' now"):
        run_config(config_path)


def test_the_store_is_replaced_whole(config_path: Path) -> None:
    config = run_config(config_path)
    store = OverrideStore.of(config)
    store.path.parent.mkdir(parents=True)
    store.path.write_text('{"version": 1, "overrides": [{"id": "x"}]}')
    with pytest.raises(ConfigError, match=r"pool_overrides\.json"):
        run_config(config_path)
    assert apply_overrides(config, []) is config


# -- leadership-only plans -------------------------------------------------------------------------------------
PARTS = pd.DataFrame({"topic": ["t"] * 4, "partition": [0, 1, 2, 3],
                      "replicas": [[1, 2, 3], [2, 1, 3], [1, 2, 3], [3, 1, 2]], "isr": [[1, 2, 3], [1, 2, 3], [2, 3],
                                                                                      [1, 2, 3]],
                      "leader": [1, 1, 2, 3], "broker_pool": ["a"] * 4})


def _changes(moves: pd.DataFrame) -> dict[int, list[int]]:
    parts = PARTS.assign(size_bytes=1)
    return {int(p): list(r) for p, r in zip(*[partition_changes(parts, moves)[c] for c in ("partition",
                                                                                             "new_replicas")],
                                            strict=True)}


def test_elect_leaders_plans_preferred_leaders_with_the_same_replicas() -> None:
    moves = leadership_moves(PARTS, {1, 2, 3}, "elect")
    # partition 1: leader 1, preferred 2 (in sync); partition 2: preferred 1 is out of sync: left alone
    assert list(moves["partition"]) == [1] and list(moves["target_broker"]) == [2]
    assert _changes(moves) == {1: [2, 1, 3]}


def test_demote_puts_another_in_sync_replica_first() -> None:
    moves = leadership_moves(PARTS, {1, 2, 3}, "demote", demoted={1})
    assert set(moves["partition"]) == {0, 1, 2}
    changes = _changes(moves)
    assert changes[0][0] == 2 and changes[1][0] == 2 and changes[2][0] == 2
    assert all(sorted(r) == [1, 2, 3] for r in changes.values())


# -- approval ----------------------------------------------------------------------------------------------------
def _facts(moved_bytes: int, replica_moves: int, duration_s: float | None) -> PlanFacts:
    return PlanFacts("h" * 64, {"totals": {"moved_bytes": moved_bytes, "replica_moves": replica_moves}},
                     pd.DataFrame(), 2**20, duration_s)


def test_auto_approval_limits_and_window(tmp_path: Path) -> None:
    path = write_config(tmp_path / "c.yaml", {**BODY, "approval": {
        "auto_approve": {"max_moved_bytes": "1GiB", "max_replica_moves": 10, "max_duration": "1h"},
        "window": {"start": "01:00", "end": "06:00", "timezone": "Europe/Berlin"}}})
    config = run_config(path)
    assert limits_passed(config, _facts(2**20, 5, 60)) == []
    passed = limits_passed(config, _facts(2 * 2**30, 11, 7200))
    assert len(passed) == 3 and "max_moved_bytes" in passed[0] and "max_duration" in passed[2]
    night = datetime(2026, 11, 23, 2, 0, tzinfo=UTC)  # 03:00 in Berlin
    afternoon = datetime(2026, 11, 23, 14, 0, tzinfo=UTC)
    small, big = _facts(1, 1, 1), _facts(2 * 2**30, 1, 1)

    def refusals(facts: PlanFacts, manual: bool, scheduled: bool, when: datetime) -> list[str]:
        return unattended_refusals(config, facts, manual_operation=manual, scheduled=scheduled, started=when)

    assert refusals(small, False, True, night) == []
    assert "outside the execution window 01:00-06:00" in refusals(small, False, True, afternoon)[0]
    assert refusals(small, False, False, afternoon) == []  # a person asked the nightly DAG to execute
    assert "max_moved_bytes" in refusals(big, False, False, night)[0]
    assert refusals(small, True, False, night) == ["a manual operation is always approved by a person"]


def test_duration_estimate_is_the_busiest_broker_receiving_or_serving_at_the_throttle() -> None:
    changes = pd.DataFrame({"old_replicas": [[1, 2], [1, 2], [3, 4]], "new_replicas": [[5, 2], [6, 2], [3, 5]],
                            "size_bytes": [100, 300, 200]})
    # Brokers 5 and 6 receive 300 each; the leaders serve: without them known, the first old replicas (broker 1
    # serves 400); with partition 1 led from broker 2, broker 1 serves 100 and 2 serves 300.
    assert estimated_seconds(changes, 10) == 40.0
    assert estimated_seconds(changes.assign(leader=[1, 2, 3]), 10) == 30.0
    assert estimated_seconds(changes, None) is None
    assert parse_duration("1h30m") == 5400 and parse_duration(90) == 90
    with pytest.raises(ValueError, match="duration"):
        parse_duration("soon")


def test_the_executor_needs_the_approved_hash(tmp_path: Path) -> None:
    run = RunFolder(tmp_path / "run")
    with pytest.raises(ExecutionError, match="not approved \\(no decision\\)"):
        assert_approved(run, "a" * 64)
    write_decision(run, "a" * 64, "rejected", "bob", "too big")
    with pytest.raises(ExecutionError, match="rejected \\(too big\\)"):
        assert_approved(run, "a" * 64)
    write_decision(run, "a" * 64, "approved", "alice", "ok")
    assert assert_approved(run, "a" * 64)["by"] == "alice"
    with pytest.raises(ExecutionError, match="is not the approved one"):
        assert_approved(run, "b" * 64)
    assert read_request(run) is None


def test_the_overrides_dag_task_lists_and_reverts(config_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    from tests.helpers import REPO

    monkeypatch.syspath_prepend(str(REPO / "plugins"))
    from kafka_rebalancer.airflow import tasks
    from kafka_rebalancer.airflow.tasks import overrides_task

    uncordoned: list[list[int]] = []  # the cordon itself is the integration test's (test_cordoned_drain.py)
    from kafka_rebalancer import kafka_admin
    from kafka_rebalancer.execute import cordon

    monkeypatch.setattr(tasks, "_connection", lambda config: None)
    monkeypatch.setattr(kafka_admin, "ClusterAdmin", lambda connection: contextlib.nullcontext())
    monkeypatch.setattr(cordon, "uncordon_reverted", lambda admin, reverted, active: str(uncordoned.append(
        reverted.brokers)))
    _, run = _request_run(config_path, "d1", action="drain-brokers", brokers=[2], reason="disk")
    record_override(run_config(config_path, run), run, "alice")
    dag_run = SimpleNamespace(triggering_user_name="bob")
    listed = overrides_task({"params": {"action": "list", "config_path": str(config_path)}, "dag_run": dag_run})
    assert [(o["id"], o["state"]) for o in listed] == [(1, "active")]
    with pytest.raises(RebalancerError, match="'override_id' is required"):
        overrides_task({"params": {"action": "revert", "config_path": str(config_path)}, "dag_run": dag_run})
    reverted = overrides_task({"params": {"action": "revert", "override_id": 1, "config_path": str(config_path)},
                               "dag_run": dag_run})
    assert reverted[0]["state"] == "reverted" and reverted[0]["reverted_by"] == "bob" and uncordoned == [[2]]
    assert run_config(config_path).pools["a"].brokers == [1, 2, 3]


def test_no_action_name_is_written_outside_its_module() -> None:
    """An action is named by its `Action` member everywhere but model/run_actions.py: a literal name elsewhere
    would be silently False when misspelt."""
    names = {a.value for a in Action}
    found = []
    sources = [*(REPO / "src").rglob("*.py"), *(REPO / "dags").glob("*.py"), *(REPO / "plugins").glob("*.py")]
    for path in sorted(sources):
        if path.name == "run_actions.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in names:
                found.append(f"{path.relative_to(REPO)}:{node.lineno}: {node.value!r}")
    assert not found, found


def test_a_request_written_before_the_scope_held_the_decisions_still_reads_the_same(config_path: Path) -> None:
    """request.json as runs wrote it before the scope held drained brokers, the promise and log-dir balancing:
    read, it gets them as the resolver decides them now (an execute-reviewed run of such a dry run works)."""
    config = run_config(config_path)
    for params in ({"action": "drain-brokers", "brokers": [2], "reason": "r"}, {"action": "demote-brokers",
                                                                                 "brokers": [1]},
                   {"action": "add-brokers", "brokers": [7], "broker_pool": "a", "reason": "r"},
                   {"action": "rebalance-pool", "broker_pool": "a"}):
        today = make_request(config, **params)
        old = today.model_dump(mode="json")
        for field in ("drained", "promise", "balances_log_dirs"):
            del old["scope"][field]
        assert ManualRequest.model_validate(old).scope == today.scope, params
        # an execute-reviewed run that adopted it (before: its override, and the scope without the decisions)
        adopted = {**make_request(config, action="execute-reviewed", reviewed_run_id="r").model_dump(mode="json"),
                   "override": old["override"], "scope": old["scope"]}
        assert ManualRequest.model_validate(adopted).scope.promise == today.scope.promise, params
        assert ManualRequest.model_validate(adopted).scope.drained == today.scope.drained, params
