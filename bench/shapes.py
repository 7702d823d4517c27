"""`make bench-shapes`: the planner on many cluster shapes (issue 36), one factor at a time around a base shape.

    python -m bench.shapes [--quick] [--shapes base,sizes-pareto,...] [--time-limit 120]
    python -m bench.shapes --shapes cc-1000,cc-1000+spread   # one row with the topic spread off, then on

The base shape is one pool of 48 brokers, RF 3, 3 racks, log-normal partition sizes, 1,500 replicas per broker, one
hot broker and 2 % new empty brokers. Each factor row changes one thing of it (sizes, new brokers, a dead broker,
disks, RF, racks, pool size); the mixed rows change several; the exact rows are 12-broker clusters whose configs
balance disk and replica count only, so the planner's plan is also compared with the exact optimum
(bench/optimum_milp.py). The issue-52 rows are the 1,000-broker cluster Cruise Control was measured on and its
variants; each has a `+spread` twin planning the same cluster with `topic_spread: {enabled: true}` (every other
row plans with `enabled: false`: the spread is on by default since issue 52, and the rows measured it off). Every
row is planned as `make bench` plans (bench.run's prepare and measure: bench.plan_once in a child process) and its
figures are the plan summary's (the re-check of plan.json against the snapshot).

The bounds a row is measured against are in its `bounds` (name -> bytes and moved / bound): "recheck" is the
summary's balance lower bound (forced moves apart: against the promised edges, the target band for the brokers
the plan fixes, where the plan keeps its promises), "band" the same against the band's edges, "disk" the disk
excess alone, "optimum" the exact MILP's (of the promised edges too). A new bound is one more entry
there and in BOUND_COLUMNS.

Writes bench/shapes-results.json (one object per shape; rows not run keep their last result) and the table
between the shapes markers in BENCHMARKS.md. --quick runs only the 12-broker rows.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from bench import optimum, run
from bench.optimum_milp import Optimum, held_brokers, solve_optimum
from bench.scales import Scale
from bench.spread_figures import spread_figures
from kafka_rebalancer.config import RebalancerConfig, load_config
from kafka_rebalancer.model.reassignment import Reassignment, parse_reassignment
from kafka_rebalancer.model.schemas import BANDS
from kafka_rebalancer.plan.recheck import recheck_plan
from kafka_rebalancer.run_folder import PLAN, RunFolder, read_json, read_table
from kafka_rebalancer.snapshot import SnapshotTables, read_snapshot
from kafka_rebalancer.snapshot.synthetic import SyntheticSpec

RESULTS = Path(__file__).resolve().parent / "shapes-results.json"
START, END = "<!-- shapes:start -->", "<!-- shapes:end -->"
REPLICAS_PER_BROKER = 1_500  # as single-200 and single-1000 in bench/scales.py


@dataclass(frozen=True)
class Shape:
    name: str
    group: str  # base, factor, pool size, kafka, mixed, solver-sized
    change: str  # what differs from the base shape
    spec: SyntheticSpec
    sibling: str | None = None  # the solver-sized row of the same shape (its plan is also compared with the optimum)
    topic_spread: bool = False  # planned with the topic spread on (the cluster of the row without it); else off

    @property
    def exact(self) -> bool:
        return self.group == SOLVER_SIZED

    @property
    def cluster(self) -> str:
        """The row whose generated cluster this row plans (a +spread twin shares its twin's)."""
        return self.name.removesuffix(SPREAD_SUFFIX)


SOLVER_SIZED = "solver-sized"
SPREAD_SUFFIX = "+spread"
# What every shape's config balances, +-10 % bands: as Cruise Control was measured against on the same clusters.
SHAPE_RESOURCES = {"disk": {}, "replica_count": {}, "leader_count": {}}
# A solver-sized sibling: the same shape at the size the exact MILP proves within a minute or two.
SIBLING_BROKERS, SIBLING_REPLICAS_PER_BROKER = 12, 75
BASE = SyntheticSpec(n_brokers=48, n_racks=3, n_pools=1, n_partitions=48 * REPLICAS_PER_BROKER // 3,
                     replication_factor=3, hot_brokers_per_pool=1, hot_weight=1.6, leader_skew=0.2,
                     under_replicated_fraction=0.01, size_distribution="lognormal", empty_broker_fraction=0.02,
                     seed=3600)
# A cluster whose topics Kafka placed (rack-aware, round robin), then scaled out by 4 %: the shape the issue's
# Cruise Control comparison used.
KAFKA = replace(BASE, placement="kafka", hot_brokers_per_pool=0, leader_skew=0.0, empty_broker_fraction=0.04)
UNEVEN_5 = (1.5, 1.25, 1.0, 0.75, 0.5)
# Issue 52's cluster, on which Cruise Control moved 328.66 TB in 91-94 s: 1,000 brokers in five racks of 200, 8 new
# empty brokers per rack, 2,000 topics x 250 partitions, RF 3, log-normal sizes with a 2 GiB median, 5 % hot brokers
# whose led partitions are 3 x larger, capacity = mean use / 0.45, placed by Kafka.
CC_1000 = SyntheticSpec(n_brokers=1_000, n_racks=5, n_pools=1, n_partitions=2_000 * 250, partitions_per_topic=250,
                        replication_factor=3, hot_brokers_per_pool=0, hot_broker_fraction=0.05,
                        hot_leader_size_factor=3.0, under_replicated_fraction=0.0, size_distribution="lognormal",
                        size_median_bytes=2 * 2**30, empty_broker_fraction=0.04, new_brokers_per_rack=True,
                        target_usage=0.45, placement="kafka", seed=5200)


def _sized(spec: SyntheticSpec, n_brokers: int, replicas_per_broker: int = REPLICAS_PER_BROKER) -> SyntheticSpec:
    """The spec with n_brokers, keeping the replicas per broker."""
    return replace(spec, n_brokers=n_brokers,
                   n_partitions=n_brokers * replicas_per_broker // spec.replication_factor)


def _large_shapes() -> list[Shape]:
    def factor(name: str, change: str, **fields: Any) -> Shape:
        return Shape(name, "factor", change, replace(BASE, **fields))

    return [
        Shape("base", "base", "48 brokers, RF 3, 3 racks, log-normal sizes, 2 % new (1 broker)", BASE),
        *(factor(f"sizes-{d}", f"sizes {d}", size_distribution=d)
          for d in ("uniform", "zipf-traffic", "pareto", "giants")),
        factor("new-0", "no new brokers", empty_broker_fraction=0.0),
        factor("new-4%", "4 % new brokers", empty_broker_fraction=0.04),
        factor("new-10%", "10 % new brokers", empty_broker_fraction=0.10),
        factor("dead-broker", "a dead broker", dead_broker=True),
        factor("disks-spread", "disk capacities x U(0.7, 1.3)", capacity_spread=0.3),
        factor("mixed-hardware", "every second broker of a rack twice the capacity", mixed_hardware=True),
        factor("rf-2", "RF 2", replication_factor=2, n_partitions=BASE.n_brokers * REPLICAS_PER_BROKER // 2),
        factor("rf-4", "RF 4 (over 3 racks)", replication_factor=4,
               n_partitions=BASE.n_brokers * REPLICAS_PER_BROKER // 4),
        factor("racks-5", "5 racks", n_racks=5),
        factor("racks-5-uneven", f"5 racks weighted {UNEVEN_5}", n_racks=5, rack_weights=UNEVEN_5),
        factor("racks-3-uneven", "3 racks weighted (1.5, 1, 0.5), RF 3: each rack holds a third",
               rack_weights=(1.5, 1.0, 0.5)),
        *(Shape(f"pool-{n}", "pool size", f"{n} brokers", _sized(BASE, n)) for n in (12, 200, 1_000)),
        *(Shape(f"kafka-{n}", "kafka", f"{n} brokers placed by Kafka (no hot broker, no leader skew), 4 % new",
                _sized(KAFKA, n)) for n in (48, 200, 1_000)),
        Shape("mixed-a", "mixed", "Pareto sizes, a dead broker, disks x U(0.7, 1.3)",
              replace(BASE, size_distribution="pareto", dead_broker=True, capacity_spread=0.3)),
        Shape("mixed-b", "mixed", f"giants, 10 % new, 5 racks weighted {UNEVEN_5}",
              replace(BASE, size_distribution="giants", empty_broker_fraction=0.10, n_racks=5,
                      rack_weights=UNEVEN_5)),
        Shape("mixed-c", "mixed", "RF 4, 5 racks, uniform sizes, a dead broker",
              replace(BASE, replication_factor=4, n_partitions=BASE.n_brokers * REPLICAS_PER_BROKER // 4,
                      n_racks=5, size_distribution="uniform", dead_broker=True)),
        Shape("mixed-200", "mixed", f"200 brokers, 4 % new, a dead broker, disks x U(0.7, 1.3), 5 racks "
              f"weighted {UNEVEN_5}",
              replace(_sized(BASE, 200), empty_broker_fraction=0.04, dead_broker=True, capacity_spread=0.3,
                      n_racks=5, rack_weights=UNEVEN_5)),
    ]


def _issue_52_shapes() -> list[Shape]:
    """The Cruise Control cluster of issue 52 and its variants, each followed by its +spread twin."""
    rows = [Shape("cc-1000", "issue-52", "1,000 brokers, 5 racks, 2,000 topics x 250, 2 GiB median, 5 % hot (led x 3), "
                  "4 % new (8 per rack), Kafka-placed", CC_1000),
            Shape("cc-1000-new-1%", "issue-52", "cc-1000 with 1 % new (2 per rack)",
                  replace(CC_1000, empty_broker_fraction=0.01)),
            Shape("cc-1000-new-10%", "issue-52", "cc-1000 with 10 % new (20 per rack)",
                  replace(CC_1000, empty_broker_fraction=0.10)),
            Shape("cc-1000-hot-15%", "issue-52", "cc-1000 with 15 % hot brokers",
                  replace(CC_1000, hot_broker_fraction=0.15)),
            # Five million replicas in one pool: the issue's bound is on its +spread twin (150 s, 8 GB, 1.10 x LB).
            Shape("cc-3000", "issue-52", "3,000 brokers, 5 racks of 600, 5,000 topics x 333, 10 new per rack, sizes "
                  "and hot brokers as cc-1000", replace(CC_1000, n_brokers=3_000, n_partitions=5_000 * 333,
                                                         partitions_per_topic=333, empty_broker_fraction=10 / 600))]
    return [twin for row in rows for twin in (row, _with_spread(row))]


def _with_spread(shape: Shape) -> Shape:
    return replace(shape, name=shape.name + SPREAD_SUFFIX, change=f"{shape.change}; topic spread on",
                   topic_spread=True)


def _shapes() -> list[Shape]:
    """Every large shape, each followed by its solver-sized sibling (the same spec at SIBLING_BROKERS brokers and
    SIBLING_REPLICAS_PER_BROKER replicas per broker; shapes whose siblings are the same spec share one); then the
    issue-52 rows (no sibling: a 12-broker cluster of 250-partition topics says nothing of them), and +spread twins
    of kafka-200 and pool-200."""
    shapes: list[Shape] = []
    sibling_of_spec: dict[SyntheticSpec, str] = {}
    for shape in _large_shapes():
        small = _sized(shape.spec, SIBLING_BROKERS, SIBLING_REPLICAS_PER_BROKER)
        if small not in sibling_of_spec:
            sibling_of_spec[small] = f"{shape.name}@{SIBLING_BROKERS}"
            shapes.append(Shape(sibling_of_spec[small], SOLVER_SIZED,
                                f"{shape.name} at {SIBLING_BROKERS} brokers, {SIBLING_REPLICAS_PER_BROKER} replicas "
                                "each", small))
        shapes.append(replace(shape, sibling=sibling_of_spec[small]))
    by_name = {s.name: s for s in shapes}
    return [*shapes, *(_with_spread(by_name[n]) for n in ("kafka-200", "pool-200")), *_issue_52_shapes()]


SHAPES = {s.name: s for s in _shapes()}
# Column title per bound: a row's bounds[name]["moved_over"].
BOUND_COLUMNS = {"disk": "balance moved / disk LB", "band": "balance moved / band's LB (LP)",
                 "recheck": "balance moved / LB (LP, promised edges)", "optimum": "moved / exact optimum"}
OPTIMUM_TARGET = 1.05  # a solver-sized row's plan: at most this times the exact optimum
# Where no plan in band exists, the optimum's edges are widened to the plan's usage after and this much further (in
# usage: 0.001 % of the broker's capacity, 1.1-1.9 MB on the 12-broker rows' disks, less than their smallest
# partition): to the byte, a rack whose brokers all end at their edges is pinned to the plan's bytes per broker, a
# subset-sum HiGHS cannot prove in minutes (see `optimum_model._add_band_rows`). Counts are whole: their edges do not
# move.
WIDENED_SLACK = 1e-5
SIBLING_SLACK = 0.03  # a large row's moved / LB: at most its sibling's + this


def driver_memory(spec: SyntheticSpec) -> str:
    return "6g" if spec.n_brokers > 500 else "4g" if spec.n_brokers > 100 else "2g"


def plan_shape(shape: Shape) -> tuple[dict[str, Any], RunFolder]:
    """Generate (once per spec) and plan the shape; the plan step's time and memory."""
    folder = f"optimum-shapes-{shape.cluster}"  # optimum.prepare's folder
    config_path, run_folder = optimum.prepare(f"shapes-{shape.cluster}", shape.spec, resources=SHAPE_RESOURCES)
    config_path = spread_config(config_path, shape.topic_spread)
    print(f"[{shape.name}] planning ...", flush=True)
    return run.measure(Scale(folder, shape.spec, driver_memory(shape.spec)), config_path, run_folder), run_folder


def spread_config(config_path: Path, enabled: bool) -> Path:
    """The config beside it with the topic spread on or off as the row says (the same cluster and runs folder)."""
    body = yaml.safe_load(config_path.read_text())
    spread_path = config_path.with_name(f"config-spread-{'on' if enabled else 'off'}.yaml")
    spread_path.write_text(yaml.safe_dump({**body, "topic_spread": {"enabled": enabled}}, sort_keys=False))
    return spread_path


def _ratio(value: float, bound: float | None) -> float | None:
    return round(value / bound, 4) if bound else None


def _rounded(ratio: float | None) -> float | None:
    return round(ratio, 4) if ratio is not None else None


def figures(shape: Shape, run_folder: RunFolder, time_limit: float,
            known_optimum: dict[str, Any] | None = None) -> dict[str, Any]:
    """The plan summary's figures, and each bound with moved / bound. `known_optimum`: the row's optimum as last
    solved for the same spec (it depends on the cluster and its bands alone, not on the plan): kept, moved / it
    worked out again."""
    totals = read_json(run_folder.stage_path(PLAN) / "summary.json")["totals"]
    snapshot, _ = read_snapshot(run_folder)
    brokers = snapshot.brokers
    disk_bound = totals.get("disk_lower_bound_bytes")
    band_bound = totals.get("band_lower_bound_bytes")
    bounds = {"disk": {"bytes": disk_bound, "moved_over": _ratio(totals["balance_bytes"], disk_bound)},
              "band": {"bytes": band_bound, "moved_over": _ratio(totals["balance_bytes"], band_bound)},
              "recheck": {"bytes": round(totals["lower_bound_bytes"] or 0.0), "edges": totals.get("lower_bound_edges"),
                          "promise_lp_bytes": totals.get("promise_lp_lower_bound_bytes"),
                          "lp_bytes": totals.get("lp_lower_bound_bytes"),
                          "separate_bytes": totals.get("separate_lower_bound_bytes"),
                          "moved_over": _rounded(totals["moved_over_lb"]),
                          "forced_bytes": totals["forced_lower_bound_bytes"],
                          "forced_moved_over": _rounded(totals["forced_moved_over_lb"])}}
    if shape.exact:
        bounds["optimum"] = (exact_optimum(run_folder, totals["moved_bytes"], time_limit) if known_optimum is None
                             else {**known_optimum, "moved_over": _ratio(totals["moved_bytes"], known_optimum["bytes"]
                                                                         if known_optimum["proven"]
                                                                         else known_optimum["bound_bytes"])})
    return {
        "brokers": int(brokers.shape[0]), "partitions": int(snapshot.partitions.shape[0]),
        "replicas": int(snapshot.replicas.shape[0]),
        "empty_brokers": int(((brokers["disk_used_bytes"] == 0) & brokers["alive"]).sum()),
        "dead_brokers": int((~brokers["alive"].astype(bool)).sum()),
        "moved_bytes": totals["moved_bytes"], "replica_moves": totals["replica_moves"],
        "balance_bytes": totals["balance_bytes"], "forced_bytes": totals["forced_bytes"],
        "out_of_band_before": totals["out_of_band_before"], "out_of_band_after": totals["out_of_band_after"],
        "infeasible": totals["infeasible"], "bounds": bounds,
        "topic_spread": spread_figures(snapshot, run_folder),
    }


def exact_optimum(run_folder: RunFolder, moved_bytes: int, time_limit: float) -> dict[str, Any]:
    """The exact optimum (HiGHS) of the planned cluster; moved / bound is against the proven bound when HiGHS stops
    at the time limit (an upper bound on the true ratio)."""
    config = load_config(run_folder.path.parent / "config.yaml")
    snapshot, _ = read_snapshot(run_folder)
    plan_dir = run_folder.stage_path(PLAN)
    print(f"[{run_folder.path.parent.name}] solving the MILP ...", flush=True)
    # No start for these: with leadership variables the planner's plan as a start made HiGHS end at its limit with
    # a weaker bound (it restarts early), where without one it proves the optimum in tens of seconds. The widened
    # problem below gets one (HiGHS found no plan of it otherwise).
    bands = read_table(plan_dir, BANDS)
    best = solve_optimum(snapshot, config, bands, time_limit=time_limit)
    held = True
    if not best.feasible and "Infeasible" in best.status:
        # No plan brings every broker out of band into its narrower target band: the planner then settles for the
        # band's edges for some (its summary's "fixed, short of the target band") and keeps the others in their
        # target band; the optimum is asked again with the same promises (the best plan keeping the ones it kept).
        short = _fixed_short_of_target(read_json(plan_dir / "summary.json"))
        best = solve_optimum(snapshot, config, bands, time_limit=time_limit,
                             held=held_brokers(snapshot, config, bands) - short)
        held = False
    in_band = best.feasible or None
    if not best.feasible and "Infeasible" in best.status:
        # Not with those promises either. Whether any plan brings every broker into its band (the band's edges
        # for every broker outside it before); if none does, the plan is held to the best plan leaving no broker
        # further outside its edges than it does (the edges widened to take in the plan's usage after).
        in_band = solve_optimum(snapshot, config, bands, time_limit=time_limit, held=set()).feasible
        if not in_band:
            plan = parse_reassignment((plan_dir / "plan.json").read_text(), str(plan_dir / "plan.json"))
            best = widened_optimum(snapshot, config, bands, plan, time_limit, slack=WIDENED_SLACK)
    bound = best.bytes if best.proven else best.bound_bytes
    return {"bytes": best.bytes, "proven": best.proven, "status": best.status, "target_band": held,
            "plan_in_band": in_band,
            "bound_bytes": round(best.bound_bytes) if best.bound_bytes is not None else None,
            "start_feasible": best.start_feasible, "slack": None if in_band is not False else WIDENED_SLACK,
            "rack_bound_bytes": (round(best.rack_bound_bytes) if best.rack_bound_bytes is not None else None),
            "seconds": round(sum(p.seconds for p in best.pools), 2), "moved_over": _ratio(moved_bytes, bound)}


def widened_optimum(snapshot: SnapshotTables, config: RebalancerConfig, bands: pd.DataFrame,
                    plan: list[Reassignment], time_limit: float, slack: float = 0.0) -> Optimum:
    """The best plan leaving no broker further outside its band than `plan` does: the band's edges widened to take
    in the plan's usage after. The plan keeps that problem's constraints by construction, so HiGHS gets it as a
    start (an incumbent to prune with; without one it found no plan of this problem in 120 s on mixed-a@12 and
    racks-3-uneven@12). `start_feasible` says whether the start kept every row. `slack`: how much further out (in
    usage, a share of capacity) a widened edge lets a broker end than the plan leaves it (WIDENED_SLACK in the
    bench; `solve_optimum`'s `widened_slack`). Where RF = racks the racks are solved apart first (`rack_time_limit`:
    a bound, and the optimum where every rack is proven and leaders fit)."""
    after = usage_after(config, snapshot, plan, bands)
    return solve_optimum(snapshot, config, bands, time_limit=time_limit, held=set(), widened=after, start=plan,
                         widened_slack=slack, rack_time_limit=time_limit / 2)


def usage_after(config: RebalancerConfig, snapshot: SnapshotTables, plan: list[Reassignment],
                bands: pd.DataFrame) -> dict[tuple[int, str], float]:
    """Per counted (broker, resource): its usage after the plan, as the re-check judges it."""
    after = recheck_plan(config, snapshot, plan, bands).after
    counted = after[after["counted"]]
    return {(int(b), str(r)): float(u) for b, r, u in zip(counted["broker_id"], counted["resource"],
                                                          counted["usage"], strict=True)}


def _fixed_short_of_target(summary: dict[str, Any]) -> set[tuple[int, str]]:
    """The (broker, resource) pairs the plan fixed into the band but not into its target band."""
    return {(int(b), str(name)) for pool in summary["pools"].values()
            for name, figures in pool["resources"].items() for b in figures["fixed_outside_target_band"]}


def _bound_cell(bound: dict[str, Any] | None) -> str:
    if bound is None:
        return "–"
    if bound["moved_over"] is None:
        return f"none: {bound['status']}" if "status" in bound else "–"
    cell = str(bound["moved_over"])
    if bound.get("plan_in_band") is False:
        slack = f", to {bound['slack'] * 100:g} % of capacity" if bound.get("slack") else ""
        cell += f" (no plan in band exists: no broker further out than the plan leaves it{slack})"
    elif bound.get("target_band") is False:
        cell += " (no plan reaches every target band: the plan's own promises)"
    if bound.get("edges") not in (None, "promised"):
        cell += f" ({bound['edges']} edges: a promise not kept)"
    if "proven" in bound and not bound["proven"]:
        cell = f"≤ {cell} (not proven)"
    if bound.get("forced_moved_over") is not None:
        cell += f" (forced {bound['forced_moved_over']})"
    return cell


def _spread_cell(spread: dict[str, Any] | None) -> str:
    if spread is None:
        return "–"
    worst, over = spread["worst_after"], spread["over_cap_after"]
    return f"{worst['replicas']}, {worst['leaders']}; {over['replicas'] + over['leaders']}"


def row_targets(name: str, results: dict[str, Any]) -> list[tuple[str, bool | None]]:
    """The row's targets (issue 36), each with met (None: not measured): a solver-sized row's plan within
    OPTIMUM_TARGET of the exact optimum; a large row's moved / LB within SIBLING_SLACK of its sibling's; every row
    out of band after only where no plan in band exists (the MILP found none; a large row the planner proves so has
    no target: its bound means nothing there)."""
    r, shape = results[name], SHAPES[name]
    moved_over = r["bounds"]["recheck"]["moved_over"]
    checks: list[tuple[str, bool | None]] = []
    if shape.exact:
        optimum = r["bounds"].get("optimum")
        ratio = optimum and optimum["moved_over"]
        # Against an unproven optimum the ratio is an upper bound: above the target it proves no miss.
        met = None if ratio is None else ratio <= OPTIMUM_TARGET or (None if not optimum.get("proven", True)
                                                                      else False)
        checks.append((f"moved / optimum {ratio} <= {OPTIMUM_TARGET}", met))
        in_band = optimum and optimum.get("plan_in_band", True if optimum["bytes"] is not None else None)
        found = {True: "exists", False: "exists not (the MILP proves it)"}.get(in_band, "not found")
        checks.append((f"out of band after {r['out_of_band_after']} (a plan in band {found})",
                       None if in_band is None else (r["out_of_band_after"] == 0 or not in_band)))
        return checks
    if r["infeasible"]:
        return []  # the planner proved that no plan brings every broker inside its band: nothing to hold it to
    sibling = results.get(shape.sibling or "")
    sibling_over = sibling and sibling["bounds"]["recheck"]["moved_over"]
    checks.append((f"moved / LB {moved_over} <= {shape.sibling}'s {sibling_over} + {SIBLING_SLACK}",
                   None if sibling_over is None or moved_over is None
                   else moved_over <= sibling_over + SIBLING_SLACK + 1e-9))
    checks.append((f"out of band after {r['out_of_band_after']} <= proven infeasible {r['infeasible']}",
                   r["out_of_band_after"] <= r["infeasible"]))
    return checks


def _targets_cell(checks: list[tuple[str, bool | None]]) -> str:
    if not checks:
        return "n/a: no plan in band exists (proven)"
    missed = [what for what, met in checks if met is False]
    if missed:
        return "missed: " + "; ".join(missed)
    return "met" if all(met for _, met in checks) else "not measured"


def table(results: dict[str, Any]) -> str:
    rows = [("shape", "what differs from base", "brokers", "replicas", "new / dead", "moved GiB", "replica moves",
             "out of band before → after (infeasible)", *BOUND_COLUMNS.values(),
             "topic spread after: worst held / share (replicas, leaders); cells over cap", "wall s", "targets")]
    for name, r in results.items():
        rows.append((name, SHAPES[name].change, str(r["brokers"]), f"{r['replicas']:,}",
                     f"{r['empty_brokers']} / {r['dead_brokers']}", f"{r['moved_bytes'] / 2**30:,.1f}",
                     f"{r['replica_moves']:,}",
                     f"{r['out_of_band_before']} → {r['out_of_band_after']} ({r['infeasible']})",
                     *(_bound_cell(r["bounds"].get(b)) for b in BOUND_COLUMNS), _spread_cell(r.get("topic_spread")),
                     f"{r['wall_s']:.1f}",
                     _targets_cell(row_targets(name, results))))
    cells = [_targets_cell(row_targets(name, results)) for name in results]
    summary = (f"Targets: {cells.count('met')} of {len(cells)} rows met, "
               f"{sum(c.startswith('missed') for c in cells)} missed, {cells.count('not measured')} not measured.")
    lines = ["| " + " | ".join(r) + " |" for r in [rows[0], tuple("---" for _ in rows[0]), *rows[1:]]]
    return "\n".join(lines) + "\n\n" + summary


def write_report(results: dict[str, Any], command: str) -> None:
    """The table between the shapes markers of BENCHMARKS.md (the section around them is written by hand)."""
    info = run.machine()
    block = (f"{START}\nCommand: {command} at {info['commit']}, {time.strftime('%Y-%m-%d')}. Machine: {info['cpu']}, "
             f"{info['cores']} cores; Spark {info['spark']} {info['spark_master']}.\n\n{table(results)}\n{END}")
    text = run.REPORT.read_text()
    if START not in text:
        print(f"no shapes markers in {run.REPORT}; the table:\n{block}")
        return
    run.REPORT.write_text(text.split(START)[0] + block + text.split(END)[1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", help="comma-separated names (default: every shape)")
    parser.add_argument("--quick", action="store_true", help="only the solver-sized shapes")
    parser.add_argument("--time-limit", type=float, default=120.0, help="HiGHS' limit per pool, seconds")
    parser.add_argument("--solve-again", action="store_true",
                        help="solve the exact optimum again even where bench/shapes-results.json has it for the spec")
    args = parser.parse_args(argv)
    names = (args.shapes.split(",") if args.shapes
             else [n for n, s in SHAPES.items() if not args.quick or s.exact])
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    started = time.monotonic()
    for name in names:
        shape = SHAPES[name]
        measured, run_folder = plan_shape(shape)
        last = results.get(name, {})
        spec = json.loads(json.dumps(asdict(shape.spec)))  # as the results file has it (tuples as lists)
        # A spec field added since the row was measured has its default there (today's behaviour).
        same = ({**asdict(SyntheticSpec()), **last.get("spec", {})} == spec
                and last.get("resources") == list(SHAPE_RESOURCES))
        known = last.get("bounds", {}).get("optimum") if same and not args.solve_again else None
        if known and known.get("target_band") is not True:
            known = None  # held to the promises the plan kept: solved again for each plan
        results[name] = {**measured, **figures(shape, run_folder, args.time_limit, known), "spec": asdict(shape.spec),
                         "resources": list(SHAPE_RESOURCES)}
        print(f"[{name}] " + json.dumps({k: v for k, v in results[name].items() if k != "spec"}), flush=True)
        ordered = {k: results[k] for k in SHAPES if k in results}
        RESULTS.write_text(json.dumps(ordered, indent=2) + "\n")  # each shape kept as soon as it is measured
    print(f"{len(names)} shapes in {time.monotonic() - started:.0f} s")
    command = "`make bench-shapes` (`python -m bench.shapes`)" if argv is None and len(sys.argv) == 1 else (
        f"`python -m bench.shapes {' '.join(argv if argv is not None else sys.argv[1:])}`")
    write_report({k: results[k] for k in SHAPES if k in results}, command)
    print(f"wrote {RESULTS} and {run.REPORT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
