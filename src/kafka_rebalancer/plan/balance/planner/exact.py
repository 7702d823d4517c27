"""The exact polish of a small pool's plan: the planner's plan made smaller by a MILP solved with HiGHS.

The greedy actions fix one broker at a time; where a broker is bound by two bands at once (over its replica
count while its disk is over by less than any one replica it could shed) they move more data than needed, up to
7% more than the least any plan copies on the optimum bench's pools. For a pool small enough, the placement of
every partition the planner may move is chosen again, all at once, by a MILP over binary x[p, b] (partition p has
a replica on broker b) and, where a constrained resource depends on the replica's role, l[p, b] (p is led from b):

- the replication factor stays; targets are the brokers that may receive and the partition's own brokers;
- rack diversity stays at least what the planner's plan gives the partition (never less than the rules ask);
- every broker ends inside its edges as the planner left them: the band, or the target band of the brokers the
  plan fixes; a broker the planner could not fix ends no further outside than it did, give or take OUTSIDE_SLACK
  (where brokers fixed into the band stay short of their target band, the MILP is solved again with the band's
  edges for them, and its plan taken if no more fall short);
- budgets hold: replica moves, bytes and moves per broker, counting the planner's moves of the other partitions;
- objective: bytes copied from the snapshot's placement, then (tie-break, a millionth of the largest partition
  each) leaderships that change.

Where every free partition has one replica on each of the pool's racks (RF = racks), a replica never changes rack:
each rack is then a MILP of its own (its replicas on its brokers, each keeping its role, so the racks that lead
stay), solved one after the other, far sooner than the whole pool's (`ExactPolish.racks_apart`).

Partitions the planner must not move freely (a replica outside the ISR, on a dead broker, outside the pool, not
movable, or on a broker that may not give) keep the planner's placement and count as fixed load. HiGHS starts from
the planner's plan and stops after a fixed number of better plans or branch-and-bound nodes (the same answer on
every machine), or at a time limit (a slow machine's safety net); its plan is taken only when it copies fewer
bytes and a check apart from the MILP finds every rule and edge kept. The polished partitions' moves replace the
planner's in the log.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import highspy
import numpy as np

from kafka_rebalancer.plan.balance.planner.constraints import EPS, Constraints
from kafka_rebalancer.plan.balance.planner.state import REPLICA, PlanState

log = logging.getLogger(__name__)

EXACT = "exact"  # the resource of a polished partition's move: chosen for all bands at once
# How much further out (in usage: a share of capacity) the polish may leave a broker the planner left outside its
# edges. Where a rack's total is fixed (RF = racks) and below its brokers' lower edges together, each of them ends
# outside, and held to the byte where it is, the MILP is a subset sum HiGHS did not improve within any limit (the
# shapes bench's mixed-a@12: 60 s, nothing); with 0.001 % of capacity (1.1-1.9 MB on its disks, less than a
# replica; no count moves) that rack copies 7.6 GB less (31.2 -> 25.3 GB) within the node limit.
OUTSIDE_SLACK = 1e-5


@dataclass(frozen=True)
class ExactLimits:
    # Pools with more variables keep the planner's plan: the small bench scale's pools (1,500 partitions on 6 brokers,
    # leaders too: 17,800 columns) took 2.6 s each and found nothing smaller. 12 brokers with 450 partitions of RF 2
    # and their leaders (10,800 columns, the shapes bench's rf-2@12) copied 14 % more than the optimum without it.
    max_columns: int = 12_000
    # HiGHS stops at the fourth plan better than the planner's or after 500 branch-and-bound nodes: on the shapes
    # bench's solver-sized rows (issue 36) the second plan left giants at 1.065x the optimum and RF 2 at 1.139x,
    # the fourth 1.017x and 1.003x, for 2-5 s more per 12-broker pool. Both limits count work, not time: the same
    # answer on every machine.
    improving_solutions: int = 4
    max_nodes: int = 500
    # Seconds, a safety net only: a solve it stops keeps the planner's plan (a plan found by then would depend on the
    # machine's speed and load; a loaded machine stopped 20 s solves at different plans).
    time_limit: float = 60.0


@dataclass
class _Milp:
    cost: list[float] = field(default_factory=list)
    copies: list[float] = field(default_factory=list)  # the bytes part of the cost (tie-breaks aside)
    integer: list[bool] = field(default_factory=list)
    rows: list[tuple[float, float, list[int], list[float]]] = field(default_factory=list)
    indicators: list[tuple[int, list[int]]] = field(default_factory=list)  # rack indicator y, its rack's x

    def column(self, cost: float, copies: float = 0.0, integer: bool = True) -> int:
        self.cost.append(cost)
        self.copies.append(copies)
        self.integer.append(integer)
        return len(self.cost) - 1

    def row(self, lower: float, upper: float, cols: list[int], vals: list[float]) -> None:
        if cols:
            self.rows.append((lower, upper, cols, vals))


class ExactPolish:
    """Builds and solves the MILP of one pool and, when it pays, puts its placement in the plan."""

    def __init__(self, state: PlanState, constraints: Constraints, limits: ExactLimits = ExactLimits()) -> None:
        self.state = state
        self.model = state.model
        self.constraints = constraints
        self.limits = limits

    def free_partitions(self) -> np.ndarray:
        """Partitions the MILP may place: every replica movable, in sync and on a broker that may give."""
        m = self.model
        gives = np.add.reduceat(m.gives[m.original_broker] & m.eligible[m.original_broker], m.p_start) \
            if len(m.p_start) else np.zeros(0, dtype=np.int64)
        return np.flatnonzero(m.p_leadership_ok & (gives == m.p_count))

    def run(self) -> bool:
        """Polish the plan; True if it changed."""
        m = self.model
        free = self.free_partitions()
        receivers = np.flatnonzero(m.receives)
        acceptance = self.constraints.acceptance
        constrained = np.isfinite(acceptance.lower) | np.isfinite(acceptance.limit)
        roles = any(m.resources[k].role_dependent for k in np.flatnonzero(constrained))
        if not len(free) or len(free) * len(receivers) * (2 if roles else 1) > self.limits.max_columns:
            return False
        changed = self._polish_all(free, receivers, constrained, roles)
        short = int(acceptance.short_of_target().sum())
        if not short:
            return changed
        # Brokers fixed into the band but still short of their target band: that promise is not kept either way.
        # Held where they are, they kept the polish from the plan that keeps the others (12 brokers with mixed
        # disks: 7 % fewer bytes): solved again with the band's edges for them, taken if no more fall short.
        with acceptance.short_of_target_released():
            return self._polish_all(free, receivers, constrained, roles, short) or changed

    def racks_apart(self, free: np.ndarray) -> list[int] | None:
        """The pool's racks where every free partition has one replica on each of them (RF = racks): a replica
        then never changes rack, and each rack is a MILP of its own once the racks that lead are kept; else
        None."""
        m = self.model
        racks = np.unique(m.rack[m.eligible])
        if not len(free) or (m.p_count[free] != len(racks)).any():
            return None
        rows = np.concatenate([np.arange(m.p_start[p], m.p_start[p] + m.p_count[p]) for p in free])
        spans = np.zeros((len(m.p_start), int(m.rack.max()) + 1), dtype=bool)
        spans[m.r_pindex[rows], m.rack[m.r_broker[rows]]] = True
        return racks.tolist() if spans[free][:, racks].all() else None

    def _polish_all(self, free: np.ndarray, receivers: np.ndarray, constrained: np.ndarray, roles: bool,
                    short: int | None = None) -> bool:
        """Rack by rack where the racks are apart (`racks_apart`), else the whole pool at once. Solved whole, such a
        pool stopped at its limits with nothing better (the shapes bench's mixed-a@12 and racks-3-uneven@12, 20 s
        each): a rack whose brokers all end outside their edges makes it a subset sum, and the other racks' excess
        stayed with it (mixed-a@12: 71.1 GB copied in a rack whose optimum copies 64.4). A rack alone is solved
        in a second or a few; its leaders stay on the racks that lead them."""
        racks = self.racks_apart(free)
        if racks is None:
            return self._polish(free, receivers, constrained, roles, short)
        changed = False
        for rack in racks:
            changed = self._polish(free, receivers, constrained, roles, short, rack) or changed
        return changed

    def _polish(self, free: np.ndarray, receivers: np.ndarray, constrained: np.ndarray, roles: bool,
                short: int | None = None, rack: int | None = None) -> bool:
        """One MILP over the free partitions (with `rack`: over their replicas on that rack's brokers, the others
        where they are), its placement put in the plan if it pays and keeps every rule (and, with `short`, leaves
        at most that many (broker, resource) pairs short of their target band)."""
        scope = np.ones(len(self.model.broker_ids), dtype=bool) if rack is None else self.model.rack == rack
        milp, x, lead = self._build(free, receivers[scope[receivers]], constrained, roles, scope)
        values = self._solve(milp, free, x, lead)
        if values is None:
            return False
        return self._apply(free, self._placement(free, x, lead, values, scope), short)

    def end_edges(self) -> tuple[np.ndarray, np.ndarray]:
        """Per (broker, resource): the usage the polish must end it within. Its edges; for a broker outside them now,
        its usage and OUTSIDE_SLACK further out, but no further outside the band than before the plan (the
        validation's "inside its band, or closer to it"), and above it no higher than before the plan or the
        band's edge under the capacity threshold."""
        m, acceptance = self.model, self.constraints.acceptance
        start = m.base_load.copy()
        np.add.at(start, m.original_broker, np.where(m.original_leader[:, None], m.r_lead, m.r_follow))
        start, usage = m.usage_at(slice(None), start), m.usage
        outside_before = np.maximum(np.maximum(acceptance.lower - start, start - acceptance.upper), 0.0)
        floor = np.minimum(np.maximum(usage - OUTSIDE_SLACK, acceptance.lower - outside_before), usage)
        ceiling = np.maximum(np.minimum(usage + OUTSIDE_SLACK, np.maximum(start, acceptance.limit)), usage)
        return (np.where(usage < acceptance.lower_of - EPS, floor, acceptance.lower_of),
                np.where(usage > acceptance.limit_of + EPS, ceiling, acceptance.limit_of))

    # -- the model -----------------------------------------------------------------------------------------
    def _build(self, free: np.ndarray, receivers: np.ndarray, constrained: np.ndarray, roles: bool,
               scope: np.ndarray) -> tuple[_Milp, list[dict[int, int]], list[dict[int, int]]]:
        """The MILP placing again the free partitions' replicas on the brokers in `scope` (every broker, or one
        rack's, where each free partition has one replica: `racks_apart`); their replicas elsewhere stay."""
        m = self.model
        milp = _Milp()
        unit = float(max(m.r_size[m.p_start[free]].max(), 1))
        x, lead, original_of = self._columns(milp, free, receivers, roles, scope, unit)
        is_free = np.zeros(len(m.p_start), dtype=bool)
        is_free[free] = True
        self._load_rows(milp, free, x, lead, constrained, scope, is_free)
        self._budget_rows(milp, free, x, original_of, scope, is_free, unit)
        if self.constraints.spread is not None:
            self._spread_rows(milp, free, x, lead, scope, is_free)
        return milp, x, lead

    def _columns(self, milp: _Milp, free: np.ndarray, receivers: np.ndarray, roles: bool, scope: np.ndarray,
                 unit: float) -> tuple[list[dict[int, int]], list[dict[int, int]], list[set[int]]]:
        """Per free partition: broker -> x column, broker -> leadership column (where the MILP chooses its
        leader), and its snapshot brokers; with the rows keeping its replicas in `scope`, led once, and its
        racks."""
        m = self.model
        whole = bool(scope.all())
        receiving = set(receivers.tolist())
        x: list[dict[int, int]] = []
        lead: list[dict[int, int]] = []
        original_of: list[set[int]] = []
        for p in free:
            rows = np.arange(m.p_start[p], m.p_start[p] + m.p_count[p])
            placed = int(scope[m.r_broker[rows]].sum())
            original = m.original_broker[rows]
            size = float(m.r_size[rows[0]]) / unit
            original_of.append(set(original.tolist()))
            brokers = sorted(receiving | {b for b in original_of[-1] if scope[b]})
            x.append({b: milp.column(0.0, 0.0) if b in original_of[-1] else milp.column(size, size) for b in brokers})
            milp.row(placed, placed, list(x[-1].values()), [1.0] * len(brokers))
            if not whole:  # one replica on the rack, which keeps its role (`_load_rows`): the racks stay
                lead.append({})
                continue
            leader = int(original[m.original_leader[rows]][0]) if m.original_leader[rows].any() else -1
            lead.append({b: milp.column(0.0 if b == leader else 1e-6) for b in brokers} if roles else {})
            if roles:
                milp.row(1.0, 1.0, list(lead[-1].values()), [1.0] * len(brokers))
                for b in brokers:
                    milp.row(-np.inf, 0.0, [lead[-1][b], x[-1][b]], [1.0, -1.0])
            self._racks(milp, p, x[-1])
        return x, lead, original_of

    def _load_rows(self, milp: _Milp, free: np.ndarray, x: list[dict[int, int]], lead: list[dict[int, int]],
                   constrained: np.ndarray, scope: np.ndarray, is_free: np.ndarray) -> None:
        """Every broker in scope inside its edges. Loads: the replicas not placed again where the planner put
        them, the others' from the variables."""
        m = self.model
        fixed = m.base_load.copy()
        fixed_rows = np.flatnonzero(~(is_free[m.r_pindex] & scope[m.r_broker]))
        np.add.at(fixed, m.r_broker[fixed_rows], m.r_load[fixed_rows])
        end_lower, end_upper = self.end_edges()
        first = m.p_start[free]
        follow, delta = m.r_follow[first], m.r_lead[first] - m.r_follow[first]
        if not scope.all():
            # A rack's replica keeps its role wherever on the rack it goes: the leader's loads where it leads.
            leads_here = np.zeros(len(m.p_start), dtype=bool)
            leading = np.flatnonzero(m.r_is_leader & scope[m.r_broker])
            leads_here[m.r_pindex[leading]] = True
            follow = np.where(leads_here[free][:, None], m.r_lead[first], follow)
        for k in np.flatnonzero(constrained):
            for b in np.flatnonzero(m.eligible & scope).tolist():  # ints: they index x's dicts
                cap = m.capacity[b, k]
                if cap <= 0:
                    continue
                lower, upper = end_lower[b, k] - EPS / 2, end_upper[b, k] + EPS / 2
                cols, vals = [], []
                for i in range(len(free)):
                    if b in x[i]:
                        cols.append(x[i][b])
                        vals.append(follow[i, k] / cap)
                        if lead[i] and delta[i, k]:
                            cols.append(lead[i][b])
                            vals.append(delta[i, k] / cap)
                base = fixed[b, k] / cap
                milp.row(lower - base, upper - base, cols, vals)

    def _budget_rows(self, milp: _Milp, free: np.ndarray, x: list[dict[int, int]], original_of: list[set[int]],
                     scope: np.ndarray, is_free: np.ndarray, unit: float) -> None:
        """Budgets, less what the planner's moves the MILP does not choose again use (those of the fixed
        partitions, and of the free ones' replicas out of scope)."""
        m, state = self.model, self.state
        budgets = self.constraints.budget.budgets
        kept = [mv for mv in state.plan.moves if mv.action == REPLICA
                and not (is_free[m.r_pindex[mv.replica]] and scope[mv.target])]
        added = [(i, b, col) for i in range(len(free)) for b, col in x[i].items() if milp.copies[col] > 0]
        sizes = m.r_size[m.p_start[free]]
        milp.row(-np.inf, budgets.max_replica_moves - len(kept), [c for _, _, c in added], [1.0] * len(added))
        if budgets.max_moved_bytes is not None:
            used = sum(int(m.r_size[mv.replica]) for mv in kept)
            milp.row(-np.inf, (budgets.max_moved_bytes - used) / unit, [c for _, _, c in added],
                     [float(sizes[i]) / unit for i, _, _ in added])
        if budgets.max_moves_per_broker is not None:
            per_broker = np.zeros(len(m.broker_ids), dtype=np.int64)
            for mv in kept:
                per_broker[[mv.source, mv.target]] += 1
            for b in np.flatnonzero(m.eligible & scope).tolist():  # ints: they index x's dicts
                # Moves in (an added replica) plus moves out (an original replica dropped: 1 - x).
                ins = [x[i][b] for i in range(len(free)) if b in x[i] and b not in original_of[i]]
                outs = [x[i][b] for i in range(len(free)) if b in x[i] and b in original_of[i]]
                milp.row(-np.inf, budgets.max_moves_per_broker - per_broker[b] - len(outs), ins + outs,
                         [1.0] * len(ins) + [-1.0] * len(outs))

    def _spread_rows(self, milp: _Milp, free: np.ndarray, x: list[dict[int, int]], lead: list[dict[int, int]],
                     scope: np.ndarray, is_free: np.ndarray) -> None:
        """The topic spread's caps: per (topic, broker in scope), the free partitions' replicas (and leaders) placed
        there plus the others' at most its cap, or what it holds now where the planner's plan left it above (the
        check after the MILP holds it to no more: `SpreadRule.within`)."""
        m, spread = self.model, self.constraints.spread
        assert spread is not None
        placed = is_free[m.r_pindex] & scope[m.r_broker]
        # A replica on a rack alone keeps its role (`_load_rows`): it leads wherever on the rack it goes.
        rack_leads = np.zeros(len(m.p_start), dtype=bool)
        if not scope.all():
            rack_leads[m.r_pindex[np.flatnonzero(m.r_is_leader & placed)]] = True
        for counts, cap, leaders in ((spread.replicas, spread.replica_cap, False),
                                     (spread.leaders, spread.leader_cap, True)):
            weights = placed & m.r_is_leader if leaders else placed
            fixed = counts.astype(np.int64) - np.bincount(
                spread.topic[weights] * len(m.broker_ids) + m.r_broker[weights],
                minlength=counts.size).reshape(counts.shape)
            room = np.maximum(cap, counts) - fixed
            rows: dict[tuple[int, int], list[int]] = {}
            for i, p in enumerate(free):
                t = int(spread.topic[m.p_start[p]])
                if not leaders:
                    columns = x[i]
                elif lead[i]:
                    columns = lead[i]
                else:
                    columns = x[i] if rack_leads[p] else {}
                for b, col in columns.items():
                    rows.setdefault((t, b), []).append(col)
            for (t, b), cols in rows.items():
                if len(cols) > room[t, b]:  # a row that can bind
                    milp.row(-np.inf, float(room[t, b]), cols, [1.0] * len(cols))

    def _racks(self, milp: _Milp, p: int, x: dict[int, int]) -> None:
        """At least as many racks as the planner's plan gives p (it spread those short of racks already)."""
        m = self.model
        rows = np.arange(m.p_start[p], m.p_start[p] + m.p_count[p])
        need = len(set(m.rack[m.r_broker[rows]].tolist()))
        by_rack: dict[int, list[int]] = {}
        for b, col in x.items():
            by_rack.setdefault(int(m.rack[b]), []).append(col)
        if need == len(rows):  # one replica per rack
            for cols in by_rack.values():
                if len(cols) > 1:
                    milp.row(-np.inf, 1.0, cols, [1.0] * len(cols))
        elif need > 1:
            ys = []
            for cols in by_rack.values():
                y = milp.column(0.0, integer=False)  # y <= an integer sum and <= 1: integral where it matters
                ys.append(y)
                milp.indicators.append((y, cols))
                milp.row(-np.inf, 0.0, [y, *cols], [1.0, *([-1.0] * len(cols))])
            milp.row(float(need), np.inf, ys, [1.0] * len(ys))

    # -- solving -------------------------------------------------------------------------------------------
    def _solve(self, milp: _Milp, free: np.ndarray, x: list[dict[int, int]],
               lead: list[dict[int, int]]) -> np.ndarray | None:
        """HiGHS' best placement when it copies fewer bytes than the planner's, else None."""
        m = self.model
        n_cols = len(milp.cost)
        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = n_cols, len(milp.rows)
        lp.col_cost_ = np.array(milp.cost)
        lp.col_lower_ = np.zeros(n_cols)
        lp.col_upper_ = np.ones(n_cols)
        lp.row_lower_ = np.array([r[0] for r in milp.rows])
        lp.row_upper_ = np.array([r[1] for r in milp.rows])
        lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
        lp.a_matrix_.start_ = np.cumsum([0, *(len(r[2]) for r in milp.rows)]).astype(np.int32)
        lp.a_matrix_.index_ = np.array([c for r in milp.rows for c in r[2]], dtype=np.int32)
        lp.a_matrix_.value_ = np.array([v for r in milp.rows for v in r[3]], dtype=float)
        lp.integrality_ = [highspy.HighsVarType.kInteger if i else highspy.HighsVarType.kContinuous
                           for i in milp.integer]
        h = highspy.Highs()
        h.setOptionValue("output_flag", False)
        h.setOptionValue("mip_max_nodes", self.limits.max_nodes)
        h.setOptionValue("mip_max_improving_sols", self.limits.improving_solutions)
        h.setOptionValue("time_limit", self.limits.time_limit)
        # The acceptance rule allows 1e-9 of usage; HiGHS' default 1e-6 could accept what the check then rejects.
        h.setOptionValue("primal_feasibility_tolerance", 1e-10)
        h.setOptionValue("mip_feasibility_tolerance", 1e-10)
        h.passModel(lp)
        start = np.zeros(n_cols)
        for i, p in enumerate(free):
            rows = np.arange(m.p_start[p], m.p_start[p] + m.p_count[p])
            start[[x[i][b] for b in m.r_broker[rows] if b in x[i]]] = 1.0
            if lead[i]:
                start[lead[i][int(m.r_broker[rows[m.r_is_leader[rows]][0]])]] = 1.0
        for y, cols in milp.indicators:
            start[y] = min(1.0, float(start[cols].sum()))
        solution = highspy.HighsSolution()
        solution.col_value = start.tolist()
        solution.value_valid = True
        h.setSolution(solution)
        if h.run() == highspy.HighsStatus.kError:
            # The greedy plan stands; the planner's task log says why it was not polished.
            log.warning("exact polish skipped: HiGHS failed (%s)", h.modelStatusToString(h.getModelStatus()))
            return None
        if h.getModelStatus() == highspy.HighsModelStatus.kTimeLimit:
            log.warning("exact polish skipped: HiGHS reached its %.0f s time limit before its work limits (a loaded "
                        "machine?); the greedy plan stands", self.limits.time_limit)
            return None
        if h.getInfo().primal_solution_status != 2:  # kSolutionStatusFeasible
            return None
        values = np.asarray(h.getSolution().col_value)
        copies = np.array(milp.copies)
        if float(copies @ (values > 0.5)) >= float(copies @ start) - 1e-9:
            return None
        return values

    def _placement(self, free: np.ndarray, x: list[dict[int, int]], lead: list[dict[int, int]], values: np.ndarray,
                   scope: np.ndarray) -> list[tuple[list[int], int]]:
        """Per free partition: its brokers (those out of `scope` kept) and the broker leading it (-1: wherever its
        leader's replica goes). Within a rack the leader's replica keeps its role: the leader is where it goes."""
        m = self.model
        out = []
        for i, p in enumerate(free):
            rows = np.arange(m.p_start[p], m.p_start[p] + m.p_count[p])
            now = m.r_broker[rows]
            chosen = [b for b, col in x[i].items() if values[col] > 0.5]
            brokers = sorted(chosen + [int(b) for b in now if not scope[b]])
            leading = now[m.r_is_leader[rows]]
            if lead[i]:
                leader = max(lead[i], key=lambda b: values[lead[i][b]])
            elif scope.all() or not len(leading):
                leader = -1
            else:
                leader = chosen[0] if scope[leading[0]] else int(leading[0])
            out.append((brokers, leader))
        return out

    # -- putting it in the plan ----------------------------------------------------------------------------
    def _apply(self, free: np.ndarray, placement: list[tuple[list[int], int]], short: int | None = None) -> bool:
        """Replace the planner's moves of the partitions placed differently by moves to the MILP's placement,
        then check the result apart from the MILP (with `short`: at most that many pairs short of their target
        band); put the planner's plan back if the check fails."""
        m, state = self.model, self.state
        changed = {}
        for i, p in enumerate(free):
            rows = np.arange(m.p_start[p], m.p_start[p] + m.p_count[p])
            brokers, leader = placement[i]
            planned_leader = int(m.r_broker[rows[m.r_is_leader[rows]][0]])
            if brokers != sorted(m.r_broker[rows].tolist()) or leader not in (-1, planned_leader):
                racks = len(set(m.rack[m.r_broker[rows]].tolist()))
                changed[int(p)] = (rows, brokers, leader, racks)
        if not changed:
            return False
        log = list(state.plan.moves)
        # The status each broker may end at: as now, or as far out as `end_edges` lets one outside its edges.
        acceptance, eligible = self.constraints.acceptance, np.flatnonzero(m.eligible)
        end_lower, end_upper = (edges[eligible] for edges in self.end_edges())
        usage, lower_of, limit_of = m.usage[eligible], acceptance.lower_of[eligible], acceptance.limit_of[eligible]
        before = (acceptance.status(eligible) + np.where(usage < lower_of - EPS, usage - end_lower, 0)
                  + np.where(usage > limit_of + EPS, end_upper - usage, 0))
        spread = self.constraints.spread
        spread_before = spread.counts() if spread is not None else None
        old = [mv for mv in log if int(m.r_pindex[mv.replica]) in changed]
        state.restore(reversed(old))
        state.plan.moves = [mv for mv in log if int(m.r_pindex[mv.replica]) not in changed]
        state.recount()
        new_start = len(state.plan.moves)
        for rows, brokers, leader, _ in changed.values():
            self._place(rows, brokers, leader)
        if self._kept(changed, before) and (spread is None or spread.within(spread_before)) and (short is None
                                            or int(self.constraints.acceptance.short_of_target().sum()) <= short):
            return True
        state.restore(reversed(state.plan.moves[new_start:]))
        state.replay(old)
        state.plan.moves = log
        state.recount()
        return False

    def _place(self, rows: np.ndarray, brokers: list[int], leader: int) -> None:
        """Move a partition (at its snapshot placement) to `brokers`, led from `leader` (-1: as it falls)."""
        m, state = self.model, self.state
        held = m.r_broker[rows].tolist()
        leaving = [int(r) for r, b in zip(rows, held, strict=True) if b not in brokers]
        leaving.sort(key=lambda r: not m.r_is_leader[r])  # the leader's replica first: it goes to the new leader
        added = sorted((b for b in brokers if b not in held), key=lambda b: b != leader)
        if leaving:
            state.apply(list(zip(leaving, added, strict=True)), None, resource=EXACT)
        if leader >= 0:
            row = int(rows[m.r_broker[rows] == leader][0])
            if not m.r_is_leader[row]:
                state.apply_leadership([row], None, resource=EXACT)

    def _kept(self, changed: dict[int, tuple[np.ndarray, list[int], int, int]], before: np.ndarray) -> bool:
        """The check apart from the MILP: every broker inside its edges or no further out than `before` allows, the
        budgets, and the changed partitions on distinct eligible brokers with at least the racks the planner's
        plan gave them."""
        m, state = self.model, self.state
        after = self.constraints.acceptance.status(np.flatnonzero(m.eligible))
        if np.any(after > before + EPS):
            return False
        budgets = self.constraints.budget.budgets
        if state.replica_moves > budgets.max_replica_moves or (
                budgets.max_moved_bytes is not None and state.moved_bytes > budgets.max_moved_bytes) or (
                budgets.max_moves_per_broker is not None and state.broker_moves.max() > budgets.max_moves_per_broker):
            return False
        for rows, brokers, _, racks in changed.values():
            now = m.r_broker[rows].tolist()
            if (sorted(now) != brokers or len(set(now)) != len(rows) or not m.eligible[now].all()
                    or len(set(m.rack[now].tolist())) < racks):
                return False
        return True
