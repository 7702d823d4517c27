"""Where the watcher keeps its state and the events it saw, beside the cluster's run folders
(`<run_root>/<cluster>/.automation/`, hidden from the runs list): `watch_state.json` (rewritten whole, atomically:
a triggerer restart finds the last look's state), `events.jsonl` (appended: every event with the decision taken on
it) and `retry/` (an event held back, to raise again at its `retry_at`: one file each, written by the decision, taken
by the watcher)."""

from __future__ import annotations

import json
import os
from collections.abc import Collection
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kafka_rebalancer.automation.watch import WatchState
from kafka_rebalancer.config import RebalancerConfig
from kafka_rebalancer.errors import RunFolderError


def automation_dir(config: RebalancerConfig) -> Path:
    return cluster_automation_dir(config.run_root, config.cluster.name)


def cluster_automation_dir(run_root: Path, cluster: str) -> Path:
    return run_root / cluster / ".automation"


def load_state(config: RebalancerConfig) -> WatchState:
    path = automation_dir(config) / "watch_state.json"
    if not path.exists():
        return WatchState()
    try:
        return WatchState.of(json.loads(path.read_text()))
    except (OSError, ValueError, TypeError, AttributeError) as exc:
        raise RunFolderError(f"{path}: not a readable watch state ({type(exc).__name__}: {exc}); move it aside to "
                             "start watching afresh") from exc


def save_state(config: RebalancerConfig, state: WatchState) -> None:
    write_whole(config, "watch_state.json", state.as_dict())


def write_whole(config: RebalancerConfig, name: str, payload: Any) -> None:
    """Replace the automation folder's file `name` with `payload` (JSON) atomically: a reader sees one or the other."""
    folder = automation_dir(config)
    folder.mkdir(parents=True, exist_ok=True)
    partial = folder / f".{name}.partial"
    partial.write_text(json.dumps(payload, indent=1))
    os.replace(partial, folder / name)


def append_events(config: RebalancerConfig, entries: list[dict[str, Any]]) -> None:
    if not entries:
        return
    folder = automation_dir(config)
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "events.jsonl").open("a") as out:
        for entry in entries:
            out.write(json.dumps(entry, sort_keys=True) + "\n")
        out.flush()
        os.fsync(out.fileno())


def read_events(config: RebalancerConfig) -> list[dict[str, Any]]:
    """Every event recorded, oldest first; a line cut short by a crash is skipped."""
    return cluster_events(config.run_root, config.cluster.name)


def cluster_events(run_root: Path, cluster: str) -> list[dict[str, Any]]:
    """`read_events` for a cluster by name (the runs page lists every cluster under the run root)."""
    path = cluster_automation_dir(run_root, cluster) / "events.jsonl"
    if not path.exists():
        return []
    entries = []
    for line in path.read_text().splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            entries.append(entry)
    return entries


def started_records(config: RebalancerConfig, run_id: str) -> list[dict[str, Any]]:
    """The events an automatic run was started for (empty: `run_id` is no automatic run). Only the events DAG's
    decision writes them, under a run id of its own choosing: a person's trigger cannot pass for one."""
    return [e for e in read_events(config) if e.get("decision") == "started" and e.get("run_id") == run_id]


def _retry_dir(config: RebalancerConfig) -> Path:
    return automation_dir(config) / "retry"


def defer_events(config: RebalancerConfig, records: list[dict[str, Any]]) -> None:
    """Keep each record of a broker held back with a `retry_at` for the watcher (a later one for the same event
    replaces it). A pool's own events are not kept: the band check raises them again while they hold."""
    folder = _retry_dir(config)
    for record in records:
        if record.get("retry_at") is None or record.get("broker_id") is None:
            continue
        folder.mkdir(parents=True, exist_ok=True)
        name = f"{record['kind']}-{record['broker_id']}.json"
        partial = folder / f".{name}.partial"
        partial.write_text(json.dumps({k: record.get(k) for k in ("kind", "broker_id", "broker_pool", "retry_at")}))
        os.replace(partial, folder / name)


def take_retries(config: RebalancerConfig, now: float, broker_pools: Collection[str] = ()) -> list[tuple[str, int]]:
    """The held-back events to raise again (kind, broker id), removed from the store: those whose time has come,
    with every other one of their pools, and every one of `broker_pools` (a pool with a new event): a pool's
    events held back at different times are raised together, for one run."""
    folder = _retry_dir(config)
    held = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            raw = json.loads(path.read_text())
            held.append((path, str(raw["kind"]), int(raw["broker_id"]), raw.get("broker_pool"),
                         float(raw["retry_at"])))
        except (OSError, ValueError, KeyError, TypeError):
            path.unlink(missing_ok=True)  # unreadable: the event it held is raised again anyway below
    pools = set(broker_pools) | {pool for _, _, _, pool, retry_at in held if retry_at <= now and pool is not None}
    taken = []
    for path, kind, broker, pool, retry_at in held:
        if retry_at <= now or pool in pools:
            taken.append((kind, broker))
            path.unlink(missing_ok=True)
    return taken


def event_fields(entry: dict[str, Any]) -> tuple[str, str, str, str, str, str]:
    """(when, kind, broker, pool, decision, why) of a recorded event, in words, as `events`, `runs` and the runs
    page show it; a started run is named."""
    at = datetime.fromtimestamp(float(entry.get("at", 0)), UTC)
    broker = "-" if entry.get("broker_id") is None else str(entry["broker_id"])  # broker 0 is a broker
    decided = str(entry.get("decision", "-")) + (f" {entry['action']}" if entry.get("action") else "")
    why = str(entry.get("why") or entry.get("observed", "")) + (f" (run {entry['run_id']})" if entry.get("run_id")
                                                                else "")
    return f"{at:%Y-%m-%d %H:%M:%S}", str(entry.get("kind", "-")), broker, str(entry.get("broker_pool") or "-"), \
        decided, why


def event_line(entry: dict[str, Any]) -> str:
    at, kind, broker, pool, decided, why = event_fields(entry)
    return f"{at} {kind:<16} broker {broker} pool {pool}: {decided}: {why}"
