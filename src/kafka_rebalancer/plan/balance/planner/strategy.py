"""The order in which the planner tries its actions (the package docstring has the whole algorithm).

1. Hard constraints first, as forced moves: replicas on dead brokers are drained, replicas outside their topic's
   pool are brought home, partitions whose replicas share racks although the pool has enough racks get them
   spread. Forced moves go to the broker with the most room that keeps placement rules and capacity thresholds.
2. Then, for each balanced resource in priority order, the brokers outside the band (once the hard constraints
   hold) are fixed into the target band and held there (`Acceptance.hold_to_target`; where RF = racks and a
   rack holds more or less than its brokers' edges take, those of its fixed brokers on that side only to the
   band's edge: `_release_full_racks`), in turns (one search
   per broker per turn, most distant first), cheapest action first: a leadership transfer (for resources the
   leader's role changes), a replica move, a swap, and, for a broker that only hot partitions keep over the band,
   a hot-partition spread. Passes over the resources repeat until one changes nothing. A broker still outside
   the band then gets another round in which every broker is held to the band's edges only (the holds can keep
   the room it needs on the fixed brokers); the holds come back. A broker still outside a count's edges then
   gets a last round that may also exchange two of a broker's replicas for one (`CountExchange`).
3. Finally the plan is made smaller (`refine`: reverts, shortcuts, smaller substitutes; then, for a small pool,
   `exact`: the placement of every freely movable partition chosen again by a MILP), and what stays outside its
   band (or a fixed broker's target band) is explained.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from kafka_rebalancer.model.topic_spread import TopicSpreadSettings
from kafka_rebalancer.plan.balance.bands import Band
from kafka_rebalancer.plan.balance.bounds import byte_lower_bound
from kafka_rebalancer.plan.balance.feasibility import prove_infeasible
from kafka_rebalancer.plan.balance.model import PoolModel
from kafka_rebalancer.plan.balance.planner.actions import (
    CountExchange,
    LeadershipTransfer,
    ReplicaMove,
    ReplicaSwap,
)
from kafka_rebalancer.plan.balance.planner.constraints import EPS, Budgets, Constraints
from kafka_rebalancer.plan.balance.planner.exact import ExactLimits, ExactPolish
from kafka_rebalancer.plan.balance.planner.forced import ForcedPlacement
from kafka_rebalancer.plan.balance.planner.hot_spread import HotPartitionSpread
from kafka_rebalancer.plan.balance.planner.ranking import Ranking
from kafka_rebalancer.plan.balance.planner.refine import drop_round_trips, prune, shortcut, substitute
from kafka_rebalancer.plan.balance.planner.spread import SpreadRule
from kafka_rebalancer.plan.balance.planner.state import HARD, PlanState, PoolPlan


class Planner:
    """Plans one pool: `Planner(model, bands, priority, budgets).run()` changes the model to the planned state and
    returns the plan (the actions in order, notes, hot partitions, infeasibility proofs, the bytes' lower bound)."""

    def __init__(self, model: PoolModel, bands: dict[str, Band], priority: list[str], budgets: Budgets,
                 candidate_limit: int = 48, exact: ExactLimits | None = None,
                 out_of_band_now: Mapping[str, Iterable[int]] | None = None,
                 topic_spread: TopicSpreadSettings | None = None) -> None:
        """`out_of_band_now`: per resource, the brokers (ids) outside the band of the current placement, before the
        forced moves shift the pool's mean (what the summary calls out of band before): the plan fixes them too.
        `topic_spread`: the caps per (topic, broker) every action keeps, where enabled (None: not planned)."""
        self.model = model
        self.out_of_band_now = {name: np.flatnonzero(np.isin(model.broker_ids, list(ids)))
                                for name, ids in (out_of_band_now or {}).items()}
        self.names = [r.name for r in model.resources]
        self.priority = [self.names.index(name) for name in priority if name in self.names]
        self.candidate_limit = candidate_limit
        self.state = PlanState(model, self.names)
        spread = SpreadRule(model, topic_spread) if topic_spread is not None and topic_spread.enabled else None
        self.constraints = Constraints(self.state, bands, budgets, spread)
        self.acceptance = self.constraints.acceptance
        self.budget = self.constraints.budget
        ranking = Ranking(model, self.acceptance, candidate_limit, spread)
        self.leadership = LeadershipTransfer(self.state, self.constraints, ranking)
        self.replica_move = ReplicaMove(self.state, self.constraints, ranking)
        self.swap = ReplicaSwap(self.state, self.constraints, ranking)
        self.exchange = CountExchange(self.state, self.constraints, ranking)
        self.exchanges = False  # CountExchange is the last resort (run)
        self.band_edges_used = False  # whether a round let every broker use the band's edges (run)
        self.hot_spread = HotPartitionSpread(self.state, self.constraints, ranking)
        self.forced = ForcedPlacement(self.state, self.constraints, ranking)
        self.polish = ExactPolish(self.state, self.constraints, exact or ExactLimits())

    @property
    def plan(self) -> PoolPlan:
        return self.state.plan

    def run(self, max_passes: int = 20) -> PoolPlan:
        acceptance = self.acceptance
        balanced = [k for k in self.priority if acceptance.band(k).balanced]
        self.plan.lower_bound_bytes = byte_lower_bound(self.model, acceptance.lower, acceptance.limit, balanced)
        for k in balanced:
            acceptance.keep_within_target(k)
        self._hard()
        self.plan.infeasible = prove_infeasible(self.model, acceptance.lower, acceptance.limit, balanced,
                                                self.state.moved)
        # The brokers to fix are moved into the target band, not just the band (hysteresis), and held there: those
        # outside the band once the forced replicas have landed, and those outside it before (a broker the forced
        # moves' shift of the mean left inside the band would otherwise be filled or emptied to its edge).
        for k in balanced:
            now = self.out_of_band_now.get(self.names[k], np.empty(0, dtype=np.int64))
            acceptance.hold_to_target(k, np.union1d(np.concatenate(acceptance.out_of_band(k)),
                                                    now[self.model.eligible[now]]))
        self._release_full_racks(balanced)
        self._passes(balanced, max_passes)
        # A broker still outside the band may need room the holds keep on the fixed brokers (a giver held at the
        # target band's lower edge): another round with the band's edges for every broker. The holds come back
        # for refine, so it undoes nothing that moved a fixed broker into its target band.
        if any(acceptance.outside_band(k) for k in balanced):
            self.band_edges_used = True
            with acceptance.band_edges_only():
                self._passes(balanced, max_passes)
        # Two-for-one exchanges come last, for the brokers still outside a count's edges: tried in every pass they
        # changed which later moves fit and cost more bytes (hot brokers of the optimum bench: +10%).
        counts = [k for k in balanced if self.model.resources[k].is_count]
        if any(len(np.concatenate(acceptance.out_of_band(k))) for k in counts):
            self.exchanges = True
            self._passes(balanced, max_passes)
        self._refine()
        # The refinements free room on the partners (fewer moves, smaller ones): a broker no partner would take an
        # exchange from at its turn may find one now (mixed-200: two brokers over the count band at their disk's
        # lower edge, 184 partners accepting after refine). Refined again after.
        if self.exchanges and any(len(np.concatenate(acceptance.out_of_band(k))) for k in counts):
            self._passes(balanced, max_passes)
            self._refine()
        self.polish.run()
        self._explain(balanced)
        return self.plan

    def _refine(self) -> None:
        """Moves dropped, shortened, replaced by smaller ones, and round trips taken out (`refine`)."""
        prune(self.state, self.constraints)
        shortcut(self.state, self.constraints)
        substitute(self.state, self.constraints)
        drop_round_trips(self.state)

    # -- 1. hard constraints ---------------------------------------------------------------------------
    def _hard(self) -> None:
        m = self.model
        for r in sorted(np.flatnonzero(m.r_must_move), key=lambda r: (-m.r_size[r], r)):
            if not self.forced.place(int(r)):
                # Not eligible but alive: another pool's broker (or none's), which the pool's model holds excluded.
                s = m.r_broker[r]
                where = ("a dead broker" if not m.alive[s] else "a broker outside its topic's pool"
                         if not m.eligible[s] else "a broker being drained")
                self.plan.notes.append((HARD, int(m.broker_ids[s]),
                                        f"{m.r_topic[r]}-{m.r_partition[r]}: its replica on {where} could not be "
                                        f"placed ({self.forced.why_not(int(r))})"))
        # Placing a partition's replica changes only that partition's racks, so the partitions short of racks
        # can be found once, for all of them.
        first = self.priority[0] if self.priority else 0
        for p in np.flatnonzero(m.p_leadership_ok & self.constraints.placement.short_of_racks()):
            # Spread: move the duplicated-rack replica on the busiest broker to a rack the partition lacks.
            duplicate = self.forced.rack_duplicate(int(p), first)
            if not self.forced.place(duplicate, spread=True):
                self.plan.notes.append((HARD, int(m.broker_ids[m.r_broker[duplicate]]),
                                        f"{m.r_topic[duplicate]}-{m.r_partition[duplicate]}: its replicas share a "
                                        f"rack, and this one could not move to a rack the partition lacks "
                                        f"({self.forced.why_not(duplicate, spread=True)})"))

    def _release_full_racks(self, balanced: list[int]) -> None:
        """Where every freely movable partition has one replica on each rack (RF = racks), a replica never leaves
        its rack, so each rack's total of a resource the replicas carry stays what it is. A rack holding more than
        its brokers' edges together (or less) cannot keep every fixed broker in its target band: the fixed brokers
        over (under) it are held to the band's edge instead (`Acceptance.release`), where they copy least (held
        to the target band, the over brokers of a dead broker's rack in mixed-a shed to its edge and filled the
        brokers under the band past theirs: the same promises broken, more bytes copied)."""
        m, acceptance = self.model, self.acceptance
        racks = self.polish.racks_apart(self.polish.free_partitions())
        if not racks:
            return
        for k in [k for k in balanced if not m.resources[k].role_dependent]:
            for rack in racks:
                brokers = np.flatnonzero(m.eligible & (m.rack == rack))
                total, capacity, usage = m.load[brokers, k].sum(), m.capacity[brokers, k], m.usage[brokers, k]
                fixed = acceptance.fixed[brokers, k]
                if total > (acceptance.limit_of[brokers, k] * capacity).sum() + EPS:
                    acceptance.release(k, brokers[fixed & (usage > acceptance.limit_of[brokers, k] + EPS)], True)
                elif total < (acceptance.lower_of[brokers, k] * capacity).sum() - EPS:
                    acceptance.release(k, brokers[fixed & (usage < acceptance.lower_of[brokers, k] - EPS)], False)

    # -- 2. balancing ----------------------------------------------------------------------------------
    def _passes(self, balanced: list[int], max_passes: int) -> None:
        for _ in range(max_passes):
            if not any([self._fix_resource(k) for k in balanced]):
                return

    def _fix_resource(self, k: int) -> bool:
        """Turns over the brokers outside the band until a turn in which every one of them tried changes nothing;
        True if anything changed. A broker whose tries keep failing sits out 1, 2, 4, ... turns in between (its
        chances rarely change from one turn to the next, and a failed try costs as much as a whole search)."""
        band = self.acceptance.band(k)
        changed = False
        failures: dict[int, int] = {}
        wait: dict[int, int] = {}
        while True:
            over, under = self.acceptance.out_of_band(k)
            usage = self.model.usage[:, k]
            distance = np.r_[usage[over] - self.acceptance.limit_of[over, k],
                             self.acceptance.lower_of[under, k] - usage[under]]
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

    def _move_out(self, s: int, k: int, band: Band) -> bool:
        """One action taking load in k off over-loaded broker s."""
        m = self.model
        limit = self.acceptance.limit_of[:, k]
        cap = m.capacity[s, k]
        aim = self.acceptance.limit_of[s, k] if self.acceptance.released[s, k] else band.target_upper
        need = m.load[s, k] - aim * cap
        most = m.load[s, k] - self.acceptance.lower_of[s, k] * cap
        usage = m.usage[:, k]
        takers = np.flatnonzero(m.eligible & (usage < limit - EPS))
        takers = takers[np.argsort(usage[takers], kind="stable")]
        # A swap lands a replica on the taker and takes one from it: brokers a manual operation keeps from either
        # are left out before the cut, so they do not crowd out the others (leadership goes anywhere eligible).
        swap_takers = takers[m.receives[takers] & m.gives[takers]]
        takers = takers[: self.candidate_limit // 4]
        if m.resources[k].role_dependent:
            if self.leadership.hand_over(s, k, need, most):
                return True
            if m.resources[k].is_count and self.leadership.with_room(s, k, need, most, taking=False):
                return True
            if not m.resources[k].is_count and any(
                    self.leadership.swap(s, int(t), k, need, min(most, limit[t] * m.capacity[t, k] - m.load[t, k]))
                    for t in takers):
                return True
        if not self.budget.brokers_left()[s] or not self.budget.moves_left():
            return False
        if self.replica_move.give(s, k, need, most):
            return True
        if m.resources[k].is_count:  # a swap leaves counts unchanged; two replicas for one do not
            return self.exchanges and any(self.exchange.exchange(s, int(t), k)
                                          for t in self._exchange_partners(s, swap_takers, self.candidate_limit))
        for t in self._exchange_partners(s, swap_takers):
            room = limit[t] * m.capacity[t, k] - m.load[t, k]
            if self.swap.swap(s, int(t), k, need, min(most, room)):
                return True
        return self.hot_spread.spread(s, k)

    def _move_in(self, t: int, k: int, band: Band) -> bool:
        """One action bringing load in k to under-loaded broker t."""
        m = self.model
        cap = m.capacity[t, k]
        lower = self.acceptance.lower_of[:, k]
        aim = self.acceptance.lower_of[t, k] if self.acceptance.released[t, k] else band.target_lower
        need = aim * cap - m.load[t, k]
        most = self.acceptance.limit_of[t, k] * cap - m.load[t, k]
        usage = m.usage[:, k]
        sources = np.flatnonzero(m.eligible & (usage > lower + EPS))
        sources = sources[sources != t]
        by_usage = sources[np.argsort(-usage[sources], kind="stable")]
        # Replicas come only from brokers that may give (a manual operation's role); leaderships from any.
        givers = by_usage[m.gives[by_usage]]
        if m.resources[k].role_dependent:
            if self.leadership.take_over(t, k, need, most):
                return True
            if m.resources[k].is_count and self.leadership.with_room(t, k, need, most, taking=True):
                return True
            if not m.resources[k].is_count and any(
                    self.leadership.swap(int(s), t, k, need, min(most, m.load[s, k] - lower[s] * m.capacity[s, k]))
                    for s in by_usage[: self.candidate_limit // 4]):
                return True
        if not m.receives[t] or not self.budget.brokers_left()[t] or not self.budget.moves_left():
            return False
        if self.replica_move.take(t, k, need, most, givers):
            return True
        if m.resources[k].is_count:
            return self.exchanges and any(self.exchange.exchange(s, t, k)
                                          for s in self._exchange_partners(t, givers, self.candidate_limit))
        for s in self._exchange_partners(t, givers):
            spare = m.load[s, k] - lower[s] * m.capacity[s, k]
            if self.swap.swap(int(s), t, k, need, min(most, spare)):
                return True
        return False

    def _exchange_partners(self, b: int, brokers: np.ndarray, limit: int | None = None) -> list[int]:
        """The first `limit` (`candidate_limit // 4`) of `brokers`, in their order, that b can exchange replicas with
        under the rack rule (each reaches the other's rack): where every partition has a replica on every rack, only
        b's own rack, and a cut before this filter left two thirds of the partners useless (mixed hardware: brokers
        stayed over the disk band that a swap within their rack would have fixed). Two-for-one exchanges, the last
        resort, ask more: the brokers with the fewest replicas sat at the disk's upper edge, and a broker over the
        count band at its disk's lower edge found none of the first twelve (mixed-200)."""
        limit = limit or self.candidate_limit // 4
        placement = self.constraints.placement
        partners: list[int] = []
        for x in map(int, brokers):
            if placement.reaches(b, x) and placement.reaches(x, b):
                partners.append(x)
                if len(partners) == limit:
                    break
        return partners

    # -- 3. explaining ---------------------------------------------------------------------------------
    def _could_move(self, b: int, k: int, gives: bool) -> np.ndarray:
        """The replicas whose move would change b's load in k: its own when it is over, the others' when under."""
        if gives:
            return self.state.movable_on(b, k)
        others = [self.state.movable_on(g, k) for g in np.flatnonzero(self.model.eligible).tolist() if g != b]
        return np.concatenate(others) if others else np.zeros(0, np.int64)

    def _explain_released(self) -> None:
        """Notes for the fixed brokers `_release_full_racks` held to the band's edge that end outside their target
        band: a promise the plan cannot keep, said where it is broken."""
        m, acceptance = self.model, self.acceptance
        for b, k in zip(*np.nonzero(acceptance.released & acceptance.short_of_target()), strict=True):
            lower, upper = acceptance.target_edges(int(k))
            side = "more" if m.usage[b, k] > upper else "less"
            self.plan.notes.append((self.names[k], int(m.broker_ids[b]), (
                f"usage {m.usage[b, k]:.4g} inside band [{acceptance.lower[k]:.4g}, {acceptance.limit[k]:.4g}] but "
                f"outside the target band [{lower:.4g}, {upper:.4g}] after the plan: its rack holds {side} than its "
                "brokers' target bands take together and a replica never leaves its rack (every partition has one "
                "replica on each rack), so some of them end outside; this one, already there, copies least")))

    def _explain(self, balanced: list[int]) -> None:
        self._explain_released()
        m = self.model
        acceptance = self.acceptance
        for k in balanced:
            width = (acceptance.limit[k] - acceptance.lower[k]) * m.capacity[m.eligible, k]
            if not m.resources[k].is_count and len(width):
                # A partition whose load alone exceeds every broker's band width cannot be balanced by moving it.
                first_rows = m.p_start
                for r in first_rows[m.r_lead[first_rows, k] > width.max()]:
                    self.plan.hot.append((int(r), self.names[k], float(m.r_lead[r, k]), float(width.max())))
            over, under = acceptance.out_of_band(k)
            for b, gives in [(int(b), True) for b in over] + [(int(b), False) for b in under]:
                usage = m.usage[b, k]
                why = self.budget.spent_for(b, self._could_move(b, k, gives)) or (
                    "no leadership transfer, replica move, swap or two-for-one exchange fits without breaking a "
                    "placement rule or another resource's band")
                where = f"outside band [{acceptance.lower[k]:.4g}, {acceptance.limit[k]:.4g}]"
                if self.band_edges_used and not acceptance.fixed[b, k]:
                    why = ("the last round let every broker use the band's edges to make room for brokers still "
                           "outside the band")
                if acceptance.lower[k] - EPS <= usage <= acceptance.limit[k] + EPS:
                    target = (f"the target band [{acceptance.lower_of[b, k]:.4g}, {acceptance.limit_of[b, k]:.4g}]"
                              if acceptance.fixed[b, k] else
                              f"its target band, or further from it than before the plan (edges "
                              f"[{acceptance.lower_of[b, k]:.4g}, {acceptance.limit_of[b, k]:.4g}])")
                    where = f"inside band [{acceptance.lower[k]:.4g}, {acceptance.limit[k]:.4g}] but outside {target}"
                self.plan.notes.append((self.names[k], int(m.broker_ids[b]), f"usage {usage:.4g} {where} after "
                                                                             f"the plan: {why}"))
