"""Where the watcher keeps its state and the events it saw, beside the cluster's runs
(`<run_root>/<cluster>/automation/`): `watch_state.json` (rewritten whole, atomically: a triggerer restart finds
the last look's state) and `events.jsonl` (appended: every event with the decision taken on it)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from kafka_rebalancer.automation.watch import WatchState
from kafka_rebalancer.config import RebalancerConfig
from kafka_rebalancer.errors import RunFolderError


def automation_dir(config: RebalancerConfig) -> Path:
    return config.run_root / config.cluster.name / "automation"


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
    folder = automation_dir(config)
    folder.mkdir(parents=True, exist_ok=True)
    partial = folder / ".watch_state.json.partial"
    partial.write_text(json.dumps(state.as_dict(), indent=1))
    os.replace(partial, folder / "watch_state.json")


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
    path = automation_dir(config) / "events.jsonl"
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
