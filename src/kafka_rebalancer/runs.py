"""The run folders of one cluster: which is the latest complete one, and which started the reassignments in flight.

"Latest" moves only when a snapshot completes, so a failed snapshot (cluster unreachable, bad capacity file)
never leaves an empty folder for a later step without --run-id to pick up. A cancel finds its run from the
reassignments in flight, not from "latest": the brake must reach what is actually moving.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from kafka_rebalancer.config import RebalancerConfig, safe_run_id
from kafka_rebalancer.errors import RunFolderError
from kafka_rebalancer.execute.log import ExecutionLog
from kafka_rebalancer.execute.progress import progress_text
from kafka_rebalancer.holds.execution_lock import pool_lock_held
from kafka_rebalancer.model.reassignment import Key, parse_reassignment
from kafka_rebalancer.run_folder import EXECUTE, PLAN, RunFolder

LATEST = "LATEST"


def mark_latest(config: RebalancerConfig, run: RunFolder) -> None:
    """Call once the run's snapshot is complete."""
    (config.run_root / config.cluster.name / LATEST).write_text(safe_run_id(run.path.name) + "\n")


def existing_run(config: RebalancerConfig, run_id: str | None) -> RunFolder:
    """The run folder of `run_id`, or of the latest complete snapshot; a clear error when there is none."""
    cluster_dir = config.run_root / config.cluster.name
    if run_id is None:
        latest = cluster_dir / LATEST
        if not latest.exists():
            raise RunFolderError(f"no complete snapshot yet under {cluster_dir}; run `kafka-rebalancer snapshot` "
                                 "first")
        run_id = latest.read_text().strip()
    run = RunFolder(config.run_dir(run_id))
    if not run.path.is_dir():
        known = sorted(p.name for p in cluster_dir.iterdir() if p.is_dir()) if cluster_dir.is_dir() else []
        raise RunFolderError(f"--run-id {run_id!r}: no run folder {run.path}; runs there: "
                             + (", ".join(known[-5:]) if known else "none"))
    return run


def executed_runs(config: RebalancerConfig) -> list[RunFolder]:
    """Runs that started executing at least one pool, the most recently active first."""
    cluster_dir = config.run_root / config.cluster.name
    logs = sorted(cluster_dir.glob(f"*/{EXECUTE}/*/execution_log.jsonl"), key=lambda p: p.stat().st_mtime,
                  reverse=True)
    runs: list[RunFolder] = []
    for log in logs:
        run = RunFolder(log.parents[2])
        if run.path not in {r.path for r in runs}:
            runs.append(run)
    return runs


def executions_in_progress(config: RebalancerConfig) -> list[str]:
    """One line per pool whose execution log's last attempt has an estimate and no end: the run, the pool and where
    it stands (`progress_text`); one whose executor died without an end (no one holds the pool's lock) says so."""
    lines = []
    for run in executed_runs(config):
        for log_path in sorted(run.stage_path(EXECUTE).glob("*/execution_log.jsonl")):
            pool = log_path.parent.name
            where = progress_text(ExecutionLog(log_path, pool, "").read())
            if where and pool_lock_held(config.run_root / ".locks", config.cluster.name, pool):
                lines.append(f"executing: run {run.path.name}, pool {pool}: {where}")
            elif where:
                lines.append(f"stopped: run {run.path.name}, pool {pool}: its executor ended without a result (no "
                             f"process holds the pool's lock; last seen {where}); a rerun continues from its log")
    return lines


def runs_to_cancel(config: RebalancerConfig, in_flight: Mapping[Key, Mapping[str, list[int]]]) -> list[RunFolder]:
    """The runs whose plans the reassignments in flight are heading for; with none in flight, the run that
    executed last (a crashed execution may have left its throttles). Refuses when what is in flight was not
    started by any run: it is not ours to stop."""
    executed = executed_runs(config)
    if not executed:
        raise RunFolderError(f"no run under {config.run_root / config.cluster.name} has started executing; "
                             "nothing to cancel")
    if not in_flight:
        return executed[:1]
    ours = [run for run in executed if _heads_for_plan(run, in_flight)]
    if not ours:
        names = ", ".join(f"{t}-{p}" for t, p in sorted(in_flight)[:10])
        raise RunFolderError(f"the reassignments in flight ({names}) were not started by any run under "
                             f"{config.run_root / config.cluster.name}; kafka-rebalancer cancels only its own "
                             "(pass --run-id to clear a run's throttles)")
    return ours


def _heads_for_plan(run: RunFolder, in_flight: Mapping[Key, Mapping[str, list[int]]]) -> bool:
    from kafka_rebalancer.execute.moves import reassignment_target  # the executor's imports are heavy

    plan_file: Path = run.stage_path(PLAN) / "plan.json"
    if not plan_file.exists():
        return False
    targets = {(e.topic, e.partition): frozenset(e.replicas)
               for e in parse_reassignment(plan_file.read_text(), str(plan_file))}
    return any(targets.get(key) == reassignment_target(state) for key, state in in_flight.items())
