"""The planning state of one pool: the `PoolModel` (assignment, leaders, per-broker loads) and what the plan has
done to it so far: the action log, which replicas moved, and the budgets used.

Every change goes through here, so the log and the counters always describe the model. An action is one entry
of the log under one sequence number: a replica move, a leadership transfer, or both halves of a swap. Only the
final state is executed (`kafka_rebalancer.plan.changes` replays the log), so an action can be taken back.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from kafka_rebalancer.model.schemas import HARD
from kafka_rebalancer.plan.balance.feasibility import Infeasible
from kafka_rebalancer.plan.balance.model import PoolModel

REPLICA, LEADERSHIP = "replica", "leadership"


@dataclass(frozen=True)
class Move:
    seq: int  # one action: a move, a leadership transfer, or both halves of a swap
    action: str  # REPLICA or LEADERSHIP
    replica: int  # the row moved, or the row that becomes leader
    source: int  # broker index giving the replica (or the leadership)
    target: int
    resource: str  # the resource this action fixes, or HARD for a forced move
    forced: bool = False


@dataclass
class PoolPlan:
    moves: list[Move] = field(default_factory=list)
    notes: list[tuple[str, int | None, str]] = field(default_factory=list)  # (resource, broker_id, text)
    hot: list[tuple[int, str, float, float]] = field(default_factory=list)  # (row, resource, load, band width)
    infeasible: list[Infeasible] = field(default_factory=list)
    lower_bound_bytes: float = 0.0


class PlanState:
    """The model being changed, the plan's log of actions, and the counters the budgets are checked against."""

    def __init__(self, model: PoolModel, names: list[str]) -> None:
        self.model = model
        self.names = names  # resource names by index, for the log
        self.plan = PoolPlan()
        self.moved = np.zeros(len(model.r_broker), dtype=bool)  # per replica row: moved by the plan
        self.broker_moves = np.zeros(len(model.broker_ids), dtype=np.int64)  # replica moves in or out, per broker
        self.moved_bytes = 0
        self.replica_moves = 0
        self._seq = 0
        # A broker that may not give (a manual operation's role) offers no replica to balancing moves.
        self._movable_originals = [rs[model.r_movable[rs] & model.gives[b]] for b, rs in
                                   enumerate(model.replicas_on(b) for b in range(len(model.broker_ids)))]
        # The loads of each broker's movable originals, side by side: the searches read them for every candidate,
        # and gathering them from the pool's rows costs a cache miss per replica. Kept until a leadership
        # transfer changes one of them.
        self._original_loads: dict[int, tuple[int, np.ndarray]] = {}
        # movable_on's answers (and their loads), kept until the loads or the moved flags of b's replicas change.
        self._moved_changes = np.zeros(len(model.broker_ids), dtype=np.int64)  # per original broker
        self._movable: dict[tuple[int, int], tuple[tuple[int, int], np.ndarray, np.ndarray]] = {}
        # movable_columns' answers, with the movable_loads array they were made from (the same object while kept).
        self._movable_columns: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
        # movable_by_size's answers, with the movable_on array they were made from.
        self._by_size: dict[tuple[int, int], tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}

    def movable_on(self, b: int, k: int) -> np.ndarray:
        """Replicas of b that may still move and carry load in k (a moved replica never moves again, so only
        b's own)."""
        return self.movable_with_loads(b, k)[0]

    def movable_loads(self, b: int, k: int) -> np.ndarray:
        """The loads (model.r_load rows) of `movable_on(b, k)`, in the same order."""
        return self.movable_with_loads(b, k)[1]

    def movable_columns(self, b: int, k: int) -> np.ndarray:
        """`movable_loads(b, k)` transposed: one contiguous row per resource, to test one resource over all of them
        (numpy is far slower along a six-column matrix's rows); kept as long as movable_loads."""
        loads = self.movable_loads(b, k)
        kept = self._movable_columns.get((b, k))
        if kept is not None and kept[0] is loads:
            return kept[1]
        columns = np.ascontiguousarray(loads.T)
        columns.flags.writeable = False
        self._movable_columns[(b, k)] = (loads, columns)
        return columns

    def movable_by_size(self, b: int, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`movable_on(b, k)` sorted by size (ties in its order), with their sizes and their `movable_columns`
        in that order: a size range is then a slice (found by binary search); kept as long as movable_on."""
        rs = self.movable_on(b, k)
        kept = self._by_size.get((b, k))
        if kept is not None and kept[0] is rs:
            return kept[1], kept[2], kept[3]
        order = np.argsort(self.model.r_size[rs], kind="stable")
        by_size = rs[order]
        sizes = self.model.r_size[by_size]
        columns = np.ascontiguousarray(self.movable_columns(b, k)[:, order])
        self._by_size[(b, k)] = (rs, by_size, sizes, columns)
        return by_size, sizes, columns

    def movable_with_loads(self, b: int, k: int) -> tuple[np.ndarray, np.ndarray]:
        """`movable_on(b, k)` and `movable_loads(b, k)` together."""
        version = (int(self.model.role_changes[b]), int(self._moved_changes[b]))
        kept = self._movable.get((b, k))
        if kept is not None and kept[0] == version:
            return kept[1], kept[2]
        rs, loads = self._movable_originals[b], self._loads_of_originals(b)
        keep = ~self.moved[rs] & (loads[:, k] > 0)
        rs, loads = rs[keep], loads.compress(keep, axis=0)  # compress: rows by mask, without fancy indexing's cost
        rs.flags.writeable = loads.flags.writeable = False  # shared by every caller until b changes
        self._movable[(b, k)] = (version, rs, loads)
        return rs, loads

    def _loads_of_originals(self, b: int) -> np.ndarray:
        version = int(self.model.role_changes[b])
        kept = self._original_loads.get(b)
        if kept is not None and kept[0] == version:
            return kept[1]
        loads = self.model.r_load.take(self._movable_originals[b], axis=0)
        self._original_loads[b] = (version, loads)
        return loads

    def _mark_moved(self, r: int, moved: bool) -> None:
        self.moved[r] = moved
        self._moved_changes[self.model.original_broker[r]] += 1

    # -- acting ----------------------------------------------------------------------------------------
    def apply(self, moves: list[tuple[int, int]], k: int | None, forced: bool = False,
              resource: str | None = None) -> None:
        """One action: a replica move (replica row, target broker), or both halves of a swap. k: the resource
        it fixes, None for a forced move; `resource`: the log's name for it instead."""
        label = resource or (HARD if k is None else self.names[k])
        for r, t in moves:
            s = int(self.model.r_broker[r])
            self.model.move(r, t)
            mv = Move(self._seq, REPLICA, r, s, t, label, forced)
            self._count([mv], 1)
            self.plan.moves.append(mv)
        self._seq += 1

    def apply_leadership(self, new_leaders: list[int], k: int | None, resource: str | None = None) -> None:
        """One action: a leadership transfer, or both halves of a leadership swap (k: the resource it fixes;
        `resource`: the log's name for it instead)."""
        m = self.model
        label = resource or self.names[k]  # type: ignore[index]  # k is given whenever resource is not
        for new_leader in new_leaders:
            old = m.transfer_leadership(new_leader)
            self.plan.moves.append(Move(self._seq, LEADERSHIP, new_leader, int(m.r_broker[old]),
                                        int(m.r_broker[new_leader]), label))
        self._seq += 1

    def undo_last(self) -> None:
        """Take the last action back entirely (a compound action given up)."""
        moves = self.plan.moves
        seq = moves[-1].seq
        # The last action's moves are the log's last ones (sequence numbers only grow): no scan of the whole log.
        size = 1
        while size < len(moves) and moves[-size - 1].seq == seq:
            size += 1
        group = moves[-size:]
        self.restore(reversed(group))
        self._count(group, -1)
        del moves[-size:]
        self._seq -= 1

    # -- trying an action's revert (pruning) -----------------------------------------------------------
    def restore(self, moves: Iterable[Move]) -> None:
        """Put the model back as it was before these moves, in the order given (the log and the counters stay)."""
        m = self.model
        for mv in moves:
            if mv.action == LEADERSHIP:
                rows = m.partition_rows(mv.replica)
                m.transfer_leadership(int(rows[m.r_broker[rows] == mv.source][0]))
            else:
                m.move(mv.replica, mv.source)

    def replay(self, moves: Iterable[Move]) -> None:
        """Make these moves on the model again, in the order given, after `restore`."""
        for mv in moves:
            if mv.action == LEADERSHIP:
                self.model.transfer_leadership(mv.replica)
            else:
                self.model.move(mv.replica, mv.target)

    def drop(self, seqs: set[int]) -> None:
        """Remove restored actions from the log and give their budget back."""
        self._count([mv for mv in self.plan.moves if mv.seq in seqs], -1)
        self.plan.moves = [mv for mv in self.plan.moves if mv.seq not in seqs]

    def recount(self) -> None:
        """The counters and moved flags recounted from the log (after the log was edited as a whole)."""
        self.moved[:] = False
        self._moved_changes += 1
        self.broker_moves[:] = 0
        self.moved_bytes = self.replica_moves = 0
        self._count(self.plan.moves, 1)

    def substitute(self, mv: Move, replica: int) -> Move:
        """The replica move mv made with another replica of the same source (already moved to the same target)
        instead: the counters follow; the caller puts the returned move in mv's place in the log."""
        self._mark_moved(mv.replica, False)
        self._mark_moved(replica, True)
        self.moved_bytes += int(self.model.r_size[replica]) - int(self.model.r_size[mv.replica])
        return Move(mv.seq, REPLICA, replica, mv.source, mv.target, mv.resource)

    def reroute(self, taken: Move, given: Move) -> Move | None:
        """A replica moved to broker b (taken) goes on to where b's replica `given` went, and given stays on b
        (the caller changed the model): the counters follow. Returns taken's new move, None if it went home."""
        self._count([taken, given], -1)
        if taken.source == given.target:
            return None
        rerouted = Move(taken.seq, REPLICA, taken.replica, taken.source, given.target, taken.resource)
        self._count([rerouted], 1)
        return rerouted

    # -- reading the log -------------------------------------------------------------------------------
    def actions(self) -> dict[int, list[Move]]:
        """The log's actions by sequence number, in order."""
        actions: dict[int, list[Move]] = {}
        for mv in self.plan.moves:
            actions.setdefault(mv.seq, []).append(mv)
        return actions

    def actions_per_partition(self) -> np.ndarray:
        m = self.model
        touched = np.array([m.r_pindex[mv.replica] for mv in self.plan.moves], dtype=np.int64)
        return np.bincount(touched, minlength=len(m.p_start))

    def _count(self, moves: list[Move], sign: int) -> None:
        """Add (sign 1) or remove (-1) the replica moves among `moves` to the counters and the moved flags."""
        for mv in moves:
            if mv.action != REPLICA:
                continue
            self._mark_moved(mv.replica, sign > 0)
            self.broker_moves[[mv.source, mv.target]] += sign
            self.moved_bytes += sign * int(self.model.r_size[mv.replica])
            self.replica_moves += sign
