"""A lower bound on the bytes any plan must copy to bring a pool inside its bands.

DESIGN §5's bound is per resource, in the resource's unit: `LB = max(sum of excess above the band, sum of
deficit below it)`. The plan's cost is bytes, though, and fixing network in or replica counts also copies bytes.
Per resource, a valid minimum in bytes:
- disk: its LB itself;
- replica count: an over-full broker must give away at least its excess in replicas, at best its smallest ones;
- network in (any load every replica carries alike): shed the excess with the replicas carrying the most of it
  per byte (a fractional knapsack, which no whole-replica choice can beat); the under-loaded brokers together
  must receive their deficits in distinct replicas from anywhere in the pool, at best the same way;
- leader count, network out and CPU can be fixed by leadership changes alone: no bytes.
Forced moves (dead brokers, replicas outside their pool) copy their bytes whatever the balance. The maximum of
these bounds is a bound.
"""

from __future__ import annotations

import numpy as np

from kafka_rebalancer.balance.model import PoolModel

EPS = 1e-9


def _knapsack_bytes(load: np.ndarray, size: np.ndarray, amount: float) -> float:
    """Fewest bytes carrying `amount` of load, taking replicas (fractionally) by load per byte, best first."""
    if amount <= EPS:
        return 0.0
    useful = load > 0
    load, size = load[useful], size[useful].astype(float)
    order = np.argsort(-(load / np.maximum(size, 1.0)), kind="stable")
    carried = np.cumsum(load[order])
    full = int(np.searchsorted(carried, amount - EPS))
    if full >= len(order):
        return float(size.sum())
    before = carried[full - 1] if full else 0.0
    fraction = (amount - before) / load[order][full]
    return float(size[order][:full].sum() + fraction * size[order][full])


def byte_lower_bound(model: PoolModel, lower: np.ndarray, upper: np.ndarray, balanced: list[int],
                     forced_bytes: int) -> float:
    """The bound for the model's current state (before balancing); `forced_bytes` already moved by force."""
    best = float(forced_bytes)
    eligible = np.flatnonzero(model.eligible)
    movable = model.r_movable & ~model.r_must_move
    for k in balanced:
        res = model.resources[k]
        if res.role_dependent:
            continue
        load, cap = model.load[:, k], model.capacity[:, k]
        excess = np.maximum(load - upper[k] * cap, 0.0)
        deficit = np.maximum(lower[k] * cap - load, 0.0)
        shed = 0.0
        for b in eligible[excess[eligible] > EPS]:
            mine = model.replicas_on(int(b))
            mine = mine[movable[mine]]
            if res.is_count:
                shed += float(np.sort(model.r_size[mine])[: int(np.ceil(excess[b] - EPS))].sum())
            else:
                shed += _knapsack_bytes(model.r_load[mine, k], model.r_size[mine], excess[b])
        needed = float(deficit[eligible].sum())
        pool = np.flatnonzero(movable)
        if res.is_count:
            receive = float(np.sort(model.r_size[pool])[: int(np.ceil(needed - EPS))].sum()) if needed > EPS else 0.0
        else:
            receive = _knapsack_bytes(model.r_load[pool, k], model.r_size[pool], needed)
        best = max(best, shed, receive)
    return best
