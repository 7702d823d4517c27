"""change-replication-factor's placement: every partition of the requested topics to the target number of replicas,
apart from the balance planner (no pool is balanced in such a run; replicas are only added or removed).

- Raising: each new replica goes to a broker of the partition's pool that takes replicas (alive, not excluded, not
  cordoned), chosen in this order: one that stays under the topic spread's cap (the validation's rule), a rack the
  partition is not on yet, one under the topic spread's target (computed on the topic's replicas after the
  change), one that stays inside its bands, then the one whose highest load against its pool's mean ends lowest
  (the broker that leaves the pool best balanced). The largest partitions are placed first, each choice counted in
  the brokers' loads before the next.
- Lowering: replicas leave the followers, never the leader: first those on a rack the partition holds twice (the
  rack spread is kept), of those the most loaded broker's.
- A partition is left as it is, with the reason (the plan's skipped partitions, the promise's `cannot`), when it has
  no leader, is under-replicated (a replica outside the ISR: its data is not all there to copy or keep), has a
  replica on an excluded broker, has no pool, its pool has too few brokers taking replicas, or the run's budgets
  (config `budgets`: replica moves, bytes, moves per broker) are spent: the largest partitions are placed first,
  each within what is left.

The new replica list is the leader first, the others in their order, the added ones last: the executor's preferred
leader election then keeps the leader where it is.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from kafka_rebalancer.config import Budgets, RebalancerConfig
from kafka_rebalancer.model.schemas import PARTITION_CHANGES, SKIPPED
from kafka_rebalancer.model.units import human_bytes
from kafka_rebalancer.operations.replication_factor import requested_topics, target_warnings
from kafka_rebalancer.plan.changes import role_loads_of


@dataclass(frozen=True)
class ReplicationFactorPlan:
    changes: pd.DataFrame  # PARTITION_CHANGES
    cannot: pd.DataFrame  # SKIPPED: the partitions of the topics left at their replication factor, with why
    summary: dict[str, Any]  # the plan summary's `replication_factor`


@dataclass
class _Brokers:
    """The cluster's brokers as the placement counts them: rack, pool, whether each takes replicas, and its load
    per resource against its pool's mean and band, updated as replicas are added and removed."""

    rack: dict[int, str]
    taking: dict[str, list[int]]  # pool -> brokers that take replicas
    load: dict[int, np.ndarray]  # broker -> load per resource
    mean: dict[str, np.ndarray]  # pool -> its mean load per resource (per broker, against capacity)
    upper: dict[str, np.ndarray]  # pool -> the band's upper edge per resource (usage)
    capacity: dict[int, np.ndarray]

    def usage(self, broker: int, extra: np.ndarray) -> np.ndarray:
        capacity = self.capacity.get(broker)
        if capacity is None:
            return np.zeros(len(extra))
        return np.where(capacity > 0, (self.load[broker] + extra) / np.where(capacity > 0, capacity, 1.0), 0.0)

    def balance_key(self, broker: int, pool: str, extra: np.ndarray) -> tuple[int, float]:
        """(resources outside the band, the highest usage against the pool's mean) once `extra` lands on it."""
        usage = self.usage(broker, extra)
        mean, upper = self.mean.get(pool), self.upper.get(pool)
        outside = int(np.sum(usage > upper + 1e-12)) if upper is not None else 0
        relative = usage / np.where(mean > 0, mean, 1.0) if mean is not None else usage
        return outside, float(relative.max(initial=0.0))


def _brokers(brokers: pd.DataFrame, load: pd.DataFrame, bands: pd.DataFrame, names: list[str],
             cordoned: frozenset[int]) -> _Brokers:
    rack = {int(b): (str(r) if isinstance(r, str) and r else f"#{int(b)}")
            for b, r in zip(brokers["broker_id"], brokers["rack"], strict=True)}
    taking: dict[str, list[int]] = {}
    for b, pool, alive, excluded in zip(brokers["broker_id"], brokers["broker_pool"], brokers["alive"],
                                        brokers["excluded"], strict=True):
        if isinstance(pool, str) and bool(alive) and not bool(excluded) and int(b) not in cordoned:
            taking.setdefault(pool, []).append(int(b))
    wide = load.pivot_table(index="broker_id", columns="resource", values=["load", "capacity"], aggfunc="first")
    loads = {int(b): wide.loc[b, "load"].reindex(names).fillna(0.0).to_numpy(float) for b in wide.index}
    capacity = {int(b): wide.loc[b, "capacity"].reindex(names).fillna(0.0).to_numpy(float) for b in wide.index}
    edges = bands.pivot_table(index="broker_pool", columns="resource", values=["mean", "upper"], aggfunc="first")
    mean = {str(p): edges.loc[p, "mean"].reindex(names).fillna(0.0).to_numpy(float) for p in edges.index}
    upper = {str(p): edges.loc[p, "upper"].reindex(names).fillna(np.inf).to_numpy(float) for p in edges.index}
    return _Brokers(rack, {p: sorted(ids) for p, ids in taking.items()}, loads, mean, upper, capacity)


def replication_factor_plan(config: RebalancerConfig, partitions: pd.DataFrame, brokers: pd.DataFrame,
                            load: pd.DataFrame, bands: pd.DataFrame, patterns: Iterable[str], target: int,
                            min_insync: Mapping[str, int], cordoned: frozenset[int] = frozenset()
                            ) -> ReplicationFactorPlan:
    """`partitions`: the run's snapshot as planned (`snapshot.evacuation.as_planned`: a topic of no pool has its
    leader's pool); `brokers`, `load` (BROKER_LOAD), `bands` (BANDS): the snapshot's brokers, their loads and the
    pools' bands; `min_insync`: each topic's min.insync.replicas (the snapshot manifest's)."""
    resources = config.resource_list()
    names = [r.name for r in resources]
    topics = requested_topics(patterns, partitions["topic"].unique())
    chosen = partitions[partitions["topic"].isin(topics)].reset_index(drop=True)
    _, follow = role_loads_of(chosen, resources)
    state = _brokers(brokers, load, bands, names, cordoned)
    excluded = set(config.exclude.brokers) | {int(b) for b, x in zip(brokers["broker_id"], brokers["excluded"],
                                                                     strict=True) if bool(x)}
    spread, budget = _Spread(config, chosen, target, state.taking), _Budget(config.budgets)
    rows, cannot = [], []
    order = np.lexsort((chosen["partition"].to_numpy(), chosen["topic"].to_numpy(),
                        -chosen["size_bytes"].to_numpy("int64")))
    for i in order:
        row = chosen.iloc[i]
        topic, partition, pool = str(row["topic"]), int(row["partition"]), row["topic_pool"]
        old = [int(b) for b in row["replicas"]]
        if len(old) == target:
            continue
        size = int(row["size_bytes"])
        why = _why_not(old, [int(b) for b in row["isr"]], int(row["leader"]), pool, excluded) or \
            budget.why_not(max(target - len(old), 0), size)
        new = None if why else _resized(old, int(row["leader"]), target, str(pool), follow[i], state, spread, topic,
                                        budget.full())
        if new is None:
            cannot.append((topic, partition, pool if isinstance(pool, str) else None,
                           why or _short(old, target, state.taking.get(str(pool), []), pool, budget)))
            continue
        budget.take(old, new, size)
        rows.append((str(pool), topic, partition, old, new, size))
    changes = pd.DataFrame(sorted(rows, key=lambda r: (r[1], r[2])), columns=PARTITION_CHANGES.names)
    skipped = pd.DataFrame(sorted(cannot, key=lambda r: (r[0], r[1])), columns=SKIPPED.names)
    return ReplicationFactorPlan(changes, skipped, _summary(chosen, changes, skipped, target, min_insync))


def _short(old: list[int], target: int, taking: list[int], pool: object, budget: _Budget) -> str:
    """Why `_resized` found no placement: too few brokers in the pool, or those there at their move budget."""
    full = f"at max_moves_per_broker={budget.budgets.max_moves_per_broker} (config budgets)"
    if target < len(old):
        return f"every follower's broker is {full}"
    free = [b for b in taking if b not in old]
    if len(free) >= target - len(old):
        return f"of the {len(free)} broker(s) of pool {pool!r} that could take its replicas, too many are {full}"
    return (f"pool {pool!r} has {len(free)} broker(s) taking replicas besides the partition's {len(old)}: too few for "
            f"{target} replicas")


class _Budget:
    """The run's budgets (config `budgets`, as the validation holds every plan to them) spent as partitions change:
    replica copies, bytes copied, and changes touching each broker (a replica added or removed there)."""

    def __init__(self, budgets: Budgets) -> None:
        self.budgets = budgets
        self.copies = self.bytes = 0
        self.per_broker: dict[int, int] = {}

    def why_not(self, copies: int, size: int) -> str | None:
        limit = self.budgets
        if self.copies + copies > limit.max_replica_moves:
            return f"the run's budget max_replica_moves={limit.max_replica_moves} is spent (config budgets)"
        if limit.max_moved_bytes is not None and self.bytes + copies * size > limit.max_moved_bytes:
            return f"the run's budget max_moved_bytes={limit.max_moved_bytes} is spent (config budgets)"
        return None

    def full(self) -> frozenset[int]:
        """The brokers at max_moves_per_broker."""
        most = self.budgets.max_moves_per_broker
        return frozenset() if most is None else frozenset(b for b, n in self.per_broker.items() if n >= most)

    def take(self, old: list[int], new: list[int], size: int) -> None:
        added = set(new) - set(old)
        self.copies, self.bytes = self.copies + len(added), self.bytes + len(added) * size
        for b in added | (set(old) - set(new)):
            self.per_broker[b] = self.per_broker.get(b, 0) + 1


def _why_not(old: list[int], isr: list[int], leader: int, pool: object, excluded: set[int]) -> str | None:
    """Why a partition's replicas may not change now (None: they may)."""
    if leader < 0:
        return "no leader"
    if not set(old) <= set(isr):
        return f"under-replicated: ISR {isr} of replicas {old} (wait until it is in sync)"
    if set(old) & excluded:
        return f"a replica on an excluded broker ({sorted(set(old) & excluded)}: exclude.brokers)"
    if not isinstance(pool, str):
        return "no pool takes its replicas: the topic has no pool, nor has its leader's broker"
    return None


class _Spread:
    """Per (topic, broker) the replicas held, against the topic spread's cap and target with the topic at the
    target replication factor (`model.topic_spread`: target ceil(share) + margin, cap max(held before, target))."""

    def __init__(self, config: RebalancerConfig, chosen: pd.DataFrame, target: int,
                 taking: Mapping[str, list[int]]) -> None:
        self.settings = config.topic_spread
        self.held: dict[tuple[str, int], int] = {}
        per_pool: dict[tuple[str, str], int] = {}
        for topic, pool, replicas in zip(chosen["topic"], chosen["topic_pool"], chosen["replicas"], strict=True):
            for b in replicas:
                self.held[(topic, int(b))] = self.held.get((topic, int(b)), 0) + 1
            key = (str(topic), str(pool))
            per_pool[key] = per_pool.get(key, 0) + max(target, len(replicas))
        self.before = dict(self.held)
        self.target = {key: -(-total // max(len(taking.get(key[1], [])), 1)) + self.settings.margin
                       for key, total in per_pool.items()}

    def over(self, topic: str, pool: str, broker: int) -> tuple[bool, bool]:
        """(over the cap, over the target) once the broker takes one more replica of the topic."""
        if not self.settings.enabled or self.settings.excluded(topic):
            return False, False
        held, target = self.held.get((topic, broker), 0) + 1, self.target.get((topic, pool), 0)
        return held > max(self.before.get((topic, broker), 0), target), held > target

    def count(self, topic: str, broker: int, step: int) -> None:
        self.held[(topic, broker)] = self.held.get((topic, broker), 0) + step


def _resized(old: list[int], leader: int, target: int, pool: str, follow: np.ndarray, state: _Brokers,
             spread: _Spread, topic: str, full: frozenset[int]) -> list[int] | None:
    """The partition's replicas at the target (the leader first), the brokers' loads and counts updated; None
    when its pool has too few brokers, not counting those `full` (at their move budget)."""
    replicas = [leader, *(b for b in old if b != leader)]
    if target > len(old):
        free = [b for b in state.taking.get(pool, []) if b not in old and b not in full]
        if len(free) < target - len(old):
            return None
        def rank(broker: int) -> tuple[bool, bool, bool, int, float, int]:
            over_cap, over_target = spread.over(topic, pool, broker)
            return (over_cap, state.rack[broker] in {state.rack[b] for b in replicas}, over_target,
                    *state.balance_key(broker, pool, follow), broker)

        for _ in range(target - len(old)):
            best = min(free, key=rank)
            free.remove(best)
            replicas.append(best)
            state.load[best] = state.load.get(best, np.zeros(len(follow))) + follow
            spread.count(topic, best, 1)
        return replicas
    if len([b for b in replicas[1:] if b not in full]) < len(replicas) - target:
        return None
    while len(replicas) > target:
        followers = [b for b in replicas[1:] if b not in full]
        racks = [state.rack[b] for b in replicas]
        worst = max(followers, key=lambda b: (racks.count(state.rack[b]) > 1,
                                              state.balance_key(b, pool, np.zeros(len(follow)))[1], b))
        replicas.remove(worst)
        if worst in state.load:
            state.load[worst] = state.load[worst] - follow
        spread.count(topic, worst, -1)
    return replicas


def _summary(chosen: pd.DataFrame, changes: pd.DataFrame, cannot: pd.DataFrame, target: int,
             min_insync: Mapping[str, int]) -> dict[str, Any]:
    """Per topic: its partitions, replication factor before (lowest..highest) and after, bytes copied (added
    replicas) and freed (removed ones), min.insync.replicas; the warnings; the partitions left as they are."""
    added = changes.assign(
        copied=[len(set(n) - set(o)) * s for o, n, s in zip(changes["old_replicas"], changes["new_replicas"],
                                                             changes["size_bytes"], strict=True)],
        freed=[len(set(o) - set(n)) * s for o, n, s in zip(changes["old_replicas"], changes["new_replicas"],
                                                            changes["size_bytes"], strict=True)])
    topics: dict[str, Any] = {}
    for topic, group in chosen.groupby("topic", sort=True):
        rf = group["replicas"].map(len)
        mine = added[added["topic"] == topic]
        topics[str(topic)] = {
            "partitions": len(group), "rf_before": _range(int(rf.min()), int(rf.max())),
            "rf_after": target, "partitions_changed": len(mine),
            "partitions_left": int((cannot["topic"] == topic).sum()),
            "copied_bytes": int(mine["copied"].sum()), "freed_bytes": int(mine["freed"].sum()),
            "min_insync_replicas": min_insync.get(str(topic))}
    return {"target": target, "topics": topics, "warnings": target_warnings(target, {
        t: n for t, n in min_insync.items() if t in topics}), "partitions_left": len(cannot)}


def _range(low: int, high: int) -> str:
    return str(low) if low == high else f"{low}..{high}"


RESIZE_HEADER = ["topic", "partitions", "replication factor", "bytes copied", "bytes freed", "min.insync.replicas",
                 "left as they are"]


def resize_rows(facts: Mapping[str, Any]) -> list[list[str]]:
    """The summary's `replication_factor`, a row per topic as text (RESIZE_HEADER), for the approval body, `show`
    and the report; a min.insync.replicas the target equals says so."""
    rows = []
    for topic, t in sorted(facts["topics"].items()):
        min_isr = t["min_insync_replicas"]
        rows.append([topic, str(t["partitions"]), f"{t['rf_before']} → {t['rf_after']}", human_bytes(t["copied_bytes"]),
                     human_bytes(t["freed_bytes"]), "-" if min_isr is None else f"{min_isr}" + (
                         " (= the target: one broker down stops acks=all writes)" if min_isr == t["rf_after"] else ""),
                     str(t["partitions_left"])])
    return rows
