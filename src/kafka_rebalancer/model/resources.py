"""The resources a pool is balanced on, and how each replica contributes to a broker's load.

A resource is measured per broker as `usage = load / capacity`; for counts the capacity is 1 and the usage is
the count itself (DESIGN §4). Each resource names the replica column that holds its per-replica load, so the
load aggregation is the same code for every resource (Spark and pandas alike).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Resource:
    name: str
    is_count: bool
    unit: str
    replica_load_column: str | None  # replicas-table column with this replica's load; None: each replica counts 1
    capacity_column: str | None  # column of the brokers table; None for counts (capacity 1)
    default_capacity_threshold: float | None  # hard limit on usage (fraction of capacity), None = none


DISK = Resource("disk", False, "bytes", "size_bytes", "disk_capacity_bytes", 0.8)
REPLICA_COUNT = Resource("replica_count", True, "replicas", None, None, None)

RESOURCES: dict[str, Resource] = {r.name: r for r in (DISK, REPLICA_COUNT)}
DEFAULT_PRIORITY: tuple[str, ...] = ("disk", "replica_count")


def resource(name: str) -> Resource:
    try:
        return RESOURCES[name]
    except KeyError:
        raise KeyError(f"unknown resource {name!r} (known: {', '.join(RESOURCES)})") from None
