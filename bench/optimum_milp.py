"""The exact optimum of a plan (issues 15, 36): the least data any plan must copy that keeps the placement rules
and lands every broker inside the band of every balanced resource. A MILP per pool, solved by HiGHS (`highspy`).

Variables: binary x[p, b], partition p has a replica on broker b, for every partition that may move and every
broker of its topic's pool that may receive (alive, not excluded); and, only when a balanced resource depends on
the replica's role (leader_count, network_out, cpu: `Resource.role_dependent`), l[p, b], b leads p after the
plan. Constraints, as the README's hard constraints and the validation suite (`validate/checks.py`) state
them:

- replication factor unchanged: sum_b x[p, b] = RF(p); no broker twice follows from x being binary;
- targets in the topic's pool, alive and not excluded: only such brokers have a variable, so replicas on dead
  brokers and outside the pool must move (the constraints force them, nothing else does);
- rack diversity never below min(RF, racks among the pool's eligible brokers, racks the partition spans now):
  at most one replica per rack when that is RF, else indicator y[p, r] <= sum_{b in r} x[p, b], sum_r y >= need;
- leadership (with l): exactly one leader, on one of the partition's replicas after the plan: l[p, b] <= x[p, b],
  sum_b l[p, b] = 1. When leader_count is the only role-dependent resource balanced, l is continuous: with x
  fixed, the leaders are a flow from partitions to brokers within whole leader-count edges (count edges are
  rounded inwards to whole numbers), whose polytope is integral, so the optimum is the same and HiGHS branches on
  x alone (it proved the 12-broker cluster of issue 36 several times faster); whole leaders for the optimum's x
  are found after (`_whole_leaders`). Network out and CPU weigh leaders unequally: with them l is binary;
- bands, for every eligible broker of the pool and balanced resource k: lower <= usage <= min(upper, capacity
  threshold), usage = load / capacity (counts: capacity 1; a broker of capacity 0 is not constrained, its usage
  is 0 as band_status counts it), load = fixed load + sum_p follow_k(p) x[p, b] + (lead_k(p) - follow_k(p))
  l[p, b], lead and follow being a replica's load as leader and as follower (`role_loads`, as the planner's
  model and the re-check count them: disk the size and replica_count 1 in either role, leader_count 1 and 0,
  network_in the bytes in either role, network_out the bytes out plus the replication to RF - 1 followers and
  0, cpu the leader's and the follower's estimate). The bands are the planner's (`bands.parquet`) or
  `bands_frame`'s.
- target band for the brokers a plan fixes: a broker outside the band of a resource before the plan (the
  re-check's judgement, `held_brokers`) must end inside the narrower target band of that resource, as the planner
  holds it (hysteresis) and as the summary's `fixed_outside_target_band` checks it; any other broker inside its
  target band widened to its usage before (no plan takes a broker out of its target band, nor further from it:
  the re-check's `end_edges`). Every balanced resource alike.

Partitions the planner must not touch (ISR safety: no leader, a live replica outside the ISR; an excluded topic
or broker; no pool) keep their replicas and their leader and count as fixed load (each replica in the role it has
now), as do every replica of other pools' partitions that stay where they are.

Objective: bytes copied, sum of size(p) x[p, b] over brokers b that do not hold p now (as the summary and the
bench count them: each added replica copies the partition once). Leadership changes are free: l has no cost and
no tie-break, so the optimum's plan may hand leadership over where no band needs it (its bytes are the optimum's).

The plan read back: a partition changes when its replicas or (with l) its leader do; its new replica list keeps
the kept replicas' positions, the added ones take the freed positions, and the leader after the plan is put first
(swapping places with the first replica), as the executor's preferred leader election makes the first replica
lead. A start plan (`start`, e.g. the planner's plan.json) is read the same way: a planned partition's first
replica leads, any other partition keeps its leader; whether it keeps every constraint is checked here
(`start_feasible`) before HiGHS gets it. A start is no speed-up: on the 12-broker cluster of issue 36 (disk,
replica and leader count) HiGHS, given the planner's plan, restarted its root early and stopped at 120 s every
time, where without it it proved the optimum in 14 to 34 s.

Not modelled: budgets (moves, bytes, moves per broker); resources whose load is not fixed by the replica's role
(none today: every resource's `role_loads` is); the planner's rule that a partition with a replica on a dead broker
moves only that replica and keeps its leader (the MILP may move its other replicas and hand its leadership over:
a relaxation); a replica's own size as the snapshot found it (the MILP counts every free partition's replicas at
the partition's size, as the re-check counts planned partitions). The planner additionally spreads partitions
short of racks; the MILP asks only for the bands and the rules above, so it is a lower bound on any plan that
keeps them, which is what `moved / optimum` compares against.

When HiGHS stops at its time limit the best plan found and the proven bound are both reported (`proven` False):
then `moved / bound` is an upper bound on the true ratio.

Rack by rack (`rack_time_limit`): where every movable partition has one replica on each rack of the pool (RF =
racks, the rack rule's tight form), no replica can change rack, so each rack is a problem of its own but for
leadership. The racks are then solved apart first (leadership rows left out: a relaxation): the sum of their bounds
bounds the pool's optimum, and where every rack is proven and leaders fit the racks' replicas (the pool's model with
x fixed) their sum is the pool's optimum; else the racks' best plans together start the pool's model. HiGHS then
searches one rack's gap at a time instead of all at once.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import highspy
import numpy as np
import pandas as pd

from kafka_rebalancer.config import RebalancerConfig
from kafka_rebalancer.model.reassignment import Reassignment
from kafka_rebalancer.model.resources import Resource, resource
from kafka_rebalancer.plan.changes import role_loads_of
from kafka_rebalancer.plan.recheck import current_placement, end_edges
from kafka_rebalancer.snapshot.build import SnapshotTables

# Every resource whose replica load is its partition's as leader or as follower (`role_loads`): all of them.
SUPPORTED = ("disk", "replica_count", "leader_count", "network_in", "network_out", "cpu")
USAGE_SLACK = 1e-9  # band_status' slack on usage (EPS): a start within it keeps the bands
WHOLE = 1e-6  # a leadership value this close to 0 or 1 is whole


@dataclass(frozen=True)
class PoolOptimum:
    pool: str
    status: str  # HiGHS' model status, e.g. "Optimal", "Time limit reached", "Infeasible"
    proven: bool  # optimal within mip_rel_gap
    bytes: int | None  # bytes copied by the best plan found (None: none found)
    bound_bytes: float | None  # HiGHS' dual bound: no plan keeping the rules and bands copies less
    gap: float | None  # HiGHS' relative MIP gap
    seconds: float
    columns: int
    rows: int
    free_partitions: int  # partitions the MILP may move
    placement: dict[tuple[str, int], list[int]] = field(default_factory=dict)  # the partitions that change
    leaders: bool = False  # the model has leadership variables (a balanced resource is role-dependent)
    # The start plan keeps every constraint of the model (checked here, row by row): None when no start was given.
    start_feasible: bool | None = None
    # `rack_time_limit`: the sum of the racks' own bounds (None: not asked, or the pool does not split by rack).
    rack_bound_bytes: float | None = None


@dataclass(frozen=True)
class Optimum:
    pools: list[PoolOptimum]

    @property
    def proven(self) -> bool:
        return all(p.proven for p in self.pools)

    @property
    def feasible(self) -> bool:
        return all(p.bytes is not None for p in self.pools)

    @property
    def bytes(self) -> int | None:
        return sum(p.bytes for p in self.pools) if self.feasible else None  # type: ignore[misc]

    @property
    def bound_bytes(self) -> float | None:
        bounds = [p.bound_bytes for p in self.pools]
        return None if any(b is None for b in bounds) else float(sum(bounds))  # type: ignore[arg-type]

    @property
    def rack_bound_bytes(self) -> float | None:
        """The racks' bounds summed over the pools (None: a pool was not solved rack by rack)."""
        bounds = [p.rack_bound_bytes for p in self.pools]
        return None if any(b is None for b in bounds) else float(sum(bounds))  # type: ignore[arg-type]

    @property
    def status(self) -> str:
        return "; ".join(f"{p.pool}: {p.status}" for p in self.pools)

    @property
    def start_feasible(self) -> bool | None:
        """Whether the start plan keeps every pool's constraints (None: no start given)."""
        given = [p.start_feasible for p in self.pools if p.start_feasible is not None]
        return all(given) if given else None

    @property
    def plan(self) -> list[Reassignment]:
        return [Reassignment(t, p, r) for (t, p), r in sorted(
            ((k, v) for pool in self.pools for k, v in pool.placement.items()), key=lambda kv: (kv[0][0], kv[0][1]))]


def _rack(rack: object, broker: int) -> str:
    # As the planner: a broker without rack information is a rack of its own (no false conflicts).
    return rack if isinstance(rack, str) and rack else f"#broker-{broker}"


def free_partitions(snapshot: SnapshotTables, config: RebalancerConfig) -> pd.Series:
    """Per partition (row of snapshot.partitions): may a plan move it? The planner's skip reasons
    (`balance/transforms.planner_replicas`) negated."""
    brokers = snapshot.brokers
    alive = set(brokers.loc[brokers["alive"], "broker_id"].astype(int))
    excluded = set(brokers.loc[brokers["excluded"], "broker_id"].astype(int)) | set(config.exclude.brokers)
    parts = snapshot.partitions

    def ok(row: pd.Series) -> bool:
        replicas, isr = [int(b) for b in row["replicas"]], {int(b) for b in row["isr"]}
        return (not bool(row["excluded"]) and not config.topic_excluded(str(row["topic"]))
                and isinstance(row["topic_pool"], str) and int(row["leader"]) >= 0
                and not any(b in excluded for b in replicas)
                and all(b in isr for b in replicas if b in alive))

    return parts.apply(ok, axis=1).astype(bool) if len(parts) else pd.Series([], dtype=bool)


def _balanced_bands(bands: pd.DataFrame, pool: str, config: RebalancerConfig) -> list[dict]:
    rows = bands[(bands["broker_pool"] == pool) & bands["balanced"].astype(bool)
                 & bands["resource"].isin(list(config.resources))]
    unsupported = sorted(set(rows["resource"]) - set(SUPPORTED))
    if unsupported:
        raise ValueError(f"pool {pool}: the optimum models {', '.join(SUPPORTED)} only, the config also balances "
                         f"{', '.join(unsupported)}")
    return rows.to_dict("records")


def held_brokers(snapshot: SnapshotTables, config: RebalancerConfig, bands: pd.DataFrame) -> set[tuple[int, str]]:
    """The (broker, resource) pairs a plan must fix into the target band: outside the band before the plan, as the
    re-check judges the current placement."""
    before = current_placement(config, snapshot, bands).before
    out = before[before["counted"] & ~before["inside"]]
    return set(zip(out["broker_id"].astype(int), out["resource"], strict=True))


def solve_optimum(snapshot: SnapshotTables, config: RebalancerConfig, bands: pd.DataFrame, *,
                  time_limit: float = 120.0, mip_rel_gap: float = 1e-4, start: list[Reassignment] | None = None,
                  held: set[tuple[int, str]] | None = None,
                  widened: Mapping[tuple[int, str], float] | None = None, widened_slack: float = 0.0,
                  rack_time_limit: float | None = None) -> Optimum:
    """The MILP of every pool with brokers (see the module docstring). HiGHS stops at `time_limit` seconds per
    pool, or when the best plan is proven within `mip_rel_gap` of the optimum (1e-4: HiGHS' default). `start`:
    a plan (e.g. the planner's; an empty list: nothing changes) given to HiGHS as a first solution when it keeps
    the rules and bands (HiGHS ignores it otherwise; `start_feasible` says which). `held`: the (broker, resource)
    pairs to end inside the target band, `held_brokers`' when None. `widened`: per (broker, resource), a usage its
    edges are widened to take in (a plan that leaves the broker outside its band: the best plan leaving it no
    further out; `widened_slack`, in usage, further still where an edge is widened: see `_solve_pool`).
    `rack_time_limit`: where every movable partition has one replica on each rack of the pool (RF =
    racks), the racks are solved apart first, each within that many seconds (`_by_rack`)."""
    pools = sorted(p for p in snapshot.brokers["broker_pool"].dropna().unique())
    # A partition whose topic's pool has no broker cannot be placed: it stays, as fixed load.
    free = free_partitions(snapshot, config) & snapshot.partitions["topic_pool"].isin(pools)
    start_map = None if start is None else {(r.topic, int(r.partition)): [int(b) for b in r.replicas]
                                            for r in start}
    held = held_brokers(snapshot, config, bands) if held is None else held
    return Optimum([_solve_pool(snapshot, config, bands, pool, free, time_limit, mip_rel_gap, start_map, held,
                                widened or {}, rack_time_limit, widened_slack) for pool in pools])


def _solve_pool(snapshot: SnapshotTables, config: RebalancerConfig, bands: pd.DataFrame, pool: str,
                free: pd.Series, time_limit: float, mip_rel_gap: float,
                start: dict[tuple[str, int], list[int]] | None, held: set[tuple[int, str]],
                widened: Mapping[tuple[int, str], float], rack_time_limit: float | None = None,
                widened_slack: float = 0.0) -> PoolOptimum:
    started = time.monotonic()
    brokers = snapshot.brokers.drop_duplicates("broker_id").set_index("broker_id")
    excluded = set(brokers.index[brokers["excluded"].astype(bool)].astype(int)) | set(config.exclude.brokers)
    members = brokers[brokers["broker_pool"] == pool]
    eligible = [int(b) for b in sorted(members.index)
                if bool(members.at[b, "alive"]) and int(b) not in excluded]
    rack = {b: _rack(members.at[b, "rack"], b) for b in eligible}
    n_racks = len(set(rack.values()))
    all_rack = {int(b): _rack(r, int(b)) for b, r in brokers["rack"].items()}

    parts = snapshot.partitions
    mine = parts[(parts["topic_pool"] == pool) & free]
    free_keys = set(zip(parts.loc[free, "topic"], parts.loc[free, "partition"].astype(int), strict=True))

    # The balanced resources, each replica's load in either role (`role_loads`, as the planner's model and the
    # re-check's placement after the plan count them), and whether leadership matters.
    balanced = _balanced_bands(bands, pool, config)
    resources = [resource(name) for name in dict.fromkeys(band["resource"] for band in balanced)]
    lead, follow = (role_loads_of(mine, resources) if len(mine) and resources
                    else (np.zeros((len(mine), len(resources))),) * 2)
    with_leaders = any(r.role_dependent for r in resources)
    # With leader count the only role-dependent resource balanced, the leadership given x is a flow from partitions
    # to brokers (each l in one partition's row and one broker's leader-count row, whole edges): its polytope is
    # integral, so l may be continuous (HiGHS branches on x alone) and whole leaders are found once x is
    # (`_whole_leaders`). Network out and CPU weigh leaders unequally: then l is binary.
    leaders_flow = {r.name for r in resources if r.role_dependent} == {"leader_count"}

    # Fixed load per eligible broker and resource: every replica that stays put (of partitions that may not move,
    # any pool), in the role it has now (their leaders stay too).
    reps = snapshot.replicas
    stays = ~pd.Series([k in free_keys for k in zip(reps["topic"], reps["partition"].astype(int), strict=True)],
                       index=reps.index, dtype=bool)
    fixed_rows = reps[stays & reps["broker_id"].isin(eligible)]
    fixed = {r.name: _replica_loads(fixed_rows, r).groupby(fixed_rows["broker_id"]).sum() for r in resources}

    # Columns: x[p, b] for each free partition of the pool and eligible broker, then the rack indicators y, then
    # (a role-dependent resource balanced) the leadership l[p, b].
    col_cost: list[float] = []
    col_upper: list[float] = []
    integer: list[bool] = []
    x_index: dict[tuple[int, int], int] = {}
    keys = list(zip(mine["topic"], mine["partition"].astype(int), strict=True))
    sizes = mine["size_bytes"].astype(np.int64).tolist()
    # The objective in units of the largest partition keeps HiGHS' numbers near 1 (bytes would be ~1e11, and
    # GiB would put a small test's costs under its tolerances); the answer is recounted in whole bytes.
    unit = float(max(sizes, default=1) or 1)
    current = [[int(b) for b in r] for r in mine["replicas"]]
    leaders = mine["leader"].astype(int).tolist()  # free partitions are led (`free_partitions`)
    for i, holders in enumerate(current):
        for b in eligible:
            x_index[(i, b)] = len(col_cost)
            col_cost.append(0.0 if b in holders else sizes[i] / unit)
            col_upper.append(1.0)
            integer.append(True)

    rows_lower: list[float] = []
    rows_upper: list[float] = []
    rows_cols: list[list[int]] = []
    rows_vals: list[list[float]] = []

    def add_row(lower: float, upper: float, cols: list[int], vals: list[float]) -> None:
        rows_lower.append(lower)
        rows_upper.append(upper)
        rows_cols.append(cols)
        rows_vals.append(vals)

    inf = highspy.kHighsInf
    y_index: dict[tuple[int, str], int] = {}
    one_per_rack = n_racks > 1  # every partition has exactly one replica on each rack (RF = racks, tight form)
    for i, holders in enumerate(current):
        rf = len(holders)
        add_row(rf, rf, [x_index[(i, b)] for b in eligible], [1.0] * len(eligible))
        need = min(rf, n_racks, len({all_rack.get(b, f"#broker-{b}") for b in holders}))
        one_per_rack = one_per_rack and need == rf == n_racks
        by_rack: dict[str, list[int]] = {}
        for b in eligible:
            by_rack.setdefault(rack[b], []).append(x_index[(i, b)])
        if need == rf:  # every replica on its own rack: the tight form
            for cols in by_rack.values():
                if len(cols) > 1:
                    add_row(-inf, 1.0, cols, [1.0] * len(cols))
        elif need > 1:
            ys = []
            for r, cols in by_rack.items():
                y_index[(i, r)] = len(col_cost)
                ys.append(len(col_cost))
                col_cost.append(0.0)
                col_upper.append(1.0)
                integer.append(False)  # y <= an integer sum and <= 1: integral where it matters
                add_row(-inf, 0.0, [y_index[(i, r)], *cols], [1.0, *([-1.0] * len(cols))])
            add_row(need, inf, ys, [1.0] * len(ys))

    # Leadership: exactly one leader per free partition, on one of its replicas after the plan. Free of cost (a
    # preferred-leader election copies nothing); binary unless `leaders_flow`.
    l_index: dict[tuple[int, int], int] = {}
    if with_leaders:
        for i in range(len(current)):
            for b in eligible:
                l_index[(i, b)] = len(col_cost)
                col_cost.append(0.0)
                col_upper.append(1.0)
                integer.append(not leaders_flow)
                add_row(-inf, 0.0, [l_index[(i, b)], x_index[(i, b)]], [1.0, -1.0])
            add_row(1.0, 1.0, [l_index[(i, b)] for b in eligible], [1.0] * len(eligible))

    # Each broker's edges: the target band for a held one, its target band widened to its usage before for the
    # others, within the band (as the planner's `Acceptance` and the re-check's `end_edges`). A broker's load of
    # resource k: fixed + sum_p follow_k(p) x[p, b] + (lead_k(p) - follow_k(p)) l[p, b], in usage units (load /
    # capacity, as band_status judges it; counts have capacity 1).
    now = current_placement(config, snapshot, bands)
    edges = end_edges(now.before, bands, now.must_leave, held).set_index(["broker_id", "resource"])
    column = {r.name: k for k, r in enumerate(resources)}
    broker_rows: list[tuple[int, int]] = []  # (row, broker): the band rows whose columns are the broker's x alone
    for band in balanced:
        res = resource(band["resource"])
        k = column[res.name]
        for b in eligible:
            lower, upper = (float(v) for v in edges.loc[(b, res.name), ["end_lower", "end_upper"]])
            if (b, res.name) in widened:
                # An edge widened to a usage outside it, and `widened_slack` beyond: with the usage alone, a rack
                # whose brokers all end at their edges (its total short of the band's, RF = racks) pins each to the
                # byte, and the optimum asks which plans copy the same bytes to the same brokers (a subset-sum
                # HiGHS cannot prove in minutes: mixed-a@12, racks-3-uneven@12).
                usage = widened[(b, res.name)]
                lower = usage - widened_slack if usage < lower else lower
                upper = usage + widened_slack if usage > upper else upper
            if res.is_count:  # a count is whole: its edges are (band_status' slack included)
                lower, upper = math.ceil(lower - USAGE_SLACK), math.floor(upper + USAGE_SLACK)
            capacity = float(members.at[b, res.capacity_column]) if res.capacity_column else 1.0
            if capacity <= 0:
                continue  # usage is 0 whatever it holds (band_status): nothing to constrain
            cols: list[int] = []
            vals: list[float] = []
            for i in range(len(current)):
                if follow[i, k] != 0.0:
                    cols.append(x_index[(i, b)])
                    vals.append(follow[i, k] / capacity)
                if res.role_dependent and lead[i, k] != follow[i, k]:
                    cols.append(l_index[(i, b)])
                    vals.append((lead[i, k] - follow[i, k]) / capacity)
            base = float(fixed[res.name].get(b, 0.0)) / capacity
            if not res.role_dependent:
                broker_rows.append((len(rows_lower), b))
            add_row(lower - base, upper - base, cols, vals)

    n_cols, n_rows = len(col_cost), len(rows_lower)
    if not keys:
        return PoolOptimum(pool, "no movable partition", True, 0, 0.0, 0.0, time.monotonic() - started, 0, 0, 0)
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = n_cols, n_rows
    lp.col_cost_ = np.array(col_cost)
    lp.col_lower_ = np.zeros(n_cols)
    lp.col_upper_ = np.array(col_upper)
    lp.row_lower_ = np.array(rows_lower)
    lp.row_upper_ = np.array(rows_upper)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
    lp.a_matrix_.start_ = np.cumsum([0, *map(len, rows_cols)]).astype(np.int32)
    lp.a_matrix_.index_ = np.array([c for cols in rows_cols for c in cols], dtype=np.int32)
    lp.a_matrix_.value_ = np.array([v for vals in rows_vals for v in vals])
    lp.integrality_ = [highspy.HighsVarType.kInteger if i else highspy.HighsVarType.kContinuous for i in integer]

    start_feasible: bool | None = None
    start_values: np.ndarray | None = None
    if start is not None:  # an empty plan is a start too (nothing moves)
        start_values = _start_values(n_cols, keys, current, leaders, rack, x_index, y_index, l_index, start)
        start_feasible = start_values is not None and _keeps_rows(start_values, lp, col_upper)
    rack_bound: float | None = None
    by_racks: np.ndarray | None = None
    if rack_time_limit is not None and one_per_rack:
        rack_bound, rack_x, all_proven = _by_rack(lp, x_index, broker_rows, rack, len(keys), rack_time_limit,
                                                  mip_rel_gap, start_values if start_feasible else None)
        rack_bound = None if rack_bound is None else rack_bound * unit
        # The racks' best replicas together, where leaders fit them: the optimum when every rack is proven, else a
        # start for the pool's model when it copies less than the given one.
        joined = None if rack_x is None else _with_x(lp, rack_x, list(x_index.values()))
        if joined is not None and all_proven:
            by_racks = joined
        elif joined is not None and (start_values is None or not start_feasible
                                     or np.dot(col_cost, joined) < np.dot(col_cost, start_values)):
            start_values = joined
    if by_racks is not None:
        text, proven, has_solution, values = "Optimal (by rack)", True, True, by_racks
        bound, gap = float(np.dot(col_cost, by_racks)) * unit, 0.0
    else:
        h = _highs(time_limit, mip_rel_gap)
        h.passModel(lp)
        if start_values is not None:
            solution = highspy.HighsSolution()
            solution.col_value = start_values.tolist()
            solution.value_valid = True
            h.setSolution(solution)
        h.run()
        status = h.getModelStatus()
        info = h.getInfo()
        text = h.modelStatusToString(status)
        has_solution = info.primal_solution_status == 2  # kSolutionStatusFeasible
        proven = status == highspy.HighsModelStatus.kOptimal
        finite = np.isfinite(info.mip_dual_bound) and status != highspy.HighsModelStatus.kInfeasible
        bound = float(info.mip_dual_bound) * unit if finite else None
        values = np.asarray(h.getSolution().col_value) if has_solution else None
        gap = float(info.mip_gap) if has_solution else None
        if bound is not None and rack_bound is not None and rack_bound > bound:
            bound = rack_bound  # the racks' own bounds add up to a better one
            text += " (bound by rack)"
            best = float(np.dot(col_cost, values)) * unit if values is not None else 0.0
            gap = max(0.0, (best - bound) / best) if best > 0 else gap
    placement: dict[tuple[str, int], list[int]] = {}
    copied: int | None = None
    if has_solution:
        assert values is not None
        if leaders_flow:
            values = _whole_leaders(lp, values, list(x_index.values()), list(l_index.values()))
        copied = 0
        for i, holders in enumerate(current):
            chosen = [b for b in eligible if values[x_index[(i, b)]] > 0.5]
            added = [b for b in chosen if b not in holders]
            copied += sizes[i] * len(added)
            if with_leaders:
                leader = max(chosen, key=lambda b: values[l_index[(i, b)]])  # the one l at 1
                if set(chosen) != set(holders) or leader != leaders[i]:
                    placement[keys[i]] = _led_by(leader, _ordered(holders, chosen))
            elif set(chosen) != set(holders):
                placement[keys[i]] = _ordered(holders, chosen)
    return PoolOptimum(pool, text, proven, copied, bound, gap, round(time.monotonic() - started, 2), n_cols, n_rows,
                       len(keys), placement, with_leaders, start_feasible, rack_bound)


def _highs(time_limit: float | None = None, mip_rel_gap: float | None = None) -> highspy.Highs:
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    if time_limit is not None:
        h.setOptionValue("time_limit", float(time_limit))
    if mip_rel_gap is not None:
        h.setOptionValue("mip_rel_gap", float(mip_rel_gap))
    # band_status accepts 1e-9 of slack on usage; HiGHS' default 1e-6 could accept a plan the check rejects.
    h.setOptionValue("primal_feasibility_tolerance", 1e-10)
    h.setOptionValue("mip_feasibility_tolerance", 1e-10)
    return h


def _by_rack(lp: highspy.HighsLp, x_index: dict[tuple[int, int], int], broker_rows: list[tuple[int, int]],
             rack: dict[int, str], n_parts: int, time_limit: float, mip_rel_gap: float,
             start: np.ndarray | None) -> tuple[float | None, np.ndarray | None, bool]:
    """The pool's racks solved apart, where every movable partition has exactly one replica on each rack (RF =
    racks, each at most once): a replica then never changes rack, and each rack is its own problem of its
    partitions' replicas on its brokers with their bands, but for leadership (a leader may be on any rack), whose
    rows are left out here. The sum of the racks' optima is so a lower bound on the pool's, and the pool's optimum
    where leaders fit the racks' replicas (`_with_x`). A rack's bytes are proven much sooner than the pool's: its
    gap alone is searched (on racks-3-uneven@12 and mixed-a@12 the pool's bound is one rack's gap). Returns the sum
    of the racks' bounds (None: a rack infeasible or without a bound), the x values of the racks' best plans (None:
    a rack has none) and whether every rack is proven."""
    starts = np.asarray(lp.a_matrix_.start_)
    index, value = np.asarray(lp.a_matrix_.index_), np.asarray(lp.a_matrix_.value_)
    cost, lower, upper = np.asarray(lp.col_cost_), np.asarray(lp.row_lower_), np.asarray(lp.row_upper_)
    total, x = 0.0, np.zeros(lp.num_col_)
    all_proven, all_found = True, True
    for name in sorted(set(rack.values())):
        brokers = [b for b in sorted(rack) if rack[b] == name]
        cols = [x_index[(i, b)] for i in range(n_parts) for b in brokers]
        local = {c: k for k, c in enumerate(cols)}
        r_lower, r_upper, r_cols, r_vals = [], [], [], []
        for i in range(n_parts):  # its one replica on this rack
            r_lower.append(1.0)
            r_upper.append(1.0)
            r_cols.append([local[x_index[(i, b)]] for b in brokers])
            r_vals.append([1.0] * len(brokers))
        for row, b in broker_rows:
            if rack[b] == name:
                r_lower.append(lower[row])
                r_upper.append(upper[row])
                r_cols.append([local[int(c)] for c in index[starts[row]:starts[row + 1]]])
                r_vals.append(value[starts[row]:starts[row + 1]].tolist())
        sub = highspy.HighsLp()
        sub.num_col_, sub.num_row_ = len(cols), len(r_lower)
        sub.col_cost_ = cost[cols]
        sub.col_lower_, sub.col_upper_ = np.zeros(len(cols)), np.ones(len(cols))
        sub.row_lower_, sub.row_upper_ = np.array(r_lower), np.array(r_upper)
        sub.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
        sub.a_matrix_.start_ = np.cumsum([0, *map(len, r_cols)]).astype(np.int32)
        sub.a_matrix_.index_ = np.array([c for row_cols in r_cols for c in row_cols], dtype=np.int32)
        sub.a_matrix_.value_ = np.array([v for vals in r_vals for v in vals])
        sub.integrality_ = [highspy.HighsVarType.kInteger] * len(cols)
        h = _highs(time_limit, mip_rel_gap)
        h.passModel(sub)
        if start is not None:
            solution = highspy.HighsSolution()
            solution.col_value = start[cols].tolist()
            solution.value_valid = True
            h.setSolution(solution)
        h.run()
        status, info = h.getModelStatus(), h.getInfo()
        if status == highspy.HighsModelStatus.kInfeasible or not np.isfinite(info.mip_dual_bound):
            return None, None, False
        total += float(info.mip_dual_bound)
        all_proven = all_proven and status == highspy.HighsModelStatus.kOptimal
        if info.primal_solution_status == 2:
            x[cols] = np.round(np.asarray(h.getSolution().col_value))
        else:
            all_found = False
    return total, (x if all_found else None), all_proven


def _with_x(lp: highspy.HighsLp, x: np.ndarray, x_cols: list[int]) -> np.ndarray | None:
    """The pool's model with its x fixed at `x`'s: the values of every column (leaders, rack indicators) where it
    is feasible, else None."""
    h = _highs()
    h.passModel(lp)
    cols = np.array(x_cols, dtype=np.int32)
    h.changeColsBounds(len(cols), cols, x[cols], x[cols])
    h.run()
    if h.getInfo().primal_solution_status != 2:
        return None
    return np.asarray(h.getSolution().col_value)


def _whole_leaders(lp: highspy.HighsLp, values: np.ndarray, x_cols: list[int], l_cols: list[int]) -> np.ndarray:
    """`values` with whole leaders: as they are when HiGHS' l are 0 or 1 already, else those of the model with x
    fixed at `values`' and l binary (a flow problem, feasible since HiGHS' fractional l are: see `leaders_flow`).
    Changes `lp`."""
    leading = values[l_cols]
    if np.all(np.abs(leading - np.round(leading)) <= WHOLE):
        return values
    x = np.round(values[x_cols])
    lower, upper, kinds = np.asarray(lp.col_lower_), np.asarray(lp.col_upper_), list(lp.integrality_)
    lower[x_cols], upper[x_cols] = x, x
    for c in l_cols:
        kinds[c] = highspy.HighsVarType.kInteger
    lp.col_lower_, lp.col_upper_, lp.integrality_ = lower, upper, kinds
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("primal_feasibility_tolerance", 1e-10)
    h.setOptionValue("mip_feasibility_tolerance", 1e-10)
    h.passModel(lp)
    h.run()
    if h.getInfo().primal_solution_status != 2:
        raise RuntimeError(f"no whole leaders for the optimum's replicas: {h.modelStatusToString(h.getModelStatus())}")
    return np.asarray(h.getSolution().col_value)


def _replica_loads(rows: pd.DataFrame, r: Resource) -> pd.Series:
    """Each replica's load of `r` in the role it has now (`broker_load_frame`'s)."""
    if r.replica_load_column is None:
        return pd.Series(1.0, index=rows.index)
    return rows[r.replica_load_column].astype(float)


def _ordered(holders: list[int], chosen: list[int]) -> list[int]:
    """The new replica list: kept replicas stay in their positions (the leader too, where it stays), added ones
    take the freed positions."""
    added = iter(sorted(b for b in chosen if b not in holders))
    return [b if b in chosen else next(added) for b in holders] + list(added)


def _led_by(leader: int, replicas: list[int]) -> list[int]:
    """The replica list with `leader` first (it swaps places with the first replica, as the planner's leadership
    transfer does): after the plan the preferred leader election makes the first replica lead."""
    out = list(replicas)
    j = out.index(leader)
    out[0], out[j] = out[j], out[0]
    return out


def _start_values(n_cols: int, keys: list[tuple[str, int]], current: list[list[int]], leaders: list[int],
                  rack: dict[int, str], x_index: dict[tuple[int, int], int], y_index: dict[tuple[int, str], int],
                  l_index: dict[tuple[int, int], int], start: dict[tuple[str, int], list[int]]) -> np.ndarray | None:
    """The columns' values of the start plan: a planned partition ends on its new replicas, led by the first (the
    executor's preferred leader election); any other keeps its replicas and its leader. None: the start places a
    replica where the MILP may not (no use as a start)."""
    values = np.zeros(n_cols)
    for i, key in enumerate(keys):
        after = start.get(key, current[i])
        leader = after[0] if key in start else leaders[i]
        if any(b not in rack for b in after) or leader not in after:
            return None
        for b in after:
            values[x_index[(i, b)]] = 1.0
            if (i, rack[b]) in y_index:
                values[y_index[(i, rack[b])]] = 1.0
        if l_index:
            values[l_index[(i, leader)]] = 1.0
    return values


def _keeps_rows(values: np.ndarray, lp: highspy.HighsLp, col_upper: list[float]) -> bool:
    """Whether the start's values keep every row of the model and the columns' bounds (to USAGE_SLACK)."""
    starts = np.asarray(lp.a_matrix_.start_)
    index, value = np.asarray(lp.a_matrix_.index_), np.asarray(lp.a_matrix_.value_)
    row_of = np.repeat(np.arange(len(starts) - 1), np.diff(starts))
    activity = np.bincount(row_of, weights=value * values[index], minlength=len(starts) - 1)
    lower, upper = np.asarray(lp.row_lower_), np.asarray(lp.row_upper_)
    return bool(np.all(activity >= lower - USAGE_SLACK) and np.all(activity <= upper + USAGE_SLACK)
                and np.all(values <= np.asarray(col_upper)))
