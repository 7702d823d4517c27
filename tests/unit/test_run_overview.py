"""A run's one-line overview (the CLI's `runs`, the Airflow runs page) follows the run through its stages."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kafka_rebalancer.approve.approval import write_decision
from kafka_rebalancer.holds.execution_lock import pool_lock
from kafka_rebalancer.report.overview import list_runs, run_overview
from kafka_rebalancer.run_folder import RunFolder, write_json
from kafka_rebalancer.runs import executions_in_progress
from tests.unit.test_executor import CONFIG, prepared_run

ESTIMATES = "\n".join(json.dumps(e) for e in [
    {"ts": "2026-11-27T12:00:00.000+00:00", "action": "execute_started"},
    {"ts": "2026-11-27T12:00:01.000+00:00", "action": "estimate", "done_fraction": 0.0, "remaining_s": 600},
    {"ts": "2026-11-27T12:02:30.000+00:00", "action": "estimate", "done_fraction": 0.25, "remaining_s": 450}])


def test_status_lists_the_executions_in_progress_with_their_last_estimate(config_factory: Callable[..., Any]) -> None:
    config = config_factory(CONFIG)
    # Finished, failed on a timeout or cancelled: none of them in progress any more (their last estimates stay).
    ends = {"running": None, "done": "execute_finished", "timed-out": "timeout", "too-long": "run_timeout",
            "isr": "isr_wait_timeout", "braked": "cancel_requested", "stopped": "cancel_observed"}
    for run_id, end in ends.items():
        log = config.run_dir(run_id) / "execute" / "a" / "execution_log.jsonl"
        log.parent.mkdir(parents=True)
        log.write_text(ESTIMATES + (f'\n{{"ts": "2026-11-27T12:09:00.000+00:00", "action": "{end}"}}' if end else ""))
    with pool_lock(config.run_root / ".locks", config.cluster.name, "a", "running"):  # its executor is alive
        assert executions_in_progress(config) == [
            "executing: run running, pool a: 25 % of the bytes at 12:02:30, finish about 12:10 UTC"]
    # Killed without an end in its log: no process holds the pool's lock.
    assert executions_in_progress(config) == [
        "stopped: run running, pool a: its executor ended without a result (no process holds the pool's lock; last "
        "seen 25 % of the bytes at 12:02:30, finish about 12:10 UTC); a rerun continues from its log"]


def test_the_status_follows_the_stages(config_factory: Callable[..., Any], tmp_path: Path) -> None:
    config = config_factory(CONFIG)
    empty = RunFolder(tmp_path / "c1" / "cli__empty")
    empty.path.mkdir(parents=True)
    assert run_overview(empty).status == "no snapshot"
    run = prepared_run(config, tmp_path / "a")
    assert (run_overview(run).status, run_overview(run).mode, run_overview(run).approval) == ("validated", "-", "-")
    write_decision(run, "h", "rejected", None, "no answer within 0:00:05: rejected, the cluster was not touched")
    assert (run_overview(run).status, run_overview(run).approval) == ("rejected", "timed out")
    write_decision(run, "h", "approved", "ann", "approved by ann")
    assert (run_overview(run).status, run_overview(run).approval) == ("approved", "approved by ann")
    pool_dir = run.path / "execute" / "a"
    pool_dir.mkdir(parents=True)
    (pool_dir / "execution_log.jsonl").write_text("{}\n")
    assert run_overview(run).status == "executing or failed"
    # With the executor's estimates: where the last one stands.
    (pool_dir / "execution_log.jsonl").write_text(ESTIMATES)
    assert run_overview(run).status == "executing or failed (a: 25 % of the bytes at 12:02:30, finish about 12:10 UTC)"
    write_json(pool_dir / "result.json", {"completed": 4, "moves": 4, "skipped": []})
    assert run_overview(run).status == "executed"
    (run.path / "verify").mkdir()
    assert run_overview(run).status == "verified"
    write_json(pool_dir / "cancel.json", {"cancelled": []})
    assert run_overview(run).status == "cancelled"


def test_a_cli_dry_run_and_the_newest_first_listing(config_factory: Callable[..., Any], tmp_path: Path) -> None:
    config = config_factory(CONFIG)
    older = prepared_run(config, tmp_path / "older")
    newer = prepared_run(config, tmp_path / "newer")
    (newer.path / "execute" / "a").mkdir(parents=True)
    write_json(newer.path / "execute" / "a" / "dry_run.json", {"dry_run": True, "moves": []})
    root = tmp_path / "runs"
    (root / "c1").mkdir(parents=True)
    older.path.rename(root / "c1" / "scheduled__2026-01-01")
    newer.path.rename(root / "c1" / "cli__2026-01-02")
    listed = list_runs(root, "c1")
    assert len(listed) == 2 and [r.started_at for r in listed] == sorted((r.started_at for r in listed), reverse=True)
    by_id = {r.run_id: r for r in listed}
    assert (by_id["cli__2026-01-02"].trigger, by_id["cli__2026-01-02"].status, by_id["cli__2026-01-02"].mode) == \
        ("cli", "dry run", "dry-run")
    assert by_id["scheduled__2026-01-01"].trigger == "scheduled"
    assert by_id["scheduled__2026-01-01"].replica_moves is None  # the test plan's summary has no totals


def test_snapshots_of_the_same_second_are_listed_by_when_they_were_written(tmp_path: Path) -> None:
    # CI saw `show` (the newest run) pick "snap" over a "cli__..." run snapshotted in the same second.
    for run_id, written_ns in (("snap", 1_000_000_000), ("cli__2026-11-26T22-10-04Z", 2_000_000_000)):
        run = RunFolder(tmp_path / "c1" / run_id)
        with run.stage("snapshot") as out:
            write_json(out / "manifest.json", {"taken_at": "2026-11-26T22:10:04+00:00"})
        os.utime(run.path / "snapshot", ns=(written_ns, written_ns))
    assert [r.run_id for r in list_runs(tmp_path)] == ["cli__2026-11-26T22-10-04Z", "snap"]
