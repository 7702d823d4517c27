"""The approval gate between validation and execution.

A validated plan executes only after a decision, recorded in the run folder (`approval/decision.json`) with the
plan hash it approves: a person's (Airflow's approval step, or the CLI's confirmation), or the config's
auto-approval for a nightly run whose plan is within the limits (and, when scheduled, that starts inside the
execution window). The
executor refuses a plan whose hash is not the approved one.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pandas as pd

from kafka_rebalancer.config import RebalancerConfig
from kafka_rebalancer.errors import ExecutionError
from kafka_rebalancer.model.copy_time import CopyBytes
from kafka_rebalancer.model.units import human_bytes, human_duration
from kafka_rebalancer.operations.overrides import now_iso
from kafka_rebalancer.operations.request import read_request
from kafka_rebalancer.plan.balance.tables import spread_pool_line
from kafka_rebalancer.plan.promises import validation_promise_lines
from kafka_rebalancer.plan.replication_factor import RESIZE_HEADER, resize_rows
from kafka_rebalancer.run_folder import APPROVAL, PLAN, VALIDATION, RunFolder, read_json, write_json
from kafka_rebalancer.snapshot.store import read_snapshot

APPROVED_STATES = ("approved", "auto-approved")
LARGEST_MOVES = 10


def estimated_seconds(changes: pd.DataFrame, throttle_bytes_per_s: int | None) -> float | None:
    """The throttle-bound minimum of the copies (`model.copy_time`): the busiest broker's bytes to receive, or to
    serve as the leader (`leader`: the snapshot's leader of each partition; without it, the first old replica),
    at the throttled rate (None: unthrottled, no estimate)."""
    if not throttle_bytes_per_s:
        return None
    leaders = changes["leader"] if "leader" in changes else [-1] * len(changes)
    moves = [_Copy(tuple(map(int, old)), tuple(map(int, new)), int(size), int(leader)) for old, new, size, leader
             in zip(changes["old_replicas"], changes["new_replicas"], changes["size_bytes"], leaders, strict=True)]
    return CopyBytes.of(moves).seconds(throttle_bytes_per_s)


@dataclass(frozen=True)
class _Copy:
    old: tuple[int, ...]
    new: tuple[int, ...]
    size_bytes: int
    leader: int


def _ids(brokers: Any) -> list[int]:
    return [int(b) for b in brokers]


@dataclass(frozen=True)
class PlanFacts:
    """What the gate decides on, read from the validated plan."""

    plan_hash: str
    summary: dict[str, Any]
    changes: pd.DataFrame
    throttle_bytes_per_s: int | None
    duration_s: float | None

    @classmethod
    def read(cls, config: RebalancerConfig, run: RunFolder, throttle_bytes_per_s: int | None = None) -> PlanFacts:
        from kafka_rebalancer.model.schemas import PARTITION_CHANGES
        from kafka_rebalancer.run_folder import read_table

        plan_dir = run.require(PLAN)
        summary = read_json(plan_dir / "summary.json")
        changes = read_table(plan_dir, PARTITION_CHANGES)
        # The leaders serve the copies: the snapshot's (read_pool_plan gives the executor the same).
        snapshot, _ = read_snapshot(run)
        changes = changes.merge(snapshot.partitions[["topic", "partition", "leader"]], on=["topic", "partition"],
                                how="left").fillna({"leader": -1})
        throttle = throttle_bytes_per_s or config.execution.throttle_bytes_per_s
        return cls(summary["plan_hash"], summary, changes, throttle, estimated_seconds(changes, throttle))


def limits_passed(config: RebalancerConfig, facts: PlanFacts) -> list[str]:
    """The auto-approval limits the plan goes beyond (empty: within all of them)."""
    limits = config.approval.auto_approve
    totals = facts.summary["totals"]
    passed = []
    if limits.max_moved_bytes is not None and totals["moved_bytes"] > limits.max_moved_bytes:
        passed.append(f"moves {human_bytes(totals['moved_bytes'])}, over max_moved_bytes "
                      f"{human_bytes(limits.max_moved_bytes)}")
    if limits.max_replica_moves is not None and totals["replica_moves"] > limits.max_replica_moves:
        passed.append(f"{totals['replica_moves']} replica moves, over max_replica_moves {limits.max_replica_moves}")
    if limits.max_duration_s is not None:
        if facts.duration_s is None:
            passed.append("duration unknown (no throttle) while max_duration is set")
        elif facts.duration_s > limits.max_duration_s:
            passed.append(f"estimated {human_duration(facts.duration_s)} at the throttle, over max_duration "
                          f"{human_duration(limits.max_duration_s)}")
    return passed


def unattended_refusals(config: RebalancerConfig, facts: PlanFacts, *, manual_operation: bool, scheduled: bool,
                        started: datetime) -> list[str]:
    """Why this run may not execute without a person (empty: it may). A manual operation always asks. A nightly
    run within every auto-approval limit goes on; a scheduled one only when it started inside the execution
    window (unpausing the DAG in the afternoon must not start an unattended execution)."""
    if manual_operation:
        return ["a manual operation is always approved by a person"]
    reasons = limits_passed(config, facts)
    window = config.approval.window
    if scheduled and window is not None and not window.contains(started):
        reasons.append(f"the run started at {started.astimezone(window.zone()).strftime('%H:%M %Z')}, outside the "
                       f"execution window {window.start}-{window.end} {window.timezone}")
    return reasons


def approval_body(config: RebalancerConfig, run: RunFolder, facts: PlanFacts, waiting_because: list[str]) -> str:
    """Markdown for the person deciding: exactly the validated plan, per pool, and where its artifacts are."""
    s, totals = facts.summary, facts.summary["totals"]
    request = read_request(run)
    lines = [f"**Plan `{facts.plan_hash[:12]}`** for cluster `{s['cluster']}`"
             + (f", manual action **{request.action}** asked by {request.requested_by}" if request else ", nightly"),
             ""]
    unkept = validation_promise_lines(run.completed(VALIDATION))
    if unkept:
        lines += ["**This plan cannot keep what the action promises; the run will not end verified:**",
                  *[f"- {line}" for line in unkept], ""]
    if request is not None and request.reason:
        lines += [f"Reason: {request.reason}", ""]
    if waiting_because:
        lines += ["Waiting for a person because:", *[f"- {why}" for why in waiting_because], ""]
    lines += [f"{totals['replica_moves']} replica moves ({human_bytes(totals['moved_bytes'])}), "
              f"{totals['partitions_changed']} partitions change; estimated "
              f"{human_duration(facts.duration_s)} at {human_bytes(facts.throttle_bytes_per_s or 0)}/s per broker.", "",
              "| pool | replica moves | preferred leader changes | leadership only | bytes (forced; balance) "
              "| out of band before → after |",
              "|---|---|---|---|---|---|"]
    for pool, p in s["pools"].items():
        band = "; ".join(f"{name}: {len(r['out_of_band_before'])} → {len(r['out_of_band_after'])}"
                         for name, r in p["resources"].items())
        split = (f" ({human_bytes(p['forced_bytes'])}; {human_bytes(p['balance_bytes'])})"
                 if "forced_bytes" in p else "")
        lines.append(f"| {pool} | {p['replica_moves']} | {p['preferred_leader_changes']} | "
                     f"{p.get('leadership_only_changes', '-')} | {human_bytes(p['moved_bytes'])}{split} | {band} |")
    spread = {pool: p["topic_spread"] for pool, p in s["pools"].items() if "topic_spread" in p}
    if spread:
        lines += ["", "Topic spread, per topic and broker against the topic's target ceil(share) + margin:",
                  *[f"- {pool}: {spread_pool_line(kinds)}" for pool, kinds in spread.items()]]
    largest = facts.changes.assign(copies=[len(set(n) - set(o)) for o, n in zip(
        facts.changes["old_replicas"], facts.changes["new_replicas"], strict=True)])
    largest = largest[largest["copies"] > 0].sort_values("size_bytes", ascending=False).head(LARGEST_MOVES)
    if len(largest):
        lines += ["", "Largest moves:", "", "| partition | replicas | size |", "|---|---|---|"]
        lines += [f"| {r.topic}-{r.partition} | {_ids(r.old_replicas)} → {_ids(r.new_replicas)} | "
                  f"{human_bytes(r.size_bytes)} |" for r in largest.itertuples(index=False)]
    log_dirs = s.get("log_dir_moves")
    if log_dirs:
        lines += ["", f"Moves between a broker's log dirs ({log_dirs['why']}): {log_dirs['moves']} replicas, "
                  f"{human_bytes(log_dirs['bytes'])}, copied inside their brokers (plan/log_dir_moves.json)"
                  + (f"; log dirs emptied: {', '.join(log_dirs['removed'])}" if log_dirs["removed"] else "") + "."]
        lines += [f"- stays where it is: {line}" for line in log_dirs["stranded"]]
    resized = s.get("replication_factor")
    if resized:
        lines += ["", f"Replication factor to {resized['target']}:", "", f"| {' | '.join(RESIZE_HEADER)} |",
                  "|---" * len(RESIZE_HEADER) + "|", *(f"| {' | '.join(row)} |" for row in resize_rows(resized))]
        lines += [f"- warning: {warning}" for warning in resized["warnings"]]
    skipped = s["skipped"]["by_reason"]
    if skipped:
        lines += ["", "Skipped partitions: " + ", ".join(f"{n} ({why})" for why, n in skipped.items())]
    if request is not None and request.override is not None:
        lines += ["", f"Records pool override: {request.override.describe().split(' ', 1)[1]} "
                  "(lasts until reverted: `kafka-rebalancer overrides revert ID`)"]
    if request is not None and request.unregister:
        lines += ["", f"Then, once verified, unregisters broker(s) {_ids(sorted(request.scope.drained))} from the "
                  "KRaft controller (refused if one is running or still holds a replica)"]
    lines += ["", f"Plan hash: `{facts.plan_hash}` (approving executes this plan and no other)",
              f"Artifacts: `{run.path}` (plan/plan.json, plan/summary.json, validation/report.json)"]
    return "\n".join(lines)


def write_decision(run: RunFolder, plan_hash: str, state: str, by: str | None, why: list[str] | str) -> dict:
    decision = {"state": state, "plan_hash": plan_hash, "by": by, "at": now_iso(),
                "why": [why] if isinstance(why, str) else list(why)}
    with run.stage(APPROVAL) as out:
        write_json(out / "decision.json", decision)
    return decision


def read_decision(run: RunFolder) -> dict | None:
    folder = run.completed(APPROVAL)
    return read_json(folder / "decision.json") if folder is not None else None


def assert_approved(run: RunFolder, plan_hash: str) -> dict:
    """The executor's check: this exact plan was approved."""
    decision = read_decision(run)
    if decision is None or decision["state"] not in APPROVED_STATES:
        state = "no decision" if decision is None else f"{decision['state']} ({'; '.join(decision['why'])})"
        raise ExecutionError(f"refusing to execute: the plan of {run.path} is not approved ({state})")
    if decision["plan_hash"] != plan_hash:
        raise ExecutionError(f"refusing to execute: plan {plan_hash[:12]} is not the approved one "
                             f"({decision['plan_hash'][:12]})")
    return decision
