"""`make bench-shapes`: the planner on many cluster shapes (issue 36), one factor at a time around a base shape.

    python -m bench.shapes [--quick] [--shapes base,sizes-pareto,...] [--time-limit 60]

The base shape is one pool of 48 brokers, RF 3, 3 racks, log-normal partition sizes, 1,500 replicas per broker,
one hot broker and 2 % new empty brokers. Each factor row changes one thing of it (sizes, new brokers, a dead
broker, disks, RF, racks, pool size); the mixed rows change several; the exact rows are 12-broker clusters whose
configs balance disk and replica count only, so the planner's plan is also compared with the exact optimum
(bench/optimum_milp.py). Every row is planned as `make bench` plans (bench.run's prepare and measure: bench.plan_once
in a child process) and its figures are the plan summary's (the re-check of plan.json against the snapshot).

The bounds a row is measured against are in its `bounds` (name -> bytes and moved / bound): "recheck" is the
summary's balance lower bound (forced moves apart), "optimum" the exact MILP's. A new bound is one more entry
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

from bench import optimum, run
from bench.optimum_milp import solve_optimum
from bench.scales import Scale
from kafka_rebalancer.config import load_config
from kafka_rebalancer.model.reassignment import read_reassignment
from kafka_rebalancer.model.schemas import BANDS
from kafka_rebalancer.run_folder import PLAN, RunFolder, read_json, read_table
from kafka_rebalancer.snapshot import read_snapshot
from kafka_rebalancer.snapshot.synthetic import SyntheticSpec

RESULTS = Path(__file__).resolve().parent / "shapes-results.json"
START, END = "<!-- shapes:start -->", "<!-- shapes:end -->"
QUICK_MAX_BROKERS = 12
REPLICAS_PER_BROKER = 1_500  # as single-200 and single-1000 in bench/scales.py


@dataclass(frozen=True)
class Shape:
    name: str
    group: str  # base, factor, pool size, mixed, exact
    change: str  # what differs from the base shape
    spec: SyntheticSpec
    exact: bool = False  # balance disk and replica count only, and compare with the exact optimum


BASE = SyntheticSpec(n_brokers=48, n_racks=3, n_pools=1, n_partitions=48 * REPLICAS_PER_BROKER // 3,
                     replication_factor=3, hot_brokers_per_pool=1, hot_weight=1.6, leader_skew=0.2,
                     under_replicated_fraction=0.01, size_distribution="lognormal", empty_broker_fraction=0.02,
                     seed=3600)
UNEVEN_5 = (1.5, 1.25, 1.0, 0.75, 0.5)


def _sized(spec: SyntheticSpec, n_brokers: int) -> SyntheticSpec:
    """The spec with n_brokers, keeping the replicas per broker."""
    return replace(spec, n_brokers=n_brokers,
                   n_partitions=n_brokers * REPLICAS_PER_BROKER // spec.replication_factor)


def _shapes() -> list[Shape]:
    def factor(name: str, change: str, **fields: Any) -> Shape:
        return Shape(name, "factor", change, replace(BASE, **fields))

    exact = replace(BASE, n_brokers=12, n_partitions=300)  # optimum.py's size: HiGHS proves it in minutes
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
        *(Shape(f"exact-{d}", "exact", f"12 brokers, 300 partitions, {d} sizes; disk and replica count only",
                replace(exact, size_distribution=d), exact=True) for d in ("lognormal", "pareto", "giants")),
    ]


SHAPES = {s.name: s for s in _shapes()}
# Column title per bound: a row's bounds[name]["moved_over"].
BOUND_COLUMNS = {"recheck": "balance moved / LB", "optimum": "moved / exact optimum"}


def driver_memory(spec: SyntheticSpec) -> str:
    return "6g" if spec.n_brokers > 500 else "4g" if spec.n_brokers > 100 else "2g"


def plan_shape(shape: Shape) -> tuple[dict[str, Any], RunFolder]:
    """Generate (once per spec) and plan the shape; the plan step's time and memory."""
    if shape.exact:
        folder = f"optimum-shapes-{shape.name}"  # optimum.prepare's folder: its configs balance what the MILP models
        config_path, run_folder = optimum.prepare(f"shapes-{shape.name}", shape.spec)
    else:
        folder = f"shapes-{shape.name}"
        config_path, run_folder = run.prepare(Scale(folder, shape.spec, driver_memory(shape.spec)))
    print(f"[{shape.name}] planning ...", flush=True)
    return run.measure(Scale(folder, shape.spec, driver_memory(shape.spec)), config_path, run_folder), run_folder


def _ratio(value: float, bound: float | None) -> float | None:
    return round(value / bound, 4) if bound else None


def _rounded(ratio: float | None) -> float | None:
    return round(ratio, 4) if ratio is not None else None


def figures(shape: Shape, run_folder: RunFolder, time_limit: float) -> dict[str, Any]:
    """The plan summary's figures, and each bound with moved / bound."""
    totals = read_json(run_folder.stage_path(PLAN) / "summary.json")["totals"]
    snapshot, _ = read_snapshot(run_folder)
    brokers = snapshot.brokers
    bounds = {"recheck": {"bytes": round(totals["lower_bound_bytes"] or 0.0),
                          "moved_over": _rounded(totals["moved_over_lb"]),
                          "forced_bytes": totals["forced_lower_bound_bytes"],
                          "forced_moved_over": _rounded(totals["forced_moved_over_lb"])}}
    if shape.exact:
        bounds["optimum"] = exact_optimum(run_folder, totals["moved_bytes"], time_limit)
    return {
        "brokers": int(brokers.shape[0]), "partitions": int(snapshot.partitions.shape[0]),
        "replicas": int(snapshot.replicas.shape[0]),
        "empty_brokers": int(((brokers["disk_used_bytes"] == 0) & brokers["alive"]).sum()),
        "dead_brokers": int((~brokers["alive"].astype(bool)).sum()),
        "moved_bytes": totals["moved_bytes"], "replica_moves": totals["replica_moves"],
        "balance_bytes": totals["balance_bytes"], "forced_bytes": totals["forced_bytes"],
        "out_of_band_before": totals["out_of_band_before"], "out_of_band_after": totals["out_of_band_after"],
        "infeasible": totals["infeasible"], "bounds": bounds,
    }


def exact_optimum(run_folder: RunFolder, moved_bytes: int, time_limit: float) -> dict[str, Any]:
    """The exact optimum (HiGHS) of the planned cluster, the plan given as its first solution; moved / bound is
    against the proven bound when HiGHS stops at the time limit (an upper bound on the true ratio)."""
    config = load_config(run_folder.path.parent / "config.yaml")
    snapshot, _ = read_snapshot(run_folder)
    plan_dir = run_folder.stage_path(PLAN)
    print(f"[{run_folder.path.parent.name}] solving the MILP ...", flush=True)
    best = solve_optimum(snapshot, config, read_table(plan_dir, BANDS), time_limit=time_limit,
                         start=read_reassignment(plan_dir / "plan.json"))
    bound = best.bytes if best.proven else best.bound_bytes
    return {"bytes": best.bytes, "proven": best.proven, "status": best.status,
            "bound_bytes": round(best.bound_bytes) if best.bound_bytes is not None else None,
            "seconds": round(sum(p.seconds for p in best.pools), 2), "moved_over": _ratio(moved_bytes, bound)}


def _bound_cell(bound: dict[str, Any] | None) -> str:
    if bound is None:
        return "–"
    cell = str(bound["moved_over"])
    if "proven" in bound and not bound["proven"]:
        cell = f"≤ {cell} (not proven)"
    if bound.get("forced_moved_over") is not None:
        cell += f" (forced {bound['forced_moved_over']})"
    return cell


def table(results: dict[str, Any]) -> str:
    rows = [("shape", "what differs from base", "brokers", "replicas", "new / dead", "moved GiB", "replica moves",
             "out of band before → after (infeasible)", *BOUND_COLUMNS.values(), "wall s")]
    for name, r in results.items():
        rows.append((name, SHAPES[name].change if name in SHAPES else "", str(r["brokers"]), f"{r['replicas']:,}",
                     f"{r['empty_brokers']} / {r['dead_brokers']}", f"{r['moved_bytes'] / 2**30:,.1f}",
                     f"{r['replica_moves']:,}",
                     f"{r['out_of_band_before']} → {r['out_of_band_after']} ({r['infeasible']})",
                     *(_bound_cell(r["bounds"].get(b)) for b in BOUND_COLUMNS), f"{r['wall_s']:.1f}"))
    return "\n".join("| " + " | ".join(r) + " |" for r in [rows[0], tuple("---" for _ in rows[0]), *rows[1:]])


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
    parser.add_argument("--quick", action="store_true", help=f"only the {QUICK_MAX_BROKERS}-broker shapes")
    parser.add_argument("--time-limit", type=float, default=60.0, help="HiGHS' limit per pool, seconds")
    args = parser.parse_args(argv)
    names = (args.shapes.split(",") if args.shapes
             else [n for n, s in SHAPES.items() if not args.quick or s.spec.n_brokers <= QUICK_MAX_BROKERS])
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    started = time.monotonic()
    for name in names:
        shape = SHAPES[name]
        measured, run_folder = plan_shape(shape)
        results[name] = {**measured, **figures(shape, run_folder, args.time_limit), "spec": asdict(shape.spec)}
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
