"""The resources a pool is balanced on, and how each replica contributes to a broker's load.

A resource is measured per broker as `usage = load / capacity`; for counts the capacity is 1 and the usage is
the count itself. Each resource names the replicas-table column holding a replica's load in its
current role, so the load aggregation is the same code for every resource (Spark and pandas alike).

Some loads depend on the replica's role. From a partition's traffic (bytes in from producers, bytes out to
consumers, per second) and a CPU estimate per role:
- network in: every replica receives the produced bytes (the leader from producers, followers by replication);
- network out: the leader serves the consumers and replicates to its RF - 1 followers; followers send nothing;
- CPU: the leader's estimate, or the follower's;
- leader count: 1 for the leader.
A leadership move swaps the roles of two replicas of a partition: no data moves, these loads do.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Resource:
    name: str
    is_count: bool
    unit: str
    replica_load_column: str | None  # replicas-table column with this replica's load; None: each replica counts 1
    capacity_column: str | None  # brokers-table column; None for counts (capacity 1)
    default_capacity_threshold: float | None  # hard limit on usage (fraction of capacity), None = none
    role_dependent: bool = False  # leader and follower replicas of a partition load brokers differently


DISK = Resource("disk", False, "bytes", "size_bytes", "disk_capacity_bytes", 0.8)
NETWORK_IN = Resource("network_in", False, "bytes/s", "nw_in_bytes_per_s", "nw_in_capacity_bytes_per_s", 0.8)
NETWORK_OUT = Resource("network_out", False, "bytes/s", "nw_out_bytes_per_s", "nw_out_capacity_bytes_per_s", 0.8,
                       role_dependent=True)
CPU = Resource("cpu", False, "cores", "cpu_cores", "cpu_capacity_cores", 0.8, role_dependent=True)
REPLICA_COUNT = Resource("replica_count", True, "replicas", None, None, None)
LEADER_COUNT = Resource("leader_count", True, "leaders", "is_leader", None, None, role_dependent=True)

# In the order resources are balanced unless the config says otherwise: the coarse counts first, then the loads,
# which can still be evened out by swaps that leave the counts as they are.
RESOURCES: dict[str, Resource] = {r.name: r for r in (REPLICA_COUNT, LEADER_COUNT, DISK, NETWORK_IN, NETWORK_OUT,
                                                      CPU)}
CANONICAL_ORDER: tuple[str, ...] = tuple(RESOURCES)
# The resources a config gets when it names none: those that need no traffic metrics.
DEFAULT_RESOURCES: tuple[str, ...] = ("disk", "replica_count", "leader_count")
TRAFFIC_RESOURCES: frozenset[str] = frozenset({"network_in", "network_out", "cpu"})


def resource(name: str) -> Resource:
    try:
        return RESOURCES[name]
    except KeyError:
        raise KeyError(f"unknown resource {name!r} (known: {', '.join(RESOURCES)})") from None


@dataclass(frozen=True)
class CpuModel:
    """CPU cores a replica costs per MiB/s of traffic: the leader handles produce and fetch requests, a follower
    only replication (an estimate, as Cruise Control's; replace it with measured figures where you have them)."""

    leader_cores_per_mib_in: float = 0.04
    leader_cores_per_mib_out: float = 0.01
    follower_cores_per_mib_in: float = 0.015

    def leader(self, bytes_in: np.ndarray, bytes_out: np.ndarray) -> np.ndarray:
        return (bytes_in * self.leader_cores_per_mib_in + bytes_out * self.leader_cores_per_mib_out) / 2**20

    def follower(self, bytes_in: np.ndarray) -> np.ndarray:
        return bytes_in * self.follower_cores_per_mib_in / 2**20


def role_loads(size_bytes: np.ndarray, bytes_in: np.ndarray, bytes_out: np.ndarray, replication_factor: np.ndarray,
               cpu_leader: np.ndarray, cpu_follower: np.ndarray,
               resources: list[Resource]) -> tuple[np.ndarray, np.ndarray]:
    """Per replica (rows) and resource (columns): the load as leader and as follower."""
    n = len(size_bytes)
    leader = np.empty((n, len(resources)))
    follower = np.empty((n, len(resources)))
    by_name = {
        "disk": (size_bytes, size_bytes),
        "network_in": (bytes_in, bytes_in),
        "network_out": (bytes_out + bytes_in * (replication_factor - 1), np.zeros(n)),
        "cpu": (cpu_leader, cpu_follower),
        "replica_count": (np.ones(n), np.ones(n)),
        "leader_count": (np.ones(n), np.zeros(n)),
    }
    for k, r in enumerate(resources):
        leader[:, k], follower[:, k] = by_name[r.name]
    return leader, follower
