"""The forced placement: a replica that must move whatever the balance (hard constraints), to the broker with the
most room that keeps the placement rules and capacity thresholds (an action as those in `actions`)."""

from __future__ import annotations

import numpy as np

from kafka_rebalancer.plan.balance.planner.actions import Action


class ForcedPlacement(Action):
    """Replicas that must move, placed whatever the balance (hard constraints)."""

    def place(self, r: int, spread: bool = False) -> bool:
        """Move replica r (which must move: off a dead broker, home to its pool, or, with spread, to a rack its
        partition lacks) to the broker with the most room that keeps the placement rules and the capacity
        thresholds, inside the bands if any broker allows."""
        m = self.model
        s = int(m.r_broker[r])
        ok = (self.placement.targets(r, s, spread, capped=False) & self.budget.brokers_left()
              & self.acceptance.under_ceiling(m.r_load[r]))
        if not ok.any() or not self.budget.moves_left() or not self.budget.brokers_left()[s]:
            return False
        # The topic spread's caps where a broker keeps them; a replica that must move goes anyway.
        caps = self.constraints.spread
        if caps is not None and (ok & caps.targets(r)).any():
            ok &= caps.targets(r)
        within_bands = ok & self.acceptance.gain_ok(np.arange(len(m.broker_ids)), m.r_load[r])
        candidates = np.flatnonzero(within_bands if within_bands.any() else ok)
        # The broker where the replica sits most centrally in every band: the lowest of its highest position in
        # a band (0 = lower edge, 1 = upper edge) after the move, so no resource fills up ahead of the others.
        lower, limit = self.acceptance.lower, self.acceptance.limit
        after = m.fill_at(candidates, m.load[candidates] + m.r_load[r])
        span = np.where(np.isfinite(limit - lower), limit - lower, np.inf)
        with np.errstate(invalid="ignore"):  # resources without a band: infinite edges, masked out below
            position = np.where(np.isfinite(span) & (span > 0), (after - lower) / np.where(span > 0, span, 1), 0.0)
        t = int(candidates[np.lexsort((candidates, position.max(axis=1)))[0]])
        self.state.apply([(r, t)], None, forced=True)
        return True

    def why_not(self, r: int, spread: bool = False) -> str:
        """Why `place(r, spread)` found no broker: a move budget, or the placement rules and capacity thresholds
        (forced moves are not held to the byte budget here; the run's trim is)."""
        m = self.model
        s = int(m.r_broker[r])
        spent = self.budget.slots_spent(s)
        if spent:
            return spent
        if (self.placement.targets(r, s, spread, capped=False) & self.acceptance.under_ceiling(m.r_load[r])).any():
            return (f"every broker that could take it has used its move budget (max_moves_per_broker="
                    f"{self.budget.budgets.max_moves_per_broker})")
        return "no broker keeps the placement rules with room under the capacity thresholds"

    def rack_duplicate(self, p: int, k: int) -> int:
        """The replica of partition p to spread: of those sharing a rack with an earlier one, the one on the
        broker most used in resource k."""
        m = self.model
        rows = np.arange(m.p_start[p], m.p_start[p] + m.p_count[p])
        racks = m.rack[m.r_broker[rows]]
        _, first_seen = np.unique(racks, return_index=True)
        duplicates = np.setdiff1d(np.arange(len(rows)), first_seen)
        return int(rows[duplicates[np.argmax(m.usage[m.r_broker[rows[duplicates]], k])]])
