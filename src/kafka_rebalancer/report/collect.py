"""Reading a run folder into the page's records (views): `collect`, one small function per section, each already
capping what a large run would show (the largest moves, the most telling brokers), so rendering stays cheap.

A stage that did not run is None; an artifact that is there but cannot be read is named in `unreadable` instead of
failing the report.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pandas as pd
import pyarrow as pa

from kafka_rebalancer.approve.approval import read_decision
from kafka_rebalancer.errors import RebalancerError
from kafka_rebalancer.execute.log import ExecutionLog
from kafka_rebalancer.model.reassignment import read_reassignment
from kafka_rebalancer.model.resources import RESOURCES
from kafka_rebalancer.model.schemas import PARTITION_CHANGES, PARTITIONS
from kafka_rebalancer.operations.request import REQUEST_FILE
from kafka_rebalancer.report.charts import BrokerUsage, Flow, LogMarker, ProgressPoint
from kafka_rebalancer.report.forecast_section import forecast_view
from kafka_rebalancer.report.log_dir_table import log_dirs_view
from kafka_rebalancer.report.overview import run_overview
from kafka_rebalancer.report.views import (
    BROKERS_SHOWN,
    FAILED_ROWS_SHOWN,
    LOG_DIRS_SHOWN,
    MARKERS_SHOWN,
    MOVES_SHOWN,
    NOT_AT_PLAN_SHOWN,
    NOTES_SHOWN,
    PROGRESS_POINTS,
    SANKEY_BROKERS,
    SKIPPED_SHOWN,
    VERIFY_TEXT_CHARS,
    ExpectationResult,
    FailedExpectation,
    Header,
    LogDirsView,
    MoveRow,
    PlannerNote,
    PlanView,
    PoolExecutionView,
    PoolPlanView,
    ResourceView,
    RunReportData,
    SnapshotView,
    ValidationView,
    VerifyView,
)
from kafka_rebalancer.run_folder import (
    EXECUTE,
    PLAN,
    SNAPSHOT,
    VALIDATION,
    VERIFY,
    RunFolder,
    read_json,
    read_table,
)
from kafka_rebalancer.snapshot.tiered import snapshot_tiered

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
    "read_failed": "problem", "restart": "problem", "throttle_clear_failed": "problem", "stalled": "problem",
    "stall_ended": "wait", "estimate": "estimate", "throttle_lowered": "throttle", "throttle_raised": "throttle",
    "load_unknown": "problem", "execute_failed": "problem",
    # Moves between a broker's log directories (JBOD), after the moves between brokers.
    "log_dirs_cordoned": "log dir", "log_dir_started": "log dir", "log_dir_reissued": "log dir",
    "log_dir_completed": "log dir", "log_dir_skipped": "skip", "log_dir_throttle_set": "throttle",
    "log_dir_throttle_cleared": "throttle", "log_dir_cancelled": "cancel",
}
# The log actions that say where a pool's execution stands; the last one in the log wins.
_EXECUTION_STATES = {
    "execute_started": "started, not finished (still running, or stopped without a result)",
    "execute_finished": "finished",
    "cancel_requested": "cancelled", "cancel_finished": "cancelled", "cancel_observed": "cancelled",
    "timeout": "failed: moves stuck past the move timeout",
    "run_timeout": "failed: the run's time limit passed",
    "isr_wait_timeout": "failed: under-replicated partitions did not recover",
    "execute_failed": "failed: the attempt ended with an error (its execution log says which)",
}
_LABEL_DETAILS = ("rate_bytes_per_s", "reason", "detail", "error", "stuck", "in_flight", "count", "cancelled",
                  "completed", "skipped", "moves", "resumed", "done_fraction", "remaining_s", "finish_s", "bound_s",
                  "copied_bytes", "since_s", "stalled", "broker", "measured", "receiving", "source_dir",
                  "target_dir", "cordoned")

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
                         verification=section("verification", _verification),
                         log_dirs=section("log_dirs", _log_dirs), forecast=section("forecast", forecast_view),
                         unreadable=unreadable)


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
    tiered, last_tiered_fetch = snapshot_tiered(folder)
    return SnapshotView(taken_at=manifest.get("taken_at"), rows=dict(manifest.get("rows") or {}),
                        capture_seconds=manifest.get("capture_seconds"), content_hash=manifest.get("content_hash"),
                        warnings=[str(w) for w in manifest.get("warnings") or []], tiered=tiered,
                        last_tiered_fetch=last_tiered_fetch)


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
        hot_partitions=list(hot), hot_total=int(totals.get("hot_partitions", len(hot))),
        replication_factor=summary.get("replication_factor"))


def _log_dirs(run: RunFolder) -> LogDirsView | None:
    return log_dirs_view(run, LOG_DIRS_SHOWN, MOVES_SHOWN, SKIPPED_SHOWN)


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
        lower_bound_bytes=facts.get("lower_bound_bytes"), lower_bound_edges=facts.get("lower_bound_edges"),
        moved_over_lb=facts.get("moved_over_lb"),
        resources=[_resource(name, info, brokers) for name, info in resources.items()],
        flows=shown, flows_total=len(flows), senders_grouped=senders_grouped, receivers_grouped=receivers_grouped,
        notes=[PlannerNote(str(n.get("resource")), None if n.get("broker_id") is None else int(n["broker_id"]),
                           str(n.get("note"))) for n in notes[:NOTES_SHOWN]], notes_total=len(notes),
        topic_spread=dict(facts.get("topic_spread") or {}))


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
        report_text_truncated=text is not None and len(text) > VERIFY_TEXT_CHARS,
        # The unkept first (they are what the reader looks for), as many as the not-at-plan rows.
        promises=sorted(summary.get("promises") or [],
                        key=lambda p: p.get("verdict") not in ("broken", "cannot"))[:NOT_AT_PLAN_SHOWN],
        topic_spread=summary.get("topic_spread"))


def _optional_json(path: Path) -> Any:
    return read_json(path) if path.exists() else None
