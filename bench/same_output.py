"""Whether two checkouts write the same artifacts: plan, validate and report on the same snapshots with each, then
compare plan.json, rollback.json, the plan's tables, summary.json and validation/report.json byte for byte, and
the report and the other text files with times, paths and great-expectations' random ids masked (a restructuring
must not change what the product writes).

    python -m bench.same_output --baseline ../other-checkout [--scales small,medium] [--actions drain-brokers,...]
        [--run CONFIG:RUN_FOLDER]

--scales plans nightly runs (every pool) on the bench's clusters; --actions (default: all five) manual runs on a
small cluster with spare brokers and two log dirs per broker (bench/same_output_actions.py): each checkout makes
and writes the run's request.json itself (its own `make_request`, as the CLI's manual operations do), then plans
the same snapshot. --run compares on the snapshot of any run folder (the demo's, say) planned with that config.

The configs leave `topic_spread` out: each side plans with its own default. Since the spread turned on by default
(issue 52), a baseline from before that plans with it off, so its plans differ by design; compare a refactor with a
baseline at or after the change. To compare with the spread off, give a config saying `topic_spread: {enabled:
false}` with --run (the plan hash then differs from a baseline from before the change all the same: the setting is
in the fingerprint now, and was not when it was the default).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from bench.run import BENCH, OUT, prepare
from bench.same_output_actions import ACTIONS, prepare_actions
from bench.scales import SCALES

RUN_ID = "same-output"
SIDES = ("new", "baseline")
COMMANDS = (["plan", "--run-id", RUN_ID], ["validate", "--run-id", RUN_ID], ["report", RUN_ID])
# One process per checkout and run, the package imported once (on a busy machine most of a small run's time is
# starting Python, pandas and Spark): a manual run's start in the checkout's own words (snapshot.start.start_run, its
# snapshot given: the request checked against the config and written, then its brokers checked against the
# snapshot), then each command as `kafka-rebalancer` runs it. A plan that fails an expectation is an outcome like any
# other (its validation report is written, and compared); any other failing step stops the run.
SIDE = """
import json, sys
from pathlib import Path
from kafka_rebalancer.cli import main
config_path, run_dir, request, commands = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4])
if request is not None:
    from kafka_rebalancer.operations.request import check_brokers_in_snapshot, make_request, run_config, write_request
    from kafka_rebalancer.run_folder import RunFolder
    run = RunFolder(run_dir)
    write_request(run, make_request(run_config(config_path), **request))
    check_brokers_in_snapshot(run)
for command in commands:
    code = main([command[0], "--config", config_path, *command[1:]])
    if code and not (command[0] == "validate" and (Path(run_dir) / "validation" / "report.json").exists()):
        sys.exit(f"kafka-rebalancer {command[0]} exited {code}")
"""


def side_run(name: str, config_path: Path, snapshot: Path, side: str) -> tuple[Path, Path]:
    """A config for one side (`config_path`'s, its runs under the side's folder; written beside it, so the paths it
    gives relative to itself still hold) and its run folder, holding a copy of `snapshot` only."""
    body = yaml.safe_load(config_path.read_text())
    folder = OUT / name / "same-output" / side
    body["run_root"] = str(folder / "runs")
    run_dir = folder / "runs" / body["cluster"]["name"] / RUN_ID
    shutil.rmtree(run_dir, ignore_errors=True)
    shutil.copytree(snapshot, run_dir / "snapshot")
    path = config_path.parent / f".same-output-{side}.yaml"
    path.write_text(yaml.safe_dump(body, sort_keys=False))
    return path, run_dir


def run_side(checkout: Path, config_path: Path, run_dir: Path, request: dict[str, Any] | None) -> list[str]:
    """Plan, validate and report with `checkout`'s package (first, for a manual run, its request). Returns the
    lines where a step says it stopped at a time limit (the exact polish's safety net: what it writes then depends
    on the machine's load, not on the code)."""
    env = {**os.environ, "PYTHONPATH": str(checkout / "src"), "PYSPARK_PYTHON": sys.executable}
    cmd = [sys.executable, "-c", SIDE, str(config_path), str(run_dir), json.dumps(request), json.dumps(COMMANDS)]
    result = subprocess.run(cmd, env=env, cwd=checkout, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{checkout}: {result.stderr[-2000:]}")
    return [line for line in result.stderr.splitlines() if "time limit" in line]


def comparable(path: Path, run_dir: Path) -> bytes:
    """The file's bytes, less what differs by nature: the plan's duration, times, the run folder's path."""
    data = path.read_bytes()
    if path.name == "summary.json" and path.parent.name == "plan":
        summary = json.loads(data)
        summary.pop("plan_seconds", None)
        return json.dumps(summary, indent=2).encode()
    if path.suffix in (".html", ".json", ".txt", ".csv"):
        text = data.decode().replace(str(run_dir), "<run>")
        text = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(\+00:00|Z)?", "<time>", text)
        text = re.sub(r"\d{8}T\d{6}\.\d+Z", "<time>", text)  # great-expectations' load times
        text = re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<uuid>", text)  # GX's ids
        return text.encode()
    return data


def differences(scale: str, config: Path, snapshot: Path, baseline: Path,
                request: dict[str, Any] | None = None) -> list[str]:
    """What differs between the two checkouts' plan, validation and report of `snapshot` (a manual run's when
    `request`, `make_request`'s parameters, is given)."""
    runs = {}
    for side, checkout in (("new", BENCH.parent), ("baseline", baseline)):
        config_path, run_dir = side_run(scale, config, snapshot, side)
        try:
            for line in run_side(checkout, config_path, run_dir, request):
                print(f"[{scale}] note, {side}: {line}", flush=True)
        finally:
            config_path.unlink()
        runs[side] = run_dir
    found = []
    for stage in ("plan", "validation", "report"):
        names = {side: sorted(p.relative_to(runs[side]) for p in (runs[side] / stage).rglob("*")
                              if p.is_file() and p.name != "files.json") for side in SIDES}
        if names["new"] != names["baseline"]:
            found.append(f"{scale} {stage}: files differ: {sorted(set(names['new']) ^ set(names['baseline']))}")
        for relative in names["new"]:
            if relative in names["baseline"] and comparable(runs["new"] / relative, runs["new"]) != comparable(
                    runs["baseline"] / relative, runs["baseline"]):
                found.append(f"{scale}: {relative} differs")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", required=True, type=Path)
    parser.add_argument("--scales", default="small,medium", help="bench scales, nightly runs; empty: none")
    parser.add_argument("--actions", default=",".join(ACTIONS),
                        help=f"manual runs, of {', '.join(ACTIONS)}; empty: none")
    parser.add_argument("--run", action="append", default=[], help="CONFIG:RUN_FOLDER, a run's snapshot (repeatable)")
    args = parser.parse_args(argv)
    actions = [a for a in args.actions.split(",") if a]
    unknown = sorted(set(actions) - set(ACTIONS))
    if unknown:
        parser.error(f"--actions: unknown {', '.join(unknown)} (known: {', '.join(ACTIONS)})")
    inputs: list[tuple[str, Path, Path, dict[str, Any] | None]] = []
    for scale in filter(None, args.scales.split(",")):
        config_path, run = prepare(SCALES[scale])
        inputs.append((scale, config_path, run.stage_path("snapshot"), None))
    if actions:
        inputs += [entry for entry in prepare_actions(OUT) if entry[0] in actions]
    for given in args.run:
        config_path, run_dir = (Path(part).resolve() for part in given.split(":", 1))
        inputs.append((run_dir.name.replace(":", "_"), config_path, run_dir / "snapshot", None))
    found = []
    for name, config_path, snapshot, request in inputs:
        print(f"[{name}] plan, validate, report with both checkouts ...", flush=True)
        these = differences(name, config_path, snapshot, args.baseline.resolve(), request)
        print(f"[{name}] {'differences: ' + str(len(these)) if these else 'the same'}", flush=True)
        found += these
    for line in found:
        print(line)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
