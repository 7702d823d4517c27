"""Topic spread as a rule the planner keeps (issue 52; the target: `kafka_rebalancer.model.topic_spread`).

No action puts a broker above a topic's replica cap, or, for a leader's replica or a leadership transfer, above
its leader cap. The caps are fixed when planning starts (`max(held then, ceil(share) + margin)`); the counts are
the model's own per (topic, broker) counters, kept by every move and transfer, so each check is a lookup (the
planner asks them for every candidate of a search, at millions of replicas). Moves back home (a revert, a
shortcut) are held to the caps too: other replicas of the topic may have arrived there since.
"""

from __future__ import annotations

import numpy as np

from kafka_rebalancer.model.topic_spread import TopicSpreadSettings, spread_caps
from kafka_rebalancer.plan.balance.model import PoolModel


class SpreadRule:
    """Caps per (topic, broker) on replicas and leaders, and the checks that veto a move or a transfer above them."""

    def __init__(self, model: PoolModel, settings: TopicSpreadSettings) -> None:
        self.model = model
        model.track_topics()
        replicas, leaders = model.topic_replicas, model.topic_leaders
        assert replicas is not None and leaders is not None
        self.replicas, self.leaders = replicas, leaders
        excluded = np.array([settings.excluded(t) for t in model.topic_names], dtype=bool)
        # The share divides a topic over the pool's brokers that take replicas: alive, not excluded. A manual
        # operation's roles (only new brokers receive) do not change where the topic should end up.
        self.replica_cap, _ = spread_caps(replicas, model.eligible, settings.margin, excluded)
        self.leader_cap, self.leader_target = spread_caps(leaders, model.eligible, settings.margin, excluded)
        # Column-major as the counters (`PoolModel.track_topics`): a broker's column is read whole.
        self.replica_cap, self.leader_cap = np.asfortranarray(self.replica_cap), np.asfortranarray(self.leader_cap)
        self.topic = model.r_topic_index

    # -- replica moves ---------------------------------------------------------------------------------
    def targets(self, r: int) -> np.ndarray:
        """Mask over brokers that may take replica r (and its leadership, when it leads) under the caps."""
        t = self.topic[r]
        ok = self.replicas[t] < self.replica_cap[t]
        if self.model.r_is_leader[r]:
            ok &= self.leaders[t] < self.leader_cap[t]
        return ok

    def allows(self, r: int, b: int) -> bool:
        """Whether broker b may take replica r under the caps."""
        t = self.topic[r]
        return bool(self.replicas[t, b] < self.replica_cap[t, b]
                    and (not self.model.r_is_leader[r] or self.leaders[t, b] < self.leader_cap[t, b]))

    def allows_many(self, rs: np.ndarray, b: int) -> np.ndarray:
        """`allows` over many replicas to one broker, each alone."""
        # b's column compared whole, then read per replica: a gather from the whole matrix missed the cache per
        # replica (a giver offers a thousand).
        t = self.topic[rs]
        ok = (self.replicas[:, b] < self.replica_cap[:, b])[t]
        return ok & (~self.model.r_is_leader[rs] | (self.leaders[:, b] < self.leader_cap[:, b])[t])

    def allows_together(self, rs: np.ndarray, b: int) -> np.ndarray:
        """Mask over rs: broker b may take the replica with every earlier one of rs of the same topic (each of a
        batch is its own move, all to b): a replica counts those of its topic before it. A replica left out does
        not free room for the later ones (conservative)."""
        if not len(rs):
            return np.zeros(0, dtype=bool)
        t = self.topic[rs]
        lead = self.model.r_is_leader[rs]
        ok = self.replicas[t, b] + _earlier_of_same(t, np.ones(len(rs), dtype=bool)) < self.replica_cap[t, b]
        return ok & (~lead | (self.leaders[t, b] + _earlier_of_same(t, lead) < self.leader_cap[t, b]))

    def pairs_fit(self, a: np.ndarray, b: np.ndarray, taker: int) -> np.ndarray:
        """Mask over pairs (a[i], b[i]) both going to taker (each alone allowed): where they are of one topic, the
        taker has room for both, and for the leaders among them."""
        t = self.topic[a]
        leading = self.model.r_is_leader[a].astype(np.int64) + self.model.r_is_leader[b]
        both = (self.replicas[t, taker] + 2 <= self.replica_cap[t, taker]) & (
            self.leaders[t, taker] + leading <= self.leader_cap[t, taker])
        return (t != self.topic[b]) | both

    # -- leadership transfers --------------------------------------------------------------------------
    def leaderships_ok(self, new_leaders: np.ndarray) -> np.ndarray:
        """Mask over replicas that would each become their partition's leader (one transfer each, alone): the
        broker holding it stays within the topic's leader cap."""
        t, b = self.topic[new_leaders], self.model.r_broker[new_leaders]
        return self.leaders[t, b] < self.leader_cap[t, b]

    def transfers_ok(self, new_leaders: list[int]) -> bool:
        """Whether the transfers together (a leadership swap's two halves) keep every broker gaining a topic's
        leader within its cap: a broker that gains one of a topic and loses another of it gains none."""
        m = self.model
        gained: dict[tuple[int, int], int] = {}
        for row in new_leaders:
            old = m.leader_of(row)
            t = int(self.topic[row])
            gained[(t, int(m.r_broker[row]))] = gained.get((t, int(m.r_broker[row])), 0) + 1
            if old >= 0:
                gained[(t, int(m.r_broker[old]))] = gained.get((t, int(m.r_broker[old])), 0) - 1
        return all(self.leaders[t, b] + n <= self.leader_cap[t, b] for (t, b), n in gained.items() if n > 0)

    # -- giving: the cheap repair ----------------------------------------------------------------------
    def over_leader_target(self, rs: np.ndarray, b: int) -> np.ndarray:
        """Mask over replicas rs of broker b: b leads more of their topic than the topic's leader target, so handing
        a leadership over repairs existing skew."""
        t = self.topic[rs]
        return self.leaders[t, b] > self.leader_target[t]

    # -- a whole placement -----------------------------------------------------------------------------
    def within(self, before: tuple[np.ndarray, np.ndarray] | None = None) -> bool:
        """Whether every (topic, broker) is within its caps, or (given the counts `before`) no further above
        them than it was then."""
        replicas_ok = self.replicas <= self.replica_cap
        leaders_ok = self.leaders <= self.leader_cap
        if before is not None:
            replicas_ok |= self.replicas <= before[0]
            leaders_ok |= self.leaders <= before[1]
        return bool(replicas_ok.all() and leaders_ok.all())

    def cells_within(self, rows: np.ndarray, brokers: np.ndarray) -> bool:
        """Whether these brokers hold no more of the rows' topics than the caps (replicas, and leaders)."""
        t = self.topic[rows]
        return bool((self.replicas[t, brokers] <= self.replica_cap[t, brokers]).all()
                    and (self.leaders[t, brokers] <= self.leader_cap[t, brokers]).all())

    def counts(self) -> tuple[np.ndarray, np.ndarray]:
        """A copy of the counters now (for `within`)."""
        return self.replicas.copy(), self.leaders.copy()


def _earlier_of_same(keys: np.ndarray, counted: np.ndarray) -> np.ndarray:
    """Per element: how many earlier elements with the same key are `counted` (a batch's running count per topic)."""
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    running = np.cumsum(counted[order]) - counted[order]
    first = np.r_[True, sorted_keys[1:] != sorted_keys[:-1]]
    # The running count at each group's first element, subtracted from the rest of the group.
    group_base = running[np.maximum.accumulate(np.where(first, np.arange(len(keys)), 0))]
    out = np.empty(len(keys), dtype=np.int64)
    out[order] = running - group_base
    return out
