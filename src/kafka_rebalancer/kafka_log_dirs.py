"""A broker's log directories as DescribeLogDirs reports them, in the shape the snapshot and the executor read."""

from __future__ import annotations

from typing import Any


def broker_log_dirs(log_dirs: list[dict[str, Any]]) -> dict[str, Any]:
    """{"replicas": {(topic, partition): size_bytes}, "total_bytes", "usable_bytes", "cordoned",
    "dirs": {path: {"total_bytes", "usable_bytes", "used_bytes", "cordoned", "offline"}} (total and usable are the
    volume's: two directories on one filesystem report the same), "replica_dirs": {(topic, partition): path},
    "future_dirs": {(topic, partition): path} (an intra-broker move in progress: its future copy)}."""
    sizes: dict[tuple[str, int], int] = {}
    dirs: dict[str, dict[str, Any]] = {}
    replica_dirs: dict[tuple[str, int], str] = {}
    future_dirs: dict[tuple[str, int], str] = {}
    total = usable = 0
    for log_dir in log_dirs:
        path, offline = str(log_dir.get("log_dir")), bool(log_dir.get("error_code", 0))
        dirs[path] = {"total_bytes": _known(log_dir.get("total_bytes")),
                      "usable_bytes": _known(log_dir.get("usable_bytes")), "used_bytes": 0,
                      "cordoned": bool(log_dir.get("is_cordoned")), "offline": offline}
        if offline:
            continue
        total += max(int(log_dir.get("total_bytes", -1)), 0)
        usable += max(int(log_dir.get("usable_bytes", -1)), 0)
        for topic in log_dir["topics"]:
            for p in topic["partitions"]:
                key = (topic["name"], p["partition_index"])
                if p.get("is_future_key"):  # an intra-broker move in progress is not load yet
                    future_dirs[key] = path
                    continue
                sizes[key] = sizes.get(key, 0) + int(p["partition_size"])
                replica_dirs[key] = path
                dirs[path]["used_bytes"] += int(p["partition_size"])
    healthy = [d for path, d in dirs.items() if not d["offline"]]
    return {"replicas": sizes, "total_bytes": total or None, "usable_bytes": usable or None,
            # KIP-1066: with every log dir cordoned the broker takes no new partition
            "cordoned": bool(healthy) and all(d["cordoned"] for d in healthy),
            "dirs": dirs, "replica_dirs": replica_dirs, "future_dirs": future_dirs}


def _known(value: Any) -> int | None:
    """A byte count DescribeLogDirs reports (-1: not known)."""
    return int(value) if value is not None and int(value) >= 0 else None
