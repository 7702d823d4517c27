"""The MILP of one pool (`bench/optimum_milp.py` states it): the pool's brokers and movable partitions as the
model sees them (`PoolFacts`), and its columns and rows (`Model`), added in a fixed order (x, the rack rows and
indicators partition by partition, leadership, the bands) so that HiGHS gets the same model every time."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import highspy
import numpy as np
import pandas as pd

from kafka_rebalancer.config import RebalancerConfig
from kafka_rebalancer.model.resources import Resource, resource
from kafka_rebalancer.plan.changes import role_loads_of
from kafka_rebalancer.plan.recheck import current_placement, end_edges
from kafka_rebalancer.snapshot.build import SnapshotTables

# Every resource whose replica load is its partition's as leader or as follower (`role_loads`): all of them.
SUPPORTED = ("disk", "replica_count", "leader_count", "network_in", "network_out", "cpu")
USAGE_SLACK = 1e-9  # band_status' slack on usage (EPS): a start within it keeps the bands


@dataclass(frozen=True)
class PoolFacts:
    """One pool as the MILP sees it: its eligible brokers (alive, not excluded) and their racks, its movable
    partitions (i: their row in keys, sizes, current, leaders, lead and follow), the balanced resources and the
    load that stays put."""

    members: pd.DataFrame  # the pool's brokers, by broker id (their capacities)
    eligible: list[int]
    rack: dict[int, str]  # an eligible broker's rack
    all_rack: dict[int, str]  # every broker's rack (a partition's racks now)
    keys: list[tuple[str, int]]
    sizes: list[int]
    current: list[list[int]]  # each partition's replicas now
    leaders: list[int]
    unit: float  # the objective's unit: the largest partition's bytes
    balanced: list[dict]  # the pool's balanced band rows
    resources: list[Resource]
    lead: np.ndarray  # (partition, resource): a replica's load as leader
    follow: np.ndarray  # and as follower
    fixed: dict[str, pd.Series]  # per resource, each eligible broker's load that stays put

    @property
    def n_racks(self) -> int:
        return len(set(self.rack.values()))

    @property
    def with_leaders(self) -> bool:
        """A balanced resource depends on the replica's role: the model has leadership variables."""
        return any(r.role_dependent for r in self.resources)

    @property
    def leaders_flow(self) -> bool:
        """With leader count the only role-dependent resource balanced, the leadership given x is a flow from
        partitions to brokers (each l in one partition's row and one broker's leader-count row, whole edges): its
        polytope is integral, so l may be continuous (HiGHS branches on x alone) and whole leaders are found once x
        is (`whole_leaders`). Network out and CPU weigh leaders unequally: then l is binary."""
        return {r.name for r in self.resources if r.role_dependent} == {"leader_count"}


def rack_of(rack: object, broker: int) -> str:
    # As the planner: a broker without rack information is a rack of its own (no false conflicts).
    return rack if isinstance(rack, str) and rack else f"#broker-{broker}"


def _balanced_bands(bands: pd.DataFrame, pool: str, config: RebalancerConfig) -> list[dict]:
    rows = bands[(bands["broker_pool"] == pool) & bands["balanced"].astype(bool)
                 & bands["resource"].isin(list(config.resources))]
    unsupported = sorted(set(rows["resource"]) - set(SUPPORTED))
    if unsupported:
        raise ValueError(f"pool {pool}: the optimum models {', '.join(SUPPORTED)} only, the config also balances "
                         f"{', '.join(unsupported)}")
    return rows.to_dict("records")


def _replica_loads(rows: pd.DataFrame, r: Resource) -> pd.Series:
    """Each replica's load of `r` in the role it has now (`broker_load_frame`'s)."""
    if r.replica_load_column is None:
        return pd.Series(1.0, index=rows.index)
    return rows[r.replica_load_column].astype(float)


def pool_facts(snapshot: SnapshotTables, config: RebalancerConfig, bands: pd.DataFrame, pool: str,
               free: pd.Series) -> PoolFacts:
    """The pool's facts; `free`: per partition, whether a plan may move it (`free_partitions`)."""
    brokers = snapshot.brokers.drop_duplicates("broker_id").set_index("broker_id")
    excluded = set(brokers.index[brokers["excluded"].astype(bool)].astype(int)) | set(config.exclude.brokers)
    members = brokers[brokers["broker_pool"] == pool]
    eligible = [int(b) for b in sorted(members.index)
                if bool(members.at[b, "alive"]) and int(b) not in excluded]
    parts = snapshot.partitions
    mine = parts[(parts["topic_pool"] == pool) & free]
    free_keys = set(zip(parts.loc[free, "topic"], parts.loc[free, "partition"].astype(int), strict=True))
    # The balanced resources, each replica's load in either role (`role_loads`, as the planner's model and the
    # re-check's placement after the plan count them).
    balanced = _balanced_bands(bands, pool, config)
    resources = [resource(name) for name in dict.fromkeys(band["resource"] for band in balanced)]
    lead, follow = (role_loads_of(mine, resources) if len(mine) and resources
                    else (np.zeros((len(mine), len(resources))),) * 2)
    # Fixed load per eligible broker and resource: every replica that stays put (of partitions that may not move,
    # any pool), in the role it has now (their leaders stay too).
    reps = snapshot.replicas
    stays = ~pd.Series([k in free_keys for k in zip(reps["topic"], reps["partition"].astype(int), strict=True)],
                       index=reps.index, dtype=bool)
    fixed_rows = reps[stays & reps["broker_id"].isin(eligible)]
    sizes = mine["size_bytes"].astype(np.int64).tolist()
    return PoolFacts(
        members=members, eligible=eligible, rack={b: rack_of(members.at[b, "rack"], b) for b in eligible},
        all_rack={int(b): rack_of(r, int(b)) for b, r in brokers["rack"].items()},
        keys=list(zip(mine["topic"], mine["partition"].astype(int), strict=True)), sizes=sizes,
        current=[[int(b) for b in r] for r in mine["replicas"]],
        leaders=mine["leader"].astype(int).tolist(),  # free partitions are led (`free_partitions`)
        # The objective in units of the largest partition keeps HiGHS' numbers near 1 (bytes would be ~1e11, and
        # GiB would put a small test's costs under its tolerances); the answer is recounted in whole bytes.
        unit=float(max(sizes, default=1) or 1), balanced=balanced, resources=resources, lead=lead, follow=follow,
        fixed={r.name: _replica_loads(fixed_rows, r).groupby(fixed_rows["broker_id"]).sum() for r in resources})


@dataclass
class Model:
    """The MILP's columns and rows (row-wise), and where each variable is: x[p, b] (partition p has a replica on
    broker b), the rack indicators y[p, rack], the leadership l[p, b]."""

    col_cost: list[float] = field(default_factory=list)
    col_upper: list[float] = field(default_factory=list)
    integer: list[bool] = field(default_factory=list)
    rows_lower: list[float] = field(default_factory=list)
    rows_upper: list[float] = field(default_factory=list)
    rows_cols: list[list[int]] = field(default_factory=list)
    rows_vals: list[list[float]] = field(default_factory=list)
    x_index: dict[tuple[int, int], int] = field(default_factory=dict)
    y_index: dict[tuple[int, str], int] = field(default_factory=dict)
    l_index: dict[tuple[int, int], int] = field(default_factory=dict)
    broker_rows: list[tuple[int, int]] = field(default_factory=list)  # (row, broker): band rows of its x alone
    one_per_rack: bool = False  # every partition has exactly one replica on each rack (RF = racks, tight form)

    def add_column(self, cost: float, integer: bool) -> int:
        """A column in [0, 1]; returns its index."""
        self.col_cost.append(cost)
        self.col_upper.append(1.0)
        self.integer.append(integer)
        return len(self.col_cost) - 1

    def add_row(self, lower: float, upper: float, cols: list[int], vals: list[float]) -> None:
        self.rows_lower.append(lower)
        self.rows_upper.append(upper)
        self.rows_cols.append(cols)
        self.rows_vals.append(vals)

    def lp(self) -> highspy.HighsLp:
        n_cols, n_rows = len(self.col_cost), len(self.rows_lower)
        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = n_cols, n_rows
        lp.col_cost_ = np.array(self.col_cost)
        lp.col_lower_ = np.zeros(n_cols)
        lp.col_upper_ = np.array(self.col_upper)
        lp.row_lower_ = np.array(self.rows_lower)
        lp.row_upper_ = np.array(self.rows_upper)
        lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
        lp.a_matrix_.start_ = np.cumsum([0, *map(len, self.rows_cols)]).astype(np.int32)
        lp.a_matrix_.index_ = np.array([c for cols in self.rows_cols for c in cols], dtype=np.int32)
        lp.a_matrix_.value_ = np.array([v for vals in self.rows_vals for v in vals])
        lp.integrality_ = [highspy.HighsVarType.kInteger if i else highspy.HighsVarType.kContinuous
                           for i in self.integer]
        return lp


def build_model(facts: PoolFacts, snapshot: SnapshotTables, config: RebalancerConfig, bands: pd.DataFrame,
                held: set[tuple[int, str]], widened: Mapping[tuple[int, str], float],
                widened_slack: float) -> Model:
    """The pool's MILP: x for each free partition and eligible broker (costing the bytes an added replica
    copies), the replication factor and rack rows, leadership where it matters, and each broker's band rows."""
    model = Model()
    for i, holders in enumerate(facts.current):
        for b in facts.eligible:
            model.x_index[(i, b)] = model.add_column(0.0 if b in holders else facts.sizes[i] / facts.unit, True)
    _add_placement_rows(model, facts)
    if facts.with_leaders:
        _add_leadership(model, facts)
    _add_band_rows(model, facts, snapshot, config, bands, held, widened, widened_slack)
    return model


def _add_placement_rows(model: Model, facts: PoolFacts) -> None:
    """Per partition: its replication factor, and its rack diversity (at most one replica per rack when it needs
    RF racks, else rack indicators y[p, r] <= sum_{b in r} x[p, b] with sum_r y >= need)."""
    inf = highspy.kHighsInf
    n_racks = facts.n_racks
    model.one_per_rack = n_racks > 1
    for i, holders in enumerate(facts.current):
        rf = len(holders)
        model.add_row(rf, rf, [model.x_index[(i, b)] for b in facts.eligible], [1.0] * len(facts.eligible))
        need = min(rf, n_racks, len({facts.all_rack.get(b, f"#broker-{b}") for b in holders}))
        model.one_per_rack = model.one_per_rack and need == rf == n_racks
        by_rack: dict[str, list[int]] = {}
        for b in facts.eligible:
            by_rack.setdefault(facts.rack[b], []).append(model.x_index[(i, b)])
        if need == rf:  # every replica on its own rack: the tight form
            for cols in by_rack.values():
                if len(cols) > 1:
                    model.add_row(-inf, 1.0, cols, [1.0] * len(cols))
        elif need > 1:
            ys = []
            for r, cols in by_rack.items():
                # y <= an integer sum and <= 1: integral where it matters
                model.y_index[(i, r)] = model.add_column(0.0, False)
                ys.append(model.y_index[(i, r)])
                model.add_row(-inf, 0.0, [model.y_index[(i, r)], *cols], [1.0, *([-1.0] * len(cols))])
            model.add_row(need, inf, ys, [1.0] * len(ys))


def _add_leadership(model: Model, facts: PoolFacts) -> None:
    """Exactly one leader per free partition, on one of its replicas after the plan. Free of cost (a
    preferred-leader election copies nothing); binary unless `leaders_flow`."""
    inf = highspy.kHighsInf
    for i in range(len(facts.current)):
        for b in facts.eligible:
            model.l_index[(i, b)] = model.add_column(0.0, not facts.leaders_flow)
            model.add_row(-inf, 0.0, [model.l_index[(i, b)], model.x_index[(i, b)]], [1.0, -1.0])
        model.add_row(1.0, 1.0, [model.l_index[(i, b)] for b in facts.eligible], [1.0] * len(facts.eligible))


def _add_band_rows(model: Model, facts: PoolFacts, snapshot: SnapshotTables, config: RebalancerConfig,
                   bands: pd.DataFrame, held: set[tuple[int, str]], widened: Mapping[tuple[int, str], float],
                   widened_slack: float) -> None:
    """Each broker's edges: the target band for a held one, its target band widened to its usage before for the
    others, within the band (as the planner's `Acceptance` and the re-check's `end_edges`). A broker's load of
    resource k: fixed + sum_p follow_k(p) x[p, b] + (lead_k(p) - follow_k(p)) l[p, b], in usage units (load /
    capacity, as band_status judges it; counts have capacity 1)."""
    now = current_placement(config, snapshot, bands)
    edges = end_edges(now.before, bands, now.must_leave, held).set_index(["broker_id", "resource"])
    column = {r.name: k for k, r in enumerate(facts.resources)}
    for band in facts.balanced:
        res = resource(band["resource"])
        k = column[res.name]
        for b in facts.eligible:
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
            capacity = float(facts.members.at[b, res.capacity_column]) if res.capacity_column else 1.0
            if capacity <= 0:
                continue  # usage is 0 whatever it holds (band_status): nothing to constrain
            cols, vals = _load_terms(model, facts, res, k, b, capacity)
            base = float(facts.fixed[res.name].get(b, 0.0)) / capacity
            if not res.role_dependent:
                model.broker_rows.append((len(model.rows_lower), b))
            model.add_row(lower - base, upper - base, cols, vals)


def _load_terms(model: Model, facts: PoolFacts, res: Resource, k: int, b: int,
                capacity: float) -> tuple[list[int], list[float]]:
    """Broker b's usage of resource `res` (column k of lead and follow) from the free partitions: its columns and
    their coefficients."""
    cols: list[int] = []
    vals: list[float] = []
    for i in range(len(facts.current)):
        if facts.follow[i, k] != 0.0:
            cols.append(model.x_index[(i, b)])
            vals.append(facts.follow[i, k] / capacity)
        if res.role_dependent and facts.lead[i, k] != facts.follow[i, k]:
            cols.append(model.l_index[(i, b)])
            vals.append((facts.lead[i, k] - facts.follow[i, k]) / capacity)
    return cols, vals
