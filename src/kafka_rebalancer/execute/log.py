"""The execution log: one JSON line per action, appended and flushed as it happens, so a rerun of the execute
task knows exactly what an earlier attempt did (README: Execution)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kafka_rebalancer.model.reassignment import Key


@dataclass
class LogState:
    """What the log says so far, per partition: the last action and its details."""

    last: dict[Key, dict[str, Any]] = field(default_factory=dict)
    plan_hashes: set[str] = field(default_factory=set)

    def action(self, key: Key) -> str | None:
        entry = self.last.get(key)
        return entry["action"] if entry else None


class ExecutionLog:
    def __init__(self, path: Path, pool: str, plan_hash: str) -> None:
        self.path = path
        self.pool = pool
        self.plan_hash = plan_hash
        path.parent.mkdir(parents=True, exist_ok=True)

    def append(self, action: str, key: Key | None = None, **details: Any) -> dict[str, Any]:
        entry: dict[str, Any] = {"ts": datetime.now(UTC).isoformat(timespec="milliseconds"), "pool": self.pool,
                                 "plan_hash": self.plan_hash, "action": action}
        if key is not None:
            entry["topic"], entry["partition"] = key
        entry.update(details)
        with self.path.open("a") as f:
            f.write(json.dumps(entry, sort_keys=False) + "\n")
            f.flush()
            os.fsync(f.fileno())
        return entry

    def read(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        entries = []
        for line in self.path.read_text().splitlines():
            if line.strip():
                try:
                    entries.append(json.loads(line))
                except json.JSONDecodeError:
                    continue  # a line cut short by a crash: the actions before it are intact
        return entries

    def log_dirs_done(self) -> set[tuple[str, int, int]]:
        """The replicas whose move between log directories completed: (topic, partition, broker)."""
        return {(e["topic"], int(e["partition"]), int(e["broker"])) for e in self.read()
                if e.get("action") == "log_dir_completed"}

    def state(self) -> LogState:
        state = LogState()
        for entry in self.read():
            state.plan_hashes.add(entry.get("plan_hash", ""))
            if "topic" in entry and not str(entry["action"]).startswith("log_dir_"):  # a replica's, not a partition's
                state.last[(entry["topic"], int(entry["partition"]))] = entry
        return state
