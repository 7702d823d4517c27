"""The actions: each looks for one change that helps a broker in one resource, asks the constraints, and makes it
through the state when they accept (returning True), or changes nothing (False).

- a leadership transfer (another in-sync replica becomes the first replica and, after the preferred leader
  election, the leader): no data moves; it changes network out, CPU and leader count;
- a replica move: an over-loaded broker gives away a replica whose load lies in the pre-check window
  `[load_s - target_upper*cap_s, load_s - lower*cap_s]`, so it lands inside the band; an under-loaded broker
  takes one in `[target_lower*cap_t - load_t, upper*cap_t - load_t]` from a broker that stays above the lower
  edge. By size, the replica that lands the broker inside with the least data, alone or with one more on the
  broker's next turn (two may copy less than the smallest that does alone); when none does, the largest that
  does not overshoot moves and the broker is fixed further on its next turn. For counts, the smallest replica, and
  for a broker short of (over by) many units several ranked replicas per search (`_take_more`, `_give_more`);
- a swap, when no single move fits: a larger replica for a smaller one, so the net transfer lands in the window;
- for a count, a two-for-one exchange when no single move fits: the count moves by one, the rest by the difference;
(a hot-partition spread, for a broker whose hot partitions alone keep it over the band, is in `hot_spread`; the
forced placement of a replica that must move whatever the balance in `forced`). Every one keeps the topic
spread's caps where it is planned (`spread`, through `Placement` and the leadership checks here).

`need` is the load that lands the broker inside the target band, `most` the most it may move without
overshooting the band on the other side.
"""

from __future__ import annotations

import numpy as np

from kafka_rebalancer.plan.balance.planner.constraints import EPS, Constraints
from kafka_rebalancer.plan.balance.planner.ranking import Ranking
from kafka_rebalancer.plan.balance.planner.state import PlanState

# The brokers below the band (the least used first) whose reach filters what a broker over it gives: new brokers
# are few; the filter's cost grows with them.
BELOW_BAND_TARGETS = 8


def enough_within(loads: np.ndarray, use: float, need: float) -> bool:
    """Whether the `loads` of at most `use` add up to `need`: moving only such replicas, one per turn, can still
    reach it (where they cannot, a larger one is the only way in)."""
    return bool(loads[loads <= use + EPS].sum() >= need - EPS)


class Action:
    """What every action works with: the state it changes, the constraints it asks, the ranking of candidates."""

    def __init__(self, state: PlanState, constraints: Constraints, ranking: Ranking) -> None:
        self.state = state
        self.model = state.model
        self.constraints = constraints
        self.placement = constraints.placement
        self.acceptance = constraints.acceptance
        self.budget = constraints.budget
        self.ranking = ranking
        self.candidate_limit = ranking.candidate_limit
        self.topic_caps = constraints.spread

    def transfers_ok(self, new_leaders: list[int]) -> bool:
        """Leadership transfers to these replicas (together) keep the topic spread's leader caps."""
        return self.topic_caps is None or self.topic_caps.transfers_ok(new_leaders)

    def leaderships_ok(self, new_leaders: np.ndarray) -> np.ndarray | bool:
        """Mask over replicas that may each become leader under the topic spread's leader caps."""
        return True if self.topic_caps is None else self.topic_caps.leaderships_ok(new_leaders)


class LeadershipTransfer(Action):
    """No data moves: another in-sync replica becomes the first replica (and the leader)."""

    def hand_over(self, s: int, k: int, need: float, most: float) -> bool:
        """Hand leadership of a partition s leads to another of its in-sync replicas."""
        m = self.model
        usage = m.usage[:, k]
        for r in self.ranking.leaderships(s, k, need, most, leaders=True)[: self.candidate_limit]:
            delta = m.leadership_delta(int(r))
            if not self.acceptance.loss_ok(s, delta):
                continue
            others = m.partition_rows(int(r))
            others = others[(others != r) & m.eligible[m.r_broker[others]]]
            ok = others[self.acceptance.gain_ok(m.r_broker[others], delta) & self.leaderships_ok(others)]
            if len(ok):
                self.state.apply_leadership([int(ok[np.argmin(usage[m.r_broker[ok]])])], k)
                return True
        return False

    def take_over(self, t: int, k: int, need: float, most: float) -> bool:
        """Take over leadership of a partition t follows."""
        m = self.model
        rs = self.ranking.leaderships(t, k, need, most, leaders=False)[: self.candidate_limit]
        leaders = m.leaders_of(rs)
        rs, leaders = rs[leaders >= 0], leaders[leaders >= 0]
        # The first candidate whose leader's broker stays above its lower edges and t below its upper edges.
        delta = m.r_lead[rs] - m.r_follow[rs]
        ok = np.flatnonzero(self.acceptance.losses_ok(m.r_broker[leaders], delta)
                            & self.acceptance.gain_ok(t, delta) & self.leaderships_ok(rs))
        if not len(ok):
            return False
        self.state.apply_leadership([int(rs[ok[0]])], k)
        return True

    def swap(self, giver: int, taker: int, k: int, need: float, most: float) -> bool:
        """Hand giver's leadership of one partition to taker and take over a lighter one from taker, so the net
        transfer in resource k reaches `need` without exceeding `most`; leader counts stay as they are and no
        data moves."""
        m = self.model
        if most <= EPS:
            return False

        def shared_leaders(b: int, other: int) -> tuple[np.ndarray, np.ndarray]:
            """b's leader rows of partitions `other` follows, and other's rows of those partitions."""
            mine = m.leadership_rows(b, leaders=True)[0]
            theirs, partitions = m.by_partition(other)
            if not len(mine) or not len(theirs):
                return mine[:0], theirs[:0]
            # other's row of each of b's partitions, by a sorted lookup (a broker holds a partition at most once)
            wanted = m.r_pindex[mine]
            at = np.minimum(np.searchsorted(partitions, wanted), len(partitions) - 1)
            keep = partitions[at] == wanted
            return mine[keep], theirs[at[keep]]

        give, give_to = shared_leaders(giver, taker)
        take, take_from = shared_leaders(taker, giver)
        if not len(give) or not len(take):
            return False
        pairs = self.ranking.pairs(m.r_lead[give, k] - m.r_follow[give, k], m.r_lead[take, k] - m.r_follow[take, k],
                                   need, most)
        for i, j in pairs:
            net = m.leadership_delta(int(give_to[i])) - m.leadership_delta(int(take_from[j]))
            if self.acceptance.exchange_ok(giver, taker, net) and self.transfers_ok([int(give_to[i]),
                                                                                    int(take_from[j])]):
                self.state.apply_leadership([int(give_to[i]), int(take_from[j])], k)
                return True
        return False

    def with_room(self, b: int, k: int, need: float, most: float, taking: bool, swaps: int = 3) -> bool:
        """Leader count: when taking a leadership would push b over another band (network out or CPU at its upper
        edge), first hand heavy leaderships over for light ones; when handing one over would take b under another
        band (at its lower edge), first take heavy leaderships for light ones. Leadership swaps leave the count as
        it is (up to `swaps` of them); then the leadership is taken or handed over, or the swaps are given up."""
        m = self.model
        lower, limit = self.acceptance.lower_of, self.acceptance.limit_of
        done = 0
        for j, res in enumerate(m.resources):
            if j == k or not res.role_dependent or res.is_count or not self.acceptance.band(j).balanced:
                continue
            while done < swaps:
                usage, spare, room = m.usage[:, j], m.load[:, j] - lower[:, j] * m.capacity[:, j], \
                    limit[:, j] * m.capacity[:, j] - m.load[:, j]
                # The other side of each swap: brokers with room to take load (b gives it), or spare to give it.
                others = np.flatnonzero(m.eligible & ((usage < limit[:, j] - EPS) if taking else
                                                      (usage > lower[:, j] + EPS)))
                others = others[others != b]
                others = others[np.argsort(usage[others] if taking else -usage[others], kind="stable")]
                if not any(self.swap(b, int(y), j, EPS, min(spare[b], room[y])) if taking else
                           self.swap(int(y), b, j, EPS, min(spare[y], room[b]))
                           for y in others[: self.candidate_limit // 2]):
                    break
                done += 1
                if (self.take_over if taking else self.hand_over)(b, k, need, most):
                    return True
        for _ in range(done):
            self.state.undo_last()
        return False


class ReplicaMove(Action):
    """One replica to another broker: from an over-loaded broker, or to an under-loaded one."""

    # Replicas one search may take (give) for a count (`_take_more`, `_give_more`), all from (to) one broker. Fewer
    # per search spread a new broker's count over more givers, each giving only its smallest replicas: at 3,000
    # brokers with 50 new, 32 drained 1,330 givers by up to 146 replicas each (median 0.50 GB, 50.7 TB copied for
    # the count). 8 copied least at 3,000 brokers (1.12 -> 1.08 x the disk lower bound) but searched more givers
    # for the same count (12-21 % more planner CPU at 1,000) and copied 1.3 % more on a 48-broker mix; 16 copies as
    # little as 8 at 1,000 brokers, 1.09 x at 3,000, for less CPU.
    batch = 16
    # For a size resource, how many givers that can reach the need `take` compares (4 or all 24 cost more time at
    # 1,000 brokers and copied more there; 2 moved the least on every bench scale).
    givers_compared = 2

    def __init__(self, state: PlanState, constraints: Constraints, ranking: Ranking) -> None:
        super().__init__(state, constraints, ranking)
        # Per (broker, resource): the broker's change count when none of its replicas could leave it (`_giveable`).
        m = state.model
        self._cannot_give = np.full((len(m.broker_ids), len(m.resources)), -1, dtype=np.int64)
        # _giveable's answers, with the movable loads and the change count they were worked out from.
        self._giveable_kept: dict[tuple[int, int], tuple[np.ndarray, int, np.ndarray, np.ndarray]] = {}

    def give(self, s: int, k: int, need: float, most: float) -> bool:
        """Move one of s's replicas, by best fit, to the least used broker in k that every rule allows; a replica
        that `_overshoots` only where no other moves."""
        m = self.model
        fitting, loads = self._for_below_band(*self._fitting(s, k, most), s, k)
        candidates, _, _ = self.ranking.replicas(fitting, loads, k, need, giver=s)
        if m.resources[k].is_count and len(candidates) and self._over_elsewhere(s, k):
            # A giver over another band (a disk-heavy broker shedding a count) asks for replicas carrying its excess
            # per unit; where the broker the first would go to is not under any band (it would have to give that
            # back), ranked again with it, so it gets the least. Ranked so for a broker under the disk band too, a
            # rack-locked 12-broker pool (the shapes bench's mixed-a@12) copied 6 % more.
            t = self._least_used_target(int(candidates[0]), s, k)
            if t is not None and not self._under_elsewhere(t, k):
                candidates, _, _ = self.ranking.replicas(fitting, loads, k, need, giver=s, receiver=t)
        over_both: tuple[int, int] | None = None
        stepwise = not m.resources[k].is_count and enough_within(loads[:, k], need, need)
        for i, r in enumerate(map(int, candidates)):
            t = self._least_used_target(r, s, k)
            if t is None:
                continue
            if stepwise and self._overshoots(r, t, k, need):
                over_both = over_both or (r, t)
                continue
            self.state.apply([(r, t)], k)
            if self._batches(k):
                self._give_more(s, k, candidates[i + 1:], need - float(m.r_load[r, k]))
            return True
        if over_both is None:
            return False
        self.state.apply([over_both], k)
        return True

    def _over_elsewhere(self, s: int, k: int) -> bool:
        """Whether s is over its edges in a balanced resource other than k."""
        m, acceptance = self.model, self.acceptance
        others = [j for j in np.flatnonzero(np.isfinite(acceptance.upper)) if j != k]
        return bool((m.usage[s, others] > acceptance.limit_of[s, others] + EPS).any())

    def _under_elsewhere(self, t: int, k: int) -> bool:
        """Whether t is under its edges in a balanced resource other than k."""
        m, acceptance = self.model, self.acceptance
        others = [j for j in np.flatnonzero(np.isfinite(acceptance.upper)) if j != k]
        return bool((m.usage[t, others] < acceptance.lower_of[t, others] - EPS).any())

    def _overshoots(self, r: int, t: int, k: int, need: float) -> bool:
        """Whether r's load in k is more than the giver needs to shed and more than t lacks to its lower edge: the
        rest lands on t for nothing, where t (a broker below the band) lacked less, or t needed nothing. Such a
        replica moves only where no other does, and only where the giver's replicas that do not overshoot cover its
        need together (`enough_within`): the largest of them moves now and the giver gets its rest on its next
        turns (mixed-a: a 415 GB replica for a 231 GB need, landing on a broker short of 248 GB, copied 170 GB
        that other brokers then had to give again)."""
        m = self.model
        lacks = self.acceptance.lower_of[t, k] * m.capacity[t, k] - m.load[t, k]
        return bool(m.r_load[r, k] > max(need, lacks) + EPS)

    def _for_below_band(self, rs: np.ndarray, loads: np.ndarray, s: int, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Where brokers are below the band in k, only those of s's replicas `rs` (with their `loads`) that the rack
        rule lets land on one of them (all where none may): the others would go to the least used broker they may
        reach, already inside the band, and the one below would then be filled from others (at RF 2 over three
        racks a hot broker sent a third of what it shed to brokers inside the band). Before the ranking's cut,
        which would otherwise run out of such replicas while s still has plenty."""
        m = self.model
        usage = m.usage[:, k]
        below = np.flatnonzero(m.eligible & m.receives & (usage < self.acceptance.lower[k] - EPS))
        if not len(below) or not len(rs):
            return rs, loads
        reach = np.zeros(len(rs), dtype=bool)
        for t in below[np.argsort(usage[below], kind="stable")][:BELOW_BAND_TARGETS]:
            reach |= self.constraints.placement.allows_many(rs, int(t))
        if reach.all() or not reach.any():
            return rs, loads
        return rs[reach], loads.compress(reach, axis=0)

    def _batches(self, k: int) -> bool:
        """A search moves several replicas for a replica count only: every replica weighs 1 there, whatever its role
        (for the leader count, batches of leaders left brokers where no leadership transfer could fix them)."""
        resource = self.model.resources[k]
        return resource.is_count and not resource.role_dependent

    def _to_least_used(self, r: int, s: int, k: int) -> bool:
        """Move r from s to the least used broker in k that every rule allows, if there is one."""
        t = self._least_used_target(r, s, k)
        if t is None:
            return False
        self.state.apply([(r, t)], k)
        return True

    def _least_used_target(self, r: int, s: int, k: int) -> int | None:
        """The least used broker in k that every rule allows r to move to from s, if any; for a count, of those
        under their edges in another balanced resource where any is allowed: they must be filled anyway, where a
        broker inside every band gets a replica it must then give back in bytes (mixed-a: a hot broker's count
        went to brokers inside the disk band, which gave 100 GB of disk back)."""
        m = self.model
        targets = self.constraints.feasible_targets(r, s)
        if not targets.any():
            return None
        if m.resources[k].is_count:
            others = [j for j in np.flatnonzero(np.isfinite(self.acceptance.upper)) if j != k]
            under = targets & (m.usage[:, others] < self.acceptance.lower_of[:, others] - EPS).any(axis=1)
            targets = under if under.any() else targets
        usage = m.usage[:, k]
        return int(np.flatnonzero(targets)[np.argmin(usage[targets])])

    def _give_more(self, s: int, k: int, candidates: np.ndarray, need: float) -> None:
        """For a count, while s still has units to shed: the next of its ranked candidates, each its own action to
        the least used broker that allows it, up to `batch` in all (as `_take_more`, the giving side)."""
        m = self.model
        for r in map(int, candidates[: self.batch - 1]):
            if need <= EPS or not self.budget.moves_left() or not self.budget.brokers_left()[s]:
                return
            if self.acceptance.loss_ok(s, m.r_load[r]) and self._to_least_used(r, s, k):
                need -= float(m.r_load[r, k])

    def take(self, t: int, k: int, need: float, most: float, givers: np.ndarray) -> bool:
        """Move one replica to t from the first of `givers` (most used first) that has one every rule allows (of
        the first `candidate_limit // 2` givers that can give at all); for a size resource, of the first
        `givers_compared` givers whose replica reaches need (alone or with another), the replica that does with the
        least load (the most used giver's best often copies far more than the next one's)."""
        m = self.model
        # The first givers that can give at all are tried, however many before them cannot: in a large pool the
        # brokers holding the most replicas often hold the smallest, and sit at another resource's lower edge
        # (at 1,000 brokers every one of the first 24 did, and 39 new brokers stayed short of the count band).
        candidates = givers[self.budget.brokers_left()[givers] & (self._cannot_give[givers, k] != m.changes[givers])]
        # Givers none of whose replicas the placement rules allow on t count apart, with a larger allowance: with
        # as many racks as replicas, only t's own rack can give, a third of the most used givers or fewer (at 200
        # brokers placed by Kafka, new brokers stayed short of every band while their rack still had room).
        tried = barred = 0
        # For a size resource: the first giver's placed replica, and the one that reaches need with the least load.
        first: tuple[int, int] | None = None
        best: tuple[float, int, int] = (np.inf, -1, -1)
        compared = 0
        for s in candidates:
            if tried == self.candidate_limit // 2 or barred == 2 * self.candidate_limit:
                break
            if not self.placement.reaches(int(s), t):
                continue
            fitting = self._under_caps(self._fitting(int(s), k, most), t)
            if self._cannot_give[s, k] == m.changes[s]:
                continue
            if not m.resources[k].is_count:
                fitting = self._within_use(fitting, int(s), k, need)
            rs, loads, costs = self.ranking.replicas(*fitting, k, need, giver=int(s), receiver=t)
            accepted = self.constraints.accepted(rs, int(s), t, loads)
            ok, costs = rs[accepted], costs[accepted]
            at = self._first_placed(ok, int(s), t)
            if at is None:
                barred += bool(len(ok))
                tried += not len(ok)
                continue
            tried += 1
            chosen = int(ok[at])
            if m.resources[k].is_count:  # every replica weighs 1: the first giver's
                self.state.apply([(chosen, t)], k)
                if self._batches(k):
                    self._take_more(t, k, int(s), ok[ok != chosen], need - float(m.r_load[chosen, k]))
                return True
            first = first or (int(s), chosen)
            if first[0] == s and not np.isfinite(costs[at]):
                break  # need is beyond two of the first giver's replicas: any giver's largest does as well
            if costs[at] < best[0] - EPS:
                best = (float(costs[at]), int(s), chosen)
            compared += bool(np.isfinite(costs[at]))
            if compared == self.givers_compared:
                break
        choice = best[1:] if np.isfinite(best[0]) else first
        if choice is None:
            return False
        self.state.apply([(choice[1], t)], k)
        return True

    def _under_caps(self, fitting: tuple[np.ndarray, np.ndarray], t: int) -> tuple[np.ndarray, np.ndarray]:
        """Of a giver's `fitting` replicas (with their loads), those the topic spread's caps let t take, before they
        are ranked: a giver over its topics' targets ranks those topics' replicas first, and where t already holds
        its cap of each, its whole ranked list was barred and the search went on giver after giver (at 1,000 brokers
        placed by Kafka, nine in ten givers tried, three times the planner's CPU)."""
        if self.topic_caps is None:
            return fitting
        rs, loads = fitting
        allowed = self.topic_caps.allows_many(rs, t)
        return fitting if allowed.all() else (rs[allowed], loads.compress(allowed, axis=0))

    def _within_use(self, fitting: tuple[np.ndarray, np.ndarray], s: int, k: int,
                    need: float) -> tuple[np.ndarray, np.ndarray]:
        """Of giver s's `fitting` replicas (with their loads), those weighing at most what the taker needs or s must
        shed (its load over its edge), where together they cover the need: a larger one copies its rest for
        neither (`_overshoots`, the taking side), and the taker gets the rest on its next turns."""
        m = self.model
        use = max(need, m.load[s, k] - self.acceptance.limit_of[s, k] * m.capacity[s, k])
        rs, loads = fitting
        fits = loads[:, k] <= use + EPS
        if fits.all() or not enough_within(loads[:, k], use, need):
            return fitting
        return rs[fits], loads.compress(fits, axis=0)

    def _first_placed(self, candidates: np.ndarray, s: int, t: int) -> int | None:
        """The index of the first candidate the placement rules allow on t, if any. The first are often placed: two
        are asked one at a time (the vectorised check costs as much for one as for all; where the rack rule bars a
        giver, it usually bars all 48), the rest at once."""
        at = next((i for i in range(min(2, len(candidates))) if self.placement.allows(int(candidates[i]), s, t)), None)
        if at is None:
            placed = np.flatnonzero(self.placement.allows_many(candidates[2:], t))
            at = int(placed[0]) + 2 if len(placed) else None
        return at

    def _take_more(self, t: int, k: int, s: int, candidates: np.ndarray, need: float) -> None:
        """For a count, while t still needs units: the next of the same giver's ranked candidates, each its own
        action, up to `batch` in all (a scale-out fills a new broker with a thousand replicas, and one search per
        replica was most of the planner's time; the giver's ranking holds for the next few).

        The candidates passed the acceptance rule one at a time; together they pass it as a prefix in rank order
        (loads only add up, so the cumulative loads are checked). The placement rules hold for each: they are
        the giver's replicas, one per partition, and moving one changes no other partition's brokers."""
        m = self.model
        candidates = candidates[: self.batch - 1]
        # The caps are the batch's (each alone is not enough: the topic's cap counts the batch's earlier replicas).
        candidates = candidates[self.placement.allows_many(candidates, t, capped=False)]
        if self.topic_caps is not None:
            candidates = candidates[self.topic_caps.allows_together(candidates, t)]
        if not len(candidates):
            return
        loads = np.cumsum(m.r_load[candidates], axis=0)
        steps = np.arange(1, len(candidates) + 1)
        ok = (self.acceptance.moves_ok(candidates, s, t, loads)
              & (loads[:, k] - m.r_load[candidates, k] < need - EPS)
              # The giver keeps half its room above every lower edge: the others give their share too, and it keeps
              # room for the actions still to fix it (a giver drained to an edge by batches could not hand over a
              # leadership it had too many of).
              & np.all(loads <= (m.load[s] - self.acceptance.lower_of[s] * m.capacity[s]) / 2 + EPS, axis=1)
              & self.budget.bytes_ok(np.cumsum(m.r_size[candidates]))
              & (self.state.replica_moves + steps <= self.budget.budgets.max_replica_moves))
        if self.budget.budgets.max_moves_per_broker is not None:
            ok &= self.state.broker_moves[[s, t]].max() + steps <= self.budget.budgets.max_moves_per_broker
        for r in candidates[: int(np.argmin(ok)) if not ok.all() else len(ok)]:
            self.state.apply([(int(r), t)], k)

    def _fitting(self, s: int, k: int, most: float) -> tuple[np.ndarray, np.ndarray]:
        """s's replicas that may move for k, keep s at or above every lower edge and weigh at most `most` in k,
        with their loads (no copies when all do)."""
        rs, loads = self._giveable(s, k)
        fits = loads[:, k] <= most + EPS
        return (rs, loads) if fits.all() else (rs[fits], loads.compress(fits, axis=0))

    def _giveable(self, s: int, k: int) -> tuple[np.ndarray, np.ndarray]:
        """s's movable replicas for k whose loss keeps s at or above every lower edge (the acceptance rule's loss
        side, which depends on s alone), with their loads; kept until s changes.

        The ranking sees only these: a giver at another resource's lower edge (common when many brokers fill up
        from the same givers, a scale-out) often has only replicas without load there to give, and those would
        rank below 48 that it may not give."""
        m = self.model
        movable, movable_loads = self.state.movable_with_loads(s, k)
        kept = self._giveable_kept.get((s, k))
        if kept is not None and kept[0] is movable_loads and kept[1] == m.changes[s]:
            return kept[2], kept[3]
        ok = self.acceptance.losses_ok_columns(s, self.state.movable_columns(s, k))
        rs, loads = movable, movable_loads
        if not ok.all():
            rs, loads = rs[ok], loads.compress(ok, axis=0)
            rs.flags.writeable = loads.flags.writeable = False  # shared by every caller until s changes
        if not len(rs):
            self._cannot_give[s, k] = m.changes[s]
        self._giveable_kept[(s, k)] = (movable_loads, int(m.changes[s]), rs, loads)
        return rs, loads


class ReplicaSwap(Action):
    """Two replicas exchanged between two brokers under one action, for a net transfer."""

    def swap(self, giver: int, taker: int, k: int, need: float, most: float) -> bool:
        """Exchange a replica of giver for a smaller one of taker so the net transfer in resource k reaches
        `need` without exceeding `most` (or comes as close as it can)."""
        m = self.model
        if most <= EPS or not self.budget.moves_left(2) or not self.budget.brokers_left(2)[[giver, taker]].all():
            return False
        # Each broker gives one replica and receives the other's: both must be allowed both (manual roles).
        if not (m.receives[[giver, taker]].all() and m.gives[[giver, taker]].all()):
            return False
        give = self.state.movable_on(giver, k)
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
                pairs += [(int(g[i]), int(t[j])) for i, j in self.ranking.pairs(
                    m.r_load[g, k], m.r_load[t, k], need, most, sizes=(m.r_size[g], m.r_size[t]))]
        if not pairs:
            return False
        # Both roles' pairs in one ranking: those reaching need by the fewest bytes, then the largest nets.
        r1s, r2s = np.array(pairs).T
        ranked = self.ranking.fewest_bytes_first(m.r_load[r1s, k] - m.r_load[r2s, k], m.r_size[r1s] + m.r_size[r2s],
                                                 need)
        r1s, r2s = r1s[ranked], r2s[ranked]
        # Every rule for every pair at once (nothing changes until one is made), then the first pair they allow.
        ok = (m.r_pindex[r1s] != m.r_pindex[r2s]) & self.budget.bytes_ok(m.r_size[r1s] + m.r_size[r2s])
        ok &= self.placement.allows_many(r1s, taker) & self.placement.allows_many(r2s, giver)
        delta = m.r_load[r1s] - m.r_load[r2s]
        given, returned = np.maximum(delta, 0), np.maximum(-delta, 0)
        ok &= (self.acceptance.losses_ok(giver, given) & self.acceptance.losses_ok(taker, returned)
               & self.acceptance.gain_ok(taker, given) & self.acceptance.gain_ok(giver, returned))
        first = np.flatnonzero(ok)
        if not len(first):
            return False
        self.state.apply([(int(r1s[first[0]]), taker), (int(r2s[first[0]]), giver)], k)
        return True


class CountExchange(Action):
    """Two replicas for one between two brokers under one action: a count moves by one unit while every other
    resource moves by the difference. A broker over a count band that sits at another resource's lower edge
    can give no replica alone, and a swap leaves the counts as they are; two small replicas out and one of
    about their size back relieves the count and keeps the rest."""

    GIVEN = 16  # the giver's smallest allowed replicas, paired two by two (120 pairs)
    RETURNED = 64  # the taker's smallest allowed replicas, one of them coming back ...
    NEAREST = 4  # ... or one of the closest in size to the two given

    def exchange(self, giver: int, taker: int, k: int) -> bool:
        """Giver hands two of its replicas to taker and takes one of taker's back: of the triples every rule
        allows, the one that copies the fewest bytes."""
        m = self.model
        if not self.budget.moves_left(3) or not self.budget.brokers_left(3)[[giver, taker]].all():
            return False
        if not (m.receives[[giver, taker]].all() and m.gives[[giver, taker]].all()):
            return False
        given = self._smallest_allowed(self.state.movable_on(giver, k), taker, self.GIVEN)
        # As in a swap, the taker may hand back a replica that arrived earlier in the plan.
        returned = m.replicas_on(taker)
        returned = returned[m.r_movable[returned]]
        returned = returned[self.placement.allows_many(returned, giver)]
        if len(given) < 2 or not len(returned):
            return False
        first, second = np.triu_indices(len(given), 1)
        a, b, c = self._triples(given[first], given[second], returned)
        net = m.r_load[a] + m.r_load[b] - m.r_load[c]  # from giver to taker
        to_taker, to_giver = np.maximum(net, 0), np.maximum(-net, 0)
        sizes = m.r_size[a] + m.r_size[b] + m.r_size[c]
        ok = ((m.r_pindex[c] != m.r_pindex[a]) & (m.r_pindex[c] != m.r_pindex[b])
              & (True if self.topic_caps is None else self.topic_caps.pairs_fit(a, b, taker))
              & self.budget.bytes_ok(sizes)
              & self.acceptance.losses_ok(giver, to_taker) & self.acceptance.losses_ok(taker, to_giver)
              & self.acceptance.gain_ok(taker, to_taker) & self.acceptance.gain_ok(giver, to_giver))
        candidates = np.flatnonzero(ok)
        if not len(candidates):
            return False
        best = int(candidates[np.argmin(sizes[candidates])])
        self.state.apply([(int(a[best]), taker), (int(b[best]), taker), (int(c[best]), giver)], k)
        return True

    def _triples(self, a: np.ndarray, b: np.ndarray, returned: np.ndarray) -> tuple[np.ndarray, ...]:
        """Per pair (a, b) given, the replicas that may come back: the taker's RETURNED smallest (the least copied)
        and the NEAREST closest in size to the pair (the least net, where a broker sits at another resource's edge:
        with only the smallest coming back, a new broker full on disk but short of replicas took more disk with
        every exchange, and an over-counted one at its disk's lower edge gave more)."""
        m = self.model
        returned = returned[np.argsort(m.r_size[returned], kind="stable")]
        sizes = m.r_size[returned].astype(float)
        pair = m.r_size[a].astype(float) + m.r_size[b].astype(float)
        at = np.searchsorted(sizes, pair)
        near = np.clip(at[:, None] + np.arange(-self.NEAREST // 2, self.NEAREST - self.NEAREST // 2), 0,
                       len(returned) - 1)
        smallest = np.broadcast_to(np.arange(min(self.RETURNED, len(returned))), (len(a), min(self.RETURNED,
                                                                                              len(returned))))
        picks = np.concatenate([smallest, near], axis=1)
        width = picks.shape[1]
        return np.repeat(a, width), np.repeat(b, width), returned[picks.ravel()]

    def _smallest_allowed(self, rs: np.ndarray, target: int, limit: int) -> np.ndarray:
        """Of rs, the `limit` smallest the placement rules let move to target (smallest first)."""
        m = self.model
        rs = rs[np.argsort(m.r_size[rs], kind="stable")][: 4 * limit]
        return rs[self.placement.allows_many(rs, target)][:limit]
