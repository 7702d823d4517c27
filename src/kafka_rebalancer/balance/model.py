"""The cluster model of one pool, as arrays: which broker holds each replica and the loads that follow.

It knows nothing of goals or actions: the planner changes it through `move`; the plan is the difference between
the original assignment and the changed one (`kafka_rebalancer.plan.changes`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from kafka_rebalancer.model.resources import Resource


class PoolModel:
    """Brokers (B), replicas (R), partitions (P) and resources (K) of one pool.

    brokers: broker_id, rack, alive, excluded, and the capacity column of every non-count resource.
    replicas: topic, partition, broker_id, position, size_bytes, movable, and each resource's load column.
    Only replicas of movable partitions move; all replicas count towards their broker's load.
    """

    def __init__(self, brokers: pd.DataFrame, replicas: pd.DataFrame, resources: list[Resource]) -> None:
        brokers = brokers.sort_values("broker_id", kind="mergesort").reset_index(drop=True)
        replicas = replicas.sort_values(["topic", "partition", "position"], kind="mergesort").reset_index(drop=True)
        self.resources = resources
        self.broker_ids = brokers["broker_id"].to_numpy(dtype=np.int64)
        self.index = {int(b): i for i, b in enumerate(self.broker_ids)}
        self.eligible = (brokers["alive"].to_numpy(bool) & ~brokers["excluded"].to_numpy(bool))
        # Brokers without rack information each count as a rack of their own (no false conflicts).
        racks = [r if isinstance(r, str) and r else f"\0broker-{b}" for r, b in zip(brokers["rack"], self.broker_ids,
                                                                                   strict=True)]
        self.rack_names = racks
        _, self.rack = np.unique(np.array(racks, dtype=object), return_inverse=True)
        self.n_racks = len({racks[i] for i in np.flatnonzero(self.eligible)})
        self.capacity = np.ones((len(brokers), len(resources)))
        for k, res in enumerate(resources):
            if res.capacity_column is not None:
                self.capacity[:, k] = brokers[res.capacity_column].to_numpy(float)

        self.r_topic = replicas["topic"].to_numpy(object)
        self.r_partition = replicas["partition"].to_numpy(np.int64)
        self.r_broker = np.array([self.index[int(b)] for b in replicas["broker_id"]], dtype=np.int64)
        self.r_size = replicas["size_bytes"].to_numpy(np.int64)
        self.r_movable = replicas["movable"].to_numpy(bool)
        self.r_load = np.ones((len(replicas), len(resources)))
        for k, res in enumerate(resources):
            if res.replica_load_column is not None:
                self.r_load[:, k] = replicas[res.replica_load_column].to_numpy(float)

        # Partitions: replicas are sorted by (topic, partition, position), so each partition is one run of rows.
        keys = pd.MultiIndex.from_arrays([replicas["topic"], replicas["partition"]])
        starts = np.flatnonzero(np.r_[True, ~(keys[1:] == keys[:-1])]) if len(replicas) else np.array([], int)
        self.p_start = starts
        self.p_count = np.diff(np.r_[starts, len(replicas)])
        self.r_pindex = np.repeat(np.arange(len(starts)), self.p_count)
        self.load = np.zeros((len(brokers), len(resources)))
        np.add.at(self.load, self.r_broker, self.r_load)

    # -- reading -------------------------------------------------------------------------------------
    @property
    def usage(self) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(self.capacity > 0, self.load / self.capacity, 0.0)

    def partition_brokers(self, r: int) -> np.ndarray:
        """Broker indexes of the partition replica r belongs to (in replica-list order)."""
        p = self.r_pindex[r]
        return self.r_broker[self.p_start[p]:self.p_start[p] + self.p_count[p]]

    def replicas_on(self, b: int) -> np.ndarray:
        return np.flatnonzero(self.r_broker == b)

    # -- changing ------------------------------------------------------------------------------------
    def move(self, r: int, target: int) -> None:
        source = self.r_broker[r]
        self.load[source] -= self.r_load[r]
        self.load[target] += self.r_load[r]
        self.r_broker[r] = target

