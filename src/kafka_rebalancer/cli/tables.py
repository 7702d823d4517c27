"""The CLI's `runs` and `show`: rich tables on a terminal, plain aligned columns otherwise (pipes, logs)."""

from __future__ import annotations

from typing import Any

import pandas as pd
from rich import box
from rich.console import Console
from rich.table import Table

from kafka_rebalancer.errors import RebalancerError
from kafka_rebalancer.forecast.summary import pool_line
from kafka_rebalancer.model.schemas import PARTITION_CHANGES
from kafka_rebalancer.model.units import human_bytes
from kafka_rebalancer.plan.balance.tables import spread_table
from kafka_rebalancer.plan.promises import validation_promise_lines
from kafka_rebalancer.plan.replication_factor import RESIZE_HEADER, resize_rows
from kafka_rebalancer.report.log_dir_table import log_dirs_view
from kafka_rebalancer.report.overview import RunOverview, run_overview
from kafka_rebalancer.report.views import LogDirUsage
from kafka_rebalancer.run_folder import (
    EXECUTE,
    FORECAST,
    PLAN,
    SNAPSHOT,
    VALIDATION,
    RunFolder,
    read_json,
    read_table,
)
from kafka_rebalancer.snapshot.tiered import snapshot_tiered, tiered_lines

TOP_MOVES = 10
SKIPPED_SHOWN = 10
NOTES_SHOWN = 10  # per pool
LOG_DIR_BROKERS_SHOWN = 10  # brokers with moves between their log dirs, those moving the most bytes


def plain_table(console: Console, title: str | None, columns: list[str]) -> Table:
    table = Table(title=title, box=box.SIMPLE_HEAD if console.is_terminal else None, title_justify="left",
                  pad_edge=False, show_edge=False)
    for column in columns:
        table.add_column(column, overflow="fold")
    return table


def runs_table(console: Console, runs: list[RunOverview], by_cluster: bool = False) -> None:
    """One row per run; `by_cluster`: the cluster first (runs --all)."""
    table = plain_table(console, None, ["cluster"] * by_cluster + [
        "run", "started", "trigger", "action", "mode", "status", "moves", "bytes", "out of band", "approval",
        "capacity", "report", "notifications"])
    for r in runs:
        moves = "-" if r.replica_moves is None else f"{r.replica_moves}" + (
            f" (+{r.preferred_leader_changes} new leaders)" if r.preferred_leader_changes else "")
        band = "-" if r.out_of_band_before is None else \
            f"{r.out_of_band_before} -> {r.out_of_band_after}" + ("" if r.out_of_band_after_measured else " planned")
        table.add_row(*[r.cluster] * by_cluster, r.run_id, r.started_at, r.trigger, r.action, r.mode, r.status, moves,
                      "-" if r.moved_bytes is None else human_bytes(r.moved_bytes), band, r.approval,
                      r.capacity, r.report or "-", "\n".join(r.notifications_failed) or "-")
    console.print(table)


def show_run(console: Console, run: RunFolder) -> None:
    """The run's summary: what it is, its tiered topics (local and remote bytes), per pool the band table before ->
    after and the planner's notes, the largest moves, skipped partitions, validation and execution."""
    overview = run_overview(run)
    console.print(f"run {overview.run_id} ({overview.cluster}): {overview.trigger} {overview.action}, "
                  f"mode {overview.mode}, status {overview.status}, approval {overview.approval}")
    console.print(f"folder {run.path}" + (f"; plan {overview.plan_hash}" if overview.plan_hash else ""))
    snapshot_dir = run.completed(SNAPSHOT)
    if snapshot_dir is not None:
        for line in tiered_lines(*snapshot_tiered(snapshot_dir), human_bytes):
            console.print(line)
    plan_dir = run.completed(PLAN)
    if plan_dir is None:
        console.print("no plan yet")
        return
    summary = read_json(plan_dir / "summary.json")
    for broker_pool, facts in summary["pools"].items():
        _pool_table(console, broker_pool, facts)
        _pool_notes(console, broker_pool, facts)
    spread = {pool: facts["topic_spread"] for pool, facts in summary["pools"].items() if "topic_spread" in facts}
    if spread:
        console.print(spread_table(spread))
    _top_moves(console, read_table(plan_dir, PARTITION_CHANGES))
    _log_dirs(console, run)
    _resized(console, summary)
    _skipped(console, summary)
    _forecast(console, run)
    _validation(console, run)
    _execution(console, run, overview)


def _pool_table(console: Console, broker_pool: str, facts: dict[str, Any]) -> None:
    """Per broker and resource, from the summary (the re-check of plan.json): usage before -> after, the band
    after, and in or OUT of the band before (the current placement's) and after (the plan's)."""
    resources = list(facts["resources"])
    leadership_only = facts.get("leadership_only_changes")
    title = (f"pool {broker_pool}: {facts['replica_moves']} replica moves, "
             f"{facts['preferred_leader_changes']} preferred-leader changes"
             + (f" ({leadership_only} leadership-only)" if leadership_only is not None else "")
             + f", {human_bytes(facts['moved_bytes'])}" + _split(facts))
    table = plain_table(console, title, ["broker", *(f"{r} (band)" for r in resources)])
    for broker in facts["brokers"]:
        cells = [str(broker["broker_id"])]
        for resource in resources:
            usage, band = broker.get(resource), facts["resources"][resource]["band"]
            if usage is None:
                cells.append("-")
                continue
            counted = broker["eligible"] and band["balanced"]
            cells.append(f"{_usage(resource, usage['usage_before'])} -> {_usage(resource, usage['usage_after'])} "
                         f"({_usage(resource, band['lower'])}..{_usage(resource, _upper(band))}) "
                         f"{_inside(counted, usage['inside_before'])} -> {_inside(counted, usage['inside_after'])}")
        table.add_row(*cells)
    console.print(table)


def _pool_notes(console: Console, broker_pool: str, facts: dict[str, Any]) -> None:
    """Under a pool's table: its widened or unbalanced bands' notes, the proofs that no plan brings some brokers
    into the band, and the planner's notes (the first NOTES_SHOWN)."""
    for resource, info in facts["resources"].items():
        band = info.get("band") or {}
        if band.get("note"):
            console.print(f"  {resource} band: {band['note']}")
        for proof in info.get("infeasibility_proofs") or []:
            console.print(f"  {resource}: at least {proof['count']} of brokers {proof['brokers']} stay outside the "
                          f"band whatever moves: {proof['proof']}")
    notes = facts.get("notes") or []
    for note in notes[:NOTES_SHOWN]:
        broker = "" if note.get("broker_id") is None else f" broker {note['broker_id']}"
        console.print(f"  note ({note['resource']}{broker}): {note['note']}")
    if len(notes) > NOTES_SHOWN:
        console.print(f"  ... {len(notes) - NOTES_SHOWN} more notes of pool {broker_pool} in plan/summary.json")


def _split(facts: dict[str, Any]) -> str:
    """Forced and balance bytes, each with its moved / LB (summaries before the split have neither)."""
    if facts.get("forced_bytes") is None:
        return ""
    return (f" (forced {human_bytes(facts['forced_bytes'])}, moved/LB {_ratio(facts.get('forced_moved_over_lb'))}; "
            f"balance {human_bytes(facts['balance_bytes'])}, moved/LB {_ratio(facts.get('moved_over_lb'))})")


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _upper(band: dict[str, Any]) -> float:
    cap = band.get("capacity_threshold")
    return band["upper"] if cap is None else min(band["upper"], cap)


def _usage(resource: str, value: float) -> str:
    return f"{value:.1%}" if resource in ("disk", "network_in", "network_out", "cpu") else f"{value:.0f}"


def _inside(counted: bool, inside: bool) -> str:
    if not counted:
        return "n/a"
    return "in" if inside else "OUT"


def _top_moves(console: Console, changes: pd.DataFrame) -> None:
    if changes.empty:
        console.print("no partition changes")
        return
    moved = changes.assign(copied=[size * len(set(new) - set(old)) for size, old, new in
                                   zip(changes["size_bytes"], changes["old_replicas"], changes["new_replicas"],
                                       strict=True)])
    top = moved.sort_values(["copied", "topic", "partition"], ascending=[False, True, True]).head(TOP_MOVES)
    table = plain_table(console, f"largest moves ({len(top)} of {len(changes)} partition changes)",
                   ["pool", "partition", "replicas", "bytes to copy", "leader"])
    for row in top.itertuples(index=False):
        old, new = [int(b) for b in row.old_replicas], [int(b) for b in row.new_replicas]
        table.add_row(row.broker_pool, f"{row.topic}-{row.partition}", f"{old} -> {new}", human_bytes(row.copied),
                      f"{old[0]} -> {new[0]}" if old[0] != new[0] else "")
    console.print(table)


def _log_dirs(console: Console, run: RunFolder) -> None:
    """The plan's moves between a broker's log directories (JBOD), when it has any: per broker with moves, each
    directory's capacity and use before -> after them, and the replicas left stranded in a removed directory."""
    try:
        view = log_dirs_view(run, directories_shown=None, moves_shown=0, stranded_shown=SKIPPED_SHOWN,
                             brokers_shown=LOG_DIR_BROKERS_SHOWN)
    except (RebalancerError, OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        console.print(f"log dir moves: could not read them: {type(exc).__name__}: {exc}", markup=False)
        return
    if view is None:
        return
    console.print(f"log dir moves ({view.why or '-'}): {view.moves_total} replicas between the log dirs of their "
                  f"broker, {human_bytes(view.bytes_total)}" + (f"; removed {', '.join(view.removed)}"
                                                                 if view.removed else "")
                  + (f"; {view.arrivals_total} arriving from other brokers into named log dirs, "
                     f"{human_bytes(view.arrival_bytes_total)}" if view.arrivals_total else ""))
    by_broker: dict[int, list[LogDirUsage]] = {}
    for u in view.directories:
        by_broker.setdefault(u.broker_id, []).append(u)
    for broker, dirs in sorted(by_broker.items(),
                               key=lambda kv: (-sum(u.bytes_out + u.arrival_bytes for u in kv[1]), kv[0])):
        table = plain_table(console, f"broker {broker} log dirs: {sum(u.moves_out for u in dirs)} replica move(s), "
                                f"{human_bytes(sum(u.bytes_out for u in dirs))}",
                       ["log dir", "capacity (source)", "used before -> after", "usage before -> after", "moves",
                        "state"])
        for u in dirs:
            capacity = "-" if u.capacity_bytes is None else human_bytes(u.capacity_bytes)
            table.add_row(u.log_dir, f"{capacity} ({u.capacity_source or 'not in the snapshot'})",
                          f"{_bytes(u.used_before)} -> {_bytes(u.used_after)}",
                          f"{_share(u.usage(u.used_before))} -> {_share(u.usage(u.used_after))}",
                          f"-{u.moves_out} +{u.moves_in}" + (f" +{u.arrivals} arriving" if u.arrivals else ""),
                          u.state)
        console.print(table)
    if view.brokers_shown < view.brokers_total:
        console.print(f"  ... {view.brokers_total - view.brokers_shown} more brokers in plan/log_dir_moves.parquet")
    if not view.snapshot_has_log_dirs and view.directories:
        console.print("  the snapshot has no log dirs (taken by an older version): use before unknown")
    if view.stranded_total:
        console.print(f"stranded: {view.stranded_total} replica(s) stay in a removed log dir")
        for line in view.stranded:
            console.print(f"  {line}", markup=False)  # as the plan wrote it: no rich markup
        if view.stranded_total > len(view.stranded):
            console.print(f"  ... {view.stranded_total - len(view.stranded)} more in plan/summary.json")


def _bytes(value: int | None) -> str:
    return "-" if value is None else human_bytes(value)


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _resized(console: Console, summary: dict[str, Any]) -> None:
    """A replication factor change: each topic's replication factor before -> after, its bytes, the warnings."""
    resized = summary.get("replication_factor")
    if not resized:
        return
    table = plain_table(console, f"replication factor to {resized['target']}", RESIZE_HEADER)
    for row in resize_rows(resized):
        table.add_row(*row)
    console.print(table)
    for warning in resized["warnings"]:
        console.print(f"  warning: {warning}")


def _skipped(console: Console, summary: dict[str, Any]) -> None:
    skipped = summary["skipped"]
    if not skipped["partitions"]:
        return
    table = plain_table(console, f"skipped partitions ({summary['totals']['skipped_partitions']})",
                   ["partition", "pool", "reason"])
    for entry in skipped["partitions"][:SKIPPED_SHOWN]:
        table.add_row(f"{entry['topic']}-{entry['partition']}", str(entry["broker_pool"] or "-"), entry["reason"])
    console.print(table)


def _forecast(console: Console, run: RunFolder) -> None:
    """The capacity forecast's notes and a line per pool (the report has its chart)."""
    folder = run.completed(FORECAST)
    if folder is None:
        return
    facts = read_json(folder / "forecast.json")
    console.print("capacity forecast" + ("" if facts["made"] else ": none"))
    for note in facts["notes"]:
        console.print(f"  note: {note}")
    for pool in facts["pools"]:
        console.print(f"  {pool_line(pool, facts['horizon_days'], facts['warning_days'])}")
    if facts["made"] and facts["topics"]["without_trend"]:
        console.print(f"  {facts['topics']['without_trend']} topics without a trend (counted as not growing): "
                      + "; ".join(f"{t['topic']}: {t['reason']}" for t in facts["topics"]["without_trend_listed"][:3]))


def _validation(console: Console, run: RunFolder) -> None:
    folder = run.completed(VALIDATION)
    if folder is None:
        console.print("validation: not run")
        return
    report = read_json(folder / "report.json")
    if report["success"]:
        console.print(f"validation: passed {report['expectations']} expectations")
        for line in validation_promise_lines(folder):
            console.print(f"  promise not kept by this plan: {line}")
        return
    console.print(f"validation: FAILED {len(report['failures'])} of {report['expectations']} expectations")
    for failure in report["failures"]:
        console.print(f"  {failure}")


def _execution(console: Console, run: RunFolder, overview: RunOverview) -> None:
    if not run.has(EXECUTE):
        console.print("execution: not run" + (f" ({overview.approval})" if overview.approval != "-" else ""))
        return
    for folder in sorted(p for p in run.stage_path(EXECUTE).iterdir() if p.is_dir() and not p.name.startswith(".")):
        if (folder / "cancel.json").exists():
            cancel = read_json(folder / "cancel.json")
            console.print(f"execution {folder.name}: cancelled ({len(cancel['cancelled'])} reassignment(s) stopped)")
        elif (folder / "result.json").exists():
            result = read_json(folder / "result.json")
            console.print(f"execution {folder.name}: {result['completed']}/{result['moves']} moves complete, "
                          f"{len(result['skipped'])} skipped")
        elif (folder / "execution_log.jsonl").exists():
            console.print(f"execution {folder.name}: started, not finished (see {folder / 'execution_log.jsonl'})")
        else:
            console.print(f"execution {folder.name}: dry run only")
