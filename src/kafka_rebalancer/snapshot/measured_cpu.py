"""Measured CPU per broker spread over its replicas, as Cruise Control does: the snapshot's CPU columns then add up
to what each broker really used, while the CPU model's weights still say which replica costs what.

- Each broker's measured cores are shared among its replicas in proportion to their modelled cost in their
  current role (CpuModel: a leader costs more per byte than a follower); a broker whose replicas the model finds
  idle (no traffic) shares its cores evenly among them.
- A partition's leader cost is the share of its leader replica; its follower cost the mean of its followers'
  shares (one follower cost serves all its followers, so a broker's followers carry the mean of their fellow
  followers' shares: its total equals its measurement exactly when those agree, and the manifest shows both).
- Replicas on brokers without a measurement (dead ones) keep the model's cost; a partition without a leader,
  or without followers, keeps the model's cost for that role.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np


def spread_measured_cpu(replica_partition: np.ndarray, replica_broker: np.ndarray, replica_is_leader: np.ndarray,
                        model_leader: np.ndarray, model_follower: np.ndarray,
                        measured: Mapping[int, float]) -> tuple[np.ndarray, np.ndarray]:
    """Per partition, the leader and follower cores. Replica arrays: each replica's partition (an index into the
    partition arrays), broker and role; partition arrays: the CPU model's leader and follower cost."""
    is_leader = replica_is_leader.astype(bool)
    modelled = np.where(is_leader, model_leader[replica_partition], model_follower[replica_partition])
    brokers, broker_index = np.unique(replica_broker, return_inverse=True)
    modelled_total = np.bincount(broker_index, weights=modelled, minlength=len(brokers))
    replica_count = np.bincount(broker_index, minlength=len(brokers))
    cores = np.array([measured.get(int(b), np.nan) for b in brokers])
    # Per broker, the cores of one unit of modelled cost, or of one replica when the model sees no cost.
    per_unit = np.divide(cores, modelled_total, out=np.full(len(brokers), np.nan), where=modelled_total > 0)
    per_replica = cores / replica_count
    share = np.where(modelled_total[broker_index] > 0, modelled * per_unit[broker_index],
                     per_replica[broker_index])
    share = np.where(np.isnan(share), modelled, share)  # no measurement: the model's cost

    n = len(model_leader)
    leader = model_leader.astype(float).copy()
    leader_rows = np.flatnonzero(is_leader)
    leader[replica_partition[leader_rows]] = share[leader_rows]
    followers = ~is_leader
    follower_sum = np.bincount(replica_partition[followers], weights=share[followers], minlength=n)
    follower_count = np.bincount(replica_partition[followers], minlength=n)
    follower = np.divide(follower_sum, follower_count, out=model_follower.astype(float).copy(),
                         where=follower_count > 0)
    return leader, follower
