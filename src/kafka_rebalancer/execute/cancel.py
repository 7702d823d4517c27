"""The brake (README: Execution, Cancel): a pool's execution marked cancelled, its reassignments in progress
cancelled with the original replica order put back, its throttles cleared, its moves between log directories taken
back, and the drained brokers it cordoned uncordoned."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from kafka_rebalancer.config import RebalancerConfig
from kafka_rebalancer.execute.cluster import Cluster, describe, names
from kafka_rebalancer.execute.executor import CANCEL_MARKER, clear_throttle
from kafka_rebalancer.execute.log import ExecutionLog
from kafka_rebalancer.execute.log_dir_moves import cancel_log_dir_moves
from kafka_rebalancer.execute.moves import PartitionMove, read_pool_plan, reassignment_target
from kafka_rebalancer.execute.throttle import throttle_for
from kafka_rebalancer.model.reassignment import Key, leadership_only
from kafka_rebalancer.run_folder import EXECUTE, PLAN, RunFolder, read_json, write_json

log = logging.getLogger(__name__)


def cancel_pool(config: RebalancerConfig, cluster: Cluster, run: RunFolder, pool: str, *, wait_s: float = 60.0,
                sleep: Callable[[float], None] = time.sleep,
                clock: Callable[[], float] = time.monotonic) -> dict[str, Any]:
    """Stop the pool's execution: mark it cancelled (a running executor starts nothing more and exits), cancel
    its reassignments in progress (Kafka then keeps the original replicas), clear the throttles, record it.

    The brake never depends on the plan still matching the config: it stops what the run folder's plan started,
    under the hash the plan was made with, whatever changed since."""
    out_dir = run.stage_path(f"{EXECUTE}/{pool}")
    if not run.has(PLAN):  # nothing of this run can be executing; the marker still stops a later start
        xlog = ExecutionLog(out_dir / "execution_log.jsonl", pool, "")
        write_json(out_dir / CANCEL_MARKER, {"requested_at": datetime.now(UTC).isoformat(timespec="seconds")})
        xlog.append("cancel_requested", note="the run has no plan")
        return {"pool": pool, "plan_hash": None, "cancelled": [], "refused": {}, "still_in_progress": [],
                "order_restored": [], "throttles_cleared": True, "note": "the run has no plan: nothing started"}
    plan = read_pool_plan(run, pool, read_json(run.stage_path(PLAN) / "summary.json")["plan_hash"])
    xlog = ExecutionLog(out_dir / "execution_log.jsonl", pool, plan.digest)
    write_json(out_dir / CANCEL_MARKER, {"requested_at": datetime.now(UTC).isoformat(timespec="seconds")})
    xlog.append("cancel_requested")
    by_key = {m.key: m for m in plan.moves}
    cancelled: set[Key] = set()
    refused: dict[Key, str] = {}
    deadline = clock() + wait_s
    while True:
        # Repeated: an executor may have started a batch just before it saw the marker.
        ongoing = cluster.list_reassignments()
        ours = {k for k, s in ongoing.items() if k in by_key and reassignment_target(s) == set(by_key[k].new)}
        if not ours or clock() > deadline:
            break
        errors = cluster.alter_reassignments({k: None for k in ours})
        refused.update(errors)
        for key in sorted(ours - set(errors)):
            if key not in cancelled:
                xlog.append("cancelled", key, old=list(by_key[key].old), new=list(by_key[key].new))
            cancelled.add(key)
        sleep(config.execution.poll_interval_s)
    reordered = _restore_replica_order(cluster, [by_key[k] for k in sorted(cancelled)], xlog,
                                       config.execution.poll_interval_s, deadline, sleep, clock)
    # Whatever rate was used (config or a DAG param), these are the configs an execution of the plan sets. A
    # broker that is down cannot have its config changed: the cancel still stands, the result says so.
    cleared = clear_throttle(cluster, throttle_for(plan.moves, None), xlog, raise_errors=False)
    back = cancel_log_dir_moves(cluster, plan.log_dir_moves, xlog.append) if plan.log_dir_moves else 0
    result = {"pool": pool, "plan_hash": plan.digest, "cancelled": names(cancelled), "log_dir_moves_back": back,
              "refused": {f"{t}-{p}": e for (t, p), e in refused.items()}, "still_in_progress": names(ours),
              "order_restored": reordered, "throttles_cleared": cleared}
    xlog.append("cancel_finished", cancelled=len(cancelled), still_in_progress=result["still_in_progress"])
    write_json(out_dir / "cancel.json", result)
    log.info("%s: cancelled %d reassignment(s); throttles %s", pool, len(cancelled),
             "cleared" if cleared else "NOT all cleared (see the log above)")
    return result


def _restore_replica_order(cluster: Cluster, moves: list[PartitionMove], xlog: ExecutionLog, poll_s: float,
                           deadline: float, sleep: Callable[[float], None], clock: Callable[[], float]) -> list[str]:
    """A cancelled reassignment leaves the original replica set in the reassignment's order, so the preferred
    leader may have changed; put the original order back (a leadership-only change, nothing is copied)."""
    current = describe(cluster, [m.key for m in moves])
    reorder = {m.key: list(m.old) for m in moves if (info := current.get(m.key)) is not None
               and leadership_only(info.replicas, m.old)}
    if not reorder:
        return []
    cluster.alter_reassignments(reorder)
    while set(cluster.list_reassignments()) & set(reorder) and clock() < deadline:
        sleep(poll_s)
    cluster.elect_preferred_leaders(list(reorder))
    xlog.append("order_restored", partitions=names(reorder))
    return names(reorder)


def run_cancel(config: RebalancerConfig, connection: Any, run: RunFolder, pool: str) -> dict[str, Any]:
    """Cancel one pool's execution on the cluster behind `connection`; its run's files are read as they are, even
    if changed since they were written (a warning): the brake must work."""
    from kafka_rebalancer.execute.cordon import uncordon_drained
    from kafka_rebalancer.kafka_admin import ClusterAdmin

    run = RunFolder(run.path, strict=False)
    with ClusterAdmin(connection) as admin:
        admin.check_reachable()
        result = cancel_pool(config, admin, run, pool)
        xlog = ExecutionLog(run.stage_path(f"{EXECUTE}/{pool}") / "execution_log.jsonl", pool,
                            result["plan_hash"] or "")
        try:
            result["uncordoned"] = uncordon_drained(admin, run, xlog)
        except Exception as exc:  # noqa: BLE001  # the moves are stopped already: a failed uncordon must not hide it
            xlog.append("uncordon_failed", error=str(exc))
            log.error("%s: cancelled, but uncordoning the drained brokers failed (%s); they stay cordoned", pool, exc)
            result["uncordoned"] = []
        return result
