"""Rightsizing (issue 55; README: Capacity forecast): per pool, the fewest brokers to add so that the pool holds the
forecast's horizon, and where it is over-provisioned, which brokers it could give up and still hold it.

Not a formula: the real planner is run on the snapshot as the forecast sees it at +horizon
(`projection.projected_snapshot`), on the driver, through the plan job's public parts (`local.planner_replicas`,
the bands, `PoolPlanningSettings.plan`), one pool at a time. Hypothetical brokers join the pool as add-brokers'
pool change takes them (running: the request's "receivers must be running" check is for real brokers; each on the
pool's fullest rack) and the pool is planned as a rebalance of the pool: add-brokers' own roles (only the new
brokers receive) would leave a pool that was unbalanced before over its threshold where the nightly run balances
it. A broker given up leaves the pool as in a drain. The pool holds when, on the planned placement at +horizon,
every broker of the pool is under the disk threshold, none is over its band's upper edge on a balanced resource,
and every added broker is inside its bands (add-brokers' promise). The search: a lower bound from the totals,
confirmed by one planner run at that count, one more at +1 if it fails; brokers to give up (a pool whose projected
total is under OVER_PROVISIONED_SHARE of its threshold): the least bytes first, a row of racks at a time while
the pool holds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

from kafka_rebalancer.config import RebalancerConfig
from kafka_rebalancer.forecast.projection import projected_snapshot, replicas_after
from kafka_rebalancer.model.band_status import EPS, band_status
from kafka_rebalancer.plan.balance import local, per_broker
from kafka_rebalancer.plan.balance.bands import Band
from kafka_rebalancer.plan.balance.planner import Budgets
from kafka_rebalancer.plan.balance.pool_bands import bands_frame
from kafka_rebalancer.plan.balance.transforms import PoolPlanningSettings, plan_pools_on_driver, split_planner_output
from kafka_rebalancer.plan.changes import partition_changes, with_load_changes
from kafka_rebalancer.snapshot.build import SnapshotTables

UNLIMITED_MOVES = 10**9  # the run's budgets cap one night's moves, not what a pool needs
EXTRA_TRIALS = 1  # planner runs past the lower bound before the answer is "more than"
TRAFFIC_CAPACITIES = ("nw_in_capacity_bytes_per_s", "nw_out_capacity_bytes_per_s", "cpu_capacity_cores")
OVER_PROVISIONED_SHARE = 0.5  # a pool whose projected total is under this share of its threshold may give some up


@dataclass(frozen=True)
class Trial:
    """One planner run on the projected pool: with `added` hypothetical brokers, without the `given_up` ones."""

    added: list[int]
    given_up: list[int]
    holds: bool
    moved_bytes: int
    peak_disk_usage: float  # the fullest broker of the pool after the plan, at +horizon
    why_not: str | None  # the first reason the pool does not hold
    moves: pd.DataFrame  # the planner's (MOVES), on the projected snapshot


@dataclass(frozen=True)
class PoolRightsizing:
    broker_pool: str
    added_capacity_bytes: int
    lower_bound: int | None  # from the totals (None: no forecast to work from)
    brokers_to_add: int | None  # None: not found within the trials (see trials) or no forecast
    trials: list[Trial] = field(default_factory=list)
    give_up: list[int] = field(default_factory=list)  # brokers the pool could do without, cheapest first
    give_up_trial: Trial | None = None
    note: str | None = None


def added_capacity(config: RebalancerConfig, brokers: pd.DataFrame) -> int:
    """The disk capacity of a hypothetical broker: forecast.added_broker_capacity_bytes, else the pool's median."""
    given = config.forecast.added_broker_capacity_bytes
    return int(given) if given is not None else int(brokers["disk_capacity_bytes"].median())


def lower_bound(used_bytes: float, capacity_bytes: float, threshold: float, added_capacity_bytes: int) -> int:
    """The fewest brokers of `added_capacity_bytes` under which the pool's total could stay under the threshold."""
    short = used_bytes / threshold - capacity_bytes
    return max(0, math.ceil(short / added_capacity_bytes - 1e-9)) if added_capacity_bytes > 0 else 0


def with_hypothetical(brokers: pd.DataFrame, used: pd.Series, pool: str, n: int,
                      capacity_bytes: int) -> tuple[pd.DataFrame, list[int]]:
    """`brokers` and n empty, running brokers of `pool` (ids after the largest) with the pool's median traffic
    capacities, each on the rack of the pool that is fullest at the time (`used`: disk bytes per broker id): with as
    many racks as replicas, a rack's replicas can only move within it."""
    if n == 0:
        return brokers, []
    members = brokers[brokers["broker_pool"] == pool]
    own = members[members["alive"] & ~members["excluded"]]
    rack_of = members["rack"].where(members["rack"].map(lambda r: isinstance(r, str) and r != ""), "")
    # A dead broker's bytes count on its rack (they stay there with as many racks as replicas), its disk does not.
    load = members["broker_id"].map(used).fillna(0).groupby(rack_of).sum()
    capacity = own["disk_capacity_bytes"].astype(float).groupby(rack_of[own.index]).sum().reindex(load.index,
                                                                                                  fill_value=0.0)
    racks = []
    for _ in range(n):
        fullest = max(sorted(load.index), key=lambda r: load[r] / capacity[r] if capacity[r] else float("inf"))
        racks.append(fullest or None)
        capacity[fullest] += capacity_bytes
    first = int(brokers["broker_id"].max()) + 1
    ids = list(range(first, first + n))
    # The template's other columns (host, log dirs) are kept: nothing here reads them.
    new = own.iloc[[0] * n].reset_index(drop=True).assign(
        broker_id=ids, rack=racks, alive=True, excluded=False, disk_capacity_bytes=capacity_bytes, disk_used_bytes=0,
        **{c: float(own[c].median()) for c in TRAFFIC_CAPACITIES})
    return pd.concat([brokers, new.astype(brokers.dtypes.to_dict())], ignore_index=True), ids


def plan_trial(config: RebalancerConfig, projected: SnapshotTables, pool: str, n_added: int, capacity_bytes: int,
               given_up: list[int], threshold: float) -> Trial:
    """The planner's plan for `pool` on the projected snapshot with `n_added` hypothetical brokers and without
    `given_up`, and whether the pool holds on it."""
    used = projected.replicas.groupby("broker_id")["size_bytes"].sum()
    brokers, added = with_hypothetical(projected.brokers, used, pool, n_added, capacity_bytes)
    brokers = brokers.assign(broker_pool=brokers["broker_pool"].where(~brokers["broker_id"].isin(given_up), None))
    resources = config.resource_list()
    topics = sorted(projected.partitions["topic"].unique())
    rows = local.planner_replicas(projected.replicas, projected.partitions.reset_index(drop=True), brokers, topics,
                                  given_up)
    parts = local.load_parts(rows, resources)
    load = per_broker.broker_load(brokers, parts, resources)
    bands = bands_frame(load, config, per_broker.incoming_load(parts, load))
    is_count = {r.name: r.is_count for r in resources}
    pool_bands = {row["resource"]: Band.from_row(row, is_count[row["resource"]])
                  for row in bands.to_dict("records") if row["broker_pool"] == pool}
    settings = PoolPlanningSettings(
        resource_names=tuple(r.name for r in resources), bands={pool: pool_bands},
        budgets=Budgets(UNLIMITED_MOVES), brokers={pool: per_broker.pool_brokers(brokers, parts)[pool]},
        topics=tuple(topics), topic_spread=config.topic_spread)
    output = split_planner_output(plan_pools_on_driver(rows, settings))
    moves = output["moves"]
    after = band_status(with_load_changes(load, output["load_changes"]), bands)
    after = after[(after["broker_pool"] == pool) & after["eligible"]]
    # Disk use from the plan's moves replayed on the projected replicas: every replica counted, the ones the
    # planner was not given (skipped partitions) too.
    touched = projected.partitions.merge(moves[["topic", "partition"]].drop_duplicates(), on=["topic", "partition"])
    placed = replicas_after(projected.replicas, partition_changes(touched, moves))
    held = placed.groupby("broker_id")["size_bytes"].sum()
    members = brokers[(brokers["broker_pool"] == pool) & brokers["alive"] & ~brokers["excluded"]]
    disk = pd.Series(members["broker_id"].map(held).fillna(0).to_numpy(float)
                     / members["disk_capacity_bytes"].to_numpy(float), index=members["broker_id"].astype(int))
    left = [b for b in given_up if held.get(b, 0) > 0]
    why_not: str | None
    if left:  # a replica no action may move (skipped: under-replicated, excluded) stays
        holds, why_not = False, f"broker {left[0]} keeps replicas the plan may not move"
    else:
        holds, why_not = _verdict(after, disk, added, threshold)
    return Trial(added, list(given_up), holds, int(moves.loc[moves["action"] == "replica", "size_bytes"].sum()),
                 float(disk.max()) if len(disk) else 0.0, why_not, moves)


def _verdict(after: pd.DataFrame, disk: pd.Series, added: list[int], threshold: float) -> tuple[bool, str | None]:
    """`disk`: each broker's disk use on the planned placement; `after`: band statuses of the planner's loads."""
    if len(disk) and disk.max() > threshold + EPS:
        return False, f"broker {int(disk.idxmax())} at {disk.max():.0%} of its disk, over {threshold:.0%}"
    counted = after[after["counted"]]
    above = counted[counted["usage"] > counted["upper"] + EPS]
    if len(above):
        b = above.iloc[0]
        return False, f"broker {int(b['broker_id'])} over its {b['resource']} band ({b['usage']:.0%})"
    outside = counted[counted["broker_id"].isin(added) & ~counted["inside"]]
    if len(outside):
        b = outside.iloc[0]
        return False, f"added broker {int(b['broker_id'])} outside its {b['resource']} band ({b['usage']:.0%})"
    return True, None


def rightsize_pool(config: RebalancerConfig, projected: SnapshotTables, pool: str, threshold: float) -> PoolRightsizing:
    """The fewest brokers to add to `pool` (or the brokers it could give up) on the projected snapshot."""
    own = projected.brokers[(projected.brokers["broker_pool"] == pool) & projected.brokers["alive"]
                            & ~projected.brokers["excluded"]]
    capacity = added_capacity(config, own)
    # Every replica the pool must hold: its topics' (those on a dead broker too).
    topics = projected.partitions.loc[projected.partitions["topic_pool"] == pool, "topic"].unique()
    used = float(projected.replicas.loc[projected.replicas["topic"].isin(topics), "size_bytes"].sum())
    total_capacity = float(own["disk_capacity_bytes"].sum())
    bound = lower_bound(used, total_capacity, threshold, capacity)
    trials = []
    for n in range(bound, bound + EXTRA_TRIALS + 1):
        trials.append(plan_trial(config, projected, pool, n, capacity, [], threshold))
        if trials[-1].holds:
            break
    found = len(trials[-1].added) if trials[-1].holds else None
    give_up: list[int] = []
    give_up_trial = None
    if found == 0 and used < OVER_PROVISIONED_SHARE * threshold * total_capacity:
        give_up, give_up_trial = _brokers_to_give_up(config, projected, pool, own, threshold)
    return PoolRightsizing(pool, capacity, bound, found, trials, give_up, give_up_trial)


def _brokers_to_give_up(config: RebalancerConfig, projected: SnapshotTables, pool: str, own: pd.DataFrame,
                        threshold: float) -> tuple[list[int], Trial | None]:
    """The brokers the pool could do without, by rows of racks (a rack's cheapest, the one holding the least bytes,
    from every rack: with as many racks as replicas, a rack left smaller than the others is over its band), one row
    more at a time as long as the pool holds without them; with the last trial that held."""
    held = projected.replicas.groupby("broker_id")["size_bytes"].sum()
    ranked = own.assign(bytes=own["broker_id"].map(held).fillna(0), rack=own["rack"].fillna(""))
    ranked = ranked.sort_values(["bytes", "broker_id"])
    ranked["row"] = ranked.groupby("rack").cumcount()
    rows = [group["broker_id"].astype(int).tolist() for _, group in ranked.groupby("row", sort=True)]
    kept: list[int] = []
    best = None
    for row in rows:
        if len(kept) + len(row) >= len(own):  # a pool keeps a broker
            break
        trial = plan_trial(config, projected, pool, 0, 0, [*kept, *row], threshold)
        if not trial.holds:
            break
        kept += row
        best = trial
    return kept, best


def rightsize(config: RebalancerConfig, tables: SnapshotTables, growth: pd.DataFrame, threshold: float,
              horizon_days: float) -> list[PoolRightsizing]:
    """Every pool of the snapshot, in name order, planned at +horizon from the topics' growth (TOPIC_GROWTH). No
    topic with a trend: no number for any pool (a pool planned as if nothing grew would look as if it held)."""
    pools = sorted(str(p) for p in tables.brokers["broker_pool"].dropna().unique())
    if growth.empty or growth["growth_bytes_per_day"].isna().all():
        return [PoolRightsizing(p, 0, None, None, note="no topic has a growth trend (see the forecast's notes): "
                                                       "no rightsizing") for p in pools]
    projected = projected_snapshot(tables, growth, horizon_days)
    return [rightsize_pool(config, projected, pool, threshold) for pool in pools]


__all__ = ["PoolRightsizing", "Trial", "added_capacity", "lower_bound", "plan_trial", "rightsize",
           "rightsize_pool", "with_hypothetical"]
