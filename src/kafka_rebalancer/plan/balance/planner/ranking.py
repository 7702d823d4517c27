"""Best fit: the order in which an action tries its candidates (replicas, leaderships, swap pairs).

For a size resource, by the data it takes to land the broker inside the target band with the candidate: its own load
where it does alone, else its load plus the smallest other replica that covers the rest where the two copy less than
the smallest that does alone (of such a pair the larger first), then the others (largest first). For a count every
replica weighs 1: those whose other loads are closest to what the brokers should move per replica come first, then
the least data; where the topic spread is planned, a giver's leaderships of topics it leads more of than their
target come first (a repair that copies nothing). Its replicas of such topics are not put first: at 1,000 brokers
placed by Kafka that copied 3.7 % more bytes (the repaired replicas were not the best fit, the new brokers filled
their count with more data and had less room left for the most used brokers' large partitions). Swap pairs of
replicas that land the broker inside come by the fewest bytes copied, then the others by the largest net.
"""

from __future__ import annotations

import math

import numpy as np

from kafka_rebalancer.plan.balance.model import PoolModel
from kafka_rebalancer.plan.balance.planner.constraints import EPS, Acceptance
from kafka_rebalancer.plan.balance.planner.spread import SpreadRule


class Ranking:
    def __init__(self, model: PoolModel, acceptance: Acceptance, candidate_limit: int,
                 spread: SpreadRule | None = None) -> None:
        self.model = model
        self.spread = spread
        self.lower, self.limit = acceptance.lower, acceptance.limit
        self.candidate_limit = candidate_limit
        # Band widths at the mean capacity: to compare loads of different resources (as band shares).
        width = np.where(np.isfinite(acceptance.upper - self.lower), acceptance.upper - self.lower, 0.0)
        k_count = len(self.lower)
        mean_capacity = model.capacity[model.eligible].mean(axis=0) if model.eligible.any() else np.ones(k_count)
        scale = width * mean_capacity
        self.footprint_scale = np.where(scale > 0, 1.0 / np.where(scale > 0, scale, 1.0), 0.0)
        # The edges as floats, and the middle of each band as a share of capacity, for _per_unit_gap.
        self._lower, self._limit = self.lower.tolist(), self.limit.tolist()
        self._middle = ((self.lower + np.where(np.isfinite(self.limit), self.limit, self.lower)) / 2).tolist()
        # _per_unit_gap's answers, kept until the broker changes (it depends on the broker's loads alone).
        self._gaps: dict[tuple[int, int, bool], tuple[int, np.ndarray]] = {}
        # _proportional's giver parts, with the loads and gap they were worked out from.
        self._giver_scores: dict[tuple[int, int], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def replicas(self, replicas: np.ndarray, loads: np.ndarray, k: int, need: float, giver: int = -1,
                 receiver: int = -1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Replica candidates to fix resource k, the first `candidate_limit` by best fit (module docstring), with
        their loads and, for a size resource, the load each takes to reach need (`bytes_to_need`; inf for a count);
        loads: the candidates' model.r_load rows; need: the load that lands the broker inside the target band."""
        m = self.model
        count = m.resources[k].is_count
        if not len(replicas):
            return replicas, loads, np.empty(0)
        cost = np.full(len(replicas), np.inf) if count else self.bytes_to_need(loads[:, k], need)
        if count:
            primary = self._proportional(loads, k, giver, receiver)
        else:  # those that cannot reach need even with another replica last, by decreasing load
            primary = np.where(np.isfinite(cost), cost, 4.0 * (np.abs(loads[:, k]).max() + 1.0) - loads[:, k])
        at = np.arange(len(replicas))
        if len(replicas) > self.candidate_limit:
            at = np.argpartition(primary, self.candidate_limit - 1)[: self.candidate_limit]
        # Ties: for a count the least data first, for a size the larger first (of a pair, the one that leaves the
        # least to cover); then the row (sizes read for the kept candidates only).
        secondary = m.r_size[replicas[at]].astype(float) if count else -loads[at, k]
        at = at[np.lexsort((replicas[at], secondary, primary[at]))]
        return replicas[at], loads.take(at, axis=0), cost[at]

    def _repair_first(self, score: np.ndarray, replicas: np.ndarray, giver: int) -> np.ndarray:
        """The scores with the giver's leaderships of topics it leads more of than their target
        (`SpreadRule.over_leader_target`) ahead of every other, in their order."""
        if self.spread is None or giver < 0 or not len(score):
            return score
        over = self.spread.over_leader_target(replicas, giver)
        if not over.any():
            return score
        return np.where(over, score, score + (float(score.max()) - float(score.min()) + 1.0))

    @staticmethod
    def bytes_to_need(load: np.ndarray, need: float) -> np.ndarray:
        """Per replica of a size resource, the load it takes to reach need with it: its own where it covers need
        alone; where it falls short, plus the smallest other replica that covers the rest, if the two copy less than
        the smallest replica that covers need alone; inf otherwise. (A giant partition covers any rest: paired with
        it, every small replica read as a fit, smallest first, though the pair copies more than the giant alone, and
        the giant mostly cannot move; the broker then gave its smallest replicas and ran into its count's edge.)"""
        order = np.argsort(load, kind="stable")
        sorted_load = load[order]
        j = np.searchsorted(sorted_load, need - load - EPS, side="left")
        # The rest must come from another replica: skip the replica itself where the search lands on it.
        rank = np.empty(len(load), dtype=np.int64)
        rank[order] = np.arange(len(load))
        j = np.where(j == rank, j + 1, j)
        rest = np.where(j < len(load), sorted_load[np.minimum(j, len(load) - 1)], np.inf)
        alone = load >= need - EPS
        single = float(load[alone].min()) if alone.any() else np.inf
        pair = load + rest
        return np.where(alone, load, np.where(pair < single, pair, np.inf))

    def leaderships(self, b: int, k: int, need: float, most: float, leaders: bool) -> np.ndarray:
        """Replicas of b whose leadership could change (leaders to hand over, or followers to take over) by at
        most `most` in k, by the same best fit as replica moves."""
        m = self.model
        rs, deltas = m.leadership_rows(b, leaders)
        gain = deltas[:, k]
        keep = (gain > EPS) & (gain <= most + EPS)
        rs, gain = rs[keep], gain[keep]
        if m.resources[k].is_count:
            score = self._away(deltas.compress(keep, axis=0), self._per_unit_gap(b, k, giving=leaders))
            if leaders:
                score = self._repair_first(score, rs, b)
            return rs[np.lexsort((rs, score))]
        fits = gain >= need - EPS
        return np.concatenate([rs[fits][np.argsort(gain[fits], kind="stable")],
                               rs[~fits][np.argsort(-gain[~fits], kind="stable")]])

    def pairs(self, give: np.ndarray, take: np.ndarray, need: float, most: float,
              sizes: tuple[np.ndarray, np.ndarray] | None = None) -> list[tuple[int, int]]:
        """Pairs (i, j) whose net transfer give[i] - take[j] lies in (0, most], ranked like single moves: those
        that reach `need` first, then the others (the largest net first). Without sizes the fits come by the
        smallest net (least overshoot: leaderships, where nothing is copied); with the replicas' sizes (give's,
        take's), each give is paired with the smallest take allowed and the fits come by the fewest bytes copied
        (a pair that only just reaches need with a large replica coming back copies both for a small net)."""
        order = np.argsort(take, kind="stable")
        sorted_take = take[order]
        idx = np.arange(len(give))
        low = np.searchsorted(sorted_take, give - most - EPS, side="left")
        if sizes is not None:
            low_c = np.minimum(low, max(len(sorted_take) - 1, 0))
            net = give - sorted_take[low_c]
            keep = (low < len(sorted_take)) & (net > EPS) & (net <= most + EPS)
            copied = sizes[0] + sizes[1][order][low_c]
            ranked = self.fewest_bytes_first(net[keep], copied[keep], need)[: self.candidate_limit]
            return [(int(i), int(order[j])) for i, j in zip(idx[keep][ranked], low_c[keep][ranked], strict=True)]
        # Per i: the largest take with net >= need (a fit), else the smallest take with net <= most.
        fit = np.searchsorted(sorted_take, give - need + EPS, side="right") - 1
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

    @staticmethod
    def fewest_bytes_first(net: np.ndarray, copied: np.ndarray, need: float) -> np.ndarray:
        """The order of swap pairs (net transfer, bytes copied): those reaching `need` by the fewest bytes, then
        the others by the largest net; ties keep their order."""
        fits = net >= need - EPS
        return np.lexsort((np.where(fits, copied, -net), ~fits))

    def _per_unit_gap(self, b: int, k: int, giving: bool) -> np.ndarray:
        """What one unit of count resource k should carry of every other balanced resource for broker b: for the
        resources where b is outside the band on the side it moves away from, its gap to the band's middle divided
        by its count gap; nothing where b is inside (there it should move as little as possible)."""
        m = self.model
        kept = self._gaps.get((b, k, giving))
        if kept is not None and kept[0] == m.changes[b]:
            return kept[1]
        # One resource at a time in plain floats (a handful of them: numpy's per-call cost would dominate), the
        # same operations in the same order as over the arrays.
        gaps = []
        for load, capacity, lower, limit, middle_usage in zip(m.load[b].tolist(), m.capacity[b].tolist(),
                                                              self._lower, self._limit, self._middle, strict=True):
            middle = middle_usage * capacity
            if giving:
                gap = load - middle if load > limit * capacity + EPS else 0.0
            else:
                gap = middle - load if load < lower * capacity - EPS else 0.0
            gaps.append((gap, load, middle))
        _, load_k, middle_k = gaps[k]
        units = (load_k - middle_k) if giving else (middle_k - load_k)
        gap = np.array([gap if j != k and math.isfinite(gap) and gap > 0 and units > EPS else 0.0
                        for j, (gap, _, _) in enumerate(gaps)])
        if units > EPS:
            gap /= units
        gap.flags.writeable = False  # shared by every caller until b changes
        self._gaps[(b, k, giving)] = (int(m.changes[b]), gap)
        return gap

    def _proportional(self, loads: np.ndarray, k: int, giver: int, receiver: int = -1) -> np.ndarray:
        """Per candidate: how far its loads are from what the giver (and the receiver, when known) should shed
        (take) per unit of count k, as band shares. Fixing a count with replicas of the right size moves the
        other resources along, instead of leaving them to swaps and extra moves later."""
        # The giver's part is kept while the giver's loads and gap are the same arrays (both are kept, read-only,
        # until it changes): a giver that could not place a replica is asked again by the next receiver.
        gap = self._per_unit_gap(giver, k, giving=True)
        kept = self._giver_scores.get((giver, k))
        if kept is not None and kept[0] is loads and kept[1] is gap:
            score = kept[2]
        else:
            score = self._away(loads, gap)
            score.flags.writeable = False
            self._giver_scores[(giver, k)] = (loads, gap, score)
        if receiver >= 0:
            score = score + self._away(loads, self._per_unit_gap(receiver, k, giving=False))
        return score

    def _away(self, loads: np.ndarray, gap: np.ndarray) -> np.ndarray:
        """Per row of loads, how far it is from gap, as band shares. The gap is repeated to the loads' shape first:
        numpy subtracts a row from every line of a narrow matrix far slower (same values)."""
        return np.abs(loads - np.repeat(gap[None, :], len(loads), axis=0)) @ self.footprint_scale
