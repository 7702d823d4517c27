"""The re-check: what a plan does, recomputed from plan.json and the snapshot alone, apart from the planner's
bookkeeping (its steps, its model, broker_load_after.parquet). The summary, the report, `status` and the bench
read their figures from here; the validation suite fails a plan whose planner claim disagrees with it.

- Before: each broker's load in the current placement, judged against the band of the current placement (the
  pool's mean as it is now, not as it will be once forced replicas have landed).
- After: the placement plan.json leaves, judged against the plan's band (whose mean counts the replicas that must
  arrive in the pool or leave it), derived again here from the snapshot and the replicas that must leave their
  brokers; the validation fails a plan whose bands (bands.parquet) differ from it (`band_rows`).
- Every replica leaving a broker is forced (its broker is dead, is being drained, or is outside the topic's pool:
  pool isolation) or a balance move (the rest).
- Lower bounds: forced, the bytes of every replica that must leave its broker; balance, per pool and resource
  `max(sum of excess above the band, sum of deficit below it)` of the current placement, in the resource's unit and
  as the fewest bytes that carry it (balance.bounds' reasoning, on the snapshot's replicas). Forced replicas landing
  on brokers below the band do some of the balance work, so a plan with forced moves can read balance moved / LB
  below 1 for a resource. Per pool, the balance bytes bound over all resources: the larger of those minima per
  broker added up (separate) and one LP over every band at once (balance.lp_bound), which counts the forced
  replicas where they must go; where some must move, the LP's alone (`recheck_bounds`).
- Topic spread (when the config turns it on): per topic and broker, the replicas and the leaders held before and
  after, the planned partitions led by their first replica (`spread_violations.planned_spread`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

import numpy as np
import pandas as pd

from kafka_rebalancer.config import RebalancerConfig
from kafka_rebalancer.model.band_status import band_status, broker_load_frame
from kafka_rebalancer.model.reassignment import Reassignment, leadership_only
from kafka_rebalancer.model.resources import Resource
from kafka_rebalancer.model.schemas import HARD
from kafka_rebalancer.operations.request import PlanningScope
from kafka_rebalancer.plan.balance.pool_bands import bands_frame, placement_bands, unbalanced_as_planned
from kafka_rebalancer.plan.balance.spread_violations import planned_spread
from kafka_rebalancer.plan.changes import replicas_of_changes, role_loads_of
from kafka_rebalancer.plan.recheck_bounds import BALANCE, DEAD, DRAINING, POOL_ISOLATION, balance_bounds
from kafka_rebalancer.snapshot.build import SnapshotTables

EPS = 1e-9
FORCED_REASONS = (DEAD, DRAINING, POOL_ISOLATION)
# A claim agrees with the re-check when both put the broker on the same side of the band and the loads match to
# LOAD_TOLERANCE of the load (Spark and pandas add in different orders) plus, for bytes, the broker's
# `Recheck.disk_slack`.
LOAD_TOLERANCE = 1e-6


def replicas_after(snapshot: SnapshotTables, plan: list[Reassignment]) -> pd.DataFrame:
    """The snapshot's replicas table with the plan applied: new brokers, first replicas leading."""
    if not plan:
        return snapshot.replicas.copy()
    changes = pd.DataFrame([(r.topic, r.partition, r.replicas) for r in plan],
                           columns=["topic", "partition", "new_replicas"])
    changes = changes.merge(snapshot.partitions[["topic", "partition", "size_bytes"]], on=["topic", "partition"])
    keep = snapshot.replicas.merge(changes[["topic", "partition"]], on=["topic", "partition"], how="left",
                                   indicator=True)
    keep = keep[keep["_merge"] == "left_only"].drop(columns="_merge")
    return pd.concat([keep, replicas_of_changes(changes, snapshot.partitions)], ignore_index=True)


@dataclass(frozen=True)
class Recheck:
    bands_before: pd.DataFrame  # the band of the current placement (schema BANDS)
    bands_after: pd.DataFrame  # the plan's band, derived again from the snapshot and what must leave (BANDS)
    before: pd.DataFrame  # band_status of the current placement against bands_before
    after: pd.DataFrame  # band_status of the planned placement against bands_after
    partitions: pd.DataFrame  # per planned partition: broker_pool, replica_moves, moved_bytes, leader changes
    leaving: pd.DataFrame  # per replica leaving a broker: broker_pool, size_bytes, reason, load per resource
    must_leave: pd.DataFrame  # per replica that must leave its broker now: broker_pool, size_bytes, reason, load
    bounds: pd.DataFrame  # per (pool, resource) balanced: lower_bound (unit), lower_bound_bytes
    pool_bounds: pd.DataFrame  # per pool: the balance part's lower bounds in bytes and their parts (POOL_BOUND_COLUMNS)
    # Per broker id: the bytes by which the planner's count of its disk after the plan may differ from this one's
    # (`disk_slack`); brokers absent: none.
    disk_slack: pd.Series
    # Per (topic, broker, kind) of the topics the spread covers: held before and after the plan, target and cap
    # (`spread_violations.planned_spread`); empty when the spread is off.
    spread: pd.DataFrame

    def out_of_band(self, side: Literal["before", "after"], pool: str | None = None,
                    resource: str | None = None) -> list[int]:
        """The brokers outside their band (of a balanced resource) before or after the plan."""
        status = self.before if side == "before" else self.after
        return _broker_ids(status[status["counted"] & ~status["inside"]], pool, resource)

    @cached_property
    def fixed_outside_target(self) -> pd.DataFrame:
        """The rows of `after` (counted) whose broker was outside the band of that resource before the plan and
        ends outside its target band: inside the band or not, as the plan moves a broker into the band aiming at
        the target band."""
        fixed = self.before.loc[self.before["counted"] & ~self.before["inside"], ["broker_id", "resource"]]
        return self.after[self.after["counted"] & ~self.after["inside_target"]].merge(fixed,
                                                                                      on=["broker_id", "resource"])

    def fixed_outside_target_band(self, pool: str | None = None, resource: str | None = None) -> list[int]:
        """The brokers of `fixed_outside_target`, one entry per (broker, resource) when no resource is given."""
        return _broker_ids(self.fixed_outside_target, pool, resource)

    @cached_property
    def taken_outside_target(self) -> pd.DataFrame:
        """The rows of `after` (counted, inside the band) whose broker, inside the band of that resource before the
        plan (not one it fixes), ends outside its `end_edges`: the plan gave to it or took from it past its target
        band's edge, toward the band's."""
        keys = ["broker_id", "resource"]
        edges = end_edges(self.before, self.bands_after, self.must_leave)
        rows = self.after[self.after["counted"] & self.after["inside"]].merge(edges[~edges["fixed"]], on=keys)
        outside = (rows["usage"] < rows["end_lower"] - EPS) | (rows["usage"] > rows["end_upper"] + EPS)
        return rows.loc[outside, self.after.columns]

    def taken_outside_target_band(self, pool: str | None = None, resource: str | None = None) -> list[int]:
        """The brokers of `taken_outside_target`, one entry per (broker, resource) when no resource is given."""
        return _broker_ids(self.taken_outside_target, pool, resource)

    def kept_must_leave(self) -> pd.DataFrame:
        """The rows of `must_leave` whose replica the plan leaves on its broker."""
        keys = ["topic", "partition", "broker_id"]
        rows = self.must_leave.merge(self.leaving[keys], on=keys, how="left", indicator=True)
        return rows.loc[rows["_merge"] == "left_only", self.must_leave.columns]

    def figures(self, pool: str | None = None) -> dict[str, object]:
        """Counts, bytes and both moved / LB of one pool, or of the whole plan (pool None)."""
        def of(frame: pd.DataFrame) -> pd.DataFrame:
            return frame if pool is None else frame[frame["broker_pool"] == pool]

        parts, leaving, must = of(self.partitions), of(self.leaving), of(self.must_leave)
        by_reason = leaving.groupby("reason")["size_bytes"].sum()
        forced = {r: int(by_reason.get(r, 0)) for r in FORCED_REASONS}
        forced_bytes, balance_bytes = sum(forced.values()), int(by_reason.get(BALANCE, 0))
        forced_bound = int(must["size_bytes"].sum())
        parts_of_bound = self.pool_bounds if pool is None else self.pool_bounds[self.pool_bounds["broker_pool"] == pool]
        kept = [self.keeps_promises(str(p)) for p in parts_of_bound["broker_pool"]]
        bound = float(np.where(kept, parts_of_bound["promise_bytes"], parts_of_bound["bytes"]).sum())
        lp, promise_lp = parts_of_bound["lp_bytes"], parts_of_bound["promise_lp_bytes"]
        disk = self.bounds[self.bounds["resource"] == "disk"]
        disk = disk if pool is None else disk[disk["broker_pool"] == pool]
        return {
            "partitions_changed": len(parts), "replica_moves": int(parts["replica_moves"].sum()),
            "preferred_leader_changes": int(parts["preferred_leader_changes"].sum()),
            "leadership_only_changes": int(parts["leadership_only"].sum()),
            "forced_moves": int((leaving["reason"] != BALANCE).sum()), "moved_bytes": int(parts["moved_bytes"].sum()),
            "forced_bytes": forced_bytes, "forced_bytes_by_reason": forced, "balance_bytes": balance_bytes,
            "forced_lower_bound_bytes": forced_bound,
            "forced_moved_over_lb": _ratio(forced_bytes, forced_bound),
            "lower_bound_bytes": bound, "moved_over_lb": _ratio(balance_bytes, bound),
            # Which bound that is (per pool: the promised edges' where the plan keeps every promise there, else the
            # band's), the band's, their parts (the larger of the two, per pool), and the disk excess alone.
            "lower_bound_edges": "promised" if all(kept) else "band" if not any(kept) else "promised or band",
            "band_lower_bound_bytes": float(parts_of_bound["bytes"].sum()),
            "separate_lower_bound_bytes": float(parts_of_bound["separate_bytes"].sum()),
            "lp_lower_bound_bytes": None if lp.isna().any() else float(lp.sum()),
            "promise_lp_lower_bound_bytes": None if promise_lp.isna().any() else float(promise_lp.sum()),
            "disk_lower_bound_bytes": float(disk["lower_bound_bytes"].sum()) if len(disk) else None,
        }

    def keeps_promises(self, pool: str) -> bool:
        """Whether the plan leaves every broker of the pool inside its band, the brokers it fixes inside their target
        band and the others inside theirs or no further from it (`end_edges`): the plans the promised edges' bound
        (`recheck_bounds.balance_bounds`) holds for."""
        return not (self.out_of_band("after", pool) or self.fixed_outside_target_band(pool)
                    or self.taken_outside_target_band(pool))

    def resource_figures(self, pool: str, resource: str) -> dict[str, object]:
        """One (pool, resource), in the resource's unit: the balance part's LB and what moved; the forced part's
        (what must leave its broker: its LB) and what left, by reason."""
        leaving = self.leaving[self.leaving["broker_pool"] == pool]
        balance = leaving["reason"] == BALANCE
        forced_by_reason = leaving[~balance].groupby("reason")[resource].sum()
        forced_bound = float(self.must_leave.loc[self.must_leave["broker_pool"] == pool, resource].sum())
        forced_moved = float(leaving.loc[~balance, resource].sum())
        bound = self.bounds[(self.bounds["broker_pool"] == pool) & (self.bounds["resource"] == resource)]
        lb, lb_bytes = (float(bound[c].iloc[0]) if len(bound) else 0.0 for c in ("lower_bound", "lower_bound_bytes"))
        handed = self.partitions.loc[self.partitions["broker_pool"] == pool, f"leadership_{resource}"]
        moved = float(leaving.loc[balance, resource].sum()) + float(handed.sum())
        return {"lower_bound": lb, "lower_bound_bytes": lb_bytes, "moved": moved, "moved_over_lb": _ratio(moved, lb),
                "forced_moved": forced_moved,
                "forced_moved_by_reason": {r: float(forced_by_reason.get(r, 0.0)) for r in FORCED_REASONS},
                "forced_lower_bound": forced_bound, "forced_moved_over_lb": _ratio(forced_moved, forced_bound),
                "out_of_band_before": self.out_of_band("before", pool, resource),
                "out_of_band_after": self.out_of_band("after", pool, resource),
                "fixed_outside_target_band": self.fixed_outside_target_band(pool, resource),
                "taken_outside_target_band": self.taken_outside_target_band(pool, resource)}


def end_edges(before: pd.DataFrame, plan_bands: pd.DataFrame, must_leave: pd.DataFrame,
              fixed_pairs: set[tuple[int, str]] | None = None) -> pd.DataFrame:
    """Per counted (broker, resource) of the current placement (`before`: its band_status), the usage a plan must
    end the broker inside, in the plan's band (upper edges capped by the capacity threshold): for a broker outside
    the band before (`fixed`: one the plan fixes; `fixed_pairs` instead where given), its target band; for any
    other, its target band widened to the usage it keeps once the replicas that must leave it have left
    (`must_leave`: another pool's, going home; its own pool's planner starts from there), within the band: a plan
    takes no broker out of its target band, nor further from it. Columns: broker_id, resource, fixed, end_lower,
    end_upper."""
    names = sorted(set(before["resource"]))
    leaving = must_leave.groupby("broker_id")[[n for n in names if n in must_leave]].sum().stack()
    leaving.index = leaving.index.set_names(["broker_id", "resource"])
    before = before.merge(leaving.rename("leaving").reset_index(), on=["broker_id", "resource"], how="left")
    before = before.assign(usage=np.where(before["capacity"] > 0, (before["load"] - before["leaving"].fillna(0.0))
                                          / before["capacity"].where(before["capacity"] > 0, 1.0), 0.0))
    rows = before[before["counted"]].merge(
        plan_bands[["broker_pool", "resource", "lower", "upper", "target_lower", "target_upper",
                    "capacity_threshold"]], on=["broker_pool", "resource"], suffixes=("_before", ""))
    cap = rows["capacity_threshold"].astype(float).fillna(np.inf).to_numpy()
    lower, upper = rows["lower"].to_numpy(float), np.minimum(rows["upper"].to_numpy(float), cap)
    target_lower = np.maximum(lower, rows["target_lower"].to_numpy(float))
    target_upper = np.minimum(upper, rows["target_upper"].to_numpy(float))
    usage, fixed = rows["usage"].to_numpy(float), ~rows["inside"].to_numpy(bool)
    if fixed_pairs is not None:
        fixed = np.array([(int(b), str(r)) in fixed_pairs for b, r in zip(rows["broker_id"], rows["resource"],
                                                                             strict=True)], dtype=bool)
    return pd.DataFrame({
        "broker_id": rows["broker_id"], "resource": rows["resource"], "fixed": fixed,
        "end_lower": np.where(fixed, target_lower, np.maximum(lower, np.minimum(target_lower, usage))),
        "end_upper": np.where(fixed, target_upper, np.minimum(upper, np.maximum(target_upper, usage)))})


def _broker_ids(rows: pd.DataFrame, pool: str | None, resource: str | None) -> list[int]:
    """The sorted broker ids of status rows, of one pool and resource where given."""
    if pool is not None:
        rows = rows[rows["broker_pool"] == pool]
    if resource is not None:
        rows = rows[rows["resource"] == resource]
    return sorted(int(b) for b in rows["broker_id"])


def _ratio(moved: float, bound: float) -> float | None:
    return moved / bound if bound > 0 else None


@dataclass(frozen=True)
class CurrentPlacement:
    """What the re-check knows before any plan: the current placement's band, status, replicas with their facts,
    the replicas that must leave, and the balance part's lower bounds. A plan's re-check adds what plan.json
    changes; the plan job works this out while the planner runs."""

    bands_before: pd.DataFrame
    bands_after: pd.DataFrame
    before: pd.DataFrame
    replicas: pd.DataFrame
    must_leave: pd.DataFrame
    bounds: pd.DataFrame
    pool_bounds: pd.DataFrame
    size_spread: pd.DataFrame  # topic, partition, spread: partitions whose replicas were found at other sizes


def replica_facts(config: RebalancerConfig, snapshot: SnapshotTables, draining: Iterable[int] = ()) -> pd.DataFrame:
    """The snapshot's replicas with their loads, pool, reason to leave and whether they may move: the part of
    `current_placement` that needs no bands, so a plan job can work it out while Spark reads."""
    return _replicas_with_facts(snapshot, config.resource_list(), frozenset(int(b) for b in draining))


def current_placement(config: RebalancerConfig, snapshot: SnapshotTables, plan_bands: pd.DataFrame,
                      draining: Iterable[int] = (), replicas: pd.DataFrame | None = None) -> CurrentPlacement:
    """The plan-independent half of the re-check. Of the plan's bands it takes only which pairs the run leaves
    unbalanced (a manual action's scope, incomplete metrics); their edges it derives again (`bands_after`).
    `replicas`: `replica_facts` of the same snapshot and draining brokers, when already worked out."""
    resources = config.resource_list()
    names = [r.name for r in resources]
    load_before = broker_load_frame(snapshot.brokers, snapshot.replicas, resources)
    bands_before = placement_bands(load_before, config, plan_bands)
    before = band_status(load_before, bands_before)
    if replicas is None:
        replicas = replica_facts(config, snapshot, draining)
    must_leave = replicas.loc[replicas["movable"] & replicas["forced"],
                              ["broker_pool", "topic", "partition", "broker_id", "size_bytes", "reason", *names]]
    bands_after = unbalanced_as_planned(bands_frame(load_before, config, _arriving(must_leave, load_before, names)),
                                        plan_bands)
    bounds, pool_bounds = balance_bounds(before, replicas, resources, band_status(load_before, bands_after),
                                         end_edges(before, bands_after, must_leave))
    return CurrentPlacement(bands_before, bands_after, before, replicas, must_leave, bounds,
                            pool_bounds, _size_spread(replicas))


def _size_spread(replicas: pd.DataFrame) -> pd.DataFrame:
    """Per partition whose replicas the snapshot found at sizes other than the partition's (the leader's log: the
    bytes in flight to the followers under live traffic), the largest difference. Columns: topic, partition,
    spread."""
    difference = (replicas["size_bytes"] - replicas["partition_size_bytes"]).abs()
    differing = replicas.loc[difference > 0, ["topic", "partition"]].assign(spread=difference[difference > 0])
    return differing.groupby(["topic", "partition"], as_index=False, observed=True)["spread"].max()


def disk_slack(plan: list[Reassignment], size_spread: pd.DataFrame) -> pd.Series:
    """Per broker id: how far the planner's disk load after the plan may lie from the re-check's. The planner moves
    each replica at its size as found; the re-check, knowing from plan.json only where a partition's replicas end,
    counts each of them at the partition's size. So a broker's two counts differ by at most the `size_spread` of
    every planned partition ending on it: 0 where replicas are their partition's size, a few hundred bytes per
    partition on a live cluster, far less than a replica the claim forgot."""
    if size_spread.empty or not plan:
        return pd.Series(dtype=float)
    ending = pd.DataFrame([(r.topic, r.partition, b) for r in plan for b in r.replicas],
                          columns=["topic", "partition", "broker_id"]).merge(size_spread, on=["topic", "partition"])
    return ending.groupby("broker_id")["spread"].sum().astype(float)


def _arriving(must_leave: pd.DataFrame, load: pd.DataFrame, names: list[str]) -> pd.DataFrame:
    """Per (pool, resource) the load the pool's eligible brokers gain once the replicas that must leave their
    brokers have left: those of the pool's topics arrive, those on its eligible brokers of other pools' topics go.
    Columns: broker_pool, resource, incoming (`bands_frame`'s)."""
    home = load.drop_duplicates("broker_id").set_index("broker_id")
    on_eligible = must_leave[must_leave["broker_id"].isin(home.index[home["eligible"]])]
    arriving = must_leave.groupby("broker_pool")[names].sum()
    leaving = on_eligible.groupby(on_eligible["broker_id"].map(home["broker_pool"]))[names].sum()
    net = arriving.sub(leaving, fill_value=0.0)
    net.index = net.index.rename("broker_pool")
    return net.reset_index().melt(id_vars="broker_pool", var_name="resource", value_name="incoming")


def recheck_plan(config: RebalancerConfig, snapshot: SnapshotTables, plan: list[Reassignment],
                 plan_bands: pd.DataFrame, draining: Iterable[int] = (),
                 current: CurrentPlacement | None = None) -> Recheck:
    """Re-derive what the plan does from plan.json and the snapshot (see the module's docstring). `current`:
    `current_placement` of the same snapshot, bands and draining brokers, when already worked out."""
    resources = config.resource_list()
    current = current or current_placement(config, snapshot, plan_bands, draining)
    after = band_status(broker_load_frame(snapshot.brokers, replicas_after(snapshot, plan), resources),
                        current.bands_after)
    partitions, leaving = _changes(snapshot, plan, current.replicas, resources)
    return Recheck(current.bands_before, current.bands_after, current.before, after, partitions, leaving,
                   current.must_leave, current.bounds, current.pool_bounds,
                   disk_slack(plan, current.size_spread), planned_spread(config, snapshot, plan))


def _replicas_with_facts(snapshot: SnapshotTables, resources: list[Resource],
                         draining: frozenset[int]) -> pd.DataFrame:
    """The snapshot's replicas with their load per resource, their topic's pool (broker_pool), why they would
    leave their broker (a forced reason, or balance) and whether they may move at all: their partition is led,
    fully in sync but for dead brokers' replicas, not excluded and on no excluded broker, and where it has a dead
    broker's replica, only that replica may move."""
    brokers = snapshot.brokers.drop_duplicates("broker_id").set_index("broker_id")
    parts = snapshot.partitions.drop_duplicates(["topic", "partition"])
    replicas = snapshot.replicas
    # Each replica's partition by its row number in `parts`, and the per-partition facts as bincounts over it:
    # merging every partition column and grouping by the topic's strings took most of this at 1.5 M replicas.
    keys = ["topic", "partition"]
    found = replicas[keys].merge(parts[keys].assign(_row=np.arange(len(parts))), on=keys, how="left")["_row"]
    pool_of = parts["topic_pool"].to_numpy(object)
    row = found.to_numpy(float)
    kept = ~np.isnan(row)
    kept[kept] = pd.notna(pool_of[row[kept].astype(np.int64)])
    replicas = replicas if kept.all() else replicas[kept]
    partition = row[kept].astype(np.int64)

    def partition_has(flags: np.ndarray) -> np.ndarray:
        return (np.bincount(partition, weights=flags, minlength=len(parts)) > 0)[partition]

    broker_id = replicas["broker_id"].to_numpy()
    on_alive = np.isin(broker_id, brokers.index[brokers["alive"].astype(bool)])
    on_draining = np.isin(broker_id, list(draining))
    topic_excluded = parts["excluded"].to_numpy(bool)[partition]
    pool = pool_of[partition]
    # ISR safety: a partition with a replica on a dead broker is under-replicated, and only that replica (and a
    # drained broker's) may move. A partition no pool balances moves only its drained brokers' replicas
    # (snapshot.evacuation: the run's snapshot gives it the pool that takes them).
    blocking = np.isin(broker_id, brokers.index[brokers["excluded"].astype(bool)]) | (
        on_alive & ~replicas["in_isr"].to_numpy(bool))
    evacuated = topic_excluded & partition_has(on_draining)
    restricted = partition_has(~on_alive) | evacuated
    home_pool = replicas["broker_id"].map(brokers["broker_pool"]).to_numpy(object)
    away = pd.isna(home_pool) | (home_pool != pool)
    leader = parts["leader"].to_numpy()[partition]
    columns = {
        **{c: replicas[c].to_numpy() for c in replicas.columns},
        "broker_pool": pool, "leader": leader, "topic_excluded": topic_excluded,
        "partition_size_bytes": parts["size_bytes"].to_numpy()[partition],
        "movable": ~partition_has(blocking) & (~restricted | ~on_alive | on_draining) & (leader >= 0)
                   & (~topic_excluded | evacuated),
        **{r.name: (replicas[r.replica_load_column].to_numpy(float) if r.replica_load_column
                    else np.ones(len(replicas))) for r in resources},
        "reason": _reasons(on_alive, on_draining, away),
        # reason != BALANCE as a flag: the bounds test it on every replica (a string comparison each time).
        "forced": ~on_alive | on_draining | away,
        "size_bytes": replicas["size_bytes"].to_numpy("int64"),
    }
    return pd.DataFrame(columns)


def _reasons(on_alive: np.ndarray, on_draining: np.ndarray, away: np.ndarray) -> np.ndarray:
    """Why each replica would leave its broker, the first that holds: its broker is dead, being drained, of
    another pool; else balance. An object array (np.where's would be fixed-width strings, converted again)."""
    reason = np.full(len(on_alive), BALANCE, dtype=object)
    reason[away] = POOL_ISOLATION
    reason[on_draining] = DRAINING
    reason[~on_alive] = DEAD
    return reason


def _changes(snapshot: SnapshotTables, plan: list[Reassignment], replicas: pd.DataFrame,
             resources: list[Resource]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per planned partition what changes against the snapshot (replicas added, preferred leader changed, order
    only), with the leader's load handed over to a replica that stays; and the replicas that leave their broker."""
    names = [r.name for r in resources]
    planned = pd.DataFrame([(r.topic, r.partition, list(r.replicas)) for r in plan],
                           columns=["topic", "partition", "new_replicas"])
    parts = planned.merge(snapshot.partitions.drop_duplicates(["topic", "partition"]), on=["topic", "partition"])
    pairs = [([int(b) for b in old], [int(b) for b in new]) for old, new in
             zip(parts["replicas"], parts["new_replicas"], strict=True)]
    added = np.array([len(set(new) - set(old)) for old, new in pairs], dtype="int64")
    out = pd.DataFrame({
        "broker_pool": parts["topic_pool"], "topic": parts["topic"], "partition": parts["partition"],
        "replica_moves": added, "moved_bytes": added * parts["size_bytes"].to_numpy("int64"),
        "preferred_leader_changes": [old[:1] != new[:1] for old, new in pairs],
        "leadership_only": [leadership_only(old, new) for old, new in pairs]})
    # The leadership handed from the current leader to another replica it stays beside: the leader's share of
    # the role-dependent loads leaves the old leader without a replica moving.
    lead, follow = role_loads_of(parts, resources)
    handed = np.array([int(leader) in new and new[:1] != [int(leader)]
                       for leader, (_, new) in zip(parts["leader"], pairs, strict=True)], dtype=bool)
    for k, name in enumerate(names):
        out[f"leadership_{name}"] = np.where(handed, lead[:, k] - follow[:, k], 0.0)
    gone = pd.DataFrame([(t, p, b) for t, p, (old, new) in zip(parts["topic"], parts["partition"], pairs,
                                                                  strict=True) for b in old if b not in new],
                        columns=["topic", "partition", "broker_id"])
    leaving = gone.merge(replicas, on=["topic", "partition", "broker_id"])
    return out, leaving[["broker_pool", "topic", "partition", "broker_id", "size_bytes", "reason", *names]]


def claim_rows(claimed_after: pd.DataFrame, recheck: Recheck, plan_bands: pd.DataFrame) -> pd.DataFrame:
    """Per broker and resource: the planner's predicted load after the plan (broker_load_after) and its in-band
    verdict beside the re-check's; `agrees` is False where the loads differ or, for a counted broker, the
    verdicts do."""
    claim = band_status(claimed_after, plan_bands)[["broker_id", "resource", "load", "inside"]]
    truth = recheck.after[["broker_pool", "broker_id", "resource", "load", "inside", "counted"]]
    rows = truth.merge(claim, on=["broker_id", "resource"], how="outer", suffixes=("_rechecked", "_claimed"),
                       indicator=True)
    difference = (rows["load_claimed"] - rows["load_rechecked"]).abs()
    slack = np.where(rows["resource"] == "disk", rows["broker_id"].map(recheck.disk_slack).fillna(0.0), 0.0)
    loads_agree = difference <= LOAD_TOLERANCE * np.maximum(
        1.0, np.maximum(rows["load_claimed"].abs(), rows["load_rechecked"].abs())) + slack
    verdicts_agree = ~rows["counted"].fillna(True).astype(bool) | (rows["inside_claimed"] == rows["inside_rechecked"])
    rows["agrees"] = (rows["_merge"] == "both") & loads_agree & verdicts_agree
    return rows[["broker_pool", "broker_id", "resource", "load_claimed", "load_rechecked", "inside_claimed",
                 "inside_rechecked", "agrees"]].reset_index(drop=True)


BAND_EDGES = ("mean", "lower", "upper", "target_lower", "target_upper")


def band_rows(recheck: Recheck, plan_bands: pd.DataFrame) -> pd.DataFrame:
    """Per (pool, resource): the plan's band (bands.parquet) beside the re-check's (`Recheck.bands_after`);
    `agrees` where both balance it or neither does and, if balanced, the mean and every edge match (counts
    exactly, bytes and rates to LOAD_TOLERANCE of the value: the sums are added in different orders)."""
    keys = ["broker_pool", "resource"]
    columns = [*keys, "balanced", *BAND_EDGES]
    rows = plan_bands[columns].merge(recheck.bands_after[columns], on=keys, how="outer",
                                     suffixes=("_planned", "_rechecked"), indicator=True)
    edges_agree = np.ones(len(rows), dtype=bool)
    for edge in BAND_EDGES:
        planned, rechecked = rows[f"{edge}_planned"].astype(float), rows[f"{edge}_rechecked"].astype(float)
        edges_agree &= ((planned - rechecked).abs()
                        <= LOAD_TOLERANCE * np.maximum(planned.abs(), rechecked.abs())).to_numpy()
    balanced = rows["balanced_planned"].fillna(False).astype(bool)
    rows["agrees"] = ((rows["_merge"] == "both") & (balanced == rows["balanced_rechecked"].fillna(False).astype(bool))
                      & (~balanced | edges_agree))
    return rows.drop(columns="_merge").reset_index(drop=True)


def left_outside(recheck: Recheck, notes: pd.DataFrame, infeasible: pd.DataFrame,
                 scope: PlanningScope) -> pd.DataFrame:
    """Per (broker, resource) the plan leaves outside its band, fixes but leaves outside its target band, or takes
    outside its target band (further from it than before), and per broker (resource HARD) still holding replicas
    that must leave it, in the pools the planner balanced in this run (`scope`: not another pool than a manual
    action's, none for a leadership-only action): whether the planner listed it with a reason (a note on that
    broker and resource, or an infeasibility proof naming it). Columns: broker_pool, broker_id, resource, left
    (which of the four), explained."""
    def planned(frame: pd.DataFrame) -> pd.DataFrame:
        return frame[frame["broker_pool"].map(scope.balance_planned).astype(bool)]

    after = planned(recheck.after[recheck.after["counted"]])
    short = planned(recheck.fixed_outside_target)
    rows = pd.concat([after[~after["inside"]].assign(left="outside its band"),
                      short[short["inside"]].assign(left="fixed, outside its target band"),
                      planned(recheck.taken_outside_target).assign(left="taken outside its target band"),
                      planned(recheck.kept_must_leave()).drop_duplicates(["broker_pool", "broker_id"]).assign(
                          resource=HARD, left="holding replicas that must leave it")],
                     ignore_index=True)
    rows = rows[["broker_pool", "broker_id", "resource", "left"]]
    listed = {(str(r), int(b)) for r, b in zip(notes["resource"], notes["broker_id"], strict=True) if pd.notna(b)}
    listed |= {(str(r), int(b)) for r, brokers in zip(infeasible["resource"], infeasible["brokers"], strict=True)
               for b in brokers}
    explained = [(str(r), int(b)) in listed for r, b in zip(rows["resource"], rows["broker_id"], strict=True)]
    return rows.assign(explained=pd.Series(explained, index=rows.index, dtype=bool)).reset_index(drop=True)

