"""The cluster model of one pool, as arrays: which broker holds each replica, which replica leads, and the
loads that follow.

It knows nothing of goals or actions: the planner changes it through `move` and `transfer_leadership`; the plan
is the difference between the original assignment and the changed one (`kafka_rebalancer.plan.changes`).

Leadership is modelled as it will be after execution: the executor elects preferred leaders for every partition
of the plan, so a touched partition is led by its first replica. When a partition whose leader is not its first
replica is first touched, the leader is put first (no load changes); a leadership transfer then swaps the
positions of the old and the new leader.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from kafka_rebalancer.model.resources import Resource, role_loads
from kafka_rebalancer.model.topic_spread import counts_per_topic_and_broker


def base_load_column(resource: str) -> str:
    """The brokers' column of the load of `resource` the pool's planner does not plan (`PoolModel.base_load`)."""
    return f"base_load_{resource}"


_PARTITION_ORDER = ["topic", "partition", "position"]


def _in_partition_order(replicas: pd.DataFrame) -> pd.DataFrame:
    """The replicas sorted by (topic, partition, position) and numbered from 0: the frame itself when it is so
    already (the plan job's rows are, in the snapshot's order; a sorted copy of 5 million rows and its renumbered
    copy cost the driver about a GB), else a stable sort's copy."""
    index = replicas.index
    numbered = isinstance(index, pd.RangeIndex) and index.start == 0 and index.step == 1
    # A missing key sorts last, where a code of -1 or a comparison with None would not put it.
    if numbered and not any(replicas[c].hasnans for c in _PARTITION_ORDER) and _ordered(
            *(_sort_key(replicas[c]) for c in _PARTITION_ORDER)):
        return replicas
    return replicas.sort_values(_PARTITION_ORDER, kind="mergesort").reset_index(drop=True)


def _sort_key(column: pd.Series) -> np.ndarray:
    """What sort_values compares of a column: a categorical's codes (its categories' order), else its values."""
    return column.cat.codes.to_numpy() if isinstance(column.dtype, pd.CategoricalDtype) else column.to_numpy()


def _ordered(*keys: np.ndarray) -> bool:
    """Whether the rows are in ascending order of `keys`, the first deciding, then the next where it ties."""
    if len(keys[0]) < 2:
        return True
    ascending = np.ones(len(keys[0]) - 1, dtype=bool)  # where the keys so far tie, whether the rest keep order
    for key in reversed(keys):
        before, after = key[:-1], key[1:]
        ascending = (after > before) | ((after == before) & ascending)
    return bool(ascending.all())


class PoolModel:
    """Brokers (B), replicas (R), partitions (P) and resources (K) of one pool.

    brokers: broker_id, rack, alive, excluded, and the capacity column of every non-count resource; optional:
    receives, gives, and a `base_load_column` per resource (see __init__).
    replicas: topic, partition, broker_id, position, is_leader, in_isr, size_bytes, movable, must_move (optional),
    and the partition's traffic (replication_factor, bytes_in_per_s, bytes_out_per_s, cpu_leader_cores,
    cpu_follower_cores; optional: no traffic when absent).
    """

    def __init__(self, brokers: pd.DataFrame, replicas: pd.DataFrame, resources: list[Resource]) -> None:
        brokers = brokers.sort_values("broker_id", kind="mergesort").reset_index(drop=True)
        replicas = _in_partition_order(replicas)
        self.resources = resources
        self._init_brokers(brokers, resources)
        self._init_replicas(replicas, resources)
        self._init_partitions(len(replicas))
        self._init_loads(brokers, resources)

    def _init_brokers(self, brokers: pd.DataFrame, resources: list[Resource]) -> None:
        self.broker_ids = brokers["broker_id"].to_numpy(dtype=np.int64)
        self.index = {int(b): i for i, b in enumerate(self.broker_ids)}
        self.alive = brokers["alive"].to_numpy(bool)
        self.eligible = self.alive & ~brokers["excluded"].to_numpy(bool)
        # Roles of a manual operation (add-brokers): a broker that may not receive is never the target of a replica
        # move; one that may not give keeps its replicas unless they must move. Absent: every broker does both.
        self.receives = self.eligible & (brokers["receives"].to_numpy(bool) if "receives" in brokers else True)
        self.gives = brokers["gives"].to_numpy(bool) if "gives" in brokers else np.ones(len(brokers), dtype=bool)
        # Brokers without rack information each count as a rack of their own (no false conflicts).
        self.rack_names = [r if isinstance(r, str) and r else f"\0broker-{b}"
                           for r, b in zip(brokers["rack"], self.broker_ids, strict=True)]
        _, self.rack = np.unique(np.array(self.rack_names, dtype=object), return_inverse=True)
        self.n_racks = len({self.rack_names[i] for i in np.flatnonzero(self.eligible)})
        self.capacity = np.ones((len(brokers), len(resources)))
        for k, res in enumerate(resources):
            if res.capacity_column is not None:
                self.capacity[:, k] = brokers[res.capacity_column].to_numpy(float)

    def _init_replicas(self, replicas: pd.DataFrame, resources: list[Resource]) -> None:
        n = len(replicas)
        self.r_topic = replicas["topic"].to_numpy(object)
        self.r_partition = replicas["partition"].to_numpy(np.int64)
        # broker_ids is sorted: each replica's broker row by binary search (a dict lookup per replica took 0.35 s
        # at 1.5 million replicas). Every replica's broker is one of the brokers (KeyError as the lookup did).
        replica_brokers = replicas["broker_id"].to_numpy(np.int64)
        self.r_broker = np.searchsorted(self.broker_ids, replica_brokers).astype(np.int64)
        unknown = (self.r_broker >= len(self.broker_ids)) | (
            self.broker_ids[np.minimum(self.r_broker, max(len(self.broker_ids) - 1, 0))] != replica_brokers
            if len(self.broker_ids) else True)
        if n and unknown.any():
            raise KeyError(int(replica_brokers[np.argmax(unknown)]))
        self.r_size = replicas["size_bytes"].to_numpy(np.int64)
        self.r_movable = replicas["movable"].to_numpy(bool)
        self.r_must_move = replicas["must_move"].to_numpy(bool) if "must_move" in replicas else np.zeros(n, bool)
        self.r_in_isr = replicas["in_isr"].to_numpy(bool) if "in_isr" in replicas else np.ones(n, bool)
        self.r_is_leader = replicas["is_leader"].to_numpy(bool).copy() if "is_leader" in replicas else \
            (replicas["position"].to_numpy() == 0)
        self.r_position = replicas["position"].to_numpy(np.int64).copy()

        def column(name: str, default: float | np.ndarray = 0.0) -> np.ndarray:
            return replicas[name].to_numpy(float) if name in replicas else np.broadcast_to(default, n).astype(float)

        self.r_lead, self.r_follow = role_loads(
            self.r_size.astype(float), column("bytes_in_per_s"), column("bytes_out_per_s"),
            column("replication_factor", np.zeros(n)), column("cpu_leader_cores"), column("cpu_follower_cores"),
            resources)
        self.r_load = np.where(self.r_is_leader[:, None], self.r_lead, self.r_follow)

    def _init_partitions(self, n: int) -> None:
        # Partitions: replicas are sorted by (topic, partition, position), so each partition is one run of rows.
        if n:
            same = (self.r_topic[1:] == self.r_topic[:-1]) & (self.r_partition[1:] == self.r_partition[:-1])
            self.p_start = np.flatnonzero(np.r_[True, ~same])
        else:
            self.p_start = np.array([], dtype=np.int64)
        self.p_count = np.diff(np.r_[self.p_start, n])
        self.r_pindex = np.repeat(np.arange(len(self.p_start)), self.p_count)
        rows_movable = np.add.reduceat(self.r_movable & self.r_in_isr & ~self.r_must_move, self.p_start) \
            if n else np.array([], int)
        # Leadership may change only where every replica is movable and in sync.
        self.p_leadership_ok = rows_movable == self.p_count
        self.p_touched = np.zeros(len(self.p_start), dtype=bool)

        self.original_broker = self.r_broker.copy()
        self.original_leader = self.r_is_leader.copy()
        self.original_position = self.r_position.copy()

    def _init_loads(self, brokers: pd.DataFrame, resources: list[Resource]) -> None:
        # What a broker carries that this pool does not plan and that stays there (another pool's replica in a
        # partition draining a dead broker's replica): its `base_load_column`s, where given.
        self.base_load = np.zeros((len(brokers), len(resources)))
        for k, res in enumerate(resources):
            if base_load_column(res.name) in brokers:
                self.base_load[:, k] = brokers[base_load_column(res.name)].to_numpy(float)
        self.load = self.base_load.copy()
        np.add.at(self.load, self.r_broker, self.r_load)
        # Per broker, how many changes touched its replicas or loads: lets a search remember a broker's answer
        # until the broker changes.
        self.changes = np.zeros(len(brokers), dtype=np.int64)
        self.arrivals = np.zeros(len(brokers), dtype=np.int64)  # replicas moved onto each broker, ever
        # Per broker, how many leadership transfers changed the loads of replicas it holds or held first (a
        # replica's own loads change with its role alone).
        self.role_changes = np.zeros(len(brokers), dtype=np.int64)
        # All changes together: `usage` is kept until the next one (it is read far more often than loads change).
        self.version = 0
        self._usage: tuple[int, np.ndarray] | None = None
        # usage divides by the capacity where there is one (1 elsewhere: masked out, and no warning to silence).
        self._has_capacity = self.capacity > 0
        self._divisor = np.where(self._has_capacity, self.capacity, 1.0)
        self._every_capacity = bool(self._has_capacity.all())
        self._replicas_on: dict[int, tuple[int, np.ndarray]] = {}
        self._leadership_rows: dict[tuple[int, bool], tuple[int, np.ndarray, np.ndarray]] = {}
        self._by_partition: dict[int, tuple[int, np.ndarray, np.ndarray]] = {}
        # Replicas per broker as of the snapshot, and those that arrived since (for scanning candidates).
        order = np.argsort(self.r_broker, kind="stable")
        bounds = np.searchsorted(self.r_broker[order], np.arange(len(brokers) + 1))
        self._original_on = [order[bounds[b]:bounds[b + 1]] for b in range(len(brokers))]
        self._arrived_on: list[list[int]] = [[] for _ in range(len(brokers))]
        # Per (topic, broker): replicas and leaders held, kept by `move` and `transfer_leadership` once asked for
        # (`track_topics`: topic spread).
        self.topic_replicas: np.ndarray | None = None
        self.topic_leaders: np.ndarray | None = None

    def track_topics(self) -> None:
        """Count the replicas and the leaders of every topic on every broker from now on (`topic_names`,
        `r_topic_index`, `topic_replicas`, `topic_leaders`): one int32 matrix each, read in O(1) per move."""
        if self.topic_replicas is not None:
            return
        n = len(self.r_topic)
        # Replicas are sorted by topic: a topic is one run of rows.
        starts = np.flatnonzero(np.r_[True, self.r_topic[1:] != self.r_topic[:-1]]) if n else np.zeros(0, np.int64)
        self.topic_names = [str(t) for t in self.r_topic[starts]]
        self.r_topic_index = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, n]))
        shape = (len(starts), len(self.broker_ids))
        # Column-major: the planner reads a broker's column (every topic, for a giver's replicas to one taker) far
        # more often than a topic's row; row-major, each of those reads missed the cache once per topic.
        self.topic_replicas = np.asfortranarray(counts_per_topic_and_broker(self.r_topic_index, self.r_broker, *shape))
        self.topic_leaders = np.asfortranarray(counts_per_topic_and_broker(self.r_topic_index, self.r_broker, *shape,
                                                                           weights=self.r_is_leader))

    # -- reading -------------------------------------------------------------------------------------
    @property
    def usage(self) -> np.ndarray:
        """Load / capacity per (broker, resource), 0 without capacity; kept until the model changes."""
        if self._usage is not None and self._usage[0] == self.version:
            return self._usage[1]
        usage = self.usage_at(slice(None), self.load)
        usage.flags.writeable = False  # shared by every caller until the next change
        self._usage = (self.version, usage)
        return usage

    def usage_at(self, brokers: np.ndarray | list[int] | slice, load: np.ndarray) -> np.ndarray:
        """What `usage` would be for these brokers (rows) at this load: the same arithmetic, without a change."""
        usage = load / self._divisor[brokers]
        if not self._every_capacity:
            usage = np.where(self._has_capacity[brokers], usage, 0.0)
        return usage

    def fill_at(self, brokers: np.ndarray | list[int] | int | slice, load: np.ndarray) -> np.ndarray:
        """Load / capacity of these brokers (rows) at this load, to hold against the bands' edges and the capacity
        thresholds: where a broker has no capacity in a resource it counts as full (+inf), so it takes nothing
        more of it and no lower edge holds it. Only a broker of no pool has none (the snapshot resolves capacities
        for pool members only): one drained, or one holding a replica its pool must take home, a source, never a
        target. Elsewhere the plain division, so the edges see the same numbers as before."""
        fill = load / self._divisor[brokers]
        if self._every_capacity:
            return fill
        return np.where(self._has_capacity[brokers], fill, np.inf)

    def partition_rows(self, r: int) -> np.ndarray:
        p = self.r_pindex[r]
        return np.arange(self.p_start[p], self.p_start[p] + self.p_count[p])

    def partition_brokers(self, r: int) -> np.ndarray:
        """Broker indexes of the partition replica r belongs to."""
        return self.r_broker[self.partition_rows(r)]

    def replicas_on(self, b: int) -> np.ndarray:
        """The replicas b holds now; kept until b changes (searches ask for the same brokers many times)."""
        cached = self._replicas_on.get(b)
        if cached is not None and cached[0] == self.changes[b]:
            return cached[1]
        original = self._original_on[b]
        here = original[self.r_broker[original] == b]
        if self._arrived_on[b]:
            arrived = np.sort(np.array(self._arrived_on[b], dtype=np.int64))
            first = np.concatenate(([True], arrived[1:] != arrived[:-1]))  # not np.r_: slow for a hot path
            arrived = arrived[first & (self.r_broker[arrived] == b)]
            # Those that left again are forgotten (a return is appended anew): the list stays as short as b's
            # arrivals.
            self._arrived_on[b] = arrived.tolist()
            arrived = arrived[self.original_broker[arrived] != b]
            here = np.concatenate([here, arrived])
        here.flags.writeable = False  # shared by every caller until b changes
        self._replicas_on[b] = (int(self.changes[b]), here)
        return here

    def leadership_rows(self, b: int, leaders: bool) -> tuple[np.ndarray, np.ndarray]:
        """b's replicas that lead (leaders) or follow partitions whose leadership may change, and what each
        would gain per resource as the leader (`leadership_delta`); kept until b changes (the leadership searches
        ask for the same brokers many times)."""
        cached = self._leadership_rows.get((b, leaders))
        if cached is not None and cached[0] == self.changes[b]:
            return cached[1], cached[2]
        rs = self.replicas_on(b)
        rs = rs[(self.r_is_leader[rs] == leaders) & self.p_leadership_ok[self.r_pindex[rs]]]
        deltas = self.r_lead.take(rs, axis=0) - self.r_follow.take(rs, axis=0)
        rs.flags.writeable = deltas.flags.writeable = False  # shared by every caller until b changes
        self._leadership_rows[(b, leaders)] = (int(self.changes[b]), rs, deltas)
        return rs, deltas

    def by_partition(self, b: int) -> tuple[np.ndarray, np.ndarray]:
        """b's replicas ordered by partition, and their partitions: to find b's row of given partitions by a
        sorted lookup; kept until b changes."""
        cached = self._by_partition.get(b)
        if cached is not None and cached[0] == self.changes[b]:
            return cached[1], cached[2]
        rs = self.replicas_on(b)
        order = np.argsort(self.r_pindex[rs], kind="stable")
        rs = rs[order]
        partitions = self.r_pindex[rs]
        rs.flags.writeable = partitions.flags.writeable = False
        self._by_partition[b] = (int(self.changes[b]), rs, partitions)
        return rs, partitions

    def leadership_delta(self, r: int) -> np.ndarray:
        """What a broker gains per resource when its replica r becomes the leader (and the leader's loses)."""
        return self.r_lead[r] - self.r_follow[r]

    def partition_row_matrix(self, rs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The rows of each replica's partition, one line per replica of rs (padded with its first row), and a
        mask of the real ones: to ask about many partitions at once."""
        p = self.r_pindex[rs]
        start, count = self.p_start[p], self.p_count[p]
        slot = np.arange(count.max() if len(rs) else 0)
        valid = slot[None, :] < count[:, None]
        return np.where(valid, start[:, None] + slot[None, :], start[:, None]), valid

    def leader_of(self, r: int) -> int:
        rows = self.partition_rows(r)
        leaders = rows[self.r_is_leader[rows]]
        return int(leaders[0]) if len(leaders) else -1

    def leaders_of(self, rs: np.ndarray) -> np.ndarray:
        """leader_of for many replicas at once."""
        if not len(rs):
            return np.zeros(0, dtype=np.int64)
        rows, valid = self.partition_row_matrix(rs)
        leads = valid & self.r_is_leader[rows]
        return np.where(leads.any(axis=1), rows[np.arange(len(rs)), leads.argmax(axis=1)], -1)

    # -- changing ------------------------------------------------------------------------------------
    def _touch(self, r: int) -> None:
        """First change to a partition: its leader becomes its first replica (preferred-leader election)."""
        p = self.r_pindex[r]
        if self.p_touched[p]:
            return
        self.p_touched[p] = True
        leader = self.leader_of(r)
        rows = self.partition_rows(r)
        first = rows[self.r_position[rows] == 0]
        if leader >= 0 and len(first) and first[0] != leader:
            self.r_position[[leader, first[0]]] = self.r_position[[first[0], leader]]

    def move(self, r: int, target: int) -> None:
        self._touch(r)
        source = self.r_broker[r]
        self.load[source] -= self.r_load[r]
        self.load[target] += self.r_load[r]
        self.r_broker[r] = target
        if self.topic_replicas is not None:
            self._count_topic(r, source, -1)
            self._count_topic(r, target, 1)
        self._arrived_on[target].append(r)
        self.arrivals[target] += 1
        self.changes[source] += 1
        self.changes[target] += 1
        self.version += 1

    def transfer_leadership(self, new_leader: int) -> int:
        """Make replica new_leader the partition's leader and first replica; returns the old leader's row."""
        self._touch(new_leader)
        old = self.leader_of(new_leader)
        for row, lead in ((old, False), (new_leader, True)):
            self.load[self.r_broker[row]] -= self.r_load[row]
            if self.topic_leaders is not None:
                self.topic_leaders[self.r_topic_index[row], self.r_broker[row]] += 1 if lead else -1
            self.r_is_leader[row] = lead
            self.r_load[row] = self.r_lead[row] if lead else self.r_follow[row]
            self.load[self.r_broker[row]] += self.r_load[row]
            self.changes[self.r_broker[row]] += 1
            self.role_changes[self.r_broker[row]] += 1
            self.role_changes[self.original_broker[row]] += 1
        self.version += 1
        self.r_position[[old, new_leader]] = self.r_position[[new_leader, old]]
        return old

    def _count_topic(self, r: int, broker: int, sign: int) -> None:
        """Replica r counted on (sign 1) or off (-1) broker's topic counters (its leadership with it)."""
        topic = self.r_topic_index[r]
        self.topic_replicas[topic, broker] += sign  # type: ignore[index]  # set by track_topics before any move
        if self.r_is_leader[r]:
            self.topic_leaders[topic, broker] += sign  # type: ignore[index]  # set with topic_replicas
