"""The plan job on a real Spark standalone cluster (a master and two workers from the pyspark package, on
loopback), submitted by the nightly DAG's own SparkSubmitOperator with the package shipped via --py-files:
the plan is byte-identical to the one local mode writes for the same snapshot."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafka_rebalancer.config import load_config
from kafka_rebalancer.plan.job import run_plan
from kafka_rebalancer.run_folder import read_json
from kafka_rebalancer.snapshot.synthetic import SyntheticSpec, generate, write_cluster
from tests.helpers import REPO
from tools.local_spark import LocalSparkCluster
from tools.package_zip import DEFAULT_ZIP, build_package_zip

pytestmark = [pytest.mark.airflow]

SPEC = SyntheticSpec(n_brokers=9, n_racks=3, n_pools=1, n_partitions=400, partitions_per_topic=20, seed=11)

# Runs the DAG's `plan` task (the SparkSubmitOperator as the DAG defines it) outside a DAG run.
SUBMIT = textwrap.dedent("""
    import sys
    sys.path[:0] = [{dags!r}, {plugins!r}]
    from kafka_rebalance_nightly import dag
    plan = dag.get_task("plan")
    plan.application_args = ["--config", {config!r}, "--run-dir", {run_dir!r}]
    plan.execute(context={{}})
""")


@pytest.fixture(scope="module")
def spark_standalone() -> Iterator[Any]:
    cluster = LocalSparkCluster("pytest", workers=2)
    state = cluster.start()
    try:
        yield state
    finally:
        cluster.stop(quiet=True)


def test_plan_on_the_standalone_cluster_equals_local_mode(spark: Any, spark_standalone: Any, tmp_path: Path) -> None:
    tables, body = generate(SPEC)
    local_config, local_run = write_cluster(tmp_path / "local", tables, body)
    cluster_config, cluster_run = write_cluster(tmp_path / "standalone", tables, body)
    run_plan(spark, load_config(local_config), local_run)

    if not DEFAULT_ZIP.exists():  # make test builds it; a bare pytest run may not have
        build_package_zip()
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path / "airflow"), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "AIRFLOW_CONN_SPARK_REBALANCER": json.dumps({
               "conn_type": "spark", "host": "spark://127.0.0.1", "port": spark_standalone.master_port,
               "extra": {"spark-binary": "spark-submit"}})}
    code = SUBMIT.format(dags=str(REPO / "dags"), plugins=str(REPO / "plugins"), config=str(cluster_config),
                         run_dir=str(cluster_run.path))
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=900)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-5000:]
    assert f"--master spark://127.0.0.1:{spark_standalone.master_port}" in output
    assert f"--py-files {DEFAULT_ZIP}" in output
    with urllib.request.urlopen(f"http://127.0.0.1:{spark_standalone.master_ui_port}/json/", timeout=10) as r:
        apps = json.load(r)["completedapps"]
    assert [a["name"] for a in apps] == ["kafka-rebalancer-plan"]  # it ran on the cluster's workers

    local_plan = (local_run.path / "plan" / "plan.json").read_bytes()
    assert (cluster_run.path / "plan" / "plan.json").read_bytes() == local_plan
    local_summary = read_json(local_run.path / "plan" / "summary.json")
    cluster_summary = read_json(cluster_run.path / "plan" / "summary.json")
    assert cluster_summary["plan_hash"] == local_summary["plan_hash"]
    assert local_summary["totals"]["partitions_changed"] > 0
