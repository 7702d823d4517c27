"""Planner speed as a ratio: this checkout's `kafka-rebalancer plan` against another checkout's, side by side.

    python -m bench.side_by_side --baseline ../baseline-checkout [--scales single-200,medium] [-n 3]
        [--tag integrity --target 1.05 [--without-record]]

Absolute times on shared machines drift by up to 2x between hours, so both run in turn on the same snapshot
(warm-up pairs first, then A B A B ...), each as a whole `kafka-rebalancer plan` process (Spark local[2], the
scale's driver memory), and the figure is the ratio new / baseline of each pair. Both plans are then judged by
the same independent check (this checkout's bands and `bench.baselines.evaluate`: replica moves and bytes
counted from plan.json, brokers out of band from the after-state), so "no worse" means the same thing for
both. Writes bench/side-by-side.json and its section of BENCHMARKS.md; with --tag T, bench/side-by-side-T.json
and a section of its own, each scale judged against the --target it was measured with (the ratio a change may
cost: a speed target for one scale, 1.0 for "no slower" at another). --without-record takes the
snapshot's integrity record away on both sides, so the new side checks the snapshot row by row as it does one
written before records began.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from bench.baselines import evaluate
from bench.run import BENCH, OUT, REPORT, checkout_label, machine, prepare, run_measured
from bench.scales import SCALES, Scale
from kafka_rebalancer.config import load_config
from kafka_rebalancer.model.reassignment import read_reassignment
from kafka_rebalancer.model.schemas import BANDS
from kafka_rebalancer.run_folder import FILES_RECORD, PLAN, RunFolder, read_json, read_table
from kafka_rebalancer.snapshot import read_snapshot
from kafka_rebalancer.spark_settings import JVM_ARCHIVE_ENV, jvm_archive_options

RESULTS = BENCH / "side-by-side.json"
RUN_ID = "side-by-side"
SIDES = ("new", "baseline")


def side_config(scale: Scale, side: str, variant: str = "side-by-side", recorded: bool = True) -> Path:
    """The scale's config for one side, runs under its own folder (one per variant); the snapshot linked into its
    run folder, without its integrity record unless `recorded`."""
    config_path, run = prepare(scale)
    body = yaml.safe_load(config_path.read_text())
    folder = OUT / scale.name / variant / side
    body["run_root"] = str(folder / "runs")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(body, sort_keys=False))
    snapshot = folder / "runs" / body["cluster"]["name"] / RUN_ID / "snapshot"
    if not snapshot.exists():
        snapshot.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(run.stage_path("snapshot"), snapshot, copy_function=os.link)
        if not recorded:
            (snapshot / FILES_RECORD).unlink()
    return path


def plan_once(checkout: Path, config_path: Path, scale: Scale, log_path: Path) -> dict[str, Any]:
    """One whole `kafka-rebalancer plan` process of `checkout`'s code (its src first on the path)."""
    cmd = [sys.executable, "-c", "import sys; from kafka_rebalancer.cli import main; sys.exit(main())",
           "plan", "--config", str(config_path), "--run-id", RUN_ID]
    env = {**os.environ, "PYTHONPATH": str(checkout / "src"), "PYSPARK_PYTHON": sys.executable,
           "PYSPARK_SUBMIT_ARGS": f"--driver-memory {scale.driver_memory} pyspark-shell"}
    measured = run_measured(cmd, env=env, cwd=checkout, log_path=log_path)
    if measured["returncode"] != 0:
        raise RuntimeError(f"plan failed ({checkout}); see {log_path}")
    return {"process_s": measured["process_s"], "peak_rss_mb": measured["peak_rss_mb"]}


def judged(config_path: Path) -> dict[str, Any]:
    """Both sides' plans by one yardstick: this checkout's bands (from the new side's plan) and evaluate()."""
    new_config = load_config(config_path)
    run = RunFolder(new_config.run_dir(RUN_ID))
    snapshot, _ = read_snapshot(run)
    bands = read_table(run.stage_path(PLAN), BANDS)
    out = {}
    for side in SIDES:
        side_run = RunFolder(load_config(config_path.parent.parent / side / "config.yaml").run_dir(RUN_ID))
        plan = read_reassignment(side_run.stage_path(PLAN) / "plan.json")
        figures = evaluate(snapshot, new_config, bands, plan)
        figures["plan_hash"] = read_json(side_run.stage_path(PLAN) / "summary.json")["plan_hash"]
        out[side] = figures
    return out


def compare(scale: Scale, baseline: Path, runs: int, warm_ups: int = 1, variant: str = "side-by-side",
            recorded: bool = True) -> dict[str, Any]:
    configs = {side: side_config(scale, side, variant, recorded) for side in SIDES}
    checkouts = {"new": BENCH.parent, "baseline": baseline}
    logs = OUT / scale.name / variant
    times: dict[str, list[dict[str, Any]]] = {side: [] for side in SIDES}
    for i in range(1 - warm_ups, runs + 1):  # warm-up pairs fill the page cache and the JVM archive: not counted
        for side in SIDES:
            label = "warm-up" if i <= 0 else f"run {i}/{runs}"
            print(f"[{scale.name}] {side} {label} ...", flush=True)
            figure = plan_once(checkouts[side], configs[side], scale, logs / f"{side}.log")
            print(f"[{scale.name}] {side} {label}: {figure['process_s']:.1f} s, {figure['peak_rss_mb']} MB",
                  flush=True)
            if i > 0:
                times[side].append(figure)
    ratios = [n["process_s"] / b["process_s"] for n, b in zip(times["new"], times["baseline"], strict=True)]
    return {
        "date": time.strftime("%Y-%m-%d"), "commit": checkout_label(BENCH.parent), "machine": machine()["cpu"],
        "warm_ups": warm_ups, "runs": runs, "snapshot_recorded": recorded,
        # The new side starts its driver JVM from the class-data archive only when $KAFKA_REBALANCER_JVM_ARCHIVE
        # names one (`make bench-vs` does); the baseline has no archive either way.
        "new_jvm_archive": bool(jvm_archive_options(os.environ.get(JVM_ARCHIVE_ENV))),
        "ratio_new_over_baseline": {"min": round(min(ratios), 3), "median": round(
            statistics.median(ratios), 3), "max": round(max(ratios), 3), "pairs": [round(r, 3) for r in ratios]},
        **{f"{side}_s": {"median": round(statistics.median(t["process_s"] for t in times[side]), 1),
                         "all": [t["process_s"] for t in times[side]]} for side in SIDES},
        **{f"{side}_peak_rss_mb": max(t["peak_rss_mb"] for t in times[side]) for side in SIDES},
        "plans": judged(configs["new"]),
    }


# Issue 15's targets against c97983c: the median ratio per scale (one pool, or several), peak memory, and plans no
# worse (no more brokers left outside their band than the baseline leaves).
RATIO_TARGET = {True: 0.35, False: 0.7}  # by whether the scale's brokers form one pool
PEAK_TARGET_MB = 6 * 1024


def ratio_targets(results: dict[str, Any], target_ratio: float | None = None) -> list[tuple[str, bool]]:
    """(target, met) for every scale measured: issue 15's, or the --target the scale was measured with (else
    `target_ratio`)."""
    status = []
    for name, r in results.items():
        target = r.get("target") or target_ratio or RATIO_TARGET[SCALES[r.get("scale", name)].spec.n_pools == 1]
        median = r["ratio_new_over_baseline"]["median"]
        new, old = r["plans"]["new"]["out_of_band_after"], r["plans"]["baseline"]["out_of_band_after"]
        status += [(f"{name} ratio {median} <= {target}", median <= target),
                   (f"{name} peak {r['new_peak_rss_mb']} MB <= {PEAK_TARGET_MB} MB",
                    r["new_peak_rss_mb"] <= PEAK_TARGET_MB),
                   (f"{name} out of band after {new} <= the baseline's {old}", new <= old)]
    return status


def write_report(results: dict[str, Any], baseline: str, info: dict[str, Any], tag: str | None = None,
                 target_ratio: float | None = None) -> None:
    rows = [("scale", "measured", "brokers / replicas", "ratio new / baseline (median, min-max)", "new s (median)",
             "baseline s (median)", "peak MB new / baseline", "out of band after new / baseline",
             "replica moves new / baseline", "moved GiB new / baseline")]
    for name, r in results.items():
        new, old = r["plans"]["new"], r["plans"]["baseline"]
        ratio = r["ratio_new_over_baseline"]
        spec = SCALES[r.get("scale", name)].spec
        # Each row says where it was measured: rows are re-measured one scale at a time, at other commits.
        where = "".join(f" {label} {r[key]}" for key, label in (("commit", "at"), ("machine", "on")) if key in r)
        archive = {True: ", JVM archive", False: ", no JVM archive"}.get(r.get("new_jvm_archive"), "")
        record = "" if r.get("snapshot_recorded", True) else ", snapshot without a record: rows checked"
        measured = f"{r['date']}{where} ({r['warm_ups']} warm-up{archive}{record})"
        rows.append((name, measured, f"{spec.n_brokers:,} / {spec.n_partitions * spec.replication_factor:,}",
                     f"{ratio['median']} ({ratio['min']}-{ratio['max']}, {r['runs']} pairs)",
                     str(r["new_s"]["median"]), str(r["baseline_s"]["median"]),
                     f"{r['new_peak_rss_mb']} / {r['baseline_peak_rss_mb']}",
                     f"{new['out_of_band_after']} / {old['out_of_band_after']}",
                     f"{new['replica_moves']:,} / {old['replica_moves']:,}",
                     f"{new['moved_bytes'] / 2**30:,.0f} / {old['moved_bytes'] / 2**30:,.0f}"))
    table = "\n".join("| " + " | ".join(r) + " |" for r in [rows[0], tuple("---" for _ in rows[0]), *rows[1:]])
    table += "\n\nTargets: " + "; ".join(f"{text}: {'met' if met else 'NOT met'}"
                                         for text, met in ratio_targets(results, target_ratio)) + "."
    section = "side-by-side" + (f"-{tag}" if tag else "")
    start, end = f"<!-- {section}:start -->", f"<!-- {section}:end -->"
    flags = f" --tag {tag} --target <ratio> [--without-record]" if tag else ""
    block = (f"{start}\nCommand: `python -m bench.side_by_side --baseline <checkout of {baseline}> --scales "
             f"<scale> [-n <pairs>] [--warm-ups <pairs>]{flags}` (`make bench-vs`), one scale at a time; the table "
             f"keeps each scale's latest measurement (its date, the new checkout's commit and the machine in "
             f"`measured`; this run: {info['cpu']}, {info['cores']} cores); "
             f"whole `kafka-rebalancer plan` processes in turn on the same snapshot, warm-up pairs first; times "
             f"are process wall seconds (Spark session included). Plans judged by one yardstick (this checkout's "
             f"bands, moves and bytes counted from plan.json).\n\n{table}\n{end}")
    text = REPORT.read_text()
    text = text.split(start)[0] + block + text.split(end)[1] if start in text else text + "\n" + block + "\n"
    REPORT.write_text(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", required=True, type=Path, help="a checkout of the code to compare against")
    parser.add_argument("--scales", default="single-200,single-1000,medium,large")
    parser.add_argument("-n", "--runs", type=int, default=3, help="counted pairs per scale")
    parser.add_argument("--warm-ups", type=int, default=1, help="uncounted pairs first (0 on long scales)")
    parser.add_argument("--tag", help="a comparison of its own (its results file and BENCHMARKS.md section)")
    parser.add_argument("--target", type=float, help="with --tag: the largest median ratio new / baseline that passes")
    parser.add_argument("--without-record", action="store_true",
                        help="plan a snapshot without its integrity record (the new side checks its rows)")
    args = parser.parse_args(argv)
    if args.tag is not None and args.target is None:
        print("--tag needs --target (the ratio the comparison is judged against)", file=sys.stderr)
        return 2
    baseline = args.baseline.resolve()
    cli = baseline / "src" / "kafka_rebalancer" / "cli"
    if not (cli.with_suffix(".py").is_file() or (cli / "__init__.py").is_file()):  # cli.py, or the cli/ package
        print(f"--baseline {baseline}: not a kafka-rebalancer checkout (no src/kafka_rebalancer/cli.py or cli/)",
              file=sys.stderr)
        return 2
    unknown = [name for name in args.scales.split(",") if name not in SCALES]
    if unknown:
        print(f"--scales: unknown {', '.join(unknown)}; expected some of {', '.join(SCALES)}", file=sys.stderr)
        return 2
    label = checkout_label(baseline)
    results_file = RESULTS.with_name(f"side-by-side-{args.tag}.json") if args.tag else RESULTS
    variant = "side-by-side" + (f"-{args.tag}" if args.tag else "") + ("-unrecorded" if args.without_record else "")
    results = json.loads(results_file.read_text()) if results_file.exists() else {}
    for scale in args.scales.split(","):
        key = scale + (" (no record)" if args.without_record else "")
        results[key] = {**compare(SCALES[scale], baseline, args.runs, args.warm_ups, variant,
                                  not args.without_record), "baseline": label, "scale": scale,
                        **({"target": args.target} if args.tag else {})}
        print(f"[{key}] " + json.dumps({k: v for k, v in results[key].items() if k != "plans"}), flush=True)
        # Written after every scale: a long comparison stopped midway keeps what it measured.
        ordered = dict(sorted(results.items(), key=lambda kv: (list(SCALES).index(kv[1].get("scale", kv[0])),
                                                               kv[0])))
        results_file.write_text(json.dumps(ordered, indent=2) + "\n")
        write_report(ordered, label, machine(), args.tag, args.target)
        print(f"wrote {results_file} and {REPORT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
