"""The terminal shows the product's own words: `kafka-rebalancer plan` of a drain, as an operator runs it, prints
its log lines and its result and nothing else; what the libraries print (Spark's JVM and log4j, HiGHS' banner,
numpy's warnings) goes to the run's log file."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kafka_rebalancer.cli import run_log
from kafka_rebalancer.operations.request import make_request, run_config, write_request
from kafka_rebalancer.run_folder import RunFolder
from kafka_rebalancer.snapshot import write_snapshot
from kafka_rebalancer.snapshot.build import SnapshotTables
from kafka_rebalancer.snapshot.capacity import CAPACITY_FIELDS
from kafka_rebalancer.snapshot.synthetic import SyntheticSpec, generate
from kafka_rebalancer.spark_settings import DRIVER_MAX_REPLICAS_ENV
from tests.helpers import REPO, write_config

pytestmark = pytest.mark.spark

# Two pools of six brokers (one dead): numpy warned of a division by zero here, the drained broker's capacity.
SPEC = SyntheticSpec(n_brokers=12, n_racks=3, n_pools=2, n_partitions=300, replication_factor=3, dead_broker=True,
                     seed=3)
DRAINED = 3
PRODUCT_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (INFO|WARNING|ERROR) kafka_rebalancer[.\w]*: ")
CHATTER = ("RuntimeWarning", "divide by zero", "HiGHS", "Copyright", "WARN ", "log4j", "Setting default log level",
           "setLogLevel", "NativeCodeLoader", "incubator", "[Stage ", "py4j")


def _drained(tables: SnapshotTables) -> SnapshotTables:
    """The snapshot a drain of broker 3 takes: the broker has left its pool, so it has no capacity (the snapshot
    resolves capacities for pool members only)."""
    brokers = tables.brokers.copy()
    drained = brokers["broker_id"] == DRAINED
    brokers.loc[drained, list(CAPACITY_FIELDS)] = 0
    brokers.loc[drained, "broker_pool"] = None
    return SnapshotTables(brokers, tables.replicas, tables.partitions, tables.warnings)


def test_a_drains_plan_prints_only_the_products_lines(tmp_path: Path) -> None:
    tables, body = generate(SPEC)
    config_path = write_config(tmp_path / "config.yaml", {**body, "run_root": str(tmp_path / "runs")})
    run = RunFolder(run_config(config_path).run_dir("drain"))
    write_request(run, make_request(run_config(config_path), action="drain-brokers", brokers=[DRAINED],
                                    reason="test"))
    write_snapshot(run, _drained(tables), {"cluster": body["cluster"]["name"]})
    env = {k: v for k, v in os.environ.items() if k not in (DRIVER_MAX_REPLICAS_ENV, "KAFKA_REBALANCER_DEBUG_LOGS")}
    result = subprocess.run([sys.executable, "-m", "kafka_rebalancer.cli", "plan", "--config", str(config_path),
                             "--run-id", "drain"], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert re.fullmatch(r"plan [0-9a-f]{12}: .*\n", result.stdout), result.stdout
    lines = result.stderr.splitlines()
    assert lines and all(PRODUCT_LINE.match(line) for line in lines), result.stderr
    terminal = result.stdout + result.stderr
    assert not [word for word in CHATTER if word in terminal], terminal
    # Moved, not lost: the run's log file has the libraries' lines and the product's, in order.
    logged = run_log(run).read_text()
    assert "HiGHS" in logged and "log4j" in logged and lines[-1] in logged
