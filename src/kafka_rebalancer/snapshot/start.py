"""A run's start, the same from the DAGs and the CLI: a manual run's request is checked and written before the
cluster is touched, then the cluster is captured with the run's pools (an execute-reviewed run adopts its reviewed
run's snapshot and plan instead)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from kafka_rebalancer.config import RebalancerConfig
from kafka_rebalancer.model.run_actions import run_action
from kafka_rebalancer.operations.replication_factor import check_replication_factor
from kafka_rebalancer.operations.request import check_brokers_in_snapshot, make_request, run_config, write_request
from kafka_rebalancer.run_folder import RunFolder
from kafka_rebalancer.snapshot import take_snapshot
from kafka_rebalancer.snapshot.reviewed import adopt_reviewed_plan


def start_run(config_path: str | Path, run_id: str, request_params: Mapping[str, Any] | None,
              connect: Callable[[RebalancerConfig], Any]) -> RunFolder:
    """Start run `run_id`: `request_params` (`make_request`'s; None for the nightly run) are checked and written
    as the run's request, a wrong one failing here, naming it; then the run's snapshot, whose brokers the request
    names are checked. `connect` opens a connection to the config's cluster."""
    base = run_config(config_path)
    run = RunFolder(base.run_dir(run_id))
    if request_params is not None:
        request = make_request(base, **request_params)
        if not run_action(request.action).plans:
            write_request(run, adopt_reviewed_plan(base, run, request, connect))
            return run
        write_request(run, request)
    config = run_config(config_path, run)
    take_snapshot(config, connect(config), run)
    check_brokers_in_snapshot(run)
    check_replication_factor(run)
    return run
