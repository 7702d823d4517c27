"""Choosing the actions for one pool (README: How a plan is made, seed 001's pre-check generalised).

1. Hard constraints first, as forced moves: replicas on dead brokers are drained, replicas outside their topic's
   pool are brought home, partitions whose replicas share racks although the pool has enough racks get them
   spread. Forced moves go to the broker with the most room that keeps placement rules and capacity thresholds.
2. Then, for each balanced resource in priority order, the brokers outside the band are fixed in turns (one action
   per broker per turn, most distant first), cheapest action first:
   - a leadership transfer (another in-sync replica becomes the first replica and, after the preferred leader
     election, the leader): no data moves; it changes network out, CPU and leader count;
   - a replica move: an over-loaded broker gives away a replica whose load lies in the pre-check window
     `[load_s - target_upper*cap_s, load_s - lower*cap_s]`, so it lands inside the band; an under-loaded broker
     takes one in `[target_lower*cap_t - load_t, upper*cap_t - load_t]` from a broker that stays above the lower
     edge. When no replica lands the broker inside, the largest that does not overshoot moves and the broker is
     fixed further on its next turn. Best fit by size (least data moved); for counts, the smallest replica;
   - a swap, when no single move fits: a larger replica for a smaller one, so the net transfer lands in the window.
3. Finally, actions that turned out unnecessary are reverted (latest first), moving the plan towards the lower
   bound of data moved.

Acceptance rule: for every balanced resource an action changes, the broker losing load stays at or above the
band's lower edge and the one gaining stays at or below its upper edge and the capacity threshold, so fixing one
resource never pushes another out of its band, nor a broker already outside further out. Placement rules: only
alive, non-excluded brokers receive (and, in a manual operation, only those allowed to); no broker twice in a
partition; rack diversity never below min(RF, racks in the pool) nor below what the partition has; only movable
replicas move; budgets hold.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kafka_rebalancer.balance.bands import Band
from kafka_rebalancer.balance.bounds import byte_lower_bound
from kafka_rebalancer.balance.feasibility import Infeasible, prove_infeasible
from kafka_rebalancer.balance.model import PoolModel

EPS = 1e-9
REPLICA, LEADERSHIP = "replica", "leadership"


@dataclass(frozen=True)
class Budgets:
    max_replica_moves: int
    max_moved_bytes: int | None = None
    max_moves_per_broker: int | None = None


@dataclass(frozen=True)
class Move:
    seq: int  # one action: a move, a leadership transfer, or both halves of a swap
    action: str  # REPLICA or LEADERSHIP
    replica: int  # the row moved, or the row that becomes leader
    source: int  # broker index giving the replica (or the leadership)
    target: int
    resource: str  # the resource this action fixes, or "hard" for a forced move
    forced: bool = False


@dataclass
class PoolPlan:
    moves: list[Move] = field(default_factory=list)
    notes: list[tuple[str, int | None, str]] = field(default_factory=list)  # (resource, broker_id, text)
    hot: list[tuple[int, str, float, float]] = field(default_factory=list)  # (row, resource, load, band width)
    infeasible: list[Infeasible] = field(default_factory=list)
    lower_bound_bytes: float = 0.0


class Planner:
    def __init__(self, model: PoolModel, bands: dict[str, Band], priority: list[str], budgets: Budgets,
                 candidate_limit: int = 48) -> None:
        self.model = model
        self.bands = bands
        self.names = [r.name for r in model.resources]
        self.priority = [self.names.index(name) for name in priority if name in self.names]
        self.budgets = budgets
        self.candidate_limit = candidate_limit
        self.moved = np.zeros(len(model.r_broker), dtype=bool)
        # A broker that may not give (a manual operation's role) offers no replica to balancing moves.
        self._movable_originals = [rs[model.r_movable[rs] & model.gives[b]] for b, rs in
                                   enumerate(model.replicas_on(b) for b in range(len(model.broker_ids)))]
        self.broker_moves = np.zeros(len(model.broker_ids), dtype=np.int64)
        # Per (broker, resource): the broker's change count when none of its replicas could leave it (_can_give).
        self._cannot_give = np.full((len(model.broker_ids), len(model.resources)), -1, dtype=np.int64)
        self.moved_bytes = 0
        self.replica_moves = 0
        self.plan = PoolPlan()
        self._seq = 0
        k_count = len(self.names)
        self.lower = np.full(k_count, -np.inf)
        self.upper = np.full(k_count, np.inf)
        self.ceiling = np.full(k_count, np.inf)  # capacity thresholds hold even for unbalanced resources
        for k, name in enumerate(self.names):
            band = bands.get(name)
            if band is None:
                continue
            if band.balanced:
                self.lower[k], self.upper[k] = band.lower, band.upper
            if band.capacity_threshold is not None:
                self.ceiling[k] = band.capacity_threshold
        self.limit = np.minimum(self.upper, self.ceiling)
        # Band widths at the mean capacity: to compare loads of different resources (as band shares).
        width = np.where(np.isfinite(self.upper - self.lower), self.upper - self.lower, 0.0)
        mean_capacity = model.capacity[model.eligible].mean(axis=0) if model.eligible.any() else np.ones(k_count)
        scale = width * mean_capacity
        self.footprint_scale = np.where(scale > 0, 1.0 / np.where(scale > 0, scale, 1.0), 0.0)

    # -- budgets -------------------------------------------------------------------------------------
    def _budget_left(self, moves: int = 1) -> bool:
        return self.replica_moves + moves <= self.budgets.max_replica_moves

    def _broker_budget_ok(self, moves: int = 1) -> np.ndarray:
        if self.budgets.max_moves_per_broker is None:
            return np.ones(len(self.broker_moves), dtype=bool)
        return self.broker_moves + moves <= self.budgets.max_moves_per_broker

    def _bytes_ok(self, extra: int) -> bool:
        return self.budgets.max_moved_bytes is None or self.moved_bytes + extra <= self.budgets.max_moved_bytes

    # -- hard constraints and the acceptance rule ------------------------------------------------------
    def _placement_ok(self, r: int, s: int, spread: bool = False, undo: bool = False) -> np.ndarray:
        """Mask over brokers that may hold replica r instead of s: alive, not excluded, not already holding the
        partition, and keeping its rack diversity (never below min(RF, racks in the pool), nor below what the
        partition has now; with spread, the target must add a rack). `undo`: r goes back where it was, which a
        broker that may not receive still allows."""
        m = self.model
        ok = (m.eligible if undo else m.receives).copy()
        ok[s] = False
        members = m.partition_brokers(r)
        ok[members] = False
        other_racks = self._racks_required(members, s, spread)
        for rack in other_racks:
            ok &= m.rack != rack
        return ok

    def _racks_required(self, members: np.ndarray, s: int, spread: bool = False) -> set[int]:
        """The racks a new replica replacing s must avoid (empty: any rack keeps the diversity required)."""
        m = self.model
        racks = m.rack[members].tolist()
        other_racks = {rack for b, rack in zip(members.tolist(), racks, strict=True) if b != s}
        required = min(len(racks), m.n_racks, len(set(racks)) + (1 if spread else 0))
        return other_racks if len(other_racks) < required else set()

    def _placement_mask(self, rs: np.ndarray, t: int) -> np.ndarray:
        """_placement_ok_for over many replicas (each from the broker it is on) to one target, vectorised: the
        planner asks this for every candidate of a search."""
        m = self.model
        if not len(rs) or not m.receives[t]:
            return np.zeros(len(rs), dtype=bool)
        rows, valid = m.partition_row_matrix(rs)
        count = m.p_count[m.r_pindex[rs]]
        members, racks = m.r_broker[rows], m.rack[m.r_broker[rows]]
        others = valid & (rows != rs[:, None])

        def distinct(mask: np.ndarray) -> np.ndarray:
            ordered = np.sort(np.where(mask, racks, -1), axis=1)
            return ((ordered[:, 1:] != ordered[:, :-1]) & (ordered[:, 1:] >= 0)).sum(axis=1) + (ordered[:, 0] >= 0)

        required = np.minimum(np.minimum(count, m.n_racks), distinct(valid))
        rack_clash = ((racks == m.rack[t]) & others).any(axis=1)
        holds = ((members == t) & valid).any(axis=1)
        return ~holds & ~((distinct(others) < required) & rack_clash)

    def _placement_ok_for(self, r: int, s: int, t: int) -> bool:
        """_placement_ok for one replica and target."""
        m = self.model
        members = m.partition_brokers(r)
        if not m.receives[t] or t == s or t in members:
            return False
        return int(m.rack[t]) not in self._racks_required(members, s)

    def _gain_ok(self, brokers: np.ndarray | int, delta: np.ndarray) -> np.ndarray:
        """Brokers gaining `delta` stay at or below the upper edge and the capacity threshold of every balanced
        resource that rises."""
        m = self.model
        after = (m.load[brokers] + delta) / m.capacity[brokers]
        return np.all(~(delta > 0) | (after <= self.limit + EPS), axis=-1)

    def _loss_ok(self, broker: int, delta: np.ndarray) -> bool:
        """A broker losing `delta` stays at or above the lower edge of every balanced resource that falls."""
        m = self.model
        after = (m.load[broker] - delta) / m.capacity[broker]
        return bool(np.all(~(delta > 0) | (after >= self.lower - EPS)))

    def _accepted(self, rs: np.ndarray, s: int, t: int) -> np.ndarray:
        """Mask over candidate replicas rs: moving each from s to t keeps the acceptance rule and the budgets."""
        m = self.model
        loads = m.r_load[rs]
        changes = loads > 0
        loss = np.all(~changes | ((m.load[s] - loads) / m.capacity[s] >= self.lower - EPS), axis=1)
        gain = np.all(~changes | ((m.load[t] + loads) / m.capacity[t] <= self.limit + EPS), axis=1)
        ok = loss & gain
        if self.budgets.max_moved_bytes is not None:
            ok &= self.moved_bytes + m.r_size[rs] <= self.budgets.max_moved_bytes
        return ok

    def _exchange_ok(self, giver: int, taker: int, delta: np.ndarray) -> bool:
        """The acceptance rule for a net transfer `delta` from giver to taker (a swap's net)."""
        given, returned = np.maximum(delta, 0), np.maximum(-delta, 0)
        return (self._loss_ok(giver, given) and self._loss_ok(taker, returned)
                and bool(self._gain_ok(taker, given)) and bool(self._gain_ok(giver, returned)))

    def _feasible_targets(self, r: int, s: int) -> np.ndarray:
        """Mask over brokers that may receive replica r from s under every rule."""
        m = self.model
        if not self._bytes_ok(int(m.r_size[r])):
            return np.zeros(len(m.broker_ids), dtype=bool)
        return (self._placement_ok(r, s) & self._broker_budget_ok()
                & self._gain_ok(np.arange(len(m.broker_ids)), m.r_load[r]))

    # -- applying --------------------------------------------------------------------------------------
    def _apply(self, moves: list[tuple[int, int]], k: int | None, forced: bool = False) -> None:
        """One action: a replica move, or both halves of a swap, under one sequence number."""
        m = self.model
        for r, t in moves:
            s = int(m.r_broker[r])
            m.move(r, t)
            self.moved[r] = True
            self.broker_moves[[s, t]] += 1
            self.moved_bytes += int(m.r_size[r])
            self.replica_moves += 1
            self.plan.moves.append(Move(self._seq, REPLICA, r, s, t, "hard" if k is None else self.names[k], forced))
        self._seq += 1

    def _apply_leadership(self, new_leaders: list[int], k: int) -> None:
        """One action: a leadership transfer, or both halves of a leadership swap, under one sequence number."""
        m = self.model
        for new_leader in new_leaders:
            old = m.transfer_leadership(new_leader)
            self.plan.moves.append(Move(self._seq, LEADERSHIP, new_leader, int(m.r_broker[old]),
                                        int(m.r_broker[new_leader]), self.names[k]))
        self._seq += 1

    # -- 1. hard constraints ---------------------------------------------------------------------------
    def _place_forced(self, r: int, spread: bool = False) -> bool:
        m = self.model
        s = int(m.r_broker[r])
        ok = self._placement_ok(r, s, spread) & self._broker_budget_ok() & (
            np.all((m.load + m.r_load[r]) / m.capacity <= self.ceiling + EPS, axis=1))
        if not ok.any() or not self._budget_left() or not self._broker_budget_ok()[s]:
            return False
        within_bands = ok & self._gain_ok(np.arange(len(m.broker_ids)), m.r_load[r])
        candidates = np.flatnonzero(within_bands if within_bands.any() else ok)
        # The broker where the replica sits most centrally in every band: the lowest of its highest position in
        # a band (0 = lower edge, 1 = upper edge) after the move, so no resource fills up ahead of the others.
        after = (m.load[candidates] + m.r_load[r]) / m.capacity[candidates]
        span = np.where(np.isfinite(self.limit - self.lower), self.limit - self.lower, np.inf)
        with np.errstate(invalid="ignore"):  # resources without a band: infinite edges, masked out below
            position = np.where(np.isfinite(span) & (span > 0), (after - self.lower) / np.where(span > 0, span, 1),
                                0.0)
        t = int(candidates[np.lexsort((candidates, position.max(axis=1)))[0]])
        self._apply([(r, t)], None, forced=True)
        return True

    def _hard(self) -> None:
        m = self.model
        for r in sorted(np.flatnonzero(m.r_must_move), key=lambda r: (-m.r_size[r], r)):
            if not self._place_forced(int(r)):
                where = "a dead broker" if not m.eligible[m.r_broker[r]] else "outside its topic's pool"
                self.plan.notes.append(("hard", int(m.broker_ids[m.r_broker[r]]),
                                        f"{m.r_topic[r]}-{m.r_partition[r]}: its replica on {where} could not be "
                                        f"placed (no broker with room keeps the placement rules, or the budget)"))
        # Placing a partition's replica changes only that partition's racks, so the partitions short of racks
        # can be found once, for all of them.
        for p in np.flatnonzero(m.p_leadership_ok & (self._distinct_racks() < np.minimum(m.p_count, m.n_racks))):
            rows = np.arange(m.p_start[p], m.p_start[p] + m.p_count[p])
            racks = m.rack[m.r_broker[rows]]
            # Spread: move the duplicated-rack replica on the busiest broker to a rack the partition lacks.
            _, first_seen = np.unique(racks, return_index=True)
            duplicates = np.setdiff1d(np.arange(len(rows)), first_seen)
            first = self.priority[0] if self.priority else 0
            r = int(rows[duplicates[np.argmax(m.usage[m.r_broker[rows[duplicates]], first])]])
            if not self._place_forced(r, spread=True):
                self.plan.notes.append(("hard", int(m.broker_ids[m.r_broker[r]]),
                                        f"{m.r_topic[r]}-{m.r_partition[r]}: replicas share a rack and no broker on "
                                        f"another rack has room"))

    def _distinct_racks(self) -> np.ndarray:
        """Per partition: how many racks its replicas are on."""
        m = self.model
        racks = m.rack[m.r_broker]
        order = np.lexsort((racks, m.r_pindex))
        partition, rack = m.r_pindex[order], racks[order]
        first = np.r_[True, (partition[1:] != partition[:-1]) | (rack[1:] != rack[:-1])]
        return np.bincount(partition[first], minlength=len(m.p_start))

    # -- 2. balancing ----------------------------------------------------------------------------------
    def _per_unit_gap(self, b: int, k: int, giving: bool) -> np.ndarray:
        """What one unit of count resource k should carry of every other balanced resource for broker b: for the
        resources where b is outside the band on the side it moves away from, its gap to the band's middle divided
        by its count gap; nothing where b is inside (there it should move as little as possible)."""
        m = self.model
        middle = (self.lower + np.where(np.isfinite(self.limit), self.limit, self.lower)) / 2 * m.capacity[b]
        if giving:
            gap = np.where(m.load[b] > self.limit * m.capacity[b] + EPS, m.load[b] - middle, 0.0)
        else:
            gap = np.where(m.load[b] < self.lower * m.capacity[b] - EPS, middle - m.load[b], 0.0)
        units = (m.load[b, k] - middle[k]) if giving else (middle[k] - m.load[b, k])
        gap = np.where(np.isfinite(gap) & (gap > 0), gap, 0.0)
        gap[k] = 0.0
        return gap / units if units > EPS else np.zeros_like(gap)

    def _proportional(self, loads: np.ndarray, k: int, giver: int, receiver: int = -1) -> np.ndarray:
        """Per candidate: how far its loads are from what the giver (and the receiver, when known) should shed
        (take) per unit of count k, as band shares. Fixing a count with replicas of the right size moves the
        other resources along, instead of leaving them to swaps and extra moves later."""
        score = np.abs(loads - self._per_unit_gap(giver, k, giving=True)) @ self.footprint_scale
        if receiver >= 0:
            score = score + np.abs(loads - self._per_unit_gap(receiver, k, giving=False)) @ self.footprint_scale
        return score

    def _order(self, replicas: np.ndarray, k: int, need: float, giver: int = -1, receiver: int = -1) -> np.ndarray:
        """Best fit, the first `candidate_limit`: replicas that land the broker inside the target band (least load
        first), then the others, largest first. For counts every replica weighs 1: those whose other loads are
        closest to what the brokers should move per replica first, then the least data."""
        m = self.model
        if not len(replicas):
            return replicas
        if m.resources[k].is_count:
            primary = self._proportional(m.r_load[replicas], k, giver, receiver)
            secondary = m.r_size[replicas].astype(float)
        else:
            load = m.r_load[replicas, k]
            # One ascending key: fitting replicas by load, then the others by decreasing load.
            primary = np.where(load >= need - EPS, load, 2.0 * (np.abs(load).max() + 1.0) - load)
            secondary = np.zeros(len(replicas))
        if len(replicas) > self.candidate_limit:
            top = np.argpartition(primary, self.candidate_limit - 1)[: self.candidate_limit]
            replicas, primary, secondary = replicas[top], primary[top], secondary[top]
        return replicas[np.lexsort((replicas, secondary, primary))]

    def _can_give(self, s: int, k: int) -> bool:
        """Whether some replica of s that may move for resource k keeps s at or above every lower edge (the
        acceptance rule's loss side, which depends on s alone). A broker without one fails every search for
        a receiver, and usually again on the next turn: the answer is kept until s changes, which spares most
        searches when many brokers fill up from the same givers (a scale-out)."""
        m = self.model
        if self._cannot_give[s, k] == m.changes[s]:
            return False
        loads = m.r_load[self._movable_on(s, k)]
        keeps = np.all(~(loads > 0) | ((m.load[s] - loads) / m.capacity[s] >= self.lower - EPS), axis=1)
        if keeps.any():
            return True
        self._cannot_give[s, k] = m.changes[s]
        return False

    def _movable_on(self, b: int, k: int) -> np.ndarray:
        """Replicas of b that may still move (a moved replica never moves again, so only b's own)."""
        rs = self._movable_originals[b]
        return rs[~self.moved[rs] & (self.model.r_load[rs, k] > 0)]

    def _leadership_order(self, rs: np.ndarray, k: int, need: float, most: float, leaders: bool,
                          b: int) -> np.ndarray:
        """Replicas of b whose leadership could change (leaders to hand over, or followers to take over), by
        the same best fit as replica moves."""
        m = self.model
        rs = rs[(m.r_is_leader[rs] == leaders) & m.p_leadership_ok[m.r_pindex[rs]]]
        gain = m.r_lead[rs, k] - m.r_follow[rs, k]
        keep = (gain > EPS) & (gain <= most + EPS)
        rs, gain = rs[keep], gain[keep]
        if m.resources[k].is_count:
            deltas = m.r_lead[rs] - m.r_follow[rs]
            score = np.abs(deltas - self._per_unit_gap(b, k, giving=leaders)) @ self.footprint_scale
            return rs[np.lexsort((rs, score))]
        fits = gain >= need - EPS
        return np.concatenate([rs[fits][np.argsort(gain[fits], kind="stable")],
                               rs[~fits][np.argsort(-gain[~fits], kind="stable")]])

    def _lead_out(self, s: int, k: int, need: float, most: float) -> bool:
        """Hand leadership of a partition s leads to another of its in-sync replicas."""
        m = self.model
        usage = m.usage[:, k]
        for r in self._leadership_order(m.replicas_on(s), k, need, most, leaders=True, b=s)[: self.candidate_limit]:
            delta = m.leadership_delta(int(r))
            if not self._loss_ok(s, delta):
                continue
            others = m.partition_rows(int(r))
            others = others[(others != r) & m.eligible[m.r_broker[others]]]
            ok = others[self._gain_ok(m.r_broker[others], delta)]
            if len(ok):
                self._apply_leadership([int(ok[np.argmin(usage[m.r_broker[ok]])])], k)
                return True
        return False

    def _undo_last(self) -> None:
        """Revert the last action (used to try a compound action and give it up)."""
        m = self.model
        seq = self.plan.moves[-1].seq
        group = [mv for mv in self.plan.moves if mv.seq == seq]
        for mv in reversed(group):
            if mv.action == LEADERSHIP:
                rows = m.partition_rows(mv.replica)
                m.transfer_leadership(int(rows[m.r_broker[rows] == mv.source][0]))
            else:
                m.move(mv.replica, mv.source)
                self.moved[mv.replica] = False
                self.broker_moves[[mv.source, mv.target]] -= 1
                self.moved_bytes -= int(m.r_size[mv.replica])
                self.replica_moves -= 1
        self.plan.moves = self.plan.moves[: -len(group)]
        self._seq -= 1

    def _lead_with_room(self, b: int, k: int, need: float, most: float, taking: bool, swaps: int = 3) -> bool:
        """Leader count: when taking a leadership would push b over another band (network out or CPU at its upper
        edge), first hand heavy leaderships over for light ones; when handing one over would take b under another
        band (at its lower edge), first take heavy leaderships for light ones. Leadership swaps leave the count as
        it is (up to `swaps` of them); then the leadership is taken or handed over, or the swaps are given up."""
        m = self.model
        done = 0
        for j, res in enumerate(m.resources):
            if j == k or not res.role_dependent or res.is_count or not self.bands[self.names[j]].balanced:
                continue
            while done < swaps:
                usage, spare, room = m.usage[:, j], m.load[:, j] - self.lower[j] * m.capacity[:, j], \
                    self.limit[j] * m.capacity[:, j] - m.load[:, j]
                # The other side of each swap: brokers with room to take load (b gives it), or spare to give it.
                others = np.flatnonzero(m.eligible & ((usage < self.limit[j] - EPS) if taking else
                                                      (usage > self.lower[j] + EPS)))
                others = others[others != b]
                others = others[np.argsort(usage[others] if taking else -usage[others], kind="stable")]
                if not any(self._lead_swap(b, int(y), j, EPS, min(spare[b], room[y])) if taking else
                           self._lead_swap(int(y), b, j, EPS, min(spare[y], room[b]))
                           for y in others[: self.candidate_limit // 2]):
                    break
                done += 1
                if (self._lead_in if taking else self._lead_out)(b, k, need, most):
                    return True
        for _ in range(done):
            self._undo_last()
        return False

    def _lead_in(self, t: int, k: int, need: float, most: float) -> bool:
        """Take over leadership of a partition t follows."""
        m = self.model
        rs = self._leadership_order(m.replicas_on(t), k, need, most, leaders=False, b=t)[: self.candidate_limit]
        leaders = m.leaders_of(rs)
        rs, leaders = rs[leaders >= 0], leaders[leaders >= 0]
        # The first candidate whose leader's broker stays above its lower edges and t below its upper edges, with
        # the arithmetic of _loss_ok and _gain_ok, for all candidates at once.
        delta = m.r_lead[rs] - m.r_follow[rs]
        losers = m.r_broker[leaders]
        loss = np.all(~(delta > 0) | ((m.load[losers] - delta) / m.capacity[losers] >= self.lower - EPS), axis=1)
        ok = np.flatnonzero(loss & self._gain_ok(t, delta))
        if not len(ok):
            return False
        self._apply_leadership([int(rs[ok[0]])], k)
        return True

    def _rank_pairs(self, give: np.ndarray, take: np.ndarray, need: float, most: float) -> list[tuple[int, int]]:
        """Pairs (i, j) whose net transfer give[i] - take[j] lies in (0, most], ranked like single moves: those
        that reach `need` first (the smallest net, least overshoot), then the others (the largest net first)."""
        order = np.argsort(take, kind="stable")
        sorted_take = take[order]
        idx = np.arange(len(give))
        # Per i: the largest take with net >= need (a fit), else the smallest take with net <= most.
        fit = np.searchsorted(sorted_take, give - need + EPS, side="right") - 1
        low = np.searchsorted(sorted_take, give - most - EPS, side="left")
        fit_ok = (fit >= 0) & (fit >= low)
        fit_net = np.where(fit_ok, give - sorted_take[np.clip(fit, 0, None)], 0.0)
        fit_ok &= fit_net > EPS
        low_c = np.clip(low, 0, max(len(sorted_take) - 1, 0))
        low_net = give - sorted_take[low_c]
        low_ok = ~fit_ok & (low < len(sorted_take)) & (low_net > EPS) & (low_net <= most + EPS)
        chosen = np.where(fit_ok, fit, low_c)
        keep = fit_ok | low_ok
        group = np.where(fit_ok, 0, 1)[keep]
        key = np.where(fit_ok, fit_net, -low_net)[keep]
        ranked = np.lexsort((idx[keep], key, group))[: self.candidate_limit]
        return [(int(i), int(order[j])) for i, j in zip(idx[keep][ranked], chosen[keep][ranked], strict=True)]

    def _lead_swap(self, giver: int, taker: int, k: int, need: float, most: float) -> bool:
        """Hand giver's leadership of one partition to taker and take over a lighter one from taker, so the net
        transfer in resource k lies in [lo, hi]; leader counts stay as they are and no data moves."""
        m = self.model
        if most <= EPS:
            return False

        def shared_leaders(b: int, other: int) -> tuple[np.ndarray, np.ndarray]:
            """b's leader rows of partitions `other` follows, and other's rows of those partitions."""
            mine, theirs = m.replicas_on(b), m.replicas_on(other)
            mine = mine[m.r_is_leader[mine] & m.p_leadership_ok[m.r_pindex[mine]]]
            if not len(mine) or not len(theirs):
                return mine[:0], theirs[:0]
            # other's row of each of b's partitions, by a sorted lookup (a broker holds a partition at most once)
            by_partition = np.argsort(m.r_pindex[theirs], kind="stable")
            partitions = m.r_pindex[theirs][by_partition]
            at = np.minimum(np.searchsorted(partitions, m.r_pindex[mine]), len(partitions) - 1)
            keep = partitions[at] == m.r_pindex[mine]
            return mine[keep], theirs[by_partition[at[keep]]]

        give, give_to = shared_leaders(giver, taker)
        take, take_from = shared_leaders(taker, giver)
        if not len(give) or not len(take):
            return False
        pairs = self._rank_pairs(m.r_lead[give, k] - m.r_follow[give, k], m.r_lead[take, k] - m.r_follow[take, k],
                                 need, most)
        for i, j in pairs:
            net = m.leadership_delta(int(give_to[i])) - m.leadership_delta(int(take_from[j]))
            if self._exchange_ok(giver, taker, net):
                self._apply_leadership([int(give_to[i]), int(take_from[j])], k)
                return True
        return False

    def _move_out(self, s: int, k: int, band: Band) -> bool:
        m = self.model
        cap = m.capacity[s, k]
        need = m.load[s, k] - band.target_upper * cap
        most = m.load[s, k] - band.lower * cap
        usage = m.usage[:, k]
        takers = np.flatnonzero(m.eligible & (usage < self.limit[k] - EPS))
        takers = takers[np.argsort(usage[takers], kind="stable")]
        # A swap lands a replica on the taker and takes one from it: brokers a manual operation keeps from either
        # are left out before the cut, so they do not crowd out the others (leadership goes anywhere eligible).
        swap_takers = takers[m.receives[takers] & m.gives[takers]][: self.candidate_limit // 4]
        takers = takers[: self.candidate_limit // 4]
        if m.resources[k].role_dependent:
            if self._lead_out(s, k, need, most):
                return True
            if m.resources[k].is_count and self._lead_with_room(s, k, need, most, taking=False):
                return True
            if not m.resources[k].is_count and any(
                    self._lead_swap(s, int(t), k, need, min(most, self.limit[k] * m.capacity[t, k] - m.load[t, k]))
                    for t in takers):
                return True
        if not self._broker_budget_ok()[s] or not self._budget_left():
            return False
        rs = self._movable_on(s, k)
        rs = rs[m.r_load[rs, k] <= most + EPS]
        for r in self._order(rs, k, need, giver=s)[: self.candidate_limit]:
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
        for t in swap_takers:
            room = self.limit[k] * m.capacity[t, k] - m.load[t, k]
            if self._swap(s, int(t), k, need, min(most, room)):
                return True
        return self._spread_hot(s, k)

    def _width(self, b: int) -> np.ndarray:
        """b's band widths in load units (infinite for unbalanced resources)."""
        with np.errstate(invalid="ignore"):
            width = (self.limit - self.lower) * self.model.capacity[b]
        return np.where(np.isfinite(width), width, np.inf)

    def _hot_load(self, b: int, k: int) -> tuple[np.ndarray, float]:
        """b's replicas whose load in k alone exceeds b's band width, and their total load."""
        m = self.model
        rs = m.replicas_on(b)
        hot = rs[m.r_load[rs, k] > self._width(b)[k] + EPS]
        return hot, float(m.r_load[hot, k].sum())

    def _spread_hot(self, s: int, k: int) -> bool:
        """A broker holding several hot partitions (each alone larger than the band's width) whose loads together
        exceed the upper edge can never get inside by giving other replicas away, and no single action that keeps
        the acceptance rule takes one of them. Hand the smallest of them over (its leadership, alone or swapped for
        the lightest leadership coming back so leader counts hold; else the replica) to the broker with the least
        load in k whose own hot partitions leave room for it; that broker then sheds ordinary load on its own
        turns. Each step lowers the hot load of brokers whose hot loads alone overflow, so it cannot cycle. Other
        resources keep the acceptance rule."""
        m = self.model
        hot, total = self._hot_load(s, k)
        if len(hot) < 2 or total <= self.limit[k] * m.capacity[s, k] + EPS:
            return False
        r = int(hot[np.lexsort((hot, m.r_load[hot, k]))[0]])
        # The resources in which the partition is hot (k among them) are exempt from the acceptance rule: the
        # same reasoning holds for each. The others keep it.
        hot_in = [j for j in range(len(self.names))
                  if not m.resources[j].is_count and np.abs(m.r_lead[r, j]) > self._width(s)[j] + EPS]
        other = ~np.isin(np.arange(len(self.names)), hot_in)

        def takes(t: int, delta: np.ndarray) -> bool:
            return bool(m.eligible[t]) and all(
                self._hot_load(t, j)[1] + delta[j] <= self.limit[j] * m.capacity[t, j] + EPS
                and (m.load[t, j] + delta[j]) / m.capacity[t, j] <= self.ceiling[j] + EPS for j in hot_in)

        if m.r_is_leader[r] and m.p_leadership_ok[m.r_pindex[r]]:
            delta = m.leadership_delta(r)
            rows = [int(x) for x in m.partition_rows(r) if x != r]
            for x in sorted(rows, key=lambda x: (m.usage[m.r_broker[x], k], x)):
                t = int(m.r_broker[x])
                if not takes(t, delta):
                    continue
                if self._exchange_ok(s, t, np.where(other, delta, 0.0)):
                    self._apply_leadership([x], k)
                    return True
                back = m.replicas_on(t)
                back = back[m.r_is_leader[back] & m.p_leadership_ok[m.r_pindex[back]]]
                for y in back[np.lexsort((back, m.r_load[back, k]))][: self.candidate_limit]:
                    mine = m.partition_rows(int(y))
                    mine = mine[m.r_broker[mine] == s]
                    net = delta - m.leadership_delta(int(mine[0])) if len(mine) else None
                    if net is not None and takes(t, net) and self._exchange_ok(s, t, np.where(other, net, 0.0)):
                        self._apply_leadership([x, int(mine[0])], k)
                        return True
        if not (m.r_movable[r] and m.gives[s] and not self.moved[r] and self._budget_left()
                and self._bytes_ok(int(m.r_size[r]))
                and self._broker_budget_ok()[s] and self._loss_ok(s, np.where(other, m.r_load[r], 0.0))):
            return False
        targets = [int(t) for t in np.flatnonzero(self._placement_ok(r, s) & self._broker_budget_ok())
                   if takes(int(t), m.r_load[r]) and self._gain_ok(int(t), np.where(other, m.r_load[r], 0.0))]
        if not targets:
            return False
        self._apply([(r, min(targets, key=lambda t: (m.usage[t, k], t)))], k)
        return True

    def _move_in(self, t: int, k: int, band: Band) -> bool:
        m = self.model
        cap = m.capacity[t, k]
        need = band.target_lower * cap - m.load[t, k]
        most = self.limit[k] * cap - m.load[t, k]
        usage = m.usage[:, k]
        sources = np.flatnonzero(m.eligible & (usage > band.lower + EPS))
        sources = sources[sources != t]
        by_usage = sources[np.argsort(-usage[sources], kind="stable")]
        # Replicas come only from brokers that may give (a manual operation's role); leaderships from any.
        givers = by_usage[m.gives[by_usage]]
        if m.resources[k].role_dependent:
            if self._lead_in(t, k, need, most):
                return True
            if m.resources[k].is_count and self._lead_with_room(t, k, need, most, taking=True):
                return True
            if not m.resources[k].is_count and any(
                    self._lead_swap(int(s), t, k, need, min(most, m.load[s, k] - band.lower * m.capacity[s, k]))
                    for s in by_usage[: self.candidate_limit // 4]):
                return True
        if not m.receives[t] or not self._broker_budget_ok()[t] or not self._budget_left():
            return False
        tried = givers[: self.candidate_limit // 2]
        tried = tried[self._broker_budget_ok()[tried] & (self._cannot_give[tried, k] != m.changes[tried])]
        for s in tried:
            if not self._can_give(int(s), k):
                continue
            rs = self._movable_on(int(s), k)
            rs = self._order(rs[m.r_load[rs, k] <= most + EPS], k, need, giver=int(s),
                             receiver=t)[: self.candidate_limit]
            ok = rs[self._accepted(rs, int(s), t)]
            ok = ok[self._placement_mask(ok, t)]
            if len(ok):
                self._apply([(int(ok[0]), t)], k)
                return True
        if m.resources[k].is_count:
            return False
        for s in givers[: self.candidate_limit // 4]:
            spare = m.load[s, k] - band.lower * m.capacity[s, k]
            if self._swap(int(s), t, k, need, min(most, spare)):
                return True
        return False

    def _swap(self, giver: int, taker: int, k: int, need: float, most: float) -> bool:
        """Exchange a replica of giver for a smaller one of taker so the net transfer in resource k reaches
        `need` without exceeding `most` (or comes as close as it can)."""
        m = self.model
        if most <= EPS or not self._budget_left(2) or not self._broker_budget_ok(2)[[giver, taker]].all():
            return False
        # Each broker gives one replica and receives the other's: both must be allowed both (manual roles).
        if not (m.receives[[giver, taker]].all() and m.gives[[giver, taker]].all()):
            return False
        give = self._movable_on(giver, k)
        # The taker may hand back a replica that arrived earlier in the plan: only the final state is executed,
        # so it goes straight from its first broker to the giver (a broker that was empty has nothing else).
        take = m.replicas_on(taker)
        take = take[m.r_movable[take]]
        if not len(give) or not len(take):
            return False
        # Leaders for leaders and followers for followers, so the leader counts stay as they are.
        pairs = []
        for role in (True, False):
            g, t = give[m.r_is_leader[give] == role], take[m.r_is_leader[take] == role]
            if len(g) and len(t):
                pairs += [(int(g[i]), int(t[j])) for i, j in self._rank_pairs(m.r_load[g, k], m.r_load[t, k],
                                                                              need, most)]
        for r1, r2 in pairs:
            if m.r_pindex[r1] == m.r_pindex[r2] or not self._bytes_ok(int(m.r_size[r1] + m.r_size[r2])):
                continue
            if not (self._placement_ok_for(r1, giver, taker) and self._placement_ok_for(r2, taker, giver)):
                continue
            if self._exchange_ok(giver, taker, m.r_load[r1] - m.r_load[r2]):
                self._apply([(r1, taker), (r2, giver)], k)
                return True
        return False

    def _out_of_band(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        m = self.model
        usage = m.usage[:, k]
        eligible = np.flatnonzero(m.eligible)
        over = eligible[usage[eligible] > self.limit[k] + EPS]
        under = eligible[usage[eligible] < self.lower[k] - EPS]
        return over, under

    def _fix_resource(self, k: int) -> bool:
        """Turns over the brokers outside the band until a turn in which every one of them tried changes nothing;
        True if anything changed. A broker whose tries keep failing sits out 1, 2, 4, ... turns in between (its
        chances rarely change from one turn to the next, and a failed try costs as much as a whole search)."""
        band = self.bands[self.names[k]]
        changed = False
        failures: dict[int, int] = {}
        wait: dict[int, int] = {}
        while True:
            over, under = self._out_of_band(k)
            usage = self.model.usage[:, k]
            distance = np.r_[usage[over] - self.limit[k], self.lower[k] - usage[under]]
            to_fix = np.r_[over, under][np.argsort(-distance, kind="stable")]
            over_set = set(over.tolist())
            progress = skipped = False
            for b in map(int, to_fix):
                if wait.get(b, 0) > 0:
                    wait[b] -= 1
                    skipped = True
                    continue
                fix = self._move_out if b in over_set else self._move_in
                if fix(b, k, band):
                    progress = changed = True
                    failures.pop(b, None)
                else:
                    failures[b] = failures.get(b, 0) + 1
                    wait[b] = 2 ** (failures[b] - 1) - 1
            if not progress and not skipped:
                return changed
            if not progress:  # only waiting brokers left: give every one of them its try now
                wait.clear()

    # -- 3. pruning --------------------------------------------------------------------------------------
    def _status(self, brokers: list[int]) -> np.ndarray:
        """Per (broker, resource): the distance outside the band (0 inside), for balanced resources."""
        return self._distance(self.model.usage[brokers])

    def _distance(self, usage: np.ndarray) -> np.ndarray:
        return np.maximum(np.maximum(self.lower - usage, usage - self.limit), 0.0)

    def _prune(self) -> None:
        """Revert actions (latest first) whose revert leaves every broker they touched inside its bands or no
        further out, and keeps every placement rule: a smaller plan with the same result."""
        m = self.model
        actions: dict[int, list[Move]] = {}
        for mv in self.plan.moves:
            actions.setdefault(mv.seq, []).append(mv)
        dropped: set[int] = set()
        later: set[int] = set()  # partitions that later, kept actions depend on
        for seq in sorted(actions, reverse=True):
            group = actions[seq]
            partitions = {int(m.r_pindex[mv.replica]) for mv in group}
            if any(mv.forced for mv in group) or partitions & later:
                later |= partitions
                continue
            touched = sorted({b for mv in group for b in (mv.source, mv.target)})
            before = self._status(touched)
            if group[0].action == LEADERSHIP:
                olds = []
                for mv in group:
                    rows = m.partition_rows(mv.replica)
                    olds.append(rows[m.r_broker[rows] == mv.source])
                if any(len(o) != 1 for o in olds) or not all(m.r_is_leader[mv.replica] for mv in group):
                    later |= partitions
                    continue
                for old in olds:
                    m.transfer_leadership(int(old[0]))
                after = self._status(touched)
                if np.all((after <= before) | (after <= EPS)):
                    dropped.add(seq)
                else:
                    for mv in group:
                        m.transfer_leadership(mv.replica)
                    later |= partitions
                continue
            if any(m.r_broker[mv.replica] != mv.target
                   or not self._placement_ok(mv.replica, mv.target, undo=True)[mv.source] for mv in group):
                later |= partitions
                continue
            for mv in group:
                m.move(mv.replica, mv.source)
            after = self._status(touched)
            if np.all((after <= before) | (after <= EPS)):
                dropped.add(seq)
                for mv in group:
                    self.moved[mv.replica] = False
                    self.broker_moves[[mv.source, mv.target]] -= 1
                    self.moved_bytes -= int(m.r_size[mv.replica])
                    self.replica_moves -= 1
            else:
                for mv in group:
                    m.move(mv.replica, mv.target)
                later |= partitions
        self.plan.moves = [mv for mv in self.plan.moves if mv.seq not in dropped]

    # -- 4. cheaper substitutes ---------------------------------------------------------------------------
    def _substitute(self) -> None:
        """For each replica move, largest first: if a smaller replica of the same source, moved to the same
        target instead, leaves both brokers inside their bands (or no further out) and keeps the placement
        rules, move that one instead. Only the final state matters, so this copies fewer bytes for the same
        result."""
        m = self.model
        groups: dict[int, list[Move]] = {}
        for mv in self.plan.moves:
            groups.setdefault(mv.seq, []).append(mv)
        singles = [g[0] for g in groups.values() if len(g) == 1 and g[0].action == REPLICA and not g[0].forced]
        # Partitions with several actions keep them (they depend on each other), and a substitute must come from a
        # partition no action touches (its move takes the replaced move's place in the sequence).
        actions = self._actions_per_partition()
        fixed, touched = actions > 1, actions > 0
        replaced: dict[int, Move] = {}
        for mv in sorted(singles, key=lambda mv: (-int(m.r_size[mv.replica]), mv.seq)):
            r, s, t = mv.replica, mv.source, mv.target
            if fixed[m.r_pindex[r]] or m.r_broker[r] != t:
                continue
            before = self._status([s, t])
            rs = self._movable_on(s, self.names.index(mv.resource))
            rs = rs[(m.r_size[rs] < m.r_size[r]) & ~touched[m.r_pindex[rs]]]
            if not len(rs):
                continue
            # With r back on s and a candidate moved instead, s and t stay inside their bands or no further out
            # (distance <= max(before, EPS)) exactly when each of the candidate's loads lies in a window.
            lo, hi = self._substitute_window(s, t, m.load[s] + m.r_load[r], m.load[t] - m.r_load[r], before)
            loads = m.r_load[rs]
            fine = np.all((loads >= lo) & (loads <= hi), axis=1)
            chosen = None
            m.move(r, s)
            ok = rs[fine][np.argsort(m.r_size[rs[fine]], kind="stable")]
            ok = ok[self._placement_mask(ok, t)]
            if len(ok):
                chosen = int(ok[0])
            if chosen is None:
                m.move(r, t)
                continue
            m.move(chosen, t)
            self.moved[r], self.moved[chosen] = False, True
            self.moved_bytes += int(m.r_size[chosen]) - int(m.r_size[r])
            replaced[mv.seq] = Move(mv.seq, REPLICA, chosen, s, t, mv.resource)
            fixed[m.r_pindex[chosen]] = touched[m.r_pindex[chosen]] = True
        self.plan.moves = [replaced.get(mv.seq, mv) for mv in self.plan.moves]

    def _substitute_window(self, s: int, t: int, base_s: np.ndarray, base_t: np.ndarray,
                           before: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per resource, the loads l that s (at base_s, giving l) and t (at base_t, taking l) can exchange while
        each stays within its distance `before` of its band (or EPS): distance(u) <= D means
        lower - D <= u <= limit + D, solved for l (one comparison per load instead of a distance per load)."""
        cap_s, cap_t = self.model.capacity[s], self.model.capacity[t]
        d_s, d_t = np.maximum(before[0], EPS), np.maximum(before[1], EPS)
        with np.errstate(invalid="ignore"):  # unbalanced resources: infinite edges give infinite bounds
            lo = np.maximum(base_s - (self.limit + d_s) * cap_s, (self.lower - d_t) * cap_t - base_t)
            hi = np.minimum(base_s - (self.lower - d_s) * cap_s, (self.limit + d_t) * cap_t - base_t)
        return lo, hi

    def _actions_per_partition(self) -> np.ndarray:
        m = self.model
        touched = np.array([m.r_pindex[mv.replica] for mv in self.plan.moves], dtype=np.int64)
        return np.bincount(touched, minlength=len(m.p_start))

    # -- running -------------------------------------------------------------------------------------------
    def run(self, max_passes: int = 20) -> PoolPlan:
        balanced = [k for k in self.priority if self.bands[self.names[k]].balanced]
        self.plan.lower_bound_bytes = byte_lower_bound(self.model, self.lower, self.limit, balanced)
        self._hard()
        self.plan.infeasible = prove_infeasible(self.model, self.lower, self.limit, balanced, self.moved)
        for _ in range(max_passes):
            if not any([self._fix_resource(k) for k in balanced]):
                break
        self._prune()
        self._substitute()
        self._explain(balanced)
        return self.plan

    def _explain(self, balanced: list[int]) -> None:
        m = self.model
        for k in balanced:
            band = self.bands[self.names[k]]
            width = (self.limit[k] - self.lower[k]) * m.capacity[m.eligible, k]
            if not m.resources[k].is_count and len(width):
                # A partition whose load alone exceeds every broker's band width cannot be balanced by moving it.
                first_rows = m.p_start
                for r in first_rows[m.r_lead[first_rows, k] > width.max()]:
                    self.plan.hot.append((int(r), self.names[k], float(m.r_lead[r, k]), float(width.max())))
            over, under = self._out_of_band(k)
            for b in np.r_[over, under]:
                usage = m.usage[b, k]
                why = (f"move budget reached (max_replica_moves={self.budgets.max_replica_moves})"
                       if not self._budget_left() else
                       "no leadership transfer, replica move or swap fits without breaking a placement rule or "
                       "another resource's band")
                self.plan.notes.append((self.names[k], int(m.broker_ids[b]),
                                        f"usage {usage:.4g} outside band [{band.lower:.4g}, "
                                        f"{self.limit[k]:.4g}] after the plan: {why}"))
