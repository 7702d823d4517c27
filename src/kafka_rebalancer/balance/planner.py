"""Choosing replica moves for one pool (DESIGN §5, seed 001's pre-check generalised).

For each balanced resource in priority order, the brokers outside the band are fixed in turns (one move per
broker per turn, most distant first). An over-loaded broker gives away a replica whose load lies in the
pre-check window `[load_s - target_upper*cap_s, load_s - lower*cap_s]`, so it lands inside the band; an
under-loaded broker takes one in `[target_lower*cap_t - load_t, upper*cap_t - load_t]` from a broker that stays
above the band's lower edge. When no single replica lands the broker inside, the largest one that does not
overshoot is moved and the broker is fixed further on its next turn. Replicas are chosen best-fit by size
(least data moved); for counts, the smallest replica.

A move is accepted only if, for every balanced resource it changes, the source stays at or above the band's
lower edge and the target at or below its upper edge (so fixing one resource never pushes another out of its
band, nor a broker already outside further out), hard constraints hold (no broker twice in a partition, rack
diversity not reduced, capacity thresholds, only alive non-excluded brokers receive, only movable partitions
move) and the budgets hold.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kafka_rebalancer.balance.bands import Band
from kafka_rebalancer.balance.model import PoolModel

EPS = 1e-9


@dataclass(frozen=True)
class Budgets:
    max_replica_moves: int
    max_moved_bytes: int | None = None
    max_moves_per_broker: int | None = None


@dataclass(frozen=True)
class Move:
    seq: int
    replica: int  # row in the model
    source: int  # broker index
    target: int
    resource: str  # the resource whose band this move fixes


@dataclass
class PoolPlan:
    moves: list[Move] = field(default_factory=list)
    notes: list[tuple[str, int | None, str]] = field(default_factory=list)  # (resource, broker_id, text)


class Planner:
    def __init__(self, model: PoolModel, bands: dict[str, Band], priority: list[str], budgets: Budgets,
                 candidate_limit: int = 64) -> None:
        self.model = model
        self.bands = bands
        self.names = [r.name for r in model.resources]
        self.priority = [self.names.index(name) for name in priority if name in self.names]
        self.budgets = budgets
        self.candidate_limit = candidate_limit
        self.moved = np.zeros(len(model.r_broker), dtype=bool)
        self.broker_moves = np.zeros(len(model.broker_ids), dtype=np.int64)
        self.moved_bytes = 0
        self.plan = PoolPlan()
        # Per resource: band edges as arrays over K for the vectorised acceptance checks.
        k_count = len(self.names)
        self.lower = np.full(k_count, -np.inf)
        self.upper = np.full(k_count, np.inf)
        self.ceiling = np.full(k_count, np.inf)  # capacity thresholds apply even to unbalanced resources
        for k, name in enumerate(self.names):
            band = bands.get(name)
            if band is None:
                continue
            if band.balanced:
                self.lower[k], self.upper[k] = band.lower, band.upper
            if band.capacity_threshold is not None:
                self.ceiling[k] = band.capacity_threshold

    # -- budgets -------------------------------------------------------------------------------------
    def _budget_left(self, moves: int = 1) -> bool:
        return len(self.plan.moves) + moves <= self.budgets.max_replica_moves

    def _broker_budget_ok(self, moves: int = 1) -> np.ndarray:
        if self.budgets.max_moves_per_broker is None:
            return np.ones(len(self.broker_moves), dtype=bool)
        return self.broker_moves + moves <= self.budgets.max_moves_per_broker

    # -- hard constraints and the acceptance rule ------------------------------------------------------
    def _placement_ok(self, r: int, s: int) -> np.ndarray:
        """Mask over brokers that may hold replica r instead of s: alive, not excluded, within the per-broker
        budget, not already holding the partition, and keeping the partition's rack diversity (never below
        min(RF, racks in the pool), nor below what the partition has now)."""
        m = self.model
        ok = m.eligible & self._broker_budget_ok()
        ok[s] = False
        members = m.partition_brokers(r)
        ok[members] = False
        other_racks = m.rack[members[members != s]]
        required = min(len(members), m.n_racks, len(np.unique(m.rack[members])))
        if len(np.unique(other_racks)) < required:
            ok &= ~np.isin(m.rack, other_racks)
        return ok

    def _gain_ok(self, brokers: np.ndarray | int, delta: np.ndarray) -> np.ndarray:
        """Brokers gaining `delta` (per resource) stay at or below the band's upper edge and the capacity
        threshold of every balanced resource that rises."""
        m = self.model
        after = (m.load[brokers] + delta) / m.capacity[brokers]
        rises = delta > 0
        return np.all(~rises | (after <= np.minimum(self.upper, self.ceiling) + EPS), axis=-1)

    def _loss_ok(self, broker: int, delta: np.ndarray) -> bool:
        """A broker losing `delta` stays at or above the band's lower edge of every balanced resource that falls."""
        m = self.model
        after = (m.load[broker] - delta) / m.capacity[broker]
        return bool(np.all(~(delta > 0) | (after >= self.lower - EPS)))

    def _exchange_ok(self, giver: int, taker: int, delta: np.ndarray) -> bool:
        """The acceptance rule for a net transfer `delta` from giver to taker (a move, or a swap's net)."""
        given, returned = np.maximum(delta, 0), np.maximum(-delta, 0)
        return (self._loss_ok(giver, given) and self._loss_ok(taker, returned)
                and bool(self._gain_ok(taker, given)) and bool(self._gain_ok(giver, returned)))

    def _bytes_ok(self, extra: int) -> bool:
        return self.budgets.max_moved_bytes is None or self.moved_bytes + extra <= self.budgets.max_moved_bytes

    def _feasible_targets(self, r: int, s: int) -> np.ndarray:
        """Mask over brokers that may receive replica r from s under every hard constraint and the band rule."""
        m = self.model
        if not self._bytes_ok(int(m.r_size[r])):
            return np.zeros(len(m.broker_ids), dtype=bool)
        return self._placement_ok(r, s) & self._gain_ok(np.arange(len(m.broker_ids)), m.r_load[r])

    def _apply(self, moves: list[tuple[int, int]], k: int) -> None:
        """Apply one action (a move, or both halves of a swap) under one sequence number."""
        m = self.model
        seq = len({mv.seq for mv in self.plan.moves})
        for r, t in moves:
            s = int(m.r_broker[r])
            m.move(r, t)
            self.moved[r] = True
            self.broker_moves[[s, t]] += 1
            self.moved_bytes += int(m.r_size[r])
            self.plan.moves.append(Move(seq, r, s, t, self.names[k]))

    # -- choosing ------------------------------------------------------------------------------------
    def _order(self, replicas: np.ndarray, k: int, need: float) -> np.ndarray:
        """Best fit: replicas that land the broker inside the target band (least load first), then the
        others, largest first. For counts every replica weighs 1: least data first."""
        m = self.model
        if m.resources[k].is_count:
            return replicas[np.lexsort((replicas, m.r_size[replicas]))]
        load = m.r_load[replicas, k]
        fits = load >= need - EPS
        first = replicas[fits][np.lexsort((replicas[fits], load[fits]))]
        rest = replicas[~fits][np.lexsort((replicas[~fits], -load[~fits]))]
        return np.concatenate([first, rest])

    def _movable_on(self, b: int, k: int) -> np.ndarray:
        m = self.model
        rs = m.replicas_on(b)
        return rs[m.r_movable[rs] & ~self.moved[rs] & (m.r_load[rs, k] > 0)]

    def _move_out(self, s: int, k: int, band: Band) -> bool:
        m = self.model
        cap = m.capacity[s, k]
        need = m.load[s, k] - band.target_upper * cap
        most = m.load[s, k] - band.lower * cap
        if not self._broker_budget_ok()[s]:
            return False
        rs = self._movable_on(s, k)
        rs = rs[m.r_load[rs, k] <= most + EPS]
        for r in self._order(rs, k, need)[: self.candidate_limit]:
            if not self._loss_ok(s, m.r_load[r]):
                continue
            targets = self._feasible_targets(r, s)
            if targets.any():
                usage = m.usage[:, k]
                t = int(np.flatnonzero(targets)[np.argmin(usage[targets])])
                self._apply([(r, t)], k)
                return True
        if m.resources[k].is_count:  # a swap leaves counts unchanged
            return False
        usage = m.usage[:, k]
        takers = np.flatnonzero(m.eligible & (usage < min(band.upper, self.ceiling[k]) - EPS))
        for t in takers[np.argsort(usage[takers], kind="stable")][: self.candidate_limit // 4]:
            room = min(band.upper, self.ceiling[k]) * m.capacity[t, k] - m.load[t, k]
            if self._swap(s, int(t), k, need, min(most, room)):
                return True
        return False

    def _move_in(self, t: int, k: int, band: Band) -> bool:
        m = self.model
        cap = m.capacity[t, k]
        need = band.target_lower * cap - m.load[t, k]
        most = min(band.upper, self.ceiling[k]) * cap - m.load[t, k]
        if not self._broker_budget_ok()[t]:
            return False
        usage = m.usage[:, k]
        sources = np.flatnonzero(m.eligible & (usage > band.lower + EPS))
        sources = sources[sources != t]
        for s in sources[np.argsort(-usage[sources], kind="stable")]:
            if not self._broker_budget_ok()[s]:
                continue
            rs = self._movable_on(int(s), k)
            rs = rs[m.r_load[rs, k] <= most + EPS]
            for r in self._order(rs, k, need)[: self.candidate_limit]:
                if self._loss_ok(int(s), m.r_load[r]) and self._feasible_targets(r, int(s))[t]:
                    self._apply([(r, t)], k)
                    return True
        if m.resources[k].is_count:
            return False
        for s in sources[np.argsort(-usage[sources], kind="stable")][: self.candidate_limit // 4]:
            spare = m.load[s, k] - band.lower * m.capacity[s, k]
            if self._swap(int(s), t, k, need, min(most, spare)):
                return True
        return False

    def _swap(self, giver: int, taker: int, k: int, lo: float, hi: float) -> bool:
        """Exchange a replica of giver for a smaller one of taker so the net transfer in resource k lies in
        [lo, hi] (used when no single replica fits). Least data first: the pair with the smallest total."""
        m = self.model
        if hi < lo or not self._budget_left(2) or not self._broker_budget_ok(2)[[giver, taker]].all():
            return False
        give = self._movable_on(giver, k)
        take = m.replicas_on(taker)
        take = take[m.r_movable[take] & ~self.moved[take]]
        if not len(give) or not len(take):
            return False
        lg = m.r_load[give, k]
        order = np.argsort(m.r_load[take, k], kind="stable")
        lt = m.r_load[take[order], k]
        first = np.searchsorted(lt, lg - hi - EPS, side="left")
        last = np.searchsorted(lt, lg - lo + EPS, side="right")
        pairs = [(lg[i] + lt[j], int(give[i]), int(take[order[j]]))
                 for i in np.flatnonzero(first < last) for j in range(first[i], min(last[i], first[i] + 3))]
        for _, r1, r2 in sorted(pairs)[: self.candidate_limit]:
            if m.r_pindex[r1] == m.r_pindex[r2] or not self._bytes_ok(int(m.r_size[r1] + m.r_size[r2])):
                continue
            if not (self._placement_ok(r1, giver)[taker] and self._placement_ok(r2, taker)[giver]):
                continue
            if self._exchange_ok(giver, taker, m.r_load[r1] - m.r_load[r2]):
                self._apply([(r1, taker), (r2, giver)], k)
                return True
        return False

    def _fix_resource(self, k: int) -> bool:
        """Turns over the brokers outside the band until a turn moves nothing; True if anything moved."""
        band = self.bands[self.names[k]]
        moved_any = False
        while self._budget_left():
            usage = self.model.usage[:, k]
            candidates = np.flatnonzero(self.model.eligible)
            over = candidates[usage[candidates] > min(band.upper, self.ceiling[k]) + EPS]
            under = candidates[usage[candidates] < band.lower - EPS]
            distance = np.r_[usage[over] - band.upper, band.lower - usage[under]]
            to_fix = np.r_[over, under][np.argsort(-distance, kind="stable")]
            progress = False
            for b in to_fix:
                if not self._budget_left():
                    break
                is_over = b in over
                if (self._move_out if is_over else self._move_in)(int(b), k, band):
                    progress = moved_any = True
            if not progress:
                break
        return moved_any

    def run(self, max_passes: int = 3) -> PoolPlan:
        balanced = [k for k in self.priority if self.bands[self.names[k]].balanced]
        for _ in range(max_passes):
            if not any([self._fix_resource(k) for k in balanced]):
                break
        self._explain_leftovers(balanced)
        return self.plan

    def _explain_leftovers(self, balanced: list[int]) -> None:
        m = self.model
        usage = m.usage
        for k in balanced:
            band = self.bands[self.names[k]]
            for b in range(len(m.broker_ids)):
                if band.contains(usage[b, k]) and usage[b, k] <= self.ceiling[k] + EPS:
                    continue
                broker_id = int(m.broker_ids[b])
                if not m.eligible[b]:
                    why = "broker is dead or excluded: it is not balanced"
                elif not self._budget_left():
                    why = f"move budget reached (max_replica_moves={self.budgets.max_replica_moves})"
                else:
                    why = ("no movable replica fits the pre-check window without breaking a hard constraint "
                           "or another resource's band")
                self.plan.notes.append((self.names[k], broker_id,
                                        f"usage {usage[b, k]:.4g} outside band [{band.lower:.4g}, "
                                        f"{band.upper:.4g}] after the plan: {why}"))
