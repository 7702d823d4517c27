"""HiGHS on a pool's MILP (`bench/optimum_model.py`): its options, one run from an optional start, the racks
solved apart (`by_rack`), the model with x fixed (`with_x`, `whole_leaders`) and a start plan's column values
(`start_values`, `keeps_rows`)."""

from __future__ import annotations

from dataclasses import dataclass

import highspy
import numpy as np

from bench.optimum_model import USAGE_SLACK, Model

WHOLE = 1e-6  # a leadership value this close to 0 or 1 is whole
FEASIBLE = 2  # HiGHS' kSolutionStatusFeasible


def highs(time_limit: float | None = None, mip_rel_gap: float | None = None) -> highspy.Highs:
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


def _started(lp: highspy.HighsLp, time_limit: float, mip_rel_gap: float, start: np.ndarray | None) -> highspy.Highs:
    """HiGHS run on `lp`, given `start` as a first solution."""
    h = highs(time_limit, mip_rel_gap)
    h.passModel(lp)
    if start is not None:
        solution = highspy.HighsSolution()
        solution.col_value = start.tolist()
        solution.value_valid = True
        h.setSolution(solution)
    h.run()
    return h


@dataclass(frozen=True)
class Solved:
    """What HiGHS ended with on a pool's model: its status, the best plan's column values and the dual bound (in
    the model's units)."""

    text: str  # HiGHS' model status
    proven: bool
    values: np.ndarray | None  # None: no plan found
    bound: float | None
    gap: float | None


def solve(lp: highspy.HighsLp, time_limit: float, mip_rel_gap: float, start: np.ndarray | None) -> Solved:
    h = _started(lp, time_limit, mip_rel_gap, start)
    status = h.getModelStatus()
    info = h.getInfo()
    has_solution = info.primal_solution_status == FEASIBLE
    finite = np.isfinite(info.mip_dual_bound) and status != highspy.HighsModelStatus.kInfeasible
    return Solved(h.modelStatusToString(status), status == highspy.HighsModelStatus.kOptimal,
                  np.asarray(h.getSolution().col_value) if has_solution else None,
                  float(info.mip_dual_bound) if finite else None, float(info.mip_gap) if has_solution else None)


def _rack_lp(lp: highspy.HighsLp, model: Model, name: str, rack: dict[int, str],
             n_parts: int) -> tuple[highspy.HighsLp, list[int]]:
    """Rack `name`'s model: the x of its brokers, each partition's one replica on the rack, its brokers' band rows
    (their x alone). Returns it and the pool model's columns it has."""
    starts = np.asarray(lp.a_matrix_.start_)
    index, value = np.asarray(lp.a_matrix_.index_), np.asarray(lp.a_matrix_.value_)
    cost, lower, upper = np.asarray(lp.col_cost_), np.asarray(lp.row_lower_), np.asarray(lp.row_upper_)
    x_index = model.x_index
    brokers = [b for b in sorted(rack) if rack[b] == name]
    cols = [x_index[(i, b)] for i in range(n_parts) for b in brokers]
    local = {c: k for k, c in enumerate(cols)}
    r_lower, r_upper, r_cols, r_vals = [], [], [], []
    for i in range(n_parts):  # its one replica on this rack
        r_lower.append(1.0)
        r_upper.append(1.0)
        r_cols.append([local[x_index[(i, b)]] for b in brokers])
        r_vals.append([1.0] * len(brokers))
    for row, b in model.broker_rows:
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
    return sub, cols


def by_rack(lp: highspy.HighsLp, model: Model, rack: dict[int, str], n_parts: int, time_limit: float,
            mip_rel_gap: float, start: np.ndarray | None) -> tuple[float | None, np.ndarray | None, bool]:
    """The pool's racks solved apart, where every movable partition has exactly one replica on each rack (RF =
    racks, each at most once): a replica then never changes rack, and each rack is its own problem of its
    partitions' replicas on its brokers with their bands, but for leadership (a leader may be on any rack), whose
    rows are left out here. The sum of the racks' optima is so a lower bound on the pool's, and the pool's optimum
    where leaders fit the racks' replicas (`with_x`). A rack's bytes are proven much sooner than the pool's: its
    gap alone is searched (on racks-3-uneven@12 and mixed-a@12 the pool's bound is one rack's gap). Returns the sum
    of the racks' bounds (None: a rack infeasible or without a bound), the x values of the racks' best plans (None:
    a rack has none) and whether every rack is proven."""
    total, x = 0.0, np.zeros(lp.num_col_)
    all_proven, all_found = True, True
    for name in sorted(set(rack.values())):
        sub, cols = _rack_lp(lp, model, name, rack, n_parts)
        h = _started(sub, time_limit, mip_rel_gap, None if start is None else start[cols])
        status, info = h.getModelStatus(), h.getInfo()
        if status == highspy.HighsModelStatus.kInfeasible or not np.isfinite(info.mip_dual_bound):
            return None, None, False
        total += float(info.mip_dual_bound)
        all_proven = all_proven and status == highspy.HighsModelStatus.kOptimal
        if info.primal_solution_status == FEASIBLE:
            x[cols] = np.round(np.asarray(h.getSolution().col_value))
        else:
            all_found = False
    return total, (x if all_found else None), all_proven


def with_x(lp: highspy.HighsLp, x: np.ndarray, x_cols: list[int]) -> np.ndarray | None:
    """The pool's model with its x fixed at `x`'s: the values of every column (leaders, rack indicators) where it
    is feasible, else None."""
    h = highs()
    h.passModel(lp)
    cols = np.array(x_cols, dtype=np.int32)
    h.changeColsBounds(len(cols), cols, x[cols], x[cols])
    h.run()
    if h.getInfo().primal_solution_status != FEASIBLE:
        return None
    return np.asarray(h.getSolution().col_value)


def whole_leaders(lp: highspy.HighsLp, values: np.ndarray, x_cols: list[int], l_cols: list[int]) -> np.ndarray:
    """`values` with whole leaders: as they are when HiGHS' l are 0 or 1 already, else those of the model with x
    fixed at `values`' and l binary (a flow problem, feasible since HiGHS' fractional l are: see
    `PoolFacts.leaders_flow`). Changes `lp`."""
    leading = values[l_cols]
    if np.all(np.abs(leading - np.round(leading)) <= WHOLE):
        return values
    x = np.round(values[x_cols])
    lower, upper, kinds = np.asarray(lp.col_lower_), np.asarray(lp.col_upper_), list(lp.integrality_)
    lower[x_cols], upper[x_cols] = x, x
    for c in l_cols:
        kinds[c] = highspy.HighsVarType.kInteger
    lp.col_lower_, lp.col_upper_, lp.integrality_ = lower, upper, kinds
    h = highs()
    h.passModel(lp)
    h.run()
    if h.getInfo().primal_solution_status != FEASIBLE:
        raise RuntimeError(f"no whole leaders for the optimum's replicas: {h.modelStatusToString(h.getModelStatus())}")
    return np.asarray(h.getSolution().col_value)


def start_values(model: Model, keys: list[tuple[str, int]], current: list[list[int]], leaders: list[int],
                 rack: dict[int, str], start: dict[tuple[str, int], list[int]]) -> np.ndarray | None:
    """The columns' values of the start plan: a planned partition ends on its new replicas, led by the first (the
    executor's preferred leader election); any other keeps its replicas and its leader. None: the start places a
    replica where the MILP may not (no use as a start)."""
    values = np.zeros(len(model.col_cost))
    for i, key in enumerate(keys):
        after = start.get(key, current[i])
        leader = after[0] if key in start else leaders[i]
        if any(b not in rack for b in after) or leader not in after:
            return None
        for b in after:
            values[model.x_index[(i, b)]] = 1.0
            if (i, rack[b]) in model.y_index:
                values[model.y_index[(i, rack[b])]] = 1.0
        if model.l_index:
            values[model.l_index[(i, leader)]] = 1.0
    return values


def keeps_rows(values: np.ndarray, lp: highspy.HighsLp, col_upper: list[float]) -> bool:
    """Whether the start's values keep every row of the model and the columns' bounds (to USAGE_SLACK)."""
    starts = np.asarray(lp.a_matrix_.start_)
    index, value = np.asarray(lp.a_matrix_.index_), np.asarray(lp.a_matrix_.value_)
    row_of = np.repeat(np.arange(len(starts) - 1), np.diff(starts))
    activity = np.bincount(row_of, weights=value * values[index], minlength=len(starts) - 1)
    lower, upper = np.asarray(lp.row_lower_), np.asarray(lp.row_upper_)
    return bool(np.all(activity >= lower - USAGE_SLACK) and np.all(activity <= upper + USAGE_SLACK)
                and np.all(values <= np.asarray(col_upper)))
