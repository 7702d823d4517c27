"""Nightly rebalancing of one Kafka cluster, per broker pool.

snapshot -> plan (Spark) -> validate (great-expectations) -> execute[pool] -> verify

Scheduled runs execute the validated plan; a run a person triggers is a dry run unless `mode` is "execute".
Schedule, Params and wiring only: the work is in the kafka_rebalancer package (imported inside the tasks).
"""

from __future__ import annotations

import os
import sys
from datetime import timedelta
from pathlib import Path

import pendulum
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import DAG, Param, get_current_context, task

from kafka_rebalancer.spark_settings import plan_spark_conf

REPO = Path(__file__).resolve().parents[1]
PLAN_JOB = REPO / "spark" / "jobs" / "plan_job.py"
SPARK_LOG_CONFIG = REPO / "spark" / "conf" / "log4j2.properties"
PACKAGE_ZIP = REPO / "dist" / "kafka_rebalancer.zip"  # built by make (tools/package_zip.py), for the workers
SPARK_CONNECTION = "spark_rebalancer"  # master URL: local[2] for the demo, spark://host:7077 for a cluster
PYTHON = os.environ.get("PYSPARK_PYTHON", sys.executable)

with DAG(
    dag_id="kafka_rebalance_nightly",
    description="Snapshot, plan, validate and execute Kafka replica moves per broker pool",
    schedule="0 2 * * *",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    tags=["kafka", "rebalance", "nightly"],
    default_args={"retries": 2, "retry_delay": timedelta(minutes=1)},
    params={
        "config_path": Param(os.environ.get("KAFKA_REBALANCER_CONFIG", str(REPO / "config" / "rebalancer.yaml")),
                             type="string", description="The kafka-rebalancer config file (YAML)"),
        "mode": Param("auto", enum=["auto", "dry-run", "execute"],
                      description="auto: scheduled runs execute, manual runs only plan"),
        "throttle_bytes_per_s": Param(None, type=["null", "integer"], minimum=1,
                                      description="Replication throttle per broker; empty: the config's"),
        "resume_cancelled": Param(False, type="boolean",
                                  description="Execute pools of this run even though they were cancelled"),
    },
) as dag:

    @task
    def snapshot() -> str:
        from kafka_rebalancer_airflow import snapshot_task

        return snapshot_task(get_current_context())

    plan = SparkSubmitOperator(
        task_id="plan",
        conn_id=SPARK_CONNECTION,
        application=str(PLAN_JOB),
        application_args=["--config", "{{ params.config_path }}",
                          "--run-dir", "{{ ti.xcom_pull(task_ids='snapshot') }}"],
        py_files=str(PACKAGE_ZIP),
        env_vars={"PYSPARK_PYTHON": PYTHON, "PYSPARK_DRIVER_PYTHON": PYTHON},
        conf={**plan_spark_conf(f"-Dlog4j2.configurationFile={SPARK_LOG_CONFIG}"),
              "spark.pyspark.python": PYTHON, "spark.ui.showConsoleProgress": "false"},
        name="kafka-rebalancer-plan",
        retries=1,
    )

    @task(retries=0)  # deterministic: a retry cannot turn a failed expectation into a pass
    def validate(run_dir: str) -> list[str]:
        from kafka_rebalancer_airflow import validate_task

        return validate_task(get_current_context(), run_dir)

    @task(map_index_template="{{ broker_pool }}")
    def execute(run_dir: str, broker_pool: str) -> dict:
        from kafka_rebalancer_airflow import execute_task

        context = get_current_context()
        context["broker_pool"] = broker_pool  # type: ignore[typeddict-unknown-key]  # names the mapped task
        return execute_task(context, run_dir, broker_pool)

    @task
    def verify(run_dir: str) -> dict:
        from kafka_rebalancer_airflow import verify_task

        return verify_task(get_current_context(), run_dir)

    run_dir = snapshot()
    pools = validate(run_dir)
    run_dir >> plan >> pools
    execute.partial(run_dir=run_dir).expand(broker_pool=pools) >> verify(run_dir)


if __name__ == "__main__":
    dag.test()
