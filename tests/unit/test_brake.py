"""The brake always works: cancel depends on the run folder and the cluster, never on the config still matching
the plan; a failed snapshot never becomes "latest"; a cancel without a run id finds the run in flight; bad CLI
arguments are refused with exit code 2 before anything runs."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kafka_rebalancer.cli import main
from kafka_rebalancer.errors import RunFolderError, ValidationFailed
from kafka_rebalancer.execute.cancel import cancel_pool
from kafka_rebalancer.execute.executor import execute_pool
from kafka_rebalancer.execute.log import ExecutionLog
from kafka_rebalancer.execute.moves import run_pools
from kafka_rebalancer.run_folder import RunFolder
from kafka_rebalancer.runs import existing_run, mark_latest, runs_to_cancel
from tests.helpers import write_config
from tests.unit.test_executor import CONFIG, MOVES, FakeCluster, no_sleep, prepared_run

IN_FLIGHT = {("t", 0): {"replicas": [3, 2, 1], "adding_replicas": [3], "removing_replicas": [1]}}


def started(run: RunFolder, pool: str = "a") -> None:
    ExecutionLog(run.stage_path(f"execute/{pool}") / "execution_log.jsonl", pool, "h").append("execute_started")


def test_cancel_works_after_the_config_changed_under_the_plan(config_factory: Callable[..., Any],
                                                              tmp_path: Path) -> None:
    planned_with = config_factory(CONFIG)
    run = prepared_run(planned_with, tmp_path)
    cluster = FakeCluster({(t, p): old for t, p, old, _ in MOVES}, polls=100)
    sleep, clock = no_sleep()
    cluster.alter_reassignments({(t, p): new for t, p, _, new in MOVES[:2]})  # two moves in flight
    cluster.alter_throttles({1: 100, 2: 100, 3: 100}, {"t": ("0:1", "0:3")})
    changed = config_factory({**CONFIG, "budgets": {"max_replica_moves": 1}}, name="changed.yaml")
    assert changed.fingerprint() != planned_with.fingerprint()
    with pytest.raises(ValidationFailed):  # executing needs the plan to match: the hash guard
        execute_pool(changed, cluster, run, "a", sleep=sleep, clock=clock)
    result = cancel_pool(changed, cluster, run, "a", sleep=sleep, clock=clock)  # the brake does not
    assert result["cancelled"] == ["t-0", "t-1"] and result["throttles_cleared"]
    assert cluster.ongoing == {} and cluster.broker_throttle == {} and cluster.topic_throttle == {}
    assert json.loads((run.path / "execute" / "a" / "cancel.json").read_text())["plan_hash"] == \
        json.loads((run.path / "plan" / "summary.json").read_text())["plan_hash"]


def test_cancel_of_a_run_without_a_plan_only_blocks_a_later_start(config_factory: Callable[..., Any],
                                                                   tmp_path: Path) -> None:
    config = config_factory(CONFIG)
    run = RunFolder(tmp_path / "empty-run")
    run.path.mkdir()
    result = cancel_pool(config, FakeCluster({}), run, "a")
    assert result["cancelled"] == [] and "nothing started" in result["note"]
    assert (run.path / "execute" / "a" / "cancel_requested.json").exists()


def test_run_pools_come_from_the_run_not_the_config(config_factory: Callable[..., Any], tmp_path: Path) -> None:
    run = prepared_run(config_factory(CONFIG), tmp_path)
    started(run, "renamed-since")
    assert run_pools(run) == ["a", "renamed-since"]


def test_cancel_without_run_id_finds_the_run_whose_reassignments_are_in_flight(
        config_factory: Callable[..., Any], tmp_path: Path) -> None:
    config = config_factory(CONFIG)
    with pytest.raises(RunFolderError, match="nothing to cancel"):
        runs_to_cancel(config, {})
    config.run_dir("moving").parent.mkdir(parents=True)
    moving = RunFolder(config.run_dir("moving"))
    prepared_run(config, tmp_path / "src").path.rename(moving.path)
    started(moving)
    later = RunFolder(config.run_dir("later"))
    prepared_run(config, tmp_path / "src2", moves=[("t", 5, [1, 2], [3, 4])]).path.rename(later.path)
    started(later)  # executed last, but not what is moving
    assert [r.path.name for r in runs_to_cancel(config, IN_FLIGHT)] == ["moving"]
    assert [r.path.name for r in runs_to_cancel(config, {})] == ["later"]  # nothing in flight: its throttles
    foreign = {("x", 0): {"replicas": [1, 2], "adding_replicas": [2], "removing_replicas": []}}
    with pytest.raises(RunFolderError, match="not started by any run"):
        runs_to_cancel(config, foreign)


def test_latest_moves_only_with_a_completed_snapshot(config_factory: Callable[..., Any], tmp_path: Path) -> None:
    config = config_factory(CONFIG)
    with pytest.raises(RunFolderError, match="no complete snapshot yet"):
        existing_run(config, None)
    done = RunFolder(config.run_dir("done"))
    done.path.mkdir(parents=True)
    mark_latest(config, done)
    (config.run_dir("failed")).mkdir()  # a snapshot that failed leaves its folder but does not become latest
    assert existing_run(config, None).path == done.path
    with pytest.raises(RunFolderError, match=r"--run-id 'nope': no run folder .*runs there: done, failed"):
        existing_run(config, "nope")


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    body = {**CONFIG, "run_root": str(tmp_path / "runs"),
            "cluster": {"name": "c1", "bootstrap_servers": "127.0.0.1:1", "request_timeout_s": 1}}
    return write_config(tmp_path / "config.yaml", body)


def test_a_failed_snapshot_does_not_become_the_latest_run(config_file: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["snapshot", "--config", str(config_file)]) == 3  # nothing listens on port 1: unreachable
    assert main(["execute", "--config", str(config_file)]) == 2
    assert "no complete snapshot yet" in capsys.readouterr().err


@pytest.mark.parametrize(("args", "message"), [
    (["execute", "--run-id", "r1", "--pool", "nope"], "--pool nope: no such pool in the config"),
    (["execute", "--run-id", "missing"], "--run-id 'missing': no run folder"),
    (["verify", "--run-id", "missing"], "--run-id 'missing': no run folder"),
    (["cancel", "--run-id", "missing"], "--run-id 'missing': no run folder"),
])
def test_bad_cli_arguments_exit_2_naming_the_flag(config_file: Path, tmp_path: Path, args: list[str], message: str,
                                                  capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "runs" / "c1" / "r1").mkdir(parents=True)
    assert main([args[0], "--config", str(config_file), *args[1:]]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


@pytest.mark.parametrize("throttle", ["0", "-5", "fast"])
def test_a_zero_negative_or_wordy_throttle_is_refused(config_file: Path, throttle: str,
                                                      capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["execute", "--config", str(config_file), "--throttle-bytes-per-s", throttle])
    assert exit_info.value.code == 2
    assert "--throttle-bytes-per-s" in capsys.readouterr().err


def test_the_hash_guard_refuses_before_any_network_call(config_factory: Callable[..., Any], tmp_path: Path) -> None:
    from kafka_rebalancer.execute.executor import run_execute
    from kafka_rebalancer.kafka_admin import KafkaConnection

    config = config_factory(CONFIG)
    run = prepared_run(config, tmp_path, validated=False)
    unreachable = KafkaConnection("127.0.0.1:1", request_timeout_s=30)  # a wait here would be 30 s
    with pytest.raises(ValidationFailed, match="failed validation"):
        run_execute(config, unreachable, run, "a", dry_run=False)
