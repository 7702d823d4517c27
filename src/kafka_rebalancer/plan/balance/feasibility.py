"""Proofs that some (broker, resource) pairs cannot be brought inside their band.

A closed group is a set of brokers between which a resource's load can only move among themselves: the pool's
eligible brokers for every resource, and, when every movable partition has one replica per rack of the pool
(RF = racks, and rack diversity may not drop), each rack for the loads every replica carries alike (disk,
network in, replica count). Within a group, under the acceptance rule (a broker losing load stays at or above
the lower edge, one gaining stays at or below the upper edge):

- an over-loaded broker can shed only what it can move, and only into the room the group's other brokers have
  below their upper edges: if the smallest k excesses already exceed that room, at most k - 1 can be fixed;
- an under-loaded broker can gain only what the group's other brokers hold above their lower edges.

Each bound ignores granularity (a replica moves whole), so it is a lower bound on the pairs that stay outside.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kafka_rebalancer.plan.balance.model import PoolModel

EPS = 1e-9
RACK_LOCKED = frozenset({"disk", "network_in", "replica_count"})


@dataclass(frozen=True)
class Infeasible:
    resource: str
    brokers: tuple[int, ...]  # the group's brokers
    count: int  # at least this many of them stay outside the band
    proof: str


def _fixable(amounts: np.ndarray, capacity: float) -> int:
    """How many of `amounts` fit into `capacity` at most (smallest first)."""
    return int(np.searchsorted(np.cumsum(np.sort(amounts)), capacity + EPS, side="right"))


def _group_bound(model: PoolModel, k: int, group: np.ndarray, lower: float, upper: float,
                 removable: np.ndarray) -> tuple[int, int, str]:
    load = model.load[group, k]
    cap = model.capacity[group, k]
    low, high = lower * cap, upper * cap
    over, under = load > high + EPS, load < low - EPS
    excess, deficit = load - high, low - load
    stuck_over = over & (load - removable[group] > high + EPS)
    room = np.maximum(high - load, 0)[~over].sum()
    over_fixable = _fixable(excess[over & ~stuck_over], room)
    unfixable_over = int(over.sum()) - over_fixable
    spare = np.minimum(np.maximum(load - low, 0), removable[group])[~under].sum()
    unfixable_under = int(under.sum()) - _fixable(deficit[under], spare)
    reason = []
    if unfixable_over:
        reason.append(f"{int(over.sum())} over by {excess[over].sum():.4g} in total "
                      f"({int(stuck_over.sum())} with too little movable load), room below the upper edge "
                      f"{room:.4g}: at least {unfixable_over} stay over")
    if unfixable_under:
        reason.append(f"{int(under.sum())} under by {deficit[under].sum():.4g} in total, load above the lower edge "
                      f"{spare:.4g}: at least {unfixable_under} stay under")
    return unfixable_over, unfixable_under, "; ".join(reason)


def _sorted_unique(values: np.ndarray) -> np.ndarray:
    """np.unique of integers by a sort: numpy's own (hash-based since 2.x) took 0.7 s for the 1.5 million rows of a
    1,000-broker pool where a sort takes 0.04 s."""
    ordered = np.sort(values)
    return ordered[np.r_[True, ordered[1:] != ordered[:-1]]] if len(ordered) else ordered


def prove_infeasible(model: PoolModel, lower: np.ndarray, upper: np.ndarray, balanced: list[int],
                     fixed: np.ndarray) -> list[Infeasible]:
    """Bounds for the current state; `fixed` marks replicas that may no longer move (e.g. forced moves)."""
    eligible = np.flatnonzero(model.eligible)
    out: list[Infeasible] = []
    if not len(eligible):
        return out
    free = model.r_movable & ~fixed
    movable_partitions = _sorted_unique(model.r_pindex[free])
    row_rack = model.rack[model.r_broker]
    width = int(row_rack.max()) + 1 if len(row_rack) else 1
    distinct = np.bincount(_sorted_unique(model.r_pindex * width + row_rack) // width, minlength=len(model.p_start))
    rack_locked = (model.n_racks > 1 and len(movable_partitions) > 0
                   and bool(np.all(model.p_count[movable_partitions] == model.n_racks))
                   and bool(np.all(distinct[movable_partitions] == model.n_racks)))
    for k in balanced:
        res = model.resources[k]
        per_row = np.where(free, model.r_load[:, k], 0.0)
        if res.role_dependent:  # a leader that stays can still hand its leadership over
            per_row = per_row + np.where(~free & model.r_is_leader & model.p_leadership_ok[model.r_pindex],
                                         model.r_lead[:, k] - model.r_follow[:, k], 0.0)
        removable = np.bincount(model.r_broker, weights=per_row, minlength=len(model.broker_ids))
        groups = [("the pool", eligible)]
        if rack_locked and res.name in RACK_LOCKED:
            groups += [(f"rack {model.rack_names[eligible[model.rack[eligible] == rk][0]]}",
                        eligible[model.rack[eligible] == rk]) for rk in np.unique(model.rack[eligible])]
        pool_bound = rack_bound = (0, 0)
        proofs: dict[str, tuple[tuple[int, ...], int, str]] = {}
        for name, group in groups:
            o, u, reason = _group_bound(model, k, group, lower[k], upper[k], removable)
            if name == "the pool":
                pool_bound = (o, u)
            else:
                rack_bound = (rack_bound[0] + o, rack_bound[1] + u)
            if o + u:
                proofs[name] = (tuple(int(b) for b in model.broker_ids[group]), o + u, reason)
        # Racks partition the pool: the larger of the two bounds holds, per direction.
        use_racks = rack_bound[0] + rack_bound[1] > pool_bound[0] + pool_bound[1]
        for name, (brokers, count, reason) in proofs.items():
            if (name == "the pool") != use_racks:
                suffix = " (one replica of every partition per rack)" if name != "the pool" else ""
                out.append(Infeasible(res.name, brokers, count, f"{name}{suffix}: {reason}"))
    return out
