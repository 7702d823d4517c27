"""The plan's moves between a broker's log directories (JBOD), as `show` and the report show them: per directory of
each broker with moves, or with replicas arriving from other brokers into directories plan.json names, its
capacity and use before (the snapshot's log_dirs) and after (before, less the bytes moving out, plus the bytes
moving in and arriving; replicas leaving for other brokers are not counted), the moves, and the replicas the plan
leaves stranded in a removed directory.

A run whose plan has neither (no plan/log_dir_moves.parquet, no `log_dir_moves` nor `arrival_log_dirs` in the
summary) has none of this: None.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from kafka_rebalancer.errors import RebalancerError
from kafka_rebalancer.model.reassignment import parse_reassignment
from kafka_rebalancer.model.schemas import LOG_DIR_MOVES, LOG_DIRS, PARTITION_CHANGES
from kafka_rebalancer.report.views import LogDirMoveRow, LogDirsView, LogDirUsage
from kafka_rebalancer.run_folder import PLAN, SNAPSHOT, RunFolder, read_json, read_table


def log_dirs_view(run: RunFolder, directories_shown: int | None, moves_shown: int, stranded_shown: int,
                  brokers_shown: int | None = None) -> LogDirsView | None:
    """The plan's log-dir moves, None when it has none; of a large plan the brokers moving the most bytes (whole
    brokers: at most `brokers_shown` of them and `directories_shown` directories, at least one broker), the largest
    moves and the first stranded replicas."""
    plan_dir = run.completed(PLAN)
    if plan_dir is None:
        return None
    moves_file = plan_dir / f"{LOG_DIR_MOVES.name}.parquet"
    try:
        summary = read_json(plan_dir / "summary.json")
        facts, named = summary.get("log_dir_moves"), summary.get("arrival_log_dirs")
    except (RebalancerError, AttributeError):
        if not moves_file.exists():
            return None  # nothing says the plan moves between log dirs; the plan's own section names the summary
        raise
    if facts is None and not moves_file.exists() and not named:
        return None
    facts = facts or {}
    moves = read_table(plan_dir, LOG_DIR_MOVES) if moves_file.exists() or facts.get("moves") else \
        pd.DataFrame(columns=LOG_DIR_MOVES.names)
    removed = [str(r) for r in facts.get("removed") or []]
    dirs = _snapshot_dirs(run)
    arrivals = _arrivals(plan_dir) if named else {}
    usage = _usage(moves, dirs, _removed_pairs(removed), arrivals)
    shown = _shown_brokers(usage, directories_shown, brokers_shown)
    largest = moves.sort_values(["size_bytes", "topic", "partition", "broker_id"],
                                ascending=[False, True, True, True], kind="mergesort").head(moves_shown)
    stranded = [str(s) for s in facts.get("stranded") or []]
    return LogDirsView(
        why=facts.get("why"), removed=removed, moves_total=int(facts.get("moves", len(moves))),
        bytes_total=int(facts.get("bytes", moves["size_bytes"].sum())),
        directories=[u for u in usage if u.broker_id in shown], brokers_total=len({u.broker_id for u in usage}),
        brokers_shown=len(shown),
        moves=[LogDirMoveRow("-" if pd.isna(r.broker_pool) else str(r.broker_pool), str(r.topic), int(r.partition),
                             int(r.broker_id), str(r.source_dir), str(r.target_dir), int(r.size_bytes))
               for r in largest.itertuples(index=False)],
        stranded=stranded[:stranded_shown], stranded_total=len(stranded), snapshot_has_log_dirs=dirs is not None,
        arrivals_total=sum(n for n, _ in arrivals.values()), arrival_bytes_total=sum(b for _, b in arrivals.values()))


def _arrivals(plan_dir: Path) -> dict[tuple[int, str], tuple[int, int]]:
    """(broker, dir) -> the replicas arriving into it from other brokers, and their bytes (plan.json's log_dirs)."""
    plan = parse_reassignment((plan_dir / "plan.json").read_text(), str(plan_dir / "plan.json"))
    changes = read_table(plan_dir, PARTITION_CHANGES)
    size = {(t, int(p)): int(b) for t, p, b in zip(changes["topic"], changes["partition"], changes["size_bytes"],
                                                     strict=True)}
    found: dict[tuple[int, str], tuple[int, int]] = {}
    for entry in plan:
        for broker, path in entry.target_dirs().items():
            count, total = found.get((broker, path), (0, 0))
            found[(broker, path)] = (count + 1, total + size.get((entry.topic, entry.partition), 0))
    return found


def _snapshot_dirs(run: RunFolder) -> pd.DataFrame | None:
    """The snapshot's log_dirs; None for a snapshot taken before they were recorded (or no snapshot)."""
    folder: Path | None = run.completed(SNAPSHOT)
    if folder is None or not (folder / f"{LOG_DIRS.name}.parquet").exists():
        return None
    return read_table(folder, LOG_DIRS)


def _removed_pairs(removed: list[str]) -> set[tuple[int, str]]:
    pairs = set()
    for entry in removed:
        broker, _, path = entry.partition(":")
        if broker.strip().lstrip("-").isdigit() and path:
            pairs.add((int(broker), path))
    return pairs


def _usage(moves: pd.DataFrame, dirs: pd.DataFrame | None, removed: set[tuple[int, str]],
           arrivals: dict[tuple[int, str], tuple[int, int]]) -> list[LogDirUsage]:
    """Every directory of each broker with moves between its directories, arrivals or a removed one, by broker and
    path."""
    counts: dict[tuple[int, str], list[int]] = {}  # (broker, dir) -> moves out, moves in, bytes out, bytes in
    for broker, source, target, size in zip(moves["broker_id"], moves["source_dir"], moves["target_dir"],
                                            moves["size_bytes"], strict=True):
        out, into = counts.setdefault((int(broker), str(source)), [0, 0, 0, 0]), \
            counts.setdefault((int(broker), str(target)), [0, 0, 0, 0])
        out[0], out[2] = out[0] + 1, out[2] + int(size)
        into[1], into[3] = into[1] + 1, into[3] + int(size)
    brokers = {b for b, _ in counts} | {b for b, _ in removed} | {b for b, _ in arrivals}
    known: dict[tuple[int, str], Any] = {}
    if dirs is not None:
        known = {(int(r.broker_id), str(r.log_dir)): r for r in dirs.itertuples(index=False)
                 if int(r.broker_id) in brokers}
    rows = []
    for key in sorted(set(known) | set(counts) | removed | set(arrivals)):
        moves_out, moves_in, bytes_out, bytes_in = counts.get(key, [0, 0, 0, 0])
        arrived, arrived_bytes = arrivals.get(key, (0, 0))
        row = known.get(key)
        used = None if row is None else int(row.used_bytes)
        capacity = None if row is None or pd.isna(row.capacity_bytes) else int(row.capacity_bytes)
        state = [name for name, on in (("removed", key in removed), ("cordoned", row is not None and row.cordoned),
                                       ("offline", row is not None and row.offline)) if on]
        rows.append(LogDirUsage(
            broker_id=key[0], log_dir=key[1], capacity_bytes=capacity,
            capacity_source=None if row is None else str(row.capacity_source), used_before=used,
            used_after=None if used is None else used - bytes_out + bytes_in + arrived_bytes, moves_out=moves_out,
            moves_in=moves_in, bytes_out=bytes_out, bytes_in=bytes_in, state=", ".join(state), arrivals=arrived,
            arrival_bytes=arrived_bytes))
    return rows


def _shown_brokers(usage: list[LogDirUsage], directories_shown: int | None, brokers_shown: int | None) -> set[int]:
    """The brokers moving the most bytes between or into their directories, whole, while their directories fit."""
    moved: dict[int, int] = {}
    size: dict[int, int] = {}
    for u in usage:
        moved[u.broker_id] = moved.get(u.broker_id, 0) + u.bytes_out + u.arrival_bytes
        size[u.broker_id] = size.get(u.broker_id, 0) + 1
    shown: set[int] = set()
    rows = 0
    for broker in sorted(moved, key=lambda b: (-moved[b], b)):
        full = (directories_shown is not None and rows + size[broker] > directories_shown) or \
            (brokers_shown is not None and len(shown) >= brokers_shown)
        if shown and full:
            break
        shown.add(broker)
        rows += size[broker]
    return shown
