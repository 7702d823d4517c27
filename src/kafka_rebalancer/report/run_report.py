"""The visual report of one run: `report/index.html` in the run folder, one self-contained page (plotly.js inlined
once, no CDN) that opens offline.

It shows whatever the run folder holds, wherever the run stopped (a snapshot only, a plan that failed validation, a
dry run, an executed, cancelled or failed execution); a stage that did not run says "not run", and an artifact that
cannot be read says so in its own section instead of failing the report. `collect` reads the folder, one small
function per section, and already caps what a large run would show (the largest moves, the most telling brokers),
so `render`, which turns the data into the page, stays cheap and pure.
"""

from __future__ import annotations

import html
import json
import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pandas as pd
import plotly.offline
import pyarrow as pa

from kafka_rebalancer.approve.approval import read_decision
from kafka_rebalancer.errors import RebalancerError
from kafka_rebalancer.execute.log import ExecutionLog
from kafka_rebalancer.model.reassignment import read_reassignment
from kafka_rebalancer.model.resources import RESOURCES
from kafka_rebalancer.model.schemas import PARTITION_CHANGES, PARTITIONS
from kafka_rebalancer.model.units import human_bytes
from kafka_rebalancer.operations.request import REQUEST_FILE
from kafka_rebalancer.report.charts import (
    CHARTS_JS,
    BrokerUsage,
    Flow,
    LogMarker,
    ProgressPoint,
    execution_timeline,
    figure_html,
    moves_sankey,
    usage_bars,
)
from kafka_rebalancer.report.overview import run_overview
from kafka_rebalancer.run_folder import (
    EXECUTE,
    PLAN,
    REPORT,
    SNAPSHOT,
    VALIDATION,
    VERIFY,
    RunFolder,
    read_json,
    read_table,
)

# What a page of a large run (1,000 brokers, 100,000 moves) still shows; the rest is in the artifacts it names.
MOVES_SHOWN = 2_000
BROKERS_SHOWN = 50  # per pool and resource
SANKEY_BROKERS = 25  # per side of a pool's Sankey; the other senders and receivers are grouped
PROGRESS_POINTS = 1_000  # per pool's timeline
MARKERS_SHOWN = 200  # per pool and kind of event
SKIPPED_SHOWN = 200
NOTES_SHOWN = 500  # per pool
FAILED_ROWS_SHOWN = 50  # per failed expectation
NOT_AT_PLAN_SHOWN = 200
VERIFY_TEXT_CHARS = 200_000

# Errors of an artifact that is there but not as expected (truncated, edited, from another version): the
# section says so and the rest of the report is still written.
_UNREADABLE = (RebalancerError, OSError, ValueError, KeyError, TypeError, IndexError, AttributeError,
               pa.ArrowException)

# Execution log actions shown as markers on the timeline, by kind.
_MARKER_GROUPS = {
    "execute_started": "start", "execute_finished": "finish", "throttle_set": "throttle",
    "throttle_cleared": "throttle", "skipped": "skip", "cancel_requested": "cancel", "cancelled": "cancel",
    "cancel_observed": "cancel", "cancel_finished": "cancel", "cancel_cleared": "cancel", "waiting_for_isr": "wait",
    "isr_recovered": "wait", "timeout": "problem", "run_timeout": "problem", "isr_wait_timeout": "problem",
    "read_failed": "problem", "restart": "problem", "throttle_clear_failed": "problem",
}
# The log actions that say where a pool's execution stands; the last one in the log wins.
_EXECUTION_STATES = {
    "execute_started": "started, not finished (still running, or stopped without a result)",
    "execute_finished": "finished",
    "cancel_requested": "cancelled", "cancel_finished": "cancelled", "cancel_observed": "cancelled",
    "timeout": "failed: moves stuck past the move timeout",
    "run_timeout": "failed: the run's time limit passed",
    "isr_wait_timeout": "failed: under-replicated partitions did not recover",
}
_LABEL_DETAILS = ("rate_bytes_per_s", "reason", "detail", "error", "stuck", "in_flight", "count", "cancelled",
                  "completed", "skipped", "moves", "resumed")


@dataclass(frozen=True)
class Header:
    cluster: str
    run_id: str
    trigger: str  # scheduled | airflow | cli | ..., with the run id's prefix
    action: str  # nightly, or the manual operation request.json asked for
    requested_by: str | None
    reason: str | None
    mode: str  # dry-run | execute | -
    status: str  # how far the run got
    approval: str  # approved by X | auto-approved | dry run | rejected by X | timed out | -
    decided_at: str | None
    decision_why: list[str]
    plan_hash: str | None
    snapshot_taken_at: str | None


@dataclass(frozen=True)
class SnapshotView:
    taken_at: str | None
    rows: dict[str, int]
    capture_seconds: float | None
    content_hash: str | None
    warnings: list[str]


@dataclass(frozen=True)
class ResourceView:
    resource: str
    is_count: bool
    lower: float | None
    upper: float | None  # capped by the capacity threshold, as band status counts it
    before_band: tuple[float | None, float | None] | None  # the current placement's (lower, capped upper)
    balanced: bool
    note: str | None
    brokers: list[BrokerUsage]  # the ones shown
    brokers_total: int
    out_of_band_before: list[int]
    out_of_band_after: list[int]
    fixed_outside_target_band: list[int]  # out of band before, short of the target band after
    taken_outside_target_band: list[int]  # inside the band before, taken out of the target band (or further)
    lower_bound: float | None  # of the balance part, against the band of the current placement
    moved: float | None  # by balance moves
    moved_over_lb: float | None
    forced_moved: float | None  # by forced moves
    forced_moved_by_reason: dict[str, float]
    forced_lower_bound: float | None  # what must leave its broker
    forced_moved_over_lb: float | None
    infeasible: int
    infeasibility_proofs: list[dict[str, Any]]  # brokers, count, proof


@dataclass(frozen=True)
class PlannerNote:
    resource: str
    broker_id: int | None
    note: str


@dataclass(frozen=True)
class PoolPlanView:
    broker_pool: str
    partitions_changed: int | None
    replica_moves: int | None
    preferred_leader_changes: int | None
    moved_bytes: int | None
    forced_bytes: int | None
    forced_bytes_by_reason: dict[str, int]
    forced_lower_bound_bytes: float | None  # the bytes that must leave their brokers
    forced_moved_over_lb: float | None
    balance_bytes: int | None
    lower_bound_bytes: float | None  # of the balance part
    moved_over_lb: float | None  # balance bytes / its lower bound
    resources: list[ResourceView]
    flows: list[Flow]  # by sender and receiver, the ones past SANKEY_BROKERS grouped (broker None)
    flows_total: int  # broker-to-broker pairs before grouping
    senders_grouped: int
    receivers_grouped: int
    notes: list[PlannerNote]  # the first NOTES_SHOWN
    notes_total: int


@dataclass(frozen=True)
class MoveRow:
    broker_pool: str
    topic: str
    partition: int
    old: tuple[int, ...]
    new: tuple[int, ...]
    size_bytes: int
    bytes_to_copy: int  # the partition's size for each replica added

    @property
    def leadership_change(self) -> str:
        old_leader, new_leader = (self.old[0] if self.old else None), (self.new[0] if self.new else None)
        return "" if old_leader == new_leader else f"{old_leader} → {new_leader}"


@dataclass(frozen=True)
class PlanView:
    totals: dict[str, Any]
    budgets: dict[str, Any]
    plan_seconds: float | None
    pools: list[PoolPlanView]
    moves: list[MoveRow]  # the largest MOVES_SHOWN, by bytes to copy
    # The re-check's totals (plan.json against the snapshot); a summary older than them: counted from the moves.
    moves_total: int  # partitions the plan changes
    replica_moves: int
    preferred_leader_changes: int
    leadership_only_changes: int | None
    bytes_total: int
    moves_source: str  # where the moves listed were read from
    skipped_by_reason: dict[str, int]
    skipped: list[dict[str, Any]]
    skipped_total: int
    hot_partitions: list[dict[str, Any]]
    hot_total: int


@dataclass(frozen=True)
class ExpectationResult:
    table: str
    expectation: str
    description: str
    success: bool
    unexpected_count: int | None
    element_count: int | None


@dataclass(frozen=True)
class FailedExpectation:
    table: str
    expectation: str
    description: str
    unexpected_count: int | None
    rows: list[dict[str, Any]]  # the first FAILED_ROWS_SHOWN
    rows_total: int


@dataclass(frozen=True)
class ValidationView:
    success: bool
    plan_hash: str | None
    expectations: int | None
    partitions_checked: int | None
    broker_resource_pairs_checked: int | None
    results: list[ExpectationResult]  # per expectation evaluated (validation/gx_results.json)
    failures: list[FailedExpectation]


@dataclass(frozen=True)
class PoolExecutionView:
    broker_pool: str
    state: str
    moves_planned: int | None
    moves_done: int
    bytes_done: int
    result: dict[str, Any] | None  # result.json
    cancel: dict[str, Any] | None  # cancel.json
    dry_run: dict[str, int] | None  # dry_run.json: how many moves per verdict
    progress: list[ProgressPoint]  # at most PROGRESS_POINTS
    markers: list[LogMarker]  # at most MARKERS_SHOWN per kind
    markers_total: int
    log_entries: int


@dataclass(frozen=True)
class VerifyView:
    plan_hash: str | None
    partitions_planned: int | None
    not_at_plan: list[dict[str, Any]]
    not_at_plan_total: int
    out_of_band_before: int | None
    out_of_band_after: int | None
    pools: dict[str, dict[str, dict[str, list[int]]]]
    report_text: str | None
    report_text_truncated: bool


@dataclass(frozen=True)
class RunReportData:
    header: Header
    snapshot: SnapshotView | None  # None: the stage did not run (or could not be read: see unreadable)
    plan: PlanView | None
    validation: ValidationView | None
    executions: list[PoolExecutionView] | None
    verification: VerifyView | None
    unreadable: dict[str, str] = field(default_factory=dict)  # section -> what went wrong reading it


# -- collect -------------------------------------------------------------------------------------------------------

T = TypeVar("T")


def collect(run: RunFolder) -> RunReportData:
    """Everything the page shows, read from the run folder; a missing stage is None, a broken one is named in
    `unreadable`."""
    unreadable: dict[str, str] = {}

    def section(name: str, read: Callable[[RunFolder], T]) -> T | None:
        try:
            return read(run)
        except _UNREADABLE as exc:
            unreadable[name] = f"{type(exc).__name__}: {exc}"
            return None

    header = section("header", _header) or _bare_header(run)
    return RunReportData(header=header, snapshot=section("snapshot", _snapshot), plan=section("plan", _plan),
                         validation=section("validation", _validation), executions=section("execution", _executions),
                         verification=section("verification", _verification), unreadable=unreadable)


def _header(run: RunFolder) -> Header:
    overview = run_overview(run)
    decision = read_decision(run) or {}
    request = _optional_json(run.path / REQUEST_FILE) or {}
    prefix = run.path.name.split("__", 1)[0] if "__" in run.path.name else None
    return Header(
        cluster=overview.cluster, run_id=overview.run_id,
        trigger=overview.trigger + (f" ({prefix}__)" if prefix else ""), action=overview.action,
        requested_by=request.get("requested_by"), reason=request.get("reason") or None, mode=overview.mode,
        status=overview.status, approval=overview.approval, decided_at=decision.get("at"),
        decision_why=list(decision.get("why") or []), plan_hash=overview.plan_hash,
        snapshot_taken_at=(_optional_json(run.stage_path(SNAPSHOT) / "manifest.json") or {}).get("taken_at"))


def _bare_header(run: RunFolder) -> Header:
    """What the folder's path alone tells, when the run's own records cannot be read."""
    return Header(cluster=run.path.parent.name, run_id=run.path.name, trigger="?", action="?", requested_by=None,
                  reason=None, mode="?", status="?", approval="?", decided_at=None, decision_why=[], plan_hash=None,
                  snapshot_taken_at=None)


def _snapshot(run: RunFolder) -> SnapshotView | None:
    folder = run.completed(SNAPSHOT)
    if folder is None:
        return None
    manifest = read_json(folder / "manifest.json")
    return SnapshotView(taken_at=manifest.get("taken_at"), rows=dict(manifest.get("rows") or {}),
                        capture_seconds=manifest.get("capture_seconds"), content_hash=manifest.get("content_hash"),
                        warnings=[str(w) for w in manifest.get("warnings") or []])


def _plan(run: RunFolder) -> PlanView | None:
    plan_dir = run.completed(PLAN)
    if plan_dir is None:
        return None
    summary = read_json(plan_dir / "summary.json")
    changes, source = _partition_changes(run, plan_dir)
    moves = _moves_frame(changes)
    flows = _flows(moves)
    largest = moves.sort_values(["bytes_to_copy", "topic", "partition"], ascending=[False, True, True],
                                kind="stable").head(MOVES_SHOWN)
    summary_pools = summary.get("pools") or {}
    pool_names = sorted(set(summary_pools) | set(moves["broker_pool"]))
    skipped = summary.get("skipped") or {}
    hot = summary.get("hot_partitions") or []
    totals = summary.get("totals") or {}
    return PlanView(
        totals=totals, budgets=summary.get("budgets") or {}, plan_seconds=summary.get("plan_seconds"),
        pools=[_pool_plan(name, summary_pools.get(name) or {}, flows.get(name, [])) for name in pool_names],
        moves=[MoveRow(pool, topic, int(partition), old, new, int(size), int(copied)) for pool, topic, partition, old,
               new, size, copied in largest[list(_MOVE_FIELDS)].itertuples(index=False, name=None)],
        moves_total=_total(totals, "partitions_changed", len(moves)),
        replica_moves=_total(totals, "replica_moves", moves["copies"].sum()),
        preferred_leader_changes=_total(totals, "preferred_leader_changes", moves["leader_changes"].sum()),
        leadership_only_changes=totals.get("leadership_only_changes"),
        bytes_total=_total(totals, "moved_bytes", moves["bytes_to_copy"].sum()), moves_source=source,
        skipped_by_reason=dict(skipped.get("by_reason") or {}),
        skipped=list(skipped.get("partitions") or [])[:SKIPPED_SHOWN],
        skipped_total=int(totals.get("skipped_partitions", len(skipped.get("partitions") or []))),
        hot_partitions=list(hot), hot_total=int(totals.get("hot_partitions", len(hot))))


def _total(totals: dict[str, Any], key: str, counted: Any) -> int:
    value = totals.get(key)
    return int(counted if value is None else value)


_MOVE_FIELDS = ("broker_pool", "topic", "partition", "old", "new", "size_bytes", "bytes_to_copy")


def _moves_frame(changes: pd.DataFrame) -> pd.DataFrame:
    """One row per partition change (MoveRow's fields): replica lists as tuples of ints, the replicas it adds
    (copies), the bytes they copy and whether the leader changes. Columnar: a plan can change 100,000 partitions."""
    old = [_ids(r) for r in changes["old_replicas"]]
    new = [_ids(r) for r in changes["new_replicas"]]
    copies = np.array([len(set(n).difference(o)) for o, n in zip(old, new, strict=True)], dtype=np.int64)
    size = changes["size_bytes"].to_numpy(dtype=np.int64)
    return pd.DataFrame({
        "broker_pool": changes["broker_pool"].fillna("-").astype(str).to_numpy(),
        "topic": changes["topic"].astype(str).to_numpy(), "partition": changes["partition"].astype(int).to_numpy(),
        "old": old, "new": new, "size_bytes": size, "bytes_to_copy": size * copies, "copies": copies,
        "leader_changes": [o[:1] != n[:1] for o, n in zip(old, new, strict=True)]})


def _ids(replicas: Any) -> tuple[int, ...]:
    return tuple(replicas.tolist()) if isinstance(replicas, np.ndarray) else tuple(int(b) for b in replicas)


def _partition_changes(run: RunFolder, plan_dir: Path) -> tuple[pd.DataFrame, str]:
    if (plan_dir / f"{PARTITION_CHANGES.name}.parquet").exists():
        return read_table(plan_dir, PARTITION_CHANGES), f"{PLAN}/{PARTITION_CHANGES.name}.parquet"
    # A plan written by hand has the reassignment documents only: pools and sizes come from the snapshot.
    planned = read_reassignment(plan_dir / "plan.json")
    old = {(r.topic, r.partition): r.replicas for r in read_reassignment(plan_dir / "rollback.json")}
    snapshot = run.completed(SNAPSHOT)
    parts = read_table(snapshot, PARTITIONS).drop_duplicates(["topic", "partition"]) \
        .set_index(["topic", "partition"]) if snapshot is not None else pd.DataFrame()
    rows = []
    for r in planned:
        key = (r.topic, r.partition)
        known = key in parts.index
        rows.append((parts.at[key, "topic_pool"] if known else None, r.topic, r.partition, old.get(key, []),
                     r.replicas, int(parts.at[key, "size_bytes"]) if known else 0))
    return pd.DataFrame(rows, columns=PARTITION_CHANGES.names), f"{PLAN}/plan.json and {PLAN}/rollback.json"


def _flows(moves: pd.DataFrame) -> dict[str, list[Flow]]:
    """Per pool, the bytes and replicas copied from each broker to each other: a partition's removed replicas
    paired with its added ones, in replica order."""
    amounts: dict[tuple[str, int, int], list[int]] = defaultdict(lambda: [0, 0])
    for broker_pool, old, new, size in zip(moves["broker_pool"], moves["old"], moves["new"], moves["size_bytes"],
                                           strict=True):
        removed = [b for b in old if b not in new]
        added = [b for b in new if b not in old]
        for source, target in zip(removed, added, strict=False):
            amount = amounts[(broker_pool, source, target)]
            amount[0] += int(size)
            amount[1] += 1
    flows: dict[str, list[Flow]] = defaultdict(list)
    for (broker_pool, source, target), (size, count) in amounts.items():
        flows[broker_pool].append(Flow(source, target, size, count))
    return flows


def _grouped_flows(flows: list[Flow]) -> tuple[list[Flow], int, int]:
    """The flows between the SANKEY_BROKERS brokers that send and that receive the most bytes, the rest summed
    into "other brokers" (None) on either side: every byte still shows. Returns the flows and how many senders
    and receivers were grouped."""
    sent: dict[int | None, int] = defaultdict(int)
    received: dict[int | None, int] = defaultdict(int)
    for f in flows:
        sent[f.source] += f.bytes
        received[f.target] += f.bytes
    senders = set(sorted(sent, key=lambda b: (-sent[b], b))[:SANKEY_BROKERS])
    receivers = set(sorted(received, key=lambda b: (-received[b], b))[:SANKEY_BROKERS])
    grouped: dict[tuple[int | None, int | None], list[int]] = defaultdict(lambda: [0, 0])
    for f in flows:
        amount = grouped[(f.source if f.source in senders else None, f.target if f.target in receivers else None)]
        amount[0] += f.bytes
        amount[1] += f.moves
    shown = [Flow(source, target, size, count) for (source, target), (size, count) in grouped.items()]
    return (sorted(shown, key=lambda f: (-f.bytes, f.source is None, f.source or 0, f.target is None, f.target or 0)),
            len(sent) - len(senders), len(received) - len(receivers))


def _pool_plan(broker_pool: str, facts: dict[str, Any], flows: list[Flow]) -> PoolPlanView:
    shown, senders_grouped, receivers_grouped = _grouped_flows(flows)
    resources = facts.get("resources") or {}
    brokers = facts.get("brokers") or []
    notes = facts.get("notes") or []
    return PoolPlanView(
        broker_pool=broker_pool, partitions_changed=facts.get("partitions_changed"),
        replica_moves=facts.get("replica_moves"), preferred_leader_changes=facts.get("preferred_leader_changes"),
        moved_bytes=facts.get("moved_bytes"), forced_bytes=facts.get("forced_bytes"),
        forced_bytes_by_reason=facts.get("forced_bytes_by_reason") or {},
        forced_lower_bound_bytes=facts.get("forced_lower_bound_bytes"),
        forced_moved_over_lb=facts.get("forced_moved_over_lb"), balance_bytes=facts.get("balance_bytes"),
        lower_bound_bytes=facts.get("lower_bound_bytes"), moved_over_lb=facts.get("moved_over_lb"),
        resources=[_resource(name, info, brokers) for name, info in resources.items()],
        flows=shown, flows_total=len(flows), senders_grouped=senders_grouped, receivers_grouped=receivers_grouped,
        notes=[PlannerNote(str(n.get("resource")), None if n.get("broker_id") is None else int(n["broker_id"]),
                           str(n.get("note"))) for n in notes[:NOTES_SHOWN]], notes_total=len(notes))


def _resource(name: str, info: dict[str, Any], brokers: list[dict[str, Any]]) -> ResourceView:
    band = info.get("band") or {}
    known = RESOURCES.get(name)
    is_count = known.is_count if known else False
    upper = _capped_upper(band)
    band_before = info.get("band_before")
    out_before = [int(b) for b in info.get("out_of_band_before") or []]
    out_after = [int(b) for b in info.get("out_of_band_after") or []]
    usages = [BrokerUsage(int(b["broker_id"]), float(b[name]["usage_before"]), float(b[name]["usage_after"]),
                          int(b["broker_id"]) in out_before, int(b["broker_id"]) in out_after)
              for b in brokers if name in b]
    return ResourceView(
        resource=name, is_count=is_count, lower=band.get("lower"), upper=upper,
        before_band=(band_before.get("lower"), _capped_upper(band_before)) if band_before else None,
        balanced=bool(band.get("balanced", True)), note=band.get("note"),
        brokers=_shown_brokers(usages, band.get("lower"), upper), brokers_total=len(usages),
        out_of_band_before=out_before, out_of_band_after=out_after,
        fixed_outside_target_band=[int(b) for b in info.get("fixed_outside_target_band") or []],
        taken_outside_target_band=[int(b) for b in info.get("taken_outside_target_band") or []],
        lower_bound=info.get("lower_bound"),
        moved=info.get("moved"), moved_over_lb=info.get("moved_over_lb"), forced_moved=info.get("forced_moved"),
        forced_moved_by_reason=info.get("forced_moved_by_reason") or {},
        forced_lower_bound=info.get("forced_lower_bound"), forced_moved_over_lb=info.get("forced_moved_over_lb"),
        infeasible=int(info.get("infeasible") or 0),
        infeasibility_proofs=list(info.get("infeasibility_proofs") or []))


def _capped_upper(band: dict[str, Any]) -> float | None:
    """The band's upper edge capped by the capacity threshold, as band status counts it."""
    upper, cap = band.get("upper"), band.get("capacity_threshold")
    return min(upper, cap) if upper is not None and cap is not None else upper


def _shown_brokers(usages: list[BrokerUsage], lower: float | None, upper: float | None) -> list[BrokerUsage]:
    """All brokers of a small pool; of a large one the out-of-band ones (farthest first), then the most loaded,
    in broker order."""
    if len(usages) <= BROKERS_SHOWN:
        return usages

    def outside(value: float) -> float:
        return max((lower or 0.0) - value, value - upper if upper is not None else 0.0, 0.0)

    ranked = sorted(usages, key=lambda u: (not (u.out_before or u.out_after),
                                           -max(outside(u.before), outside(u.after)), -u.before, u.broker_id))
    return sorted(ranked[:BROKERS_SHOWN], key=lambda u: u.broker_id)


def _validation(run: RunFolder) -> ValidationView | None:
    folder = run.completed(VALIDATION)
    if folder is None:
        return None
    report = read_json(folder / "report.json")
    raw = _optional_json(folder / "gx_results.json") or []
    results = [ExpectationResult(
        table=str(suite.get("suite_name", "")).removeprefix("plan_"), expectation=r["expectation_config"]["type"],
        description=(r["expectation_config"].get("meta") or {}).get("description") or r["expectation_config"]["type"],
        success=bool(r["success"]), unexpected_count=(r.get("result") or {}).get("unexpected_count"),
        element_count=(r.get("result") or {}).get("element_count"))
        for suite in raw for r in suite.get("results") or []]
    failures = [FailedExpectation(
        table=str(f.get("table", "")), expectation=str(f.get("expectation", "")),
        description=str(f.get("description") or f.get("expectation", "")), unexpected_count=f.get("unexpected_count"),
        rows=list(f.get("rows") or [])[:FAILED_ROWS_SHOWN], rows_total=len(f.get("rows") or []))
        for f in report.get("failures") or []]
    return ValidationView(success=bool(report.get("success")), plan_hash=report.get("plan_hash"),
                          expectations=report.get("expectations"), partitions_checked=report.get("partitions_checked"),
                          broker_resource_pairs_checked=report.get("broker_resource_pairs_checked"),
                          results=results, failures=failures)


def _executions(run: RunFolder) -> list[PoolExecutionView] | None:
    if not run.has(EXECUTE):
        return None
    folders = sorted(p for p in run.stage_path(EXECUTE).iterdir() if p.is_dir() and not p.name.startswith("."))
    return [_pool_execution(folder) for folder in folders]


def _pool_execution(folder: Path) -> PoolExecutionView:
    entries = ExecutionLog(folder / "execution_log.jsonl", folder.name, "").read()
    result = _optional_json(folder / "result.json")
    cancel = _optional_json(folder / "cancel.json")
    dry_run = _optional_json(folder / "dry_run.json")
    verdicts: dict[str, int] | None = None
    if dry_run is not None:
        verdicts = {}
        for move in dry_run.get("moves") or []:
            verdicts[str(move.get("would"))] = verdicts.get(str(move.get("would")), 0) + 1
    progress, markers, markers_total = _progress(entries)
    planned = [e.get("moves") for e in entries if e.get("action") == "execute_started"]
    return PoolExecutionView(
        broker_pool=folder.name, state=_execution_state(entries, result, cancel is not None, dry_run is not None),
        moves_planned=planned[-1] if planned else (result or {}).get("moves"),
        moves_done=progress[-1].moves_done if progress else 0, bytes_done=progress[-1].bytes_done if progress else 0,
        result=result, cancel=cancel, dry_run=verdicts, progress=_thin(progress, PROGRESS_POINTS), markers=markers,
        markers_total=markers_total, log_entries=len(entries))


def _progress(entries: list[dict[str, Any]]) -> tuple[list[ProgressPoint], list[LogMarker], int]:
    """Moves and bytes done after each completion (a partition counts once, however often it was restarted), and
    the log's events as markers."""
    timed = [e for e in entries if e.get("ts")]  # a line without a time has no place on a timeline
    started_bytes: dict[tuple[Any, Any], int] = {}
    done: set[tuple[Any, Any]] = set()
    moves_done = bytes_done = 0
    points = [ProgressPoint(timed[0]["ts"], 0, 0)] if timed else []
    markers: list[LogMarker] = []
    per_group: dict[str, int] = defaultdict(int)
    for entry in timed:
        action, key = entry.get("action"), (entry.get("topic"), entry.get("partition"))
        if action == "started":
            started_bytes[key] = int(entry.get("bytes") or 0)
        elif action == "completed" and key not in done:
            done.add(key)
            moves_done += 1
            bytes_done += started_bytes.get(key, 0)  # 0 when it was already at its target: nothing copied
            points.append(ProgressPoint(entry["ts"], moves_done, bytes_done))
        group = _MARKER_GROUPS.get(str(action))
        if group is not None:
            per_group[group] += 1
            if per_group[group] <= MARKERS_SHOWN:
                markers.append(LogMarker(entry["ts"], moves_done, group, _marker_label(entry)))
    return points, markers, sum(per_group.values())


def _marker_label(entry: dict[str, Any]) -> str:
    what = str(entry.get("action"))
    if "topic" in entry:
        what += f" {entry['topic']}-{entry.get('partition')}"
    details = [f"{k}={entry[k]}" for k in _LABEL_DETAILS if entry.get(k) not in (None, [], {}, "")]
    label = what + (f" ({', '.join(details)})" if details else "")
    return label if len(label) <= 200 else label[:199] + "…"


def _execution_state(entries: list[dict[str, Any]], result: dict[str, Any] | None, cancelled: bool,
                     dry_run: bool) -> str:
    states = [_EXECUTION_STATES[e["action"]] for e in entries if e.get("action") in _EXECUTION_STATES]
    if not states:
        return "dry run" if dry_run else ("finished" if result is not None else "no execution log")
    state = states[-1]
    if state == "finished" and result is not None:
        state = (f"finished: {result.get('completed')} of {result.get('moves')} moves done, "
                 f"{len(result.get('skipped') or [])} skipped")
    if cancelled and not state.startswith("cancelled"):
        state += " (after a cancel: resumed)"
    return state


def _thin(points: list[ProgressPoint], limit: int) -> list[ProgressPoint]:
    """At most `limit` points, evenly spread, the first and the last kept."""
    if len(points) <= limit:
        return points
    return [points[i] for i in np.unique(np.linspace(0, len(points) - 1, limit).round().astype(int))]


def _verification(run: RunFolder) -> VerifyView | None:
    folder = run.completed(VERIFY)
    if folder is None:
        return None
    summary = read_json(folder / "summary.json")
    text_file = folder / "report.txt"
    text = text_file.read_text(errors="replace") if text_file.exists() else None
    not_at_plan = list(summary.get("partitions_not_at_plan") or [])
    return VerifyView(
        plan_hash=summary.get("plan_hash"), partitions_planned=summary.get("partitions_planned"),
        not_at_plan=not_at_plan[:NOT_AT_PLAN_SHOWN], not_at_plan_total=len(not_at_plan),
        out_of_band_before=summary.get("out_of_band_before"), out_of_band_after=summary.get("out_of_band_after"),
        pools=dict(summary.get("pools") or {}), report_text=text[:VERIFY_TEXT_CHARS] if text is not None else None,
        report_text_truncated=text is not None and len(text) > VERIFY_TEXT_CHARS)


def _optional_json(path: Path) -> Any:
    return read_json(path) if path.exists() else None


# -- render --------------------------------------------------------------------------------------------------------

Cell = str | tuple[str, float]  # text, or text and the number it sorts by


def render(data: RunReportData) -> str:
    """The page: one HTML document with plotly.js, the charts, the tables and the table script inlined."""
    h = data.header
    sections = [
        _render_header(data),
        _section("snapshot", "Snapshot", _render_snapshot(data)),
        _section("usage", "Usage per broker, before and after", _plan_part(data, _render_usage)),
        _section("moves", "Moves", _plan_part(data, _render_moves)),
        _section("bounds", "Lower bound and moved / LB", _plan_part(data, _render_bounds)),
        _section("notes", "Planner notes", _plan_part(data, _render_notes)),
        _section("skipped", "Skipped and hot partitions", _plan_part(data, _render_skipped)),
        _section("validation", "Validation", _render_validation(data)),
        _section("execution", "Execution", _render_execution(data)),
        _section("verification", "Verification", _render_verification(data)),
    ]
    nav = " · ".join(f'<a href="#section-{name}">{title}</a>' for name, title in (
        ("snapshot", "snapshot"), ("usage", "usage"), ("moves", "moves"), ("bounds", "lower bound"),
        ("notes", "planner notes"), ("skipped", "skipped"), ("validation", "validation"), ("execution", "execution"),
        ("verification", "verification")))
    title = _esc(f"Run {h.run_id} ({h.cluster})")
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">', f"<title>{title}</title>",
        f"<style>{_CSS}</style>", f"<script>{plotly.offline.get_plotlyjs()}</script>", "</head>", "<body>",
        f"<nav>{nav}</nav>", *sections, f"<script>{_TABLE_JS}</script>", f"<script>{CHARTS_JS}</script>", "</body>",
        "</html>", ""])


def _render_header(data: RunReportData) -> str:
    h = data.header
    rows = [("cluster", h.cluster), ("run id", h.run_id), ("trigger", h.trigger), ("action", h.action),
            ("requested by", h.requested_by), ("reason", h.reason), ("mode", h.mode), ("status", h.status),
            ("approval", h.approval + (f" at {h.decided_at}" if h.decided_at else "")),
            ("why", "; ".join(h.decision_why) or None), ("plan hash", h.plan_hash),
            ("snapshot taken at", h.snapshot_taken_at)]
    facts = "".join(f"<tr><th>{_esc(k)}</th><td>{_esc(v)}</td></tr>" for k, v in rows if v)
    return (f'<header id="summary"><h1>Run {_esc(h.run_id)}</h1><table class="facts">{facts}</table>'
            f"{_unreadable(data, 'header')}</header>")


def _render_snapshot(data: RunReportData) -> str:
    snapshot = data.snapshot
    if snapshot is None:
        return _unreadable(data, "snapshot") or _not_run("no snapshot/ stage in this run")
    rows = [("taken at", snapshot.taken_at), ("content hash", snapshot.content_hash),
            ("capture", f"{snapshot.capture_seconds:.1f} s" if snapshot.capture_seconds is not None else None),
            *((f"{name} rows", f"{count:,}") for name, count in snapshot.rows.items())]
    facts = "".join(f"<tr><th>{_esc(k)}</th><td>{_esc(v)}</td></tr>" for k, v in rows if v)
    warnings = "".join(f"<li>{_esc(w)}</li>" for w in snapshot.warnings)
    return f'<table class="facts">{facts}</table>' + (f"<p>Warnings:</p><ul>{warnings}</ul>" if warnings else "")


def _plan_part(data: RunReportData, part: Callable[[PlanView], str]) -> str:
    if data.plan is None:
        return _unreadable(data, "plan") or _not_run("no plan/ stage in this run")
    return part(data.plan)


def _broker_list(broker_ids: list[int], shown: int = 10) -> str:
    listed = ", ".join(str(b) for b in broker_ids[:shown])
    return listed if len(broker_ids) <= shown else f"{listed} and {len(broker_ids) - shown} more"


def _render_usage(plan: PlanView) -> str:
    blocks = []
    for i, pool in enumerate(plan.pools):
        blocks.append(f"<h3>Pool {_esc(pool.broker_pool)}</h3>")
        if not pool.resources:
            blocks.append("<p>plan/summary.json has no per-broker usage for this pool.</p>")
        for j, r in enumerate(pool.resources):
            # A balanced band's note says it was widened (few items per broker).
            note = (f" (not balanced: {r.note or 'the band is not enforced'})" if not r.balanced
                    else f" ({r.note})" if r.note else "")
            caption = (f"{r.resource}: {len(r.out_of_band_before)} broker(s) out of band before, "
                       f"{len(r.out_of_band_after)} after{note}.")
            if r.fixed_outside_target_band:
                caption += (f" {len(r.fixed_outside_target_band)} of those out of band before end outside the "
                            f"target band (brokers {_broker_list(r.fixed_outside_target_band)}).")
            if r.taken_outside_target_band:
                caption += (f" {len(r.taken_outside_target_band)} broker(s) inside the band before are taken out of "
                            f"the target band, or further from it (brokers {_broker_list(r.taken_outside_target_band)};"
                            " the planner notes give the reason).")
            if r.brokers_total > len(r.brokers):
                hidden_out = len(set(r.out_of_band_before) | set(r.out_of_band_after)) - sum(
                    1 for b in r.brokers if b.out_before or b.out_after)
                caption += (f" Showing {len(r.brokers)} of {r.brokers_total} brokers: the out-of-band ones first, "
                            f"then the most loaded ({hidden_out} out-of-band broker(s) not shown); all of them in "
                            "plan/summary.json.")
            fig = usage_bars(f"{pool.broker_pool}: {r.resource}", r.brokers, r.lower, r.upper, r.is_count,
                             r.before_band)
            blocks.append(f'<figure>{figure_html(fig, f"usage-{i}-{j}", 380)}'
                          f"<figcaption>{_esc(caption)}</figcaption></figure>")
    if not blocks:
        return "<p>The plan covers no pool.</p>"
    legend = ("Per broker, usage before the plan (light bars) and as planned after it (dark bars); the plan's "
              "band is the dashed green lines. A broker before the plan is judged against the band of the current "
              "placement, drawn as dotted grey lines where the replicas that must move (off a dead or drained "
              "broker, or home to their pool) shift the mean. Orange bars, labelled “out”, are brokers outside "
              "their band.")
    return f"<p>{_esc(legend)}</p>" + "".join(blocks)


def _render_moves(plan: PlanView) -> str:
    only = "" if plan.leadership_only_changes is None else f", {plan.leadership_only_changes:,} of them leadership-only"
    summary = (f"{plan.moves_total:,} partition(s) change: {plan.replica_moves:,} replica move(s), "
               f"{plan.preferred_leader_changes:,} with a new preferred leader{only}; "
               f"{human_bytes(plan.bytes_total)} to copy (the re-check of plan.json against the snapshot; the moves "
               f"below are read from {plan.moves_source}).")
    parts = [f'<p id="moves-summary" data-moves="{plan.moves_total}">{_esc(summary)}</p>']
    for i, pool in enumerate(plan.pools):
        if not pool.flows:
            continue
        caption = f"Pool {pool.broker_pool}: replicas copied from broker to broker, by bytes."
        if pool.senders_grouped or pool.receivers_grouped:
            caption += (f" The {SANKEY_BROKERS} brokers that send and the {SANKEY_BROKERS} that receive the most "
                        f"are shown one by one; the other {pool.senders_grouped} sender(s) and "
                        f"{pool.receivers_grouped} receiver(s) are summed as “others” ({pool.flows_total:,} "
                        "broker-to-broker flows in all).")
        fig = moves_sankey(f"{pool.broker_pool}: source broker → target broker", pool.flows)
        height = max(300, 22 * max(len({f.source for f in pool.flows}), len({f.target for f in pool.flows})))
        parts.append(f'<figure>{figure_html(fig, f"sankey-{i}", height)}<figcaption>{_esc(caption)}</figcaption>'
                     "</figure>")
    if not plan.moves:
        parts.append("<p>The plan moves nothing.</p>")
        return "".join(parts)
    if plan.moves_total > len(plan.moves):
        parts.append(f'<p class="truncated">showing the {len(plan.moves):,} largest of {plan.moves_total:,} moves; '
                     "all of them in plan/plan.json</p>")
    rows: list[list[Cell]] = [
        [m.broker_pool, m.topic, (str(m.partition), m.partition), f"{list(m.old)} → {list(m.new)}",
         (human_bytes(m.bytes_to_copy), m.bytes_to_copy), m.leadership_change] for m in plan.moves]
    parts.append('<p><label>Filter <input id="moves-filter" type="search" data-filters="moves" '
                 'placeholder="topic, broker, pool…"></label> <span id="moves-count"></span></p>')
    parts.append(_table(["pool", "topic", ("partition", True), "replicas (old → new)", ("bytes to copy", True),
                         "leader"], rows, table_id="moves", sortable=True))
    return "".join(parts)


def _render_bounds(plan: PlanView) -> str:
    pool_rows: list[list[Cell]] = []
    resource_rows: list[list[Cell]] = []
    for pool in plan.pools:
        if pool.partitions_changed is None:  # a summary without per-pool figures (a plan written by hand)
            continue
        pool_rows.append([pool.broker_pool, _number_cell(pool.partitions_changed), _number_cell(pool.replica_moves),
                          _bytes_cell(pool.moved_bytes), _bytes_cell(pool.forced_bytes),
                          _forced_reasons(pool.forced_bytes_by_reason), _bytes_cell(pool.forced_lower_bound_bytes),
                          _ratio_cell(pool.forced_moved_over_lb), _bytes_cell(pool.balance_bytes),
                          _bytes_cell(pool.lower_bound_bytes), _ratio_cell(pool.moved_over_lb)])
        for r in pool.resources:
            resource_rows.append([
                pool.broker_pool, r.resource, _amount_cell(r.resource, r.forced_moved),
                _forced_reasons(r.forced_moved_by_reason, lambda v, name=r.resource: _amount_cell(name, v)[0]),
                _amount_cell(r.resource, r.forced_lower_bound), _ratio_cell(r.forced_moved_over_lb),
                _amount_cell(r.resource, r.lower_bound), _amount_cell(r.resource, r.moved),
                _ratio_cell(r.moved_over_lb),
                (f"{len(r.out_of_band_before)} → {len(r.out_of_band_after)}", len(r.out_of_band_after)),
                _number_cell(r.infeasible)])
    if not pool_rows:
        return "<p>plan/summary.json has no per-pool figures.</p>"
    intro = ("Recomputed from plan.json and the snapshot. Forced moves take replicas off dead or draining brokers "
             "and bring replicas home to their topic's pool; their LB is the bytes that must leave, so their "
             "moved / LB is 1 when all of them are placed. Balance moves are the rest; their LB is the least any "
             "plan must move to bring every broker of the current placement into its band (the larger of the excess "
             "above and the room below the band), and moved / LB near 1 means the plan moves little more than it "
             "must (below 1 when forced replicas filled brokers below the band).")
    return (f"<p>{_esc(intro)}</p>"
            + _table(["pool", ("partitions changed", True), ("replica moves", True), ("moved", True),
                      ("forced", True), "forced: why", ("must leave", True), ("forced moved / LB", True),
                      ("balance", True), ("balance LB", True), ("balance moved / LB", True)], pool_rows,
                     sortable=True)
            + "<h3>Per resource</h3>"
            + _table(["pool", "resource", ("forced moved", True), "forced: why", ("must leave", True),
                      ("forced moved / LB", True), ("balance LB", True), ("balance moved", True),
                      ("balance moved / LB", True), ("out of band before → after", True), ("infeasible", True)],
                     resource_rows, sortable=True))


FORCED_REASON_WORDS = {"dead_broker": "dead broker", "draining_broker": "draining broker",
                       "pool_isolation": "pool isolation"}


def _forced_reasons(by_reason: dict[str, Any], amount: Callable[[Any], str] = human_bytes) -> Cell:
    """What forced moves carried, by why they moved, largest first (`amount` writes it in its unit)."""
    parts = sorted(((v, k) for k, v in by_reason.items() if v), reverse=True)
    return "; ".join(f"{FORCED_REASON_WORDS.get(k, k)} {amount(v)}" for v, k in parts) or "-"


def _render_notes(plan: PlanView) -> str:
    """Per pool, the proofs that no plan brings some brokers into their band, and the planner's notes: why it left
    a broker outside its band or target band, or a replica where it is."""
    parts = []
    for pool in plan.pools:
        proofs = [(r.resource, proof) for r in pool.resources for proof in r.infeasibility_proofs]
        if not proofs and not pool.notes:
            continue
        parts.append(f"<h3>Pool {_esc(pool.broker_pool)}</h3>")
        if proofs:
            parts.append("<p>No plan can bring all of these brokers into the band: at least “count” of them stay "
                         "outside it, whatever moves.</p>")
            parts.append(_table(["resource", "brokers", ("count", True), "proof"],
                                [[resource, _broker_list([int(b) for b in proof.get("brokers") or []]),
                                  _number_cell(proof.get("count")), str(proof.get("proof"))]
                                 for resource, proof in proofs], sortable=True))
        if pool.notes:
            if pool.notes_total > len(pool.notes):
                parts.append(f'<p class="truncated">showing {len(pool.notes):,} of {pool.notes_total:,} notes; all '
                             "of them in plan/summary.json and plan/planner_notes.parquet</p>")
            parts.append(_table(["resource", ("broker", True), "note"],
                                [[n.resource, ("-", -1.0) if n.broker_id is None else (str(n.broker_id), n.broker_id),
                                  n.note] for n in pool.notes], sortable=True))
    if not parts:
        return ("<p>The planner left no notes: it names the reason for every broker it leaves outside its band or "
                "target band, and for every replica it could not move, and there are none.</p>")
    return "".join(parts)


def _render_skipped(plan: PlanView) -> str:
    parts = []
    if plan.skipped_by_reason:
        parts.append(f"<p>{plan.skipped_total:,} partition(s) skipped by the planner.</p>")
        parts.append(_table(["reason", ("partitions", True)],
                            [[reason, (f"{n:,}", n)] for reason, n in sorted(plan.skipped_by_reason.items())],
                            sortable=True))
        if plan.skipped_total > len(plan.skipped):
            parts.append(f'<p class="truncated">showing {len(plan.skipped):,} of {plan.skipped_total:,} skipped '
                         "partitions; all of them in plan/skipped.parquet</p>")
        parts.append(_table(["pool", "topic", ("partition", True), "reason"],
                            [[str(s.get("broker_pool") or "-"), str(s.get("topic")),
                              (str(s.get("partition")), float(s.get("partition") or 0)), str(s.get("reason"))]
                             for s in plan.skipped], sortable=True))
    else:
        parts.append("<p>No partition skipped.</p>")
    if plan.hot_partitions:
        parts.append(f"<h3>Hot partitions ({plan.hot_total:,})</h3>")
        for advice in dict.fromkeys(str(h.get("advice") or "") for h in plan.hot_partitions):
            if advice:
                parts.append(f'<p class="advice">{_esc(advice)}</p>')
        parts.append(_table(["pool", "topic", ("partition", True), "resource", ("load", True), ("band width", True)],
                            [[str(h.get("broker_pool")), str(h.get("topic")),
                              (str(h.get("partition")), float(h.get("partition") or 0)), str(h.get("resource")),
                              _amount_cell(str(h.get("resource")), h.get("load")),
                              _amount_cell(str(h.get("resource")), h.get("band_width"))]
                             for h in plan.hot_partitions], sortable=True))
        if plan.hot_total > len(plan.hot_partitions):
            parts.append(f'<p class="truncated">showing {len(plan.hot_partitions):,} of {plan.hot_total:,}; all of '
                         "them in plan/hot_partitions.parquet</p>")
    else:
        parts.append("<p>No hot partition.</p>")
    return "".join(parts)


def _render_validation(data: RunReportData) -> str:
    v = data.validation
    if v is None:
        return _unreadable(data, "validation") or _not_run("no validation/ stage in this run")
    verdict = "passed" if v.success else f"FAILED ({len(v.failures)} expectation(s))"
    checked = ", ".join(f"{n:,} {what}" for n, what in ((v.partitions_checked, "partitions"),
                                                         (v.broker_resource_pairs_checked, "broker-resource pairs"))
                        if n is not None)
    parts = [f'<p class="{"ok" if v.success else "bad"}">Validation {verdict}'
             + (f"; {v.expectations} expectations" if v.expectations is not None else "")
             + (f" checked on {checked}" if checked else "") + ".</p>"]
    if v.results:
        parts.append(_table(["table", "expectation", "result", ("unexpected", True), ("rows", True)], [
            [r.table, r.description, "pass" if r.success else "FAIL", _number_cell(r.unexpected_count),
             _number_cell(r.element_count)] for r in v.results], sortable=True))
        if v.expectations is not None and len(v.results) < v.expectations:
            parts.append(f"<p>{v.expectations - len(v.results)} expectation(s) had no rows to check (an empty table "
                         "passes).</p>")
    for f in v.failures:
        parts.append(f"<h3>Failed: {_esc(f.description)}</h3><p>{_esc(f.expectation)} on {_esc(f.table)}: "
                     f"{_esc(f.unexpected_count)} row(s) broke it.</p>")
        if f.rows:
            columns = list(dict.fromkeys(k for row in f.rows for k in row))
            parts.append(_table(columns, [[_plain(row.get(c)) for c in columns] for row in f.rows]))
        if f.rows_total > len(f.rows):
            parts.append(f'<p class="truncated">showing {len(f.rows)} of {f.rows_total:,} rows; all of them in '
                         "validation/report.json</p>")
    return "".join(parts)


def _render_execution(data: RunReportData) -> str:
    executions = data.executions
    if executions is None:
        return _unreadable(data, "execution") or _not_run(
            "no execute/ stage in this run" + (f" (approval: {data.header.approval})"
                                                if data.header.approval not in ("-", "?") else ""))
    if not executions:
        return "<p>The execute/ stage holds no pool.</p>"
    parts = []
    for i, pool in enumerate(executions):
        parts.append(f'<h3>Pool {_esc(pool.broker_pool)}: <span class="state">{_esc(pool.state)}</span></h3>')
        planned = None if pool.moves_planned is None else f"{pool.moves_planned:,}"
        facts = [("moves planned", planned), ("moves done (log)", f"{pool.moves_done:,}"),
                 ("bytes done (log)", human_bytes(pool.bytes_done)), ("log entries", f"{pool.log_entries:,}")]
        parts.append('<table class="facts">' + "".join(
            f"<tr><th>{_esc(k)}</th><td>{_esc(v)}</td></tr>" for k, v in facts if v is not None) + "</table>")
        if pool.result is not None:
            parts.append(_render_result(pool.result))
        if pool.cancel is not None:
            parts.append(_render_cancel(pool.cancel))
        if pool.dry_run is not None:
            parts.append("<p>Dry run (dry_run.json), what execute would do with each move:</p>" + _table(
                ["verdict", ("moves", True)], [[k, (f"{n:,}", n)] for k, n in sorted(pool.dry_run.items())]))
        if len(pool.progress) > 1 or pool.markers:
            fig = execution_timeline(f"{pool.broker_pool}: progress", pool.progress, pool.markers)
            caption = "Moves and bytes done over time; markers: the log's throttle, skip, cancel and other events."
            if pool.markers_total > len(pool.markers):
                caption += (f" Showing {len(pool.markers):,} of {pool.markers_total:,} events (at most "
                            f"{MARKERS_SHOWN} of a kind); all of them in execute/{pool.broker_pool}/"
                            "execution_log.jsonl.")
            parts.append(f'<figure>{figure_html(fig, f"timeline-{i}", 380)}<figcaption>{_esc(caption)}'
                         "</figcaption></figure>")
    return "".join(parts)


def _render_result(result: dict[str, Any]) -> str:
    skipped = list(result.get("skipped") or [])
    failed_elections = dict(result.get("leader_elections_failed") or {})
    rate = result.get("throttle_bytes_per_s")
    parts = [f"<p>result.json: {_esc(result.get('completed'))} of {_esc(result.get('moves'))} moves complete "
             f"({_esc(result.get('completed_this_attempt'))} in the last attempt), {len(skipped)} skipped, "
             f"{len(failed_elections)} failed leader election(s); throttle "
             f"{_esc(human_bytes(rate) + '/s' if rate else 'none')}.</p>"]
    if skipped:
        parts.append(_table(["topic", ("partition", True), "reason"], [
            [str(x.get("topic")), (str(x.get("partition")), float(x.get("partition") or 0)), str(x.get("reason"))]
            for x in skipped[:SKIPPED_SHOWN]], sortable=True))
    if failed_elections:
        parts.append(_table(["partition", "leader election error"], [[k, str(v)] for k, v in failed_elections.items()]))
    return "".join(parts) + _json_block("result.json", result)


def _render_cancel(cancel: dict[str, Any]) -> str:
    refused = dict(cancel.get("refused") or {})
    in_progress = list(cancel.get("still_in_progress") or [])
    line = (f"cancel.json: {len(cancel.get('cancelled') or [])} reassignment(s) cancelled, {len(refused)} refused, "
            f"{len(in_progress)} still in progress; throttles "
            f"{'cleared' if cancel.get('throttles_cleared') else 'NOT all cleared'}.")
    css = ' class="bad"' if refused or in_progress else ""
    return f"<p{css}>{_esc(line)}</p>" + _json_block("cancel.json", cancel)


def _render_verification(data: RunReportData) -> str:
    v = data.verification
    if v is None:
        return _unreadable(data, "verification") or _not_run("no verify/ stage in this run")
    at_plan = f"All {v.partitions_planned} planned partitions are" if not v.not_at_plan_total else \
        f"{v.not_at_plan_total:,} of {v.partitions_planned} planned partitions are NOT"
    parts = [f'<p class="{"bad" if v.not_at_plan_total else "ok"}">{at_plan} at their planned replicas; brokers out '
             f"of band: {v.out_of_band_before} before → {v.out_of_band_after} after (measured).</p>"]
    rows: list[list[Cell]] = []
    for pool, resources in sorted(v.pools.items()):
        for resource, sides in sorted(resources.items()):
            before, after = sides.get("out_of_band_before") or [], sides.get("out_of_band_after") or []
            rows.append([pool, resource, (", ".join(map(str, before)) or "-", len(before)),
                         (", ".join(map(str, after)) or "-", len(after))])
    if rows:
        parts.append(_table(["pool", "resource", ("out of band before", True), ("out of band after", True)], rows,
                            sortable=True))
    if v.not_at_plan:
        parts.append(_table(["topic", ("partition", True), "planned", "current"], [
            [str(p.get("topic")), (str(p.get("partition")), float(p.get("partition") or 0)), str(p.get("planned")),
             str(p.get("current"))] for p in v.not_at_plan], sortable=True))
        if v.not_at_plan_total > len(v.not_at_plan):
            parts.append(f'<p class="truncated">showing {len(v.not_at_plan)} of {v.not_at_plan_total:,}; all of them '
                         "in verify/summary.json</p>")
    if v.report_text is not None:
        more = " (cut short; the whole table is in verify/report.txt)" if v.report_text_truncated else ""
        parts.append(f"<details><summary>verify/report.txt{more}</summary><pre>{_esc(v.report_text)}</pre>"
                     "</details>")
    return "".join(parts)


def _section(name: str, title: str, body: str) -> str:
    # Prefixed: the moves table owns the plain id "moves".
    return f'<section id="section-{name}"><h2>{_esc(title)}</h2>{body}</section>'


def _not_run(why: str) -> str:
    return f'<p class="not-run">not run: {_esc(why)}</p>'


def _unreadable(data: RunReportData, name: str) -> str:
    problem = data.unreadable.get(name)
    return f'<p class="unreadable">could not read this part of the run: {_esc(problem)}</p>' if problem else ""


def _table(headers: list[str | tuple[str, bool]], rows: list[list[Cell]], table_id: str | None = None,
           sortable: bool = False) -> str:
    """A plain table; numeric columns (header given as (name, True)) sort by the number in their cells."""
    ths = []
    for h in headers:
        name, numeric = h if isinstance(h, tuple) else (h, False)
        kind = ' data-type="number"' if numeric else ""
        ths.append(f"<th{kind}>{_esc(name)}</th>")
    body = []
    for row in rows:
        cells = []
        for cell in row:
            if isinstance(cell, tuple):
                cells.append(f'<td class="num" data-value="{_sort_value(cell[1])}">{_esc(cell[0])}</td>')
            else:
                cells.append(f"<td>{_esc(cell)}</td>")
        body.append(f"<tr>{''.join(cells)}</tr>")
    attributes = (f' id="{table_id}"' if table_id else "") + (' class="sortable"' if sortable else "")
    return f"<table{attributes}><thead><tr>{''.join(ths)}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _sort_value(value: float) -> str:
    """The number as the table script's parseFloat reads it (it knows -Infinity, not Python's -inf)."""
    value = float(value)
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return repr(value)


def _json_block(name: str, value: Any) -> str:
    return f"<details><summary>{_esc(name)}</summary><pre>{_esc(json.dumps(value, indent=2))}</pre></details>"


def _esc(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def _plain(value: Any) -> str:
    return "-" if value is None else str(value)


# Missing numbers sort first: -Infinity parses in the table script as a number.
def _number_cell(value: float | None) -> Cell:
    return ("-", float("-inf")) if value is None else (f"{value:,}", value)


def _ratio_cell(value: float | None) -> Cell:
    return ("-", float("-inf")) if value is None else (f"{value:.2f}", value)


def _bytes_cell(value: float | None) -> Cell:
    return ("-", float("-inf")) if value is None else (human_bytes(value), value)


def _amount_cell(resource: str, value: float | None) -> Cell:
    """An amount of a resource in its unit (bytes, bytes/s, cores, a count)."""
    if value is None:
        return "-", float("-inf")
    known = RESOURCES.get(resource)
    if known is None or known.is_count:
        return f"{value:,.0f}", value
    if known.unit == "bytes":
        return human_bytes(value), value
    if known.unit == "bytes/s":
        return f"{human_bytes(value)}/s", value
    return f"{value:,.2f} {known.unit}", value


_CSS = """
body { font-family: system-ui, sans-serif; margin: 0 auto; max-width: 1400px; padding: 0 1.5rem 3rem; color: #222; }
nav { position: sticky; top: 0; background: #fff; padding: .5rem 0; border-bottom: 1px solid #ddd; z-index: 10; }
h1 { font-size: 1.5rem; } h2 { border-bottom: 2px solid #3182bd; padding-bottom: .2rem; margin-top: 2.5rem; }
table { border-collapse: collapse; margin: .5rem 0 1rem; font-size: .9rem; }
th, td { border: 1px solid #ddd; padding: .25rem .5rem; text-align: left; vertical-align: top; }
thead th { background: #f3f6fa; position: sticky; top: 2.2rem; }
table.sortable thead th { cursor: pointer; user-select: none; }
th[aria-sort="ascending"]::after { content: " ▲"; } th[aria-sort="descending"]::after { content: " ▼"; }
table.facts th { background: #f3f6fa; width: 12rem; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
figure { margin: 1rem 0; } figcaption { color: #555; font-size: .9rem; }
.not-run { color: #777; font-style: italic; } .unreadable, .bad { color: #b30000; font-weight: 600; }
.ok { color: #2c7a2c; font-weight: 600; } .truncated { color: #8a5a00; }
.advice { background: #fff8e5; padding: .5rem; border-left: 3px solid #f0b400; }
pre { background: #f7f7f7; padding: .5rem; overflow-x: auto; font-size: .8rem; }
"""

# Click a header to sort (again to reverse); type in a filter box to keep the rows holding every word typed.
_TABLE_JS = """
(function () {
  "use strict";
  function forEach(list, fn) { Array.prototype.forEach.call(list, fn); }
  function sortKey(row, index, numeric) {
    var cell = row.cells[index];
    var value = cell.hasAttribute("data-value") ? cell.getAttribute("data-value") : cell.textContent;
    return numeric ? parseFloat(value) : value;
  }
  forEach(document.querySelectorAll("table.sortable"), function (table) {
    var headers = table.tHead.rows[0].cells;
    forEach(headers, function (th, index) {
      th.addEventListener("click", function () {
        var numeric = th.getAttribute("data-type") === "number";
        var ascending = th.getAttribute("aria-sort") !== "ascending";
        forEach(headers, function (other) { other.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var x = sortKey(a, index, numeric), y = sortKey(b, index, numeric);
          var order = numeric ? (x === y ? 0 : (x < y ? -1 : 1)) : x.localeCompare(y, undefined, {numeric: true});
          return ascending ? order : -order;
        });
        var fragment = document.createDocumentFragment();
        rows.forEach(function (row) { fragment.appendChild(row); });
        body.appendChild(fragment);
      });
    });
  });
  forEach(document.querySelectorAll("input[data-filters]"), function (input) {
    var table = document.getElementById(input.getAttribute("data-filters"));
    var counter = document.getElementById(input.getAttribute("data-filters") + "-count");
    if (!table) { return; }
    input.addEventListener("input", function () {
      var words = input.value.toLowerCase().split(/\\s+/).filter(Boolean);
      var rows = table.tBodies[0].rows;
      var shown = 0;
      forEach(rows, function (row) {
        var text = row.textContent.toLowerCase();
        var match = words.every(function (word) { return text.indexOf(word) !== -1; });
        row.hidden = !match;
        if (match) { shown += 1; }
      });
      if (counter) { counter.textContent = words.length ? shown + " of " + rows.length + " rows" : ""; }
    });
  });
})();
"""


def write_report(run: RunFolder) -> Path:
    """Write the run's report/index.html atomically (a reader sees the old page or the new one) and return it."""
    page = render(collect(run))
    with run.stage(REPORT) as out:
        (out / "index.html").write_text(page, encoding="utf-8")
    return run.stage_path(REPORT) / "index.html"
