"""A lower bound on the bytes any plan must copy to bring a pool inside its bands.

The lower bound is per resource, in the resource's unit: `LB = max(sum of excess above the band, sum of
deficit below it)`. The plan's cost is bytes, though, and fixing network in or replica counts also copies bytes.
So, per broker and resource, a minimum in bytes:
- disk: the excess (or deficit) itself;
- replica count: an over-full broker gives away at least its excess in replicas, at best its smallest ones; an
  under-full one receives at least its deficit, at best the pool's smallest;
- network in (any load every replica carries alike): the replicas carrying the most of it per byte (a
  fractional knapsack, which no choice of whole replicas can beat);
- leader count, network out and CPU can be fixed by leadership changes alone: no bytes.
A broker must satisfy every resource at once, so it gives away (receives) at least the largest of its minima;
brokers give away (receive) distinct replicas, so these add up. Replicas that must move (off dead brokers, or
home from other pools) are copied whatever the balance, and they are given by brokers outside the pool's eligible
ones, so they add to what those give: computed on the state before any move (arrivals only add to excesses), the
bound is max(forced bytes + sum given, sum received).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from kafka_rebalancer.plan.balance.model import PoolModel

EPS = 1e-9


class _Knapsack:
    """Fewest bytes carrying a given load, taking replicas (fractionally) by load per byte, best first."""

    def __init__(self, load: np.ndarray, size: np.ndarray) -> None:
        useful = load > 0
        load, size = load[useful], np.maximum(size[useful].astype(float), 1.0)
        order = np.argsort(-(load / size), kind="stable")
        self.load, self.size = load[order], size[order]
        self.carried, self.bytes = np.cumsum(self.load), np.cumsum(self.size)

    def bytes_for(self, amount: float) -> float:
        if amount <= EPS or not len(self.load):
            return 0.0
        full = int(np.searchsorted(self.carried, amount - EPS))
        if full >= len(self.load):
            return float(self.bytes[-1])
        before_load = self.carried[full - 1] if full else 0.0
        before_bytes = self.bytes[full - 1] if full else 0.0
        return float(before_bytes + (amount - before_load) / self.load[full] * self.size[full])


def _smallest(sizes: np.ndarray, count: float) -> float:
    n = int(np.ceil(count - EPS))
    return float(np.sort(sizes)[:n].sum()) if n > 0 else 0.0


def fewest_bytes(excess: np.ndarray, deficit: np.ndarray, is_count: bool,
                 own_replicas: Callable[[int], tuple[np.ndarray, np.ndarray]], pool_load: np.ndarray,
                 pool_size: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For one resource, per broker: the fewest bytes it must give away to shed its excess (from its own
    replicas, `own_replicas(i)` = (loads, sizes)) and receive to fill its deficit (from the pool's replicas)."""
    pool_sizes = np.sort(pool_size.astype(float))
    pool_smallest = np.concatenate([[0.0], np.cumsum(pool_sizes)])
    pool_knapsack = None if is_count else _Knapsack(pool_load, pool_size)
    given, received = np.zeros(len(excess)), np.zeros(len(deficit))
    for i in np.flatnonzero(excess > EPS):
        loads, sizes = own_replicas(int(i))
        given[i] = _smallest(sizes, excess[i]) if is_count else _Knapsack(loads, sizes).bytes_for(excess[i])
    for i in np.flatnonzero(deficit > EPS):
        received[i] = (pool_smallest[min(int(np.ceil(deficit[i] - EPS)), len(pool_sizes))] if is_count
                       else pool_knapsack.bytes_for(deficit[i]))  # type: ignore[union-attr]  # set unless is_count
    return given, received


def byte_lower_bound(model: PoolModel, lower: np.ndarray, upper: np.ndarray, balanced: list[int]) -> float:
    """The bound, for the model's state before any move."""
    gives, receives = bytes_per_broker(model, lower, upper, balanced)
    forced = float(model.r_size[model.r_must_move].sum())
    return max(forced + float(gives.sum()), float(receives.sum()))


def bytes_per_broker(model: PoolModel, lower: np.ndarray, upper: np.ndarray,
                     balanced: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Per broker: the fewest bytes it must give away, and receive, to get inside every band."""
    movable = model.r_movable & ~model.r_must_move
    pool = np.flatnonzero(movable)
    gives = np.zeros(len(model.broker_ids))
    receives = np.zeros(len(model.broker_ids))
    for k in balanced:
        if model.resources[k].role_dependent:
            continue
        load, cap = model.load[:, k], model.capacity[:, k]
        excess = np.where(model.eligible, np.maximum(load - upper[k] * cap, 0.0), 0.0)
        deficit = np.where(model.eligible, np.maximum(lower[k] * cap - load, 0.0), 0.0)

        def own(b: int, k: int = k) -> tuple[np.ndarray, np.ndarray]:
            mine = model.replicas_on(b)
            mine = mine[movable[mine]]
            return model.r_load[mine, k], model.r_size[mine]

        given, received = fewest_bytes(excess, deficit, model.resources[k].is_count, own, model.r_load[pool, k],
                                       model.r_size[pool])
        gives, receives = np.maximum(gives, given), np.maximum(receives, received)
    return gives, receives
