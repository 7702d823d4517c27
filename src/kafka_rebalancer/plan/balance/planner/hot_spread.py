"""A hot-partition spread: for a broker whose hot partitions alone keep it over the band, the smallest of them is
handed over (its leadership, or its replica) to the broker with the least load that has room for it (an action as
those in `actions`)."""

from __future__ import annotations

import numpy as np

from kafka_rebalancer.plan.balance.planner.actions import Action
from kafka_rebalancer.plan.balance.planner.constraints import EPS


class HotPartitionSpread(Action):
    """Hot partitions (each larger than the band is wide) spread over the brokers."""

    def spread(self, s: int, k: int) -> bool:
        """A broker holding several hot partitions (each alone larger than the band's width) whose loads together
        exceed the upper edge can never get inside by giving other replicas away, and no single action that keeps
        the acceptance rule takes one of them. Hand the smallest of them over (its leadership, alone or swapped for
        the lightest leadership coming back so leader counts hold; else the replica) to the broker with the least
        load in k whose own hot partitions leave room for it; that broker then sheds ordinary load on its own
        turns. Each step lowers the hot load of brokers whose hot loads alone overflow, so it cannot cycle. Other
        resources keep the acceptance rule."""
        m = self.model
        acceptance, limit = self.acceptance, self.acceptance.limit_of
        hot, total = self.hot_load(s, k)
        if len(hot) < 2 or total <= limit[s, k] * m.capacity[s, k] + EPS:
            return False
        r = int(hot[np.lexsort((hot, m.r_load[hot, k]))[0]])
        # The resources in which the partition is hot (k among them) are exempt from the acceptance rule: the
        # same reasoning holds for each. The others keep it.
        k_count = len(m.resources)
        hot_in = [j for j in range(k_count)
                  if not m.resources[j].is_count and np.abs(m.r_lead[r, j]) > acceptance.width(s)[j] + EPS]
        other = ~np.isin(np.arange(k_count), hot_in)

        def takes(t: int, delta: np.ndarray) -> bool:
            return bool(m.eligible[t]) and all(
                self.hot_load(t, j)[1] + delta[j] <= limit[t, j] * m.capacity[t, j] + EPS
                and (m.load[t, j] + delta[j]) / m.capacity[t, j] <= acceptance.ceiling[j] + EPS for j in hot_in)

        if m.r_is_leader[r] and m.p_leadership_ok[m.r_pindex[r]]:
            delta = m.leadership_delta(r)
            rows = [int(x) for x in m.partition_rows(r) if x != r]
            for x in sorted(rows, key=lambda x: (m.usage[m.r_broker[x], k], x)):
                t = int(m.r_broker[x])
                if not takes(t, delta):
                    continue
                if acceptance.exchange_ok(s, t, np.where(other, delta, 0.0)) and self.transfers_ok([x]):
                    self.state.apply_leadership([x], k)
                    return True
                back = m.replicas_on(t)
                back = back[m.r_is_leader[back] & m.p_leadership_ok[m.r_pindex[back]]]
                for y in back[np.lexsort((back, m.r_load[back, k]))][: self.candidate_limit]:
                    mine = m.partition_rows(int(y))
                    mine = mine[m.r_broker[mine] == s]
                    net = delta - m.leadership_delta(int(mine[0])) if len(mine) else None
                    if (net is not None and takes(t, net) and acceptance.exchange_ok(s, t, np.where(other, net, 0.0))
                            and self.transfers_ok([x, int(mine[0])])):
                        self.state.apply_leadership([x, int(mine[0])], k)
                        return True
        if not (m.r_movable[r] and m.gives[s] and not self.state.moved[r] and self.budget.moves_left()
                and self.budget.bytes_ok(int(m.r_size[r]))
                and self.budget.brokers_left()[s] and acceptance.loss_ok(s, np.where(other, m.r_load[r], 0.0))):
            return False
        targets = [int(t) for t in np.flatnonzero(self.placement.targets(r, s) & self.budget.brokers_left())
                   if takes(int(t), m.r_load[r]) and acceptance.gain_ok(int(t), np.where(other, m.r_load[r], 0.0))]
        if not targets:
            return False
        self.state.apply([(r, min(targets, key=lambda t: (m.usage[t, k], t)))], k)
        return True

    def hot_load(self, b: int, k: int) -> tuple[np.ndarray, float]:
        """b's replicas whose load in k alone exceeds b's band width, and their total load."""
        m = self.model
        rs = m.replicas_on(b)
        hot = rs[m.r_load[rs, k] > self.acceptance.width(b)[k] + EPS]
        return hot, float(m.r_load[hot, k].sum())
