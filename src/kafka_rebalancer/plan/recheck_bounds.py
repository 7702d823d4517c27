"""The re-check's lower bounds on a pool's balance bytes, over the current placement's replicas (`recheck`): per
resource the fewest bytes carrying its excess or deficit (balance.bounds), per pool the larger of those minima per
broker added up (separate) and one LP over every band at once (balance.lp_bound)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from kafka_rebalancer.model.band_status import EPS
from kafka_rebalancer.model.resources import Resource
from kafka_rebalancer.plan.balance.bounds import fewest_bytes
from kafka_rebalancer.plan.balance.lp_bound import FREE, LpBound, lp_lower_bound

# Why a replica leaves its broker: forced (its broker is dead or being drained, or it is outside its topic's pool)
# or a balance move.
DEAD, DRAINING, POOL_ISOLATION, BALANCE = "dead_broker", "draining_broker", "pool_isolation", "balance"


def _replicas_of(by_broker: dict[int, pd.DataFrame], broker_ids: np.ndarray, resource_name: str,
                 empty: pd.DataFrame) -> Callable[[int], tuple[np.ndarray, np.ndarray]]:
    """(loads, sizes) of the i-th broker's replicas, for `fewest_bytes`."""
    def own(i: int) -> tuple[np.ndarray, np.ndarray]:
        mine = by_broker.get(int(broker_ids[i]), empty)
        return mine[resource_name].to_numpy(float), mine["size_bytes"].to_numpy(float)
    return own


POOL_BOUND_COLUMNS = ["broker_pool", "bytes", "promise_bytes", "separate_bytes", "lp_bytes", "promise_lp_bytes",
                      "lp_status", "lp_seconds"]


def balance_bounds(before: pd.DataFrame, replicas: pd.DataFrame, resources: list[Resource],
                   plan_status: pd.DataFrame, edges: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per (pool, resource) balanced: LB in the unit and the fewest bytes carrying it. Per pool (POOL_BOUND_COLUMNS):
    the bytes bound over all resources (`bytes`) from two:
    - separate: a broker gives away, and receives, at least the largest of its per-resource minima; brokers'
      replicas are distinct, so these add up; against the current placement's band (`before`), forced arrivals
      left out, as the per-resource LBs;
    - lp: one LP over all bands at once (`balance.lp_bound`; None when infeasible or not solved), against the
      plan's band (`plan_status`: the current placement judged in it), forced replicas arriving and leaving as
      they must. Without forced replicas the two bands are the same.
    Both are lower bounds where no replica must move, and `bytes` is the larger. Where some must (the pool's
    forced replicas arrive, or others' leave its brokers), the separate one is not: the current placement's band
    is not the plan's, and forced replicas landing on brokers below the band do balance work it counts; `bytes`
    is then the LP's (the separate one where the LP has none).
    `promise_bytes` is the same bound for the plans that keep every promise (`edges`: recheck.end_edges): the
    brokers a plan fixes end in the target band, not only the band (hysteresis), and no other broker leaves its
    target band or goes further from it. The LP is solved again with those edges (`promise_lp_bytes`); the
    planner aims at them, and the exact optimum of the bench (bench/optimum_milp.py) is theirs.
    Leader count, network out and CPU can be fixed by leadership alone: no bytes. The replicas considered are
    those that may move and need not (forced ones are the forced part's)."""
    counted = before[before["counted"]]
    names = [r.name for r in resources]
    # Only the columns read below: at 1.5 M replicas a copy of every column took seconds.
    candidates = replicas.loc[replicas["movable"] & ~replicas["forced"],
                              ["broker_pool", "broker_id", "size_bytes", *names]]
    rows = []
    separate: dict[str, float] = {}
    for pool, brokers in counted.groupby("broker_pool", sort=True):
        in_pool = candidates[candidates["broker_pool"] == pool]
        by_broker = {int(b): group for b, group in in_pool.groupby("broker_id")}
        gives: dict[int, float] = {}
        receives: dict[int, float] = {}
        for r in resources:
            status = brokers[brokers["resource"] == r.name]
            if status.empty:
                continue
            excess = (status["load"] - status["upper"] * status["capacity"]).clip(lower=0).to_numpy()
            deficit = (status["lower"] * status["capacity"] - status["load"]).clip(lower=0).to_numpy()
            given = np.zeros(len(status))
            received = np.zeros(len(status))
            if not r.role_dependent:
                own = _replicas_of(by_broker, status["broker_id"].to_numpy(), r.name, in_pool.iloc[:0])
                given, received = fewest_bytes(excess, deficit, r.is_count, own, in_pool[r.name].to_numpy(float),
                                               in_pool["size_bytes"].to_numpy(float))
                for broker_id, g, got in zip(status["broker_id"], given, received, strict=True):
                    gives[int(broker_id)] = max(gives.get(int(broker_id), 0.0), float(g))
                    receives[int(broker_id)] = max(receives.get(int(broker_id), 0.0), float(got))
            rows.append((pool, r.name, max(float(excess.sum()), float(deficit.sum())),
                         max(float(given.sum()), float(received.sum()))))
        separate[str(pool)] = max(sum(gives.values(), 0.0), sum(receives.values(), 0.0))
    forced = replicas.loc[replicas["movable"] & replicas["forced"], ["broker_pool", "broker_id"]]
    broker_pool = plan_status.drop_duplicates("broker_id").set_index("broker_id")["broker_pool"]
    with_forced = {str(p) for p in forced["broker_pool"]} | {str(p) for p in
                                                             forced["broker_id"].map(broker_pool).dropna()}
    pools = []
    for pool in sorted(set(separate) | {str(p) for p in plan_status.loc[plan_status["counted"], "broker_pool"]}):
        lp = _pool_lp_bound(pool, plan_status, replicas, resources, edges)
        sep, forced_here = separate.get(pool, 0.0), pool in with_forced
        promised = lp.tight_bytes if lp.tight_bytes is not None else lp.bytes
        pools.append((pool, _pool_bound(lp.bytes, sep, forced_here), _pool_bound(promised, sep, forced_here), sep,
                      lp.bytes, lp.tight_bytes, lp.status, lp.seconds))
    return (pd.DataFrame(rows, columns=["broker_pool", "resource", "lower_bound", "lower_bound_bytes"]),
            pd.DataFrame(pools, columns=POOL_BOUND_COLUMNS))


def _pool_bound(lp_bytes: float | None, separate: float, forced: bool) -> float:
    """A pool's bound from its LP's and its separate one: the LP's alone where forced replicas move (and it has
    one), else the larger."""
    return lp_bytes if forced and lp_bytes is not None else max(separate, lp_bytes or 0.0)


def _pool_lp_bound(pool: str, status: pd.DataFrame, replicas: pd.DataFrame, resources: list[Resource],
                   edges: pd.DataFrame) -> LpBound:
    """`lp_lower_bound` of one pool: its brokers' loads and bands (`status`: band_status of the current placement
    in the plan's band), their replicas that may move and need not, and the replicas that must arrive in the pool
    (its topics' forced ones) or leave its brokers (any topic's forced ones); solved again against the promised
    `edges` (end_lower, end_upper per counted broker and resource). A broker being drained receives nothing. A
    replica is rack-bound (`_rack_bound`) where its partition has one replica on each of the pool's racks."""
    names = [r.name for r in resources if not r.role_dependent]
    rows = status[status["broker_pool"] == pool].merge(edges[["broker_id", "resource", "end_lower", "end_upper"]],
                                                       on=["broker_id", "resource"], how="left")
    broker_ids = np.sort(rows["broker_id"].unique())
    index = pd.Index(broker_ids)
    shape = (len(broker_ids), len(names))
    base, lower, upper = np.zeros(shape), np.full(shape, -np.inf), np.full(shape, np.inf)
    promised_lower, promised_upper = lower.copy(), upper.copy()
    eligible = np.zeros(len(broker_ids), dtype=bool)
    for j, name in enumerate(names):
        of = rows[rows["resource"] == name]
        at = index.get_indexer(of["broker_id"])
        capacity = of["capacity"].to_numpy(float)
        base[at, j] = of["load"].to_numpy(float)
        eligible[at] |= of["eligible"].to_numpy(bool)
        # Enforced: as band_status counts it (usage within 1e-9 of the edges); usage is 0 at capacity 0.
        enforced = of["counted"].to_numpy(bool) & (capacity > 0)
        lower[at[enforced], j] = ((of["lower"].to_numpy(float) - EPS) * capacity)[enforced]
        upper[at[enforced], j] = ((of["upper"].to_numpy(float) + EPS) * capacity)[enforced]
        # The promised edges lie within the band's; where a broker has none, the band's.
        end_lower = np.fmax(of["end_lower"].to_numpy(float), of["lower"].to_numpy(float))
        end_upper = np.fmin(of["end_upper"].to_numpy(float), of["upper"].to_numpy(float))
        promised_lower[at[enforced], j] = ((end_lower - EPS) * capacity)[enforced]
        promised_upper[at[enforced], j] = ((end_upper + EPS) * capacity)[enforced]
    forced = replicas["movable"] & replicas["forced"]
    leaving = replicas.loc[forced & replicas["broker_id"].isin(broker_ids), ["broker_id", *names]]
    base -= leaving.groupby("broker_id")[names].sum().reindex(broker_ids, fill_value=0.0).to_numpy(float)
    forced_ones = replicas[replicas["forced"]]
    draining = forced_ones.loc[forced_ones["reason"] == DRAINING, "broker_id"].unique()
    of_pool = replicas.loc[replicas["broker_pool"] == pool,
                           ["topic", "partition", "broker_id", "movable", "forced", "size_bytes", *names]]
    broker_rack, rack_bound = _rack_bound(rows.drop_duplicates("broker_id"), broker_ids, of_pool)
    commodity = np.where(rack_bound, broker_rack[np.maximum(index.get_indexer(of_pool["broker_id"]), 0)], FREE)
    mine = (of_pool["movable"] & ~of_pool["forced"]).to_numpy(bool)
    at = index.get_indexer(of_pool["broker_id"])
    mine &= at >= 0  # (a balance move's replica is on a broker of its topic's pool)
    arriving = (of_pool["movable"] & of_pool["forced"]).to_numpy(bool)
    return lp_lower_bound(
        broker=at[mine], size=of_pool["size_bytes"].to_numpy(float)[mine],
        load=of_pool[names].to_numpy(float)[mine], commodity=commodity[mine],
        is_count=np.array([r.is_count for r in resources if not r.role_dependent], dtype=bool),
        forced_size=of_pool["size_bytes"].to_numpy(float)[arriving],
        forced_load=of_pool[names].to_numpy(float)[arriving], forced_commodity=commodity[arriving],
        base=base, lower=lower, upper=upper, receives=eligible & ~np.isin(broker_ids, draining),
        broker_rack=broker_rack, tight=(promised_lower, promised_upper))


def _rack_bound(brokers: pd.DataFrame, broker_ids: np.ndarray, of_pool: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Per broker of the pool (`broker_ids`, `brokers`: a status row each) its rack's index among the racks of the
    pool's live brokers (-1: none); per replica of the pool's topics (`of_pool`) whether its partition is
    rack-bound: as many replicas as the pool has racks, one on each (on the pool's brokers). The validation keeps
    a partition's racks from dropping (`racks_after >= racks_before`) and its replicas on its pool's brokers, so
    such a partition keeps one replica in each rack: a replica leaving a rack is replaced in that rack. Where a live
    broker has no rack, none is."""
    info = brokers.set_index("broker_id").reindex(broker_ids)
    racks, alive = info["rack"], info["alive"].fillna(False).astype(bool).to_numpy()
    named = racks.map(lambda r: isinstance(r, str) and bool(r)).to_numpy(bool)
    live_racks = sorted(set(racks[alive & named]))
    none = np.zeros(len(of_pool), dtype=bool)
    if of_pool.empty or not alive.any() or not named[alive].all() or not 1 < len(live_racks) <= 16:
        return np.full(len(broker_ids), -1), none
    code = racks.map({r: i for i, r in enumerate(live_racks)}).fillna(-1).astype(np.int64).to_numpy()
    at = pd.Index(broker_ids).get_indexer(of_pool["broker_id"])
    rack = np.where(at >= 0, code[np.maximum(at, 0)], -1)
    topic = pd.factorize(of_pool["topic"])[0].astype(np.int64)
    number = of_pool["partition"].to_numpy(np.int64)
    partition = pd.factorize(topic * (int(number.max()) + 1) + number)[0]
    count = np.bincount(partition)
    strays = np.bincount(partition, weights=rack < 0)
    mask = np.bincount(partition, weights=np.where(rack >= 0, 2.0 ** np.maximum(rack, 0), 0.0))
    # m replicas whose powers of two add up to 2^m - 1 are on m distinct racks.
    m = len(live_racks)
    bound = (count == m) & (strays == 0) & (mask == 2.0 ** m - 1)
    return code, bound[partition]
