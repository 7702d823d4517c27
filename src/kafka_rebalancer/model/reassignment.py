"""Kafka's reassignment JSON (what `kafka-reassign-partitions.sh --execute` reads) and the plan's hash.

    {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2, 3]}, ...]}

A partition may name, per replica, the log directory it goes to (`"log_dirs": ["/data-2", "any", "any"]`, JBOD):
"any" leaves the choice to the broker.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from kafka_rebalancer.errors import ConfigError

Key = tuple[str, int]  # a partition: (topic, partition)


@dataclass(frozen=True)
class Reassignment:
    topic: str
    partition: int
    replicas: list[int]
    log_dirs: tuple[str, ...] | None = None  # per replica, its target log directory or ANY_LOG_DIR

    def target_dirs(self) -> dict[int, str]:
        """The replicas whose log directory is named: broker -> directory."""
        return {b: d for b, d in zip(self.replicas, self.log_dirs or (), strict=False) if d != ANY_LOG_DIR}


ANY_LOG_DIR = "any"


def reassignment_document(changes: pd.DataFrame, column: str = "new_replicas",
                          log_dirs: Mapping[tuple[str, int, int], str] | None = None) -> dict:
    """plan.json (column new_replicas) or rollback.json (old_replicas), sorted by topic and partition; a
    partition with a replica in `log_dirs` ((topic, partition, broker) -> directory) names every replica's."""
    rows = sorted(zip(changes["topic"], changes["partition"], changes[column], strict=True),
                  key=lambda r: (r[0], int(r[1])))
    entries = []
    for topic, partition, replicas in rows:
        entry: dict = {"topic": str(topic), "partition": int(partition), "replicas": [int(b) for b in replicas]}
        named = [(log_dirs or {}).get((str(topic), int(partition), int(b))) for b in replicas]
        if any(named):
            entry["log_dirs"] = [d or ANY_LOG_DIR for d in named]
        entries.append(entry)
    return {"version": 1, "partitions": entries}


def dumps(document: dict) -> str:
    """Stable text, the same plan the same bytes: one partition per line, readable and easy to diff (and written
    by json's C encoder; pretty-printing a broker per line took seconds for a large plan)."""
    lines = ",\n".join(json.dumps(entry, ensure_ascii=False) for entry in document["partitions"])
    rest = json.dumps({k: v for k, v in document.items() if k != "partitions"}, ensure_ascii=False)[1:-1]
    return f'{{{rest}, "partitions": [\n{lines}\n]}}\n' if lines else f'{{{rest}, "partitions": []}}\n'


LOG_DIR_MOVES_FILE = "log_dir_moves.json"  # a plan's moves between log directories (JBOD), beside plan.json


def plan_hash(plan_text: str, snapshot_hash: str, config_fingerprint: str, log_dir_text: str | None = None) -> str:
    """Identifies a plan: its moves (between brokers, and between a broker's log directories where it has any), the
    cluster state and the config it came from."""
    digest = hashlib.sha256()
    for part in (plan_text, snapshot_hash, config_fingerprint, *([log_dir_text] if log_dir_text else [])):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()


def plan_folder_hash(plan_dir: Path, snapshot_hash: str, config_fingerprint: str) -> str:
    """The hash of the plan in a plan folder as it is on disk."""
    log_dirs = plan_dir / LOG_DIR_MOVES_FILE
    return plan_hash((plan_dir / "plan.json").read_text(), snapshot_hash, config_fingerprint,
                     log_dirs.read_text() if log_dirs.exists() else None)


def parse_reassignment(text: str, file: str = "<reassignment json>") -> list[Reassignment]:
    """Read a reassignment JSON document, with errors naming the entry and field."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(file, "", f"not valid JSON: {exc}") from exc
    if not isinstance(raw, dict) or raw.get("version") != 1 or not isinstance(raw.get("partitions"), list):
        raise ConfigError(file, "", 'expected {"version": 1, "partitions": [...]}')
    out: list[Reassignment] = []
    seen: set[tuple[str, int]] = set()
    for i, entry in enumerate(raw["partitions"]):
        where = f"partitions[{i}]"
        if not isinstance(entry, dict):
            raise ConfigError(file, where, "expected an object with topic, partition, replicas")
        topic, partition, replicas = entry.get("topic"), entry.get("partition"), entry.get("replicas")
        if not isinstance(topic, str) or not topic:
            raise ConfigError(file, f"{where}.topic", f"expected a topic name, got {topic!r}")
        if not isinstance(partition, int) or isinstance(partition, bool) or partition < 0:
            raise ConfigError(file, f"{where}.partition", f"expected a partition number >= 0, got {partition!r}")
        if not isinstance(replicas, list) or not replicas or not all(
                isinstance(b, int) and not isinstance(b, bool) for b in replicas):
            raise ConfigError(file, f"{where}.replicas", f"expected a non-empty list of broker ids, got {replicas!r}")
        if len(set(replicas)) != len(replicas):
            raise ConfigError(file, f"{where}.replicas", f"a broker appears twice: {replicas}")
        if (topic, partition) in seen:
            raise ConfigError(file, where, f"{topic}-{partition} appears twice")
        seen.add((topic, partition))
        out.append(Reassignment(topic, partition, list(replicas), _log_dirs(entry, replicas, file, where)))
    return out


def _log_dirs(entry: dict, replicas: list[int], file: str, where: str) -> tuple[str, ...] | None:
    """An entry's optional `log_dirs`: one per replica, each an absolute path or "any"."""
    if "log_dirs" not in entry:
        return None
    log_dirs = entry["log_dirs"]
    if not isinstance(log_dirs, list) or len(log_dirs) != len(replicas) or not all(
            isinstance(d, str) and (d == ANY_LOG_DIR or d.startswith("/")) for d in log_dirs):
        raise ConfigError(file, f"{where}.log_dirs", f'expected one absolute path or "any" per replica '
                                                     f"({len(replicas)}), got {log_dirs!r}")
    return tuple(log_dirs)


def read_reassignment(path: str | Path) -> list[Reassignment]:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(str(path), "", f"cannot read: {exc.strerror}") from exc
    return parse_reassignment(text, str(path))


def copies_nothing(old: Sequence[int], new: Sequence[int]) -> bool:
    """Whether a partition's reassignment copies no data: the same replicas, in whatever order. The executor runs
    these first, in batches of their own, with no throttle."""
    return set(old) == set(new)


def leadership_only(old: Sequence[int], new: Sequence[int]) -> bool:
    """Whether a partition's change copies nothing but changes something: the same replicas in another order (its
    preferred leader changes, or only its followers' order). The summary counts these apart."""
    return copies_nothing(old, new) and list(old) != list(new)
