"""After balancing: a smaller plan with the same result.

Actions that turned out unnecessary are reverted (latest first), a replica that passed through a broker goes
straight on (`shortcut`), a replica move is made with a smaller replica of the same source where that one does
as well, moving the plan towards the lower bound of data moved, and a replica that came back home leaves the log
(`drop_round_trips`).
Only the final state is executed, so either changes the plan, never its outcome for the bands.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from kafka_rebalancer.plan.balance.planner.constraints import EPS, Constraints
from kafka_rebalancer.plan.balance.planner.state import LEADERSHIP, REPLICA, Move, PlanState

REFINE_BATCH = 256  # single moves judged at once by prune and substitute


class _Batched:
    """Answers about moves taken in a fixed order, worked out REFINE_BATCH at a time (one vectorised call) as the
    model stands; an answer holds while neither of its move's brokers changes (`change`), after which the batch is
    worked out again from that move."""

    def __init__(self, moves: list[Move], work_out: Callable[[list[Move]], list[Any]]) -> None:
        self.moves = moves
        self.position = {mv.seq: i for i, mv in enumerate(moves)}
        self.work_out = work_out
        self.answers: dict[int, Any] = {}
        self.changed: set[int] = set()  # brokers whose loads changed since the batch was worked out

    def __getitem__(self, mv: Move) -> Any:
        if mv.seq not in self.answers or mv.source in self.changed or mv.target in self.changed:
            i = self.position[mv.seq]
            batch = self.moves[i:i + REFINE_BATCH]
            self.answers = dict(zip((b.seq for b in batch), self.work_out(batch), strict=True))
            self.changed = set()
        return self.answers[mv.seq]

    def change(self, brokers: Iterable[int]) -> None:
        self.changed.update(brokers)


def _rows(batch: list[Move]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The batch's sources, targets and replica rows."""
    sources, targets, replicas = (np.array([getattr(mv, name) for mv in batch], dtype=np.int64)
                                  for name in ("source", "target", "replica"))
    return sources, targets, replicas


def prune(state: PlanState, constraints: Constraints) -> None:
    """Revert actions (latest first) whose revert leaves every broker they touched inside its bands or no
    further out, and keeps every placement rule: a smaller plan with the same result."""
    m = state.model
    acceptance = constraints.acceptance
    dropped: set[int] = set()
    later: set[int] = set()  # partitions that later, kept actions depend on
    actions = sorted(state.actions().items(), reverse=True)
    # Most actions are single replica moves, judged from the loads without changing the model, in batches.
    singles = {seq: group[0] for seq, group in actions if len(group) == 1 and group[0].action == REPLICA}

    def revertible_by_loads(batch: list[Move]) -> list[bool]:
        sources, targets, rows = _rows(batch)
        return acceptance.no_further_out_many(targets, sources, m.r_load[rows]).tolist()

    judged = _Batched(list(singles.values()), revertible_by_loads)

    for seq, group in actions:
        partitions = {int(m.r_pindex[mv.replica]) for mv in group}
        if any(mv.forced for mv in group) or partitions & later:
            later |= partitions
            continue
        mv = singles.get(seq)
        if mv is not None:
            if judged[mv] and _revertible(state, constraints, group):
                state.restore(group)
                dropped.add(seq)
                judged.change((mv.source, mv.target))
            else:
                later |= partitions
            continue
        if not _revertible(state, constraints, group):
            later |= partitions
            continue
        touched = sorted({b for mv in group for b in (mv.source, mv.target)})
        judged.change(touched)  # a trial taken back may not restore the loads to the last bit
        before = acceptance.status(touched)
        state.restore(group)
        after = acceptance.status(touched)
        if np.all((after <= before) | (after <= EPS)) and _spread_kept(constraints, group):
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
        # (the topic spread's leader caps are checked once the transfers are taken back: `_spread_kept`)
        return all(int((m.r_broker[m.partition_rows(mv.replica)] == mv.source).sum()) == 1
                   and m.r_is_leader[mv.replica] for mv in group)
    return all(m.r_broker[mv.replica] == mv.target
               and constraints.placement.allows(mv.replica, mv.target, mv.source, undo=True) for mv in group)


def _spread_kept(constraints: Constraints, group: list[Move]) -> bool:
    """After an action was taken back: the brokers it gave back to hold no topic above its caps."""
    spread = constraints.spread
    return spread is None or spread.cells_within(np.array([mv.replica for mv in group], dtype=np.int64),
                                                 np.array([mv.source for mv in group], dtype=np.int64))


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
    ordered = sorted(singles, key=lambda mv: (-int(m.r_size[mv.replica]), mv.seq))
    # With r back on s and a candidate moved instead, s and t stay inside their bands or no further out
    # (distance <= max(before, EPS)) exactly when each of the candidate's loads lies in a window. The windows of a
    # batch of moves are worked out at once (`_Batched`).

    def windows_of(batch: list[Move]) -> list[tuple[np.ndarray, np.ndarray]]:
        s, t, rows = _rows(batch)
        lo, hi = _window(constraints, s, t, m.load[s] + m.r_load[rows], m.load[t] - m.r_load[rows],
                         constraints.acceptance.status(s), constraints.acceptance.status(t))
        return list(zip(lo, hi, strict=True))

    windows = _Batched(ordered, windows_of)

    for mv in ordered:
        r, s, t = mv.replica, mv.source, mv.target
        if fixed[m.r_pindex[r]] or m.r_broker[r] != t:
            continue
        k = state.names.index(mv.resource)
        rs, sizes, columns = state.movable_by_size(s, k)
        last = int(np.searchsorted(sizes, m.r_size[r]))  # the smaller ones
        if not last:
            continue
        # Checked a resource at a time over contiguous columns (few candidates pass them all).
        lo, hi = windows[mv]
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
        if constraints.spread is not None and not constraints.spread.allows(r, s):
            continue  # r back on s: other replicas of its topic may have come to s since
        m.move(r, s)
        m.move(chosen, t)
        windows.change((s, t))
        replaced[mv.seq] = state.substitute(mv, chosen)
        fixed[m.r_pindex[chosen]] = touched[m.r_pindex[chosen]] = True
    state.plan.moves = [replaced.get(mv.seq, mv) for mv in state.plan.moves]


def shortcut(state: PlanState, constraints: Constraints) -> None:
    """Where a broker b took a replica x (from a) and gave a replica y (to c), x goes to c directly and y stays on
    b, if b and c stay inside their bands or no further out and x may go to c: every broker keeps its replica
    count, and y's bytes are not copied (nor x's, when c is a and x stays home). Largest y first; a rerouted x may
    be rerouted again from c. Only single moves of partitions no other action touches take part."""
    m = state.model
    placement = constraints.placement
    once = state.actions_per_partition() == 1
    # Per broker, the replica moves into and out of it, by replica row (a swap's halves each count).
    into: dict[int, dict[int, Move]] = {}
    out_of: dict[int, dict[int, Move]] = {}
    for mv in state.plan.moves:
        if mv.action == REPLICA and not mv.forced and once[m.r_pindex[mv.replica]]:
            into.setdefault(mv.target, {})[mv.replica] = mv
            out_of.setdefault(mv.source, {})[mv.replica] = mv
    replaced: dict[tuple[int, int], Move | None] = {}
    for b in sorted(set(into) & set(out_of)):
        for y in sorted(out_of[b].values(), key=lambda mv: (-int(m.r_size[mv.replica]), mv.seq)):
            if not into.get(b) or y.replica not in out_of[b]:
                continue
            c = y.target
            if not placement.allows(y.replica, c, b, undo=True):
                continue
            taken = list(into[b].values())
            xs = np.array([mv.replica for mv in taken], dtype=np.int64)
            before = constraints.acceptance.status([b, c])
            # x and y change places between b and c: b gives c the load of x and takes y's back.
            lo, hi = _window(constraints, b, c, m.load[b] + m.r_load[y.replica], m.load[c] - m.r_load[y.replica],
                             before[0], before[1])
            loads = m.r_load[xs]
            fits = np.flatnonzero(np.all((loads >= lo) & (loads <= hi), axis=1))
            # Home first (nothing copied at all), then the x closest to y's size (b and c change least).
            home = np.array([taken[i].source == c for i in fits], dtype=bool)
            gap = np.abs(m.r_size[xs[fits]] - m.r_size[y.replica])
            for i in fits[np.lexsort((gap, ~home))]:
                x = taken[int(i)]
                if placement.allows(x.replica, b, c, undo=x.source == c):
                    break
            else:
                continue
            m.move(y.replica, b)
            m.move(x.replica, c)
            rerouted = state.reroute(x, y)
            replaced[(y.seq, y.replica)] = None
            replaced[(x.seq, x.replica)] = rerouted
            del out_of[b][y.replica], into[c][y.replica], into[b][x.replica], out_of[x.source][x.replica]
            if rerouted is not None:
                into[c][x.replica] = out_of[x.source][x.replica] = rerouted
    state.plan.moves = [moved for mv in state.plan.moves
                        if (moved := replaced.get((mv.seq, mv.replica), mv)) is not None]


def drop_round_trips(state: PlanState) -> None:
    """The replica moves of a replica back on its snapshot broker at the end (taken away by one action, home again
    by a later one) copy nothing: they leave the log and the counters. Not where its partition's leadership moved
    too: a leadership transfer's replay names the broker the replica was on at the time."""
    m = state.model
    led = {int(m.r_pindex[mv.replica]) for mv in state.plan.moves if mv.action == LEADERSHIP}
    home = {mv.replica for mv in state.plan.moves
            if mv.action == REPLICA and m.r_broker[mv.replica] == m.original_broker[mv.replica]
            and int(m.r_pindex[mv.replica]) not in led}
    if home:
        state.plan.moves = [mv for mv in state.plan.moves if not (mv.action == REPLICA and mv.replica in home)]
        state.recount()


def _window(constraints: Constraints, s: int | np.ndarray, t: int | np.ndarray, base_s: np.ndarray,
            base_t: np.ndarray, before_s: np.ndarray, before_t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per resource, the loads l that s (at base_s, giving l) and t (at base_t, taking l) can exchange while each
    stays within its distance (`before_s`, `before_t`) of its band (or EPS): distance(u) <= D means
    lower - D <= u <= limit + D, solved for l (one comparison per load instead of a distance per load). s and t
    may be arrays of brokers (one window per row)."""
    acceptance = constraints.acceptance
    lower, limit = acceptance.lower_of, acceptance.limit_of
    cap_s, cap_t = acceptance.model.capacity[s], acceptance.model.capacity[t]
    d_s, d_t = np.maximum(before_s, EPS), np.maximum(before_t, EPS)
    with np.errstate(invalid="ignore"):  # unbalanced resources: infinite edges give infinite bounds
        lo = np.maximum(base_s - (limit[s] + d_s) * cap_s, (lower[t] - d_t) * cap_t - base_t)
        hi = np.minimum(base_s - (lower[s] - d_s) * cap_s, (limit[t] + d_t) * cap_t - base_t)
    return lo, hi
