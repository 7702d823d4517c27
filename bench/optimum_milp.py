"""The exact optimum of a plan (issue 15): the least data any plan must copy that keeps the placement rules and
lands every broker's disk and replica count inside their bands. A MILP per pool, solved by HiGHS (`highspy`).

Variables: binary x[p, b], partition p has a replica on broker b, for every partition that may move and every
broker of its topic's pool that may receive (alive, not excluded). Constraints, as the README's hard constraints
and the validation suite (`validate/checks.py`) state them:

- replication factor unchanged: sum_b x[p, b] = RF(p); no broker twice follows from x being binary;
- targets in the topic's pool, alive and not excluded: only such brokers have a variable, so replicas on dead
  brokers and outside the pool must move (the constraints force them, nothing else does);
- rack diversity never below min(RF, racks among the pool's eligible brokers, racks the partition spans now):
  at most one replica per rack when that is RF, else indicator y[p, r] <= sum_{b in r} x[p, b], sum_r y >= need;
- bands, for every eligible broker of the pool and balanced resource: lower <= usage <= min(upper, capacity
  threshold), usage = load / capacity for disk and the replica count itself for replica_count, the load being the
  fixed replicas' plus sum_p size(p) x[p, b]. The bands are the planner's (`bands.parquet`) or `bands_frame`'s.
- target band for the brokers a plan fixes: a broker outside the band of a resource before the plan (the
  re-check's judgement, `held_brokers`) must end inside the narrower target band of that resource, as the planner
  holds it (hysteresis) and as the summary's `fixed_outside_target_band` checks it; any other broker inside its
  target band widened to its usage before (no plan takes a broker out of its target band, nor further from it:
  the re-check's `end_edges`).

Partitions the planner must not touch (ISR safety: no leader, a live replica outside the ISR; an excluded topic
or broker; no pool) keep their replicas and count as fixed load, as do every replica of other pools' partitions
that stay where they are.

Objective: bytes copied, sum of size(p) x[p, b] over brokers b that do not hold p now (as the summary and the
bench count them: each added replica copies the partition once).

Not modelled: budgets (moves, bytes, moves per broker) and resources whose load depends on the replica's role
(leader count, network out, CPU) or on traffic; the optimum is asked for configs that balance disk and replica
count only, so the planner and the MILP answer the same question. The planner additionally spreads partitions
short of racks; the MILP asks only for the bands and the rules above, so it is a lower bound on any plan that
keeps them, which is what `moved / optimum` compares against.

When HiGHS stops at its time limit the best plan found and the proven bound are both reported (`proven` False):
then `moved / bound` is an upper bound on the true ratio.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import highspy
import numpy as np
import pandas as pd

from kafka_rebalancer.config import RebalancerConfig
from kafka_rebalancer.model.reassignment import Reassignment
from kafka_rebalancer.plan.recheck import current_placement, end_edges
from kafka_rebalancer.snapshot.build import SnapshotTables

SUPPORTED = ("disk", "replica_count")


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
    def status(self) -> str:
        return "; ".join(f"{p.pool}: {p.status}" for p in self.pools)

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
                  held: set[tuple[int, str]] | None = None) -> Optimum:
    """The MILP of every pool with brokers (see the module docstring). HiGHS stops at `time_limit` seconds per
    pool, or when the best plan is proven within `mip_rel_gap` of the optimum (1e-4: HiGHS' default). `start`:
    a plan (e.g. the planner's) given to HiGHS as a first solution when it keeps the rules and bands (HiGHS
    ignores it otherwise). `held`: the (broker, resource) pairs to end inside the target band, `held_brokers`'
    when None."""
    pools = sorted(p for p in snapshot.brokers["broker_pool"].dropna().unique())
    # A partition whose topic's pool has no broker cannot be placed: it stays, as fixed load.
    free = free_partitions(snapshot, config) & snapshot.partitions["topic_pool"].isin(pools)
    start_map = {(r.topic, int(r.partition)): [int(b) for b in r.replicas] for r in start or []}
    held = held_brokers(snapshot, config, bands) if held is None else held
    return Optimum([_solve_pool(snapshot, config, bands, pool, free, time_limit, mip_rel_gap, start_map, held)
                    for pool in pools])


def _solve_pool(snapshot: SnapshotTables, config: RebalancerConfig, bands: pd.DataFrame, pool: str,
                free: pd.Series, time_limit: float, mip_rel_gap: float,
                start: dict[tuple[str, int], list[int]], held: set[tuple[int, str]]) -> PoolOptimum:
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

    # Fixed load per eligible broker: every replica that stays put (of partitions that may not move, any pool).
    reps = snapshot.replicas
    stays = ~pd.Series([k in free_keys for k in zip(reps["topic"], reps["partition"].astype(int), strict=True)],
                       index=reps.index, dtype=bool)
    fixed_rows = reps[stays & reps["broker_id"].isin(eligible)]
    fixed_disk = fixed_rows.groupby("broker_id")["size_bytes"].sum().astype(float)
    fixed_count = fixed_rows.groupby("broker_id").size().astype(float)

    # Columns: x[p, b] for each free partition of the pool and eligible broker, then the rack indicators y.
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
    for i, holders in enumerate(current):
        rf = len(holders)
        add_row(rf, rf, [x_index[(i, b)] for b in eligible], [1.0] * len(eligible))
        need = min(rf, n_racks, len({all_rack.get(b, f"#broker-{b}") for b in holders}))
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

    # Each broker's edges: the target band for a held one, its target band widened to its usage before for the
    # others, within the band (as the planner's `Acceptance` and the re-check's `end_edges`).
    now = current_placement(config, snapshot, bands)
    edges = end_edges(now.before, bands, now.must_leave, held).set_index(["broker_id", "resource"])
    for band in _balanced_bands(bands, pool, config):
        for b in eligible:
            lower, upper = (float(v) for v in edges.loc[(b, band["resource"]), ["end_lower", "end_upper"]])
            cols = [x_index[(i, b)] for i in range(len(current))]
            if band["resource"] == "replica_count":
                base = float(fixed_count.get(b, 0.0))
                add_row(lower - base, upper - base, cols, [1.0] * len(cols))
            else:  # disk, in usage units (fractions of the broker's capacity) as band_status judges it
                capacity = float(members.at[b, "disk_capacity_bytes"])
                if capacity <= 0:
                    continue  # usage is 0 whatever it holds (band_status): nothing to constrain
                base = float(fixed_disk.get(b, 0.0)) / capacity
                add_row(lower - base, upper - base, cols, [s / capacity for s in sizes])

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

    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("time_limit", float(time_limit))
    h.setOptionValue("mip_rel_gap", float(mip_rel_gap))
    # band_status accepts 1e-9 of slack on usage; HiGHS' default 1e-6 could accept a plan the check rejects.
    h.setOptionValue("primal_feasibility_tolerance", 1e-10)
    h.setOptionValue("mip_feasibility_tolerance", 1e-10)
    h.passModel(lp)
    if start:
        _set_start(h, n_cols, keys, current, eligible, rack, x_index, y_index, start)
    h.run()
    status = h.getModelStatus()
    info = h.getInfo()
    text = h.modelStatusToString(status)
    has_solution = info.primal_solution_status == 2  # kSolutionStatusFeasible
    placement: dict[tuple[str, int], list[int]] = {}
    copied: int | None = None
    if has_solution:
        values = np.asarray(h.getSolution().col_value)
        copied = 0
        for i, holders in enumerate(current):
            chosen = [b for b in eligible if values[x_index[(i, b)]] > 0.5]
            added = [b for b in chosen if b not in holders]
            copied += sizes[i] * len(added)
            if set(chosen) != set(holders):
                placement[keys[i]] = _ordered(holders, chosen)
    proven = status == highspy.HighsModelStatus.kOptimal
    finite = np.isfinite(info.mip_dual_bound) and status != highspy.HighsModelStatus.kInfeasible
    bound = float(info.mip_dual_bound) * unit if finite else None
    gap = float(info.mip_gap) if has_solution else None
    return PoolOptimum(pool, text, proven, copied, bound, gap, round(time.monotonic() - started, 2), n_cols, n_rows,
                       len(keys), placement)


def _ordered(holders: list[int], chosen: list[int]) -> list[int]:
    """The new replica list: kept replicas stay in their positions (the leader too, where it stays), added ones
    take the freed positions."""
    added = iter(sorted(b for b in chosen if b not in holders))
    return [b if b in chosen else next(added) for b in holders] + list(added)


def _set_start(h: highspy.Highs, n_cols: int, keys: list[tuple[str, int]], current: list[list[int]],
               eligible: list[int], rack: dict[int, str], x_index: dict[tuple[int, int], int],
               y_index: dict[tuple[int, str], int], start: dict[tuple[str, int], list[int]]) -> None:
    values = np.zeros(n_cols)
    for i, key in enumerate(keys):
        after = start.get(key, current[i])
        if any(b not in rack for b in after):
            return  # the start places a replica where the MILP may not: no use as a start
        for b in after:
            values[x_index[(i, b)]] = 1.0
            if (i, rack[b]) in y_index:
                values[y_index[(i, rack[b])]] = 1.0
    solution = highspy.HighsSolution()
    solution.col_value = values.tolist()
    solution.value_valid = True
    h.setSolution(solution)
