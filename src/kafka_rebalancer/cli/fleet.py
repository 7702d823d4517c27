"""The commands over a fleet folder (README: Fleet): `fleet` (its clusters, their nightly schedules, the Airflow
pool to create), `runs --all` and `events --all` (every cluster's, newest first). A file that does not load is
named on stderr (report_broken) and the others are shown all the same."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from kafka_rebalancer.errors import RebalancerError

if TYPE_CHECKING:  # the fleet module is imported where it is used: the CLI reads its arguments before pydantic
    from rich.console import Console

    from kafka_rebalancer.fleet import Fleet


def add_fleet_arguments(parser: argparse.ArgumentParser, what: str) -> None:
    """`--config C` or `--all` (the folder of --config-dir, else KAFKA_REBALANCER_CONFIG_DIR)."""
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--config", type=Path)
    which.add_argument("--all", action="store_true", help=f"{what} of every cluster of the fleet folder")
    add_config_dir_argument(parser)


def add_config_dir_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config-dir", type=Path, help="the fleet folder (default: KAFKA_REBALANCER_CONFIG_DIR)")


def fleet_of(args: argparse.Namespace) -> Fleet:
    from kafka_rebalancer.fleet import CONFIG_DIR_ENV, load_fleet

    folder = args.config_dir or os.environ.get(CONFIG_DIR_ENV)
    if not folder:
        raise RebalancerError(f"--all reads the fleet folder: give --config-dir or set {CONFIG_DIR_ENV}")
    return load_fleet(Path(folder))


def fleet_command(fleet: Fleet) -> None:
    """The folder as Airflow will build it: each cluster's file and schedule, the pool."""
    from kafka_rebalancer.fleet import EXECUTION_POOL

    for cluster in fleet.clusters:
        print(f"{cluster.name}: {cluster.config_file.name}, nightly at '{cluster.schedule}' (UTC), runs under "
              f"{cluster.config.run_root / cluster.name}")
    if not fleet.clusters:
        print(f"no cluster config (*.yaml with a cluster section) in {fleet.folder}")
    slots = fleet.settings.max_concurrent_executions
    print(f"fleet-wide: at most {slots} broker pool execution(s) at once; create or resize the Airflow pool with\n"
          f"  airflow pools set {EXECUTION_POOL} {slots} 'kafka-rebalancer: executions at once across the fleet'")


def runs_all(fleet: Fleet, console: Console, limit: int) -> None:
    """Every cluster's runs in one table, newest first, the cluster first in each row."""
    from kafka_rebalancer.cli.tables import runs_table
    from kafka_rebalancer.report.overview import list_runs

    runs = [run for c in fleet.clusters for run in list_runs(c.config.run_root, c.name)]
    runs.sort(key=lambda r: r.started_at, reverse=True)
    if not runs:
        print(f"no runs of the {len(fleet.clusters)} cluster(s) of {fleet.folder}")
    runs_table(console, runs[:limit], by_cluster=True)


def events_all(fleet: Fleet, limit: int) -> None:
    """Every cluster's watcher events and decisions, newest first, each line naming its cluster."""
    from kafka_rebalancer.automation.events_log import event_line, read_events

    entries = [(float(e.get("at", 0)), c.name, e) for c in fleet.clusters for e in read_events(c.config)]
    entries.sort(key=lambda item: item[0], reverse=True)
    if not entries:
        print(f"no events recorded for the {len(fleet.clusters)} cluster(s) of {fleet.folder} (the watchers run "
              f"while their events DAGs are unpaused)")
    for _, cluster, entry in entries[:limit]:
        print(f"{cluster}: {event_line(entry)}")


def report_broken(fleet: Fleet) -> bool:
    """Name each file of the folder that does not load (stderr); whether there was one."""
    for broken in fleet.broken:
        print(f"error: {broken.error} (this file is left out)", file=sys.stderr)
    return bool(fleet.broken)
