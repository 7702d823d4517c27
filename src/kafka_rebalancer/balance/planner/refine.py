"""After balancing: a smaller plan with the same result.

Actions that turned out unnecessary are reverted (latest first), and a replica move is made with a smaller
replica of the same source where that one does as well, moving the plan towards the lower bound of data moved.
Only the final state is executed, so either changes the plan, never its outcome for the bands.
"""

from __future__ import annotations

import numpy as np

from kafka_rebalancer.balance.planner.constraints import EPS, Constraints
from kafka_rebalancer.balance.planner.state import LEADERSHIP, REPLICA, Move, PlanState


def prune(state: PlanState, constraints: Constraints) -> None:
    """Revert actions (latest first) whose revert leaves every broker they touched inside its bands or no
    further out, and keeps every placement rule: a smaller plan with the same result."""
    m = state.model
    acceptance = constraints.acceptance
    dropped: set[int] = set()
    later: set[int] = set()  # partitions that later, kept actions depend on
    for seq, group in sorted(state.actions().items(), reverse=True):
        partitions = {int(m.r_pindex[mv.replica]) for mv in group}
        if any(mv.forced for mv in group) or partitions & later or not _revertible(state, constraints, group):
            later |= partitions
            continue
        if len(group) == 1 and group[0].action == REPLICA:  # most actions: judged without changing the model
            mv = group[0]
            if acceptance.no_further_out(mv.target, mv.source, m.r_load[mv.replica]):
                state.restore(group)
                dropped.add(seq)
            else:
                later |= partitions
            continue
        touched = sorted({b for mv in group for b in (mv.source, mv.target)})
        before = acceptance.status(touched)
        state.restore(group)
        after = acceptance.status(touched)
        if np.all((after <= before) | (after <= EPS)):
            dropped.add(seq)
        else:
            state.replay(group)
            later |= partitions
    state.drop(dropped)


def _revertible(state: PlanState, constraints: Constraints, group: list[Move]) -> bool:
    """The action's revert is possible as it stands: a leadership transfer's new leader still leads and its old
    one is still in the partition; a moved replica is still on its target and may go back to its source."""
    m = state.model
    if group[0].action == LEADERSHIP:
        return all(int((m.r_broker[m.partition_rows(mv.replica)] == mv.source).sum()) == 1
                   and m.r_is_leader[mv.replica] for mv in group)
    return all(m.r_broker[mv.replica] == mv.target
               and constraints.placement.allows(mv.replica, mv.target, mv.source, undo=True) for mv in group)


def substitute(state: PlanState, constraints: Constraints) -> None:
    """For each replica move, largest first: if a smaller replica of the same source, moved to the same target
    instead, leaves both brokers inside their bands (or no further out) and keeps the placement rules, move that
    one instead. Only the final state matters, so this copies fewer bytes for the same result."""
    m = state.model
    singles = [g[0] for g in state.actions().values()
               if len(g) == 1 and g[0].action == REPLICA and not g[0].forced]
    # Partitions with several actions keep them (they depend on each other), and a substitute must come from a
    # partition no action touches (its move takes the replaced move's place in the sequence).
    actions = state.actions_per_partition()
    fixed, touched = actions > 1, actions > 0
    replaced: dict[int, Move] = {}
    # Disk's load is the replica's size: the candidates inside disk's window are a slice of those sorted by size.
    disk = state.names.index("disk") if "disk" in state.names else None
    for mv in sorted(singles, key=lambda mv: (-int(m.r_size[mv.replica]), mv.seq)):
        r, s, t = mv.replica, mv.source, mv.target
        if fixed[m.r_pindex[r]] or m.r_broker[r] != t:
            continue
        k = state.names.index(mv.resource)
        rs, sizes, columns = state.movable_by_size(s, k)
        last = int(np.searchsorted(sizes, m.r_size[r]))  # the smaller ones
        if not last:
            continue
        before = constraints.acceptance.status([s, t])
        # With r back on s and a candidate moved instead, s and t stay inside their bands or no further out
        # (distance <= max(before, EPS)) exactly when each of the candidate's loads lies in a window: checked a
        # resource at a time over contiguous columns (few candidates pass them all).
        lo, hi = _window(constraints, s, t, m.load[s] + m.r_load[r], m.load[t] - m.r_load[r], before)
        first = 0
        if disk is not None:
            if np.isnan(lo[disk]) or np.isnan(hi[disk]):
                continue  # as the comparisons below: nothing lies in a window with an undefined edge
            first = int(np.searchsorted(columns[disk, :last], lo[disk], "left"))
            last = int(np.searchsorted(columns[disk, :last], hi[disk], "right"))
        if first >= last:
            continue
        inside = np.ones(last - first, dtype=bool)
        for column, low, high in zip(columns[:, first:last], lo.tolist(), hi.tolist(), strict=True):
            inside &= column >= low
            inside &= column <= high
        # The candidates' placement does not depend on where r is (another partition): the model changes only
        # when one is chosen. Already in size order: the first that fits is the smallest.
        ok = rs[first:last][inside]
        ok = ok[~touched[m.r_pindex[ok]]]
        ok = ok[constraints.placement.allows_many(ok, t)]
        if not len(ok):
            continue
        chosen = int(ok[0])
        m.move(r, s)
        m.move(chosen, t)
        replaced[mv.seq] = state.substitute(mv, chosen)
        fixed[m.r_pindex[chosen]] = touched[m.r_pindex[chosen]] = True
    state.plan.moves = [replaced.get(mv.seq, mv) for mv in state.plan.moves]


def _window(constraints: Constraints, s: int, t: int, base_s: np.ndarray, base_t: np.ndarray,
            before: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per resource, the loads l that s (at base_s, giving l) and t (at base_t, taking l) can exchange while each
    stays within its distance `before` of its band (or EPS): distance(u) <= D means lower - D <= u <= limit + D,
    solved for l (one comparison per load instead of a distance per load)."""
    acceptance = constraints.acceptance
    lower, limit = acceptance.lower_of, acceptance.limit_of
    cap_s, cap_t = acceptance.model.capacity[s], acceptance.model.capacity[t]
    d_s, d_t = np.maximum(before[0], EPS), np.maximum(before[1], EPS)
    with np.errstate(invalid="ignore"):  # unbalanced resources: infinite edges give infinite bounds
        lo = np.maximum(base_s - (limit[s] + d_s) * cap_s, (lower[t] - d_t) * cap_t - base_t)
        hi = np.minimum(base_s - (lower[s] - d_s) * cap_s, (limit[t] + d_t) * cap_t - base_t)
    return lo, hi
