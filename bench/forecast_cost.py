"""What the capacity forecast adds to the nightly plan step (issue 55): the plan of a generated cluster, once from
its snapshot as generated (no log size history: the forecast stage says so and nothing is worked out) and once from
the same snapshot keeping 14 days of hourly log sizes per topic (every topic growing, a tenth flat at retention, a
restart gap), the runs alternating, each in its own process (bench.plan_once).

    python -m bench.forecast_cost [--scale single-200] [-n 3]

Prints one JSON line: the median plan step of each, the forecast's share, and how many topics and points.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from bench.run import OUT, measure, prepare
from bench.scales import SCALES
from kafka_rebalancer.model.units import DAY_S
from kafka_rebalancer.run_folder import SNAPSHOT, RunFolder
from kafka_rebalancer.snapshot import read_snapshot, write_snapshot
from kafka_rebalancer.snapshot.log_size_history import STEP_S

HISTORY_DAYS = 14
END = 1_790_000_000.0  # a fixed hour: the same history every time


def synthetic_history(partitions: pd.DataFrame, seed: int = 55) -> pd.DataFrame:
    """TOPIC_HISTORY: each topic's size over HISTORY_DAYS at STEP_S, ending at its size in the snapshot."""
    rng = np.random.default_rng(seed)
    sizes = partitions.groupby("topic")["size_bytes"].sum()
    times = np.arange(END - HISTORY_DAYS * DAY_S, END + 1, STEP_S)
    frames = []
    for i, (topic, size) in enumerate(sizes.items()):
        growth = float(size) * rng.uniform(0.002, 0.02)  # per day
        if i % 10 == 0:  # at retention: a sawtooth under a flat limit
            values = float(size) - (growth * (times - END) / DAY_S) % max(float(size) * 0.01, 1.0)
        else:
            values = float(size) + growth * (times - END) / DAY_S
        values = values * (1 + rng.normal(0, 0.0005, len(times)))
        keep = ~((times > END - 5 * DAY_S) & (times < END - 4.5 * DAY_S)) if i % 7 == 0 else slice(None)
        frames.append(pd.DataFrame({"topic": topic, "time_s": times[keep], "size_bytes": np.maximum(values[keep], 0)}))
    return pd.concat(frames, ignore_index=True)


def with_history(run: RunFolder, target: Path) -> RunFolder:
    """A copy of the run's snapshot that keeps a synthetic log size history (its manifest says so)."""
    shutil.rmtree(target, ignore_errors=True)
    tables, manifest = read_snapshot(run)
    history = synthetic_history(tables.partitions)
    manifest = {k: v for k, v in manifest.items() if k not in ("content_hash", "rows", "warnings")}
    manifest["forecast_history"] = {"history_days": HISTORY_DAYS, "start": float(history["time_s"].min()),
                                    "end": END, "step_s": STEP_S, "topics": int(history["topic"].nunique()),
                                    "points": len(history), "notes": []}
    copy = RunFolder(target)
    write_snapshot(copy, tables, manifest, SNAPSHOT, history)
    return copy


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", default="single-200", choices=sorted(SCALES))
    parser.add_argument("-n", type=int, default=3)
    args = parser.parse_args(argv)
    scale = SCALES[args.scale]
    config_path, run = prepare(scale)
    forecast_run = with_history(run, OUT / scale.name / "run-with-history")
    walls: dict[str, list[float]] = {"without": [], "with": []}
    for _ in range(args.n):
        for name, folder in (("without", run), ("with", forecast_run)):
            walls[name].append(measure(scale, config_path, folder)["wall_s"])
    forecast = json.loads((forecast_run.stage_path("forecast") / "forecast.json").read_text())
    without, with_ = statistics.median(walls["without"]), statistics.median(walls["with"])
    print(json.dumps({"scale": scale.name, "plan_s_without_history": without, "plan_s_with_history": with_,
                      "forecast_share": round(with_ / without - 1, 3), "runs": walls,
                      "topics": forecast["history"]["topics"], "points": forecast["history"]["points"],
                      "with_trend": forecast["topics"]["with_trend"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
