"""What an action must keep: every check here can veto an action, none chooses one.

Placement rules: only alive, non-excluded brokers receive (and, in a manual operation, only those allowed to); no
broker twice in a partition; rack diversity never below min(RF, racks in the pool) nor below what the partition
has; only movable replicas move (`PlanState.movable_on`); budgets hold.

Acceptance rule: for every balanced resource an action changes, the broker losing load stays at or above the
band's lower edge and the one gaining stays at or below its upper edge and the capacity threshold, so fixing one
resource never pushes another out of its band, nor a broker already outside further out. Capacity thresholds
hold even for resources that are not balanced.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from kafka_rebalancer.plan.balance.bands import Band
from kafka_rebalancer.plan.balance.model import PoolModel
from kafka_rebalancer.plan.balance.planner.spread import SpreadRule
from kafka_rebalancer.plan.balance.planner.state import PlanState

EPS = 1e-9


@dataclass(frozen=True)
class Budgets:
    max_replica_moves: int
    max_moved_bytes: int | None = None
    max_moves_per_broker: int | None = None


class BudgetRule:
    """Vetoes replica moves once a budget is used up (leadership transfers cost none)."""

    def __init__(self, budgets: Budgets, state: PlanState) -> None:
        self.budgets = budgets
        self.state = state
        # Without a per-broker budget every broker may always take part: one shared mask, asked for constantly.
        self._everyone = np.ones(len(state.broker_moves), dtype=bool)
        self._everyone.flags.writeable = False

    def moves_left(self, moves: int = 1) -> bool:
        return self.state.replica_moves + moves <= self.budgets.max_replica_moves

    def brokers_left(self, moves: int = 1) -> np.ndarray:
        """Mask over brokers that may take part in `moves` more replica moves."""
        if self.budgets.max_moves_per_broker is None:
            return self._everyone
        return self.state.broker_moves + moves <= self.budgets.max_moves_per_broker

    def bytes_ok(self, extra: int | np.ndarray) -> bool | np.ndarray:
        """Copying `extra` more bytes keeps the byte budget (per element, for an array of sizes)."""
        return self.budgets.max_moved_bytes is None or self.state.moved_bytes + extra <= self.budgets.max_moved_bytes

    def slots_spent(self, broker: int) -> str | None:
        """Which move-count budget, if any, leaves `broker` no replica move in or out."""
        if not self.moves_left():
            return f"move budget reached (max_replica_moves={self.budgets.max_replica_moves})"
        if not self.brokers_left()[broker]:
            return f"the broker's move budget reached (max_moves_per_broker={self.budgets.max_moves_per_broker})"
        return None

    def spent_for(self, broker: int, replicas: np.ndarray) -> str | None:
        """Which budget, if any, now vetoes every move of `replicas`, those that could change `broker`'s load (its
        own when it gives, other brokers' when it receives)."""
        b = self.budgets
        spent = self.slots_spent(broker)
        if spent:
            return spent
        with_slot = self.brokers_left()[self.state.model.r_broker[replicas]]
        if len(replicas) and not with_slot.any():
            return (f"the move budget of every broker that could give it a replica is reached "
                    f"(max_moves_per_broker={b.max_moves_per_broker})")
        sizes = self.state.model.r_size[replicas[with_slot]]
        if len(sizes) and b.max_moved_bytes is not None and not self.bytes_ok(int(sizes.min())):
            left = b.max_moved_bytes - self.state.moved_bytes
            return (f"byte budget reached (max_moved_bytes={b.max_moved_bytes}: {left} bytes left, the smallest "
                    f"replica that could move has {sizes.min()})")
        return None


class Placement:
    """Where a replica may go: the placement rules, which depend on the assignment alone, and the topic spread's
    caps (`spread`, when planned: no broker above a topic's cap)."""

    def __init__(self, model: PoolModel, spread: SpreadRule | None = None) -> None:
        self.model = model
        self.spread = spread
        self._reached: dict[int, tuple[int, np.ndarray, np.ndarray]] = {}  # arrivals, replicas, racks reached

    def targets(self, r: int, s: int, spread: bool = False, undo: bool = False, capped: bool = True) -> np.ndarray:
        """Mask over brokers that may hold replica r instead of s: alive, not excluded, not already holding the
        partition, and keeping its rack diversity (never below min(RF, racks in the pool), nor below what the
        partition has now; with spread, the target must add a rack), and (`capped`) under the topic's caps. `undo`:
        r goes back where it was, which a broker that may not receive still allows."""
        m = self.model
        ok = (m.eligible if undo else m.receives).copy()
        if capped and self.spread is not None:
            ok &= self.spread.targets(r)
        ok[s] = False
        members = m.partition_brokers(r)
        ok[members] = False
        other_racks = self._racks_required(members, s, spread)
        for rack in other_racks:
            ok &= m.rack != rack
        return ok

    def allows(self, r: int, s: int, t: int, undo: bool = False) -> bool:
        """`targets` for one replica and target."""
        m = self.model
        if not (m.eligible if undo else m.receives)[t] or t == s:
            return False
        # The partition's brokers as plain ints (its rows are one run): asked one replica at a time, numpy's
        # per-call cost would dominate.
        p = m.r_pindex[r]
        members = m.r_broker[m.p_start[p]:m.p_start[p] + m.p_count[p]].tolist()
        return (t not in members and int(m.rack[t]) not in self._racks_required(members, s)
                and (self.spread is None or self.spread.allows(r, t)))

    def allows_many(self, rs: np.ndarray, t: int, capped: bool = True) -> np.ndarray:
        """`allows` over many replicas (each from the broker it is on) to one target, vectorised: the planner asks
        this for every candidate of a search. Without `capped`, the topic's caps are left to the caller."""
        m = self.model
        if not len(rs) or not m.receives[t]:
            return np.zeros(len(rs), dtype=bool)
        rows, valid = m.partition_row_matrix(rs)
        members = m.r_broker[rows]
        racks = m.rack[members]
        others = valid & (rows != rs[:, None])
        allowed = ~((members == t) & valid).any(axis=1)
        if capped and self.spread is not None:
            allowed &= self.spread.allows_many(rs, t)
        # Where t's rack is among the other replicas' (a clash), the partition keeps its D distinct racks unless
        # the replica leaving is the only one on its rack; then it has D - 1, too few unless D exceeds the racks
        # in the pool (the required min(RF, racks in the pool, D) is D or that number). D is counted only there.
        clash = allowed & ((racks == m.rack[t]) & others).any(axis=1)
        alone = np.flatnonzero(clash & ~((racks == m.rack[m.r_broker[rs]][:, None]) & others).any(axis=1))
        if len(alone):
            ordered = np.sort(np.where(valid[alone], racks[alone], -1), axis=1)
            distinct = ((ordered[:, 1:] != ordered[:, :-1]) & (ordered[:, 1:] >= 0)).sum(axis=1) + (ordered[:, 0] >= 0)
            allowed[alone] = distinct > m.n_racks
        return allowed

    def reaches(self, s: int, t: int) -> bool:
        """Whether some replica on s may move to t's rack under the rack rule alone: a cheap filter of the brokers
        a search pairs (where every partition has one replica per rack, only s's own rack), before each move is
        checked in full. A superset is enough for a filter, so the racks are worked out again only when s has
        gained replicas, and only for those (working all of s's out after every change took a fifth of the
        planner at 1,000 brokers); the others' moves can change them too, rarely, and are not followed."""
        m = self.model
        kept = self._reached.get(s)
        if kept is None or kept[0] != m.arrivals[s]:
            rs = m.replicas_on(s)
            rs = rs[m.r_movable[rs]]
            if kept is None:
                reached = self._racks_reached(s, rs)
            else:
                gained = np.setdiff1d(rs, kept[1], assume_unique=True)
                reached = kept[2] | self._racks_reached(s, gained) if len(gained) else kept[2]
            kept = (int(m.arrivals[s]), rs, reached)
            self._reached[s] = kept
        return bool(kept[2][m.rack[t]])

    def _racks_reached(self, s: int, rs: np.ndarray) -> np.ndarray:
        """The racks replicas `rs` of broker s may move to under the rack rule."""
        m = self.model
        reached = np.zeros(int(m.rack.max()) + 1 if len(m.rack) else 0, dtype=bool)
        reached[m.rack[s]] = True  # a move within the rack keeps every partition's racks
        if not len(rs):
            return reached
        rows, valid = m.partition_row_matrix(rs)
        others = valid & (rows != rs[:, None])
        held = np.zeros((len(rs), len(reached)), dtype=bool)
        i, j = np.nonzero(others)
        held[i, m.rack[m.r_broker[rows[i, j]]]] = True
        with_own = held.copy()
        with_own[:, m.rack[s]] = True
        # As `_racks_required`: a replica whose other replicas already span the racks required may go anywhere.
        required = np.minimum(np.minimum(valid.sum(axis=1), m.n_racks), with_own.sum(axis=1))
        if (held.sum(axis=1) >= required).any():
            reached[:] = True
        else:
            reached |= (~held).any(axis=0)
        return reached

    def short_of_racks(self) -> np.ndarray:
        """Mask over partitions: its replicas are on fewer racks than min(RF, racks in the pool)."""
        m = self.model
        racks = m.rack[m.r_broker]
        order = np.lexsort((racks, m.r_pindex))
        partition, rack = m.r_pindex[order], racks[order]
        first = np.r_[True, (partition[1:] != partition[:-1]) | (rack[1:] != rack[:-1])]
        distinct = np.bincount(partition[first], minlength=len(m.p_start))
        return distinct < np.minimum(m.p_count, m.n_racks)

    def _racks_required(self, members: np.ndarray | list[int], s: int, spread: bool = False) -> set[int]:
        """The racks a new replica replacing s must avoid (empty: any rack keeps the diversity required)."""
        m = self.model
        racks = m.rack[members].tolist()
        other_racks = {rack for b, rack in zip(members, racks, strict=True) if b != s}
        required = min(len(racks), m.n_racks, len(set(racks)) + (1 if spread else 0))
        return other_racks if len(other_racks) < required else set()


class Acceptance:
    """The acceptance rule over the pool's bands, as usage edges per resource (index k): `lower` and `upper` for
    balanced resources (infinite otherwise), `ceiling` the capacity threshold, `limit` the lower of the two.

    The rule holds each broker to its own edges, `lower_of` and `limit_of` (broker, resource): the band's; for a
    broker inside the band, the target band widened to its usage when planning starts (`keep_within_target`: no
    action takes it out of its target band, or further from it); for a broker the plan fixes in a resource
    (`hold_to_target`), the target band's. A fixed broker is moved into the target band and no later action takes
    it back out of it."""

    def __init__(self, model: PoolModel, bands: dict[str, Band], names: list[str]) -> None:
        self.model = model
        self.bands = bands
        self.names = names
        k_count = len(names)
        self.lower = np.full(k_count, -np.inf)
        self.upper = np.full(k_count, np.inf)
        self.ceiling = np.full(k_count, np.inf)
        for k, name in enumerate(names):
            band = bands.get(name)
            if band is None:
                continue
            if band.balanced:
                self.lower[k], self.upper[k] = band.lower, band.upper
            if band.capacity_threshold is not None:
                self.ceiling[k] = band.capacity_threshold
        self.limit = np.minimum(self.upper, self.ceiling)
        n_brokers = len(model.broker_ids)
        self.lower_of = np.repeat(self.lower[None, :], n_brokers, axis=0)
        self.limit_of = np.repeat(self.limit[None, :], n_brokers, axis=0)
        self.fixed = np.zeros((n_brokers, k_count), dtype=bool)  # (broker, resource) held by `hold_to_target`
        self.released = np.zeros((n_brokers, k_count), dtype=bool)  # fixed, held to the band's edge (`release`)

    def keep_within_target(self, k: int) -> None:
        """Every broker's edges in resource k: its target band widened to its usage now, within the band. The
        brokers a plan gives from or gives to on the way stay inside their target band, or no further from it, so
        they are not filled or emptied to the band's edges; those outside the band keep the band's edges."""
        band = self.band(k)
        usage = self.model.usage[:, k]
        self.lower_of[:, k] = np.maximum(self.lower[k], np.minimum(band.target_lower, usage))
        self.limit_of[:, k] = np.minimum(self.limit[k], np.maximum(band.target_upper, usage))

    def target_edges(self, k: int) -> tuple[float, float]:
        """Resource k's target band, within the band (and under the capacity threshold)."""
        band = self.band(k)
        return max(float(self.lower[k]), band.target_lower), min(float(self.limit[k]), band.target_upper)

    def hold_to_target(self, k: int, brokers: np.ndarray) -> None:
        """From now on, these brokers' edges in resource k are its target band's (within the band)."""
        self.fixed[brokers, k] = True
        self.lower_of[brokers, k], self.limit_of[brokers, k] = self.target_edges(k)

    def release(self, k: int, brokers: np.ndarray, over: bool) -> None:
        """These brokers' edge in resource k on one side (`over`: the upper) becomes the band's: where a closed group
        of brokers (a rack a replica never leaves) holds more (less) than their edges take together, some of them
        must end outside their target band, and the ones already there copy nothing to stay
        (`Planner._release_full_racks`)."""
        if over:
            self.limit_of[brokers, k] = self.limit[k]
        else:
            self.lower_of[brokers, k] = self.lower[k]
        self.released[brokers, k] = True

    @contextmanager
    def band_edges_only(self) -> Iterator[None]:
        """Within: every broker held to the band's edges, the target band's holds set aside (and put back after)."""
        held = self.lower_of.copy(), self.limit_of.copy()
        self.lower_of[:] = self.lower
        self.limit_of[:] = self.limit
        try:
            yield
        finally:
            self.lower_of[:], self.limit_of[:] = held

    def short_of_target(self) -> np.ndarray:
        """Per (broker, resource): held to the target band (`fixed`), inside the band, outside the target band."""
        usage = self.model.usage
        target_lower, target_upper = self.lower.copy(), self.limit.copy()
        for k in np.flatnonzero(self.fixed.any(axis=0)):  # only balanced resources are held
            target_lower[k], target_upper[k] = self.target_edges(int(k))
        inside_band = (usage >= self.lower - EPS) & (usage <= self.limit + EPS)
        return self.fixed & inside_band & ((usage < target_lower - EPS) | (usage > target_upper + EPS))

    @contextmanager
    def short_of_target_released(self) -> Iterator[None]:
        """Within: the brokers `short_of_target` now have the band's edges in those resources (put back after)."""
        released = self.short_of_target()
        held = self.lower_of.copy(), self.limit_of.copy()
        self.lower_of[released] = np.broadcast_to(self.lower, released.shape)[released]
        self.limit_of[released] = np.broadcast_to(self.limit, released.shape)[released]
        try:
            yield
        finally:
            self.lower_of[:], self.limit_of[:] = held

    def outside_band(self, k: int) -> bool:
        """Whether an eligible broker is outside the band's edges in resource k (its own edges aside)."""
        m = self.model
        usage = m.usage[m.eligible, k]
        return bool(np.any((usage < self.lower[k] - EPS) | (usage > self.limit[k] + EPS)))

    def band(self, k: int) -> Band:
        return self.bands[self.names[k]]

    def gain_ok(self, brokers: np.ndarray | int | slice, delta: np.ndarray) -> np.ndarray:
        """Brokers gaining `delta` (indexes, or slice(None) for all) stay at or below the upper edge and the
        capacity threshold of every balanced resource that rises."""
        after = self.model.fill_at(brokers, self.model.load[brokers] + delta)
        return np.all(~(delta > 0) | (after <= self.limit_of[brokers] + EPS), axis=-1)

    def loss_ok(self, broker: int, delta: np.ndarray) -> bool:
        """A broker losing `delta` stays at or above the lower edge of every balanced resource that falls."""
        after = self.model.fill_at(broker, self.model.load[broker] - delta)
        return bool(np.all(~(delta > 0) | (after >= self.lower_of[broker] - EPS)))

    def losses_ok(self, brokers: np.ndarray | int, deltas: np.ndarray) -> np.ndarray:
        """`loss_ok` for many (broker, delta) pairs at once, one per row (or one broker losing any one row)."""
        after = self.model.fill_at(brokers, self.model.load[brokers] - deltas)
        return np.all(~(deltas > 0) | (after >= self.lower_of[brokers] - EPS), axis=1)

    def losses_ok_columns(self, broker: int, columns: np.ndarray) -> np.ndarray:
        """`losses_ok` of one broker for deltas given as columns (one contiguous row per resource, one column per
        delta): the same arithmetic, a resource at a time (numpy is far slower across a six-column matrix)."""
        m = self.model
        ok = np.ones(columns.shape[1], dtype=bool)
        if not len(ok):
            return ok
        for delta, load, capacity, lower in zip(columns, m.load[broker].tolist(), m.capacity[broker].tolist(),
                                                (self.lower_of[broker] - EPS).tolist(), strict=True):
            # Every delta passes where the largest does (rounding is monotone): one pass over a resource the
            # broker is far from the lower edge of, instead of four. No capacity: no lower edge (`fill_at`).
            if capacity <= 0 or (load - float(delta.max())) / capacity >= lower:
                continue
            ok &= ~(delta > 0) | ((load - delta) / capacity >= lower)
        return ok

    def moves_ok(self, rs: np.ndarray, s: int, t: int, loads: np.ndarray | None = None) -> np.ndarray:
        """Mask over candidate replicas rs: moving each from s to t keeps the rule for both brokers (loads: their
        model.r_load rows, when the caller has them)."""
        m = self.model
        loads = m.r_load[rs] if loads is None else loads
        changes = loads > 0
        loss = np.all(~changes | (m.fill_at(s, m.load[s] - loads) >= self.lower_of[s] - EPS), axis=1)
        gain = np.all(~changes | (m.fill_at(t, m.load[t] + loads) <= self.limit_of[t] + EPS), axis=1)
        return loss & gain

    def exchange_ok(self, giver: int, taker: int, delta: np.ndarray) -> bool:
        """The rule for a net transfer `delta` from giver to taker (a swap's net)."""
        given, returned = np.maximum(delta, 0), np.maximum(-delta, 0)
        return (self.loss_ok(giver, given) and self.loss_ok(taker, returned)
                and bool(self.gain_ok(taker, given)) and bool(self.gain_ok(giver, returned)))

    def under_ceiling(self, delta: np.ndarray) -> np.ndarray:
        """Mask over brokers that stay at or below every capacity threshold after gaining `delta`."""
        m = self.model
        return np.all(m.fill_at(slice(None), m.load + delta) <= self.ceiling + EPS, axis=1)

    # -- distances from the bands ----------------------------------------------------------------------
    def status(self, brokers: list[int] | np.ndarray) -> np.ndarray:
        """Per (broker, resource) of these brokers now: the distance outside its edges (0 inside)."""
        usage = self.model.usage[brokers]
        return np.maximum(np.maximum(self.lower_of[brokers] - usage, usage - self.limit_of[brokers]), 0.0)

    def no_further_out(self, giver: int, taker: int, delta: np.ndarray) -> bool:
        """Moving load `delta` from giver to taker leaves both inside their edges or no further outside them than
        now: `status` before and after, without changing the model."""
        return bool(self.no_further_out_many(np.array([giver]), np.array([taker]), delta[None, :])[0])

    def no_further_out_many(self, givers: np.ndarray, takers: np.ndarray, deltas: np.ndarray) -> np.ndarray:
        """`no_further_out` of many moves at once, each judged alone against the model as it stands."""
        m = self.model
        ok = np.ones(len(givers), dtype=bool)
        for brokers, delta in ((givers, -deltas), (takers, deltas)):
            before = self.status(brokers)
            usage = m.usage_at(brokers, m.load[brokers] + delta)
            after = np.maximum(np.maximum(self.lower_of[brokers] - usage, usage - self.limit_of[brokers]), 0.0)
            ok &= np.all((after <= before) | (after <= EPS), axis=1)
        return ok

    def out_of_band(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The eligible brokers over and under their edges in resource k (the band, or the target band of the
        brokers the plan fixes)."""
        m = self.model
        usage = m.usage[:, k]
        eligible = np.flatnonzero(m.eligible)
        over = eligible[usage[eligible] > self.limit_of[eligible, k] + EPS]
        under = eligible[usage[eligible] < self.lower_of[eligible, k] - EPS]
        return over, under

    def width(self, b: int) -> np.ndarray:
        """b's band widths in load units (infinite for unbalanced resources)."""
        with np.errstate(invalid="ignore"):
            width = (self.limit - self.lower) * self.model.capacity[b]
        return np.where(np.isfinite(width), width, np.inf)


class Constraints:
    """The rules together, for the checks that combine them."""

    def __init__(self, state: PlanState, bands: dict[str, Band], budgets: Budgets,
                 spread: SpreadRule | None = None) -> None:
        self.model = state.model
        self.spread = spread
        self.placement = Placement(state.model, spread)
        self.acceptance = Acceptance(state.model, bands, state.names)
        self.budget = BudgetRule(budgets, state)

    def accepted(self, rs: np.ndarray, s: int, t: int, loads: np.ndarray | None = None) -> np.ndarray:
        """Mask over candidate replicas rs: moving each from s to t keeps the acceptance rule and the budgets
        (loads: their model.r_load rows, when the caller has them)."""
        ok = self.acceptance.moves_ok(rs, s, t, loads)
        if self.budget.budgets.max_moved_bytes is not None:
            ok &= self.budget.bytes_ok(self.model.r_size[rs])
        return ok

    def feasible_targets(self, r: int, s: int) -> np.ndarray:
        """Mask over brokers that may receive replica r from s under every rule."""
        m = self.model
        if not self.budget.bytes_ok(int(m.r_size[r])):
            return np.zeros(len(m.broker_ids), dtype=bool)
        return (self.placement.targets(r, s) & self.budget.brokers_left()
                & self.acceptance.gain_ok(slice(None), m.r_load[r]))
