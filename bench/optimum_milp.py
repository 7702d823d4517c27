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
  are found after (`optimum_highs.whole_leaders`). Network out and CPU weigh leaders unequally: with them l is binary;
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

import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import highspy
import numpy as np
import pandas as pd

from bench.optimum_highs import Solved, by_rack, keeps_rows, solve, start_values, whole_leaders, with_x
from bench.optimum_model import Model, PoolFacts, build_model, pool_facts
from kafka_rebalancer.config import RebalancerConfig
from kafka_rebalancer.model.reassignment import Reassignment
from kafka_rebalancer.plan.recheck import current_placement
from kafka_rebalancer.snapshot.build import SnapshotTables


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
    further out; `widened_slack`, in usage, further still where an edge is widened: see `optimum_model._add_band_rows`).
    `rack_time_limit`: where every movable partition has one replica on each rack of the pool (RF =
    racks), the racks are solved apart first, each within that many seconds (`optimum_highs.by_rack`)."""
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
    facts = pool_facts(snapshot, config, bands, pool, free)
    model = build_model(facts, snapshot, config, bands, held, widened, widened_slack)
    if not facts.keys:
        return PoolOptimum(pool, "no movable partition", True, 0, 0.0, 0.0, time.monotonic() - started, 0, 0, 0)
    lp = model.lp()
    start_feasible: bool | None = None
    first: np.ndarray | None = None
    if start is not None:  # an empty plan is a start too (nothing moves)
        first = start_values(model, facts.keys, facts.current, facts.leaders, facts.rack, start)
        start_feasible = first is not None and keeps_rows(first, lp, model.col_upper)
    rack_bound: float | None = None
    if rack_time_limit is not None and model.one_per_rack:
        rack_bound, by_racks, first = _rack_first(lp, model, facts, rack_time_limit, mip_rel_gap, first,
                                                  start_feasible)
        if by_racks is not None:
            bound = float(np.dot(model.col_cost, by_racks)) * facts.unit
            solved = Solved("Optimal (by rack)", True, by_racks, bound, 0.0)
            return _pool_optimum(pool, started, lp, model, facts, solved, start_feasible, rack_bound)
    solved = solve(lp, time_limit, mip_rel_gap, first)
    solved = _in_bytes(solved, model, facts.unit, rack_bound)
    return _pool_optimum(pool, started, lp, model, facts, solved, start_feasible, rack_bound)


def _rack_first(lp: highspy.HighsLp, model: Model, facts: PoolFacts, rack_time_limit: float, mip_rel_gap: float,
                first: np.ndarray | None, start_feasible: bool | None,
                ) -> tuple[float | None, np.ndarray | None, np.ndarray | None]:
    """The racks solved apart (`by_rack`): the sum of their bounds in bytes, the pool's optimum where every rack
    is proven and leaders fit the racks' replicas (else None), and the start for the pool's model (the racks'
    best replicas together when they copy less than `first`, else `first`)."""
    rack_bound, rack_x, all_proven = by_rack(lp, model, facts.rack, len(facts.keys), rack_time_limit, mip_rel_gap,
                                             first if start_feasible else None)
    rack_bound = None if rack_bound is None else rack_bound * facts.unit
    joined = None if rack_x is None else with_x(lp, rack_x, list(model.x_index.values()))
    if joined is not None and all_proven:
        return rack_bound, joined, first
    if joined is not None and (first is None or not start_feasible
                               or np.dot(model.col_cost, joined) < np.dot(model.col_cost, first)):
        return rack_bound, None, joined
    return rack_bound, None, first


def _in_bytes(solved: Solved, model: Model, unit: float, rack_bound: float | None) -> Solved:
    """HiGHS' answer with its bound in bytes, or the racks' bound where theirs add up to a better one."""
    bound = None if solved.bound is None else solved.bound * unit
    if bound is None or rack_bound is None or rack_bound <= bound:
        return replace(solved, bound=bound)
    best = float(np.dot(model.col_cost, solved.values)) * unit if solved.values is not None else 0.0
    gap = max(0.0, (best - rack_bound) / best) if best > 0 else solved.gap
    return replace(solved, text=solved.text + " (bound by rack)", bound=rack_bound, gap=gap)


def _pool_optimum(pool: str, started: float, lp: highspy.HighsLp, model: Model, facts: PoolFacts, solved: Solved,
                  start_feasible: bool | None, rack_bound: float | None) -> PoolOptimum:
    """The pool's answer: the plan read back from the best solution (the partitions that change, the bytes they
    copy)."""
    placement: dict[tuple[str, int], list[int]] = {}
    copied: int | None = None
    if solved.values is not None:
        values = solved.values
        if facts.leaders_flow:
            values = whole_leaders(lp, values, list(model.x_index.values()), list(model.l_index.values()))
        copied = 0
        for i, holders in enumerate(facts.current):
            chosen = [b for b in facts.eligible if values[model.x_index[(i, b)]] > 0.5]
            copied += facts.sizes[i] * len([b for b in chosen if b not in holders])
            if facts.with_leaders:
                leader = max(chosen, key=lambda b: values[model.l_index[(i, b)]])  # the one l at 1
                if set(chosen) != set(holders) or leader != facts.leaders[i]:
                    placement[facts.keys[i]] = _led_by(leader, _ordered(holders, chosen))
            elif set(chosen) != set(holders):
                placement[facts.keys[i]] = _ordered(holders, chosen)
    return PoolOptimum(pool, solved.text, solved.proven, copied, solved.bound, solved.gap,
                       round(time.monotonic() - started, 2), len(model.col_cost), len(model.rows_lower),
                       len(facts.keys), placement, facts.with_leaders, start_feasible, rack_bound)


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
