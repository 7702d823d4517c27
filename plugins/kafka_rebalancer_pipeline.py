"""The rebalancing pipeline's tasks, wired once for every DAG that runs it (nightly and manual):

    snapshot -> plan (Spark) -> validate (great-expectations) -> approve -> execute[pool] -> verify -> unregister
    -> report

The tasks' bodies, the approval operator and the hook are kafka_rebalancer.airflow's; this module wires them, with
where this checkout keeps the plan job, Spark's log config and the package zip. `approve` decides first (a dry run
stops there, a scheduled run within the limits goes on unattended, anything else waits for a person); `report`
runs last whatever happened and writes the run's report/index.html. `unregister` does something only for a drain
that asked for it (its own stage in the run folder, after a verified run).

Light at parse time: the task bodies (and with them the package's heavy imports) are imported inside the tasks.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import Param, get_current_context, task

from kafka_rebalancer.airflow.deployment import ClusterDags, deployed_clusters
from kafka_rebalancer.airflow.operators import RUN_DIR, PlanApprovalOperator
from kafka_rebalancer.spark_settings import plan_spark_conf

REPO = Path(__file__).resolve().parents[1]
PLAN_JOB = REPO / "spark" / "jobs" / "plan_job.py"
SPARK_LOG_CONFIG = REPO / "spark" / "conf" / "log4j2.properties"
PACKAGE_ZIP = REPO / "dist" / "kafka_rebalancer.zip"  # built by make (tools/package_zip.py), for the workers
SPARK_CONNECTION = "spark_rebalancer"  # master URL: local[2] for the demo, spark://host:7077 for a cluster
PYTHON = os.environ.get("PYSPARK_PYTHON", sys.executable)
DEFAULT_CONFIG = REPO / "config" / "rebalancer.yaml"  # without KAFKA_REBALANCER_CONFIG(_DIR)

log = logging.getLogger(__name__)


def clusters() -> list[ClusterDags]:
    """The clusters whose DAGs each DAG file builds (kafka_rebalancer.airflow.deployment)."""
    return deployed_clusters(DEFAULT_CONFIG)


def config_param(cluster: ClusterDags) -> Param:
    """Every DAG's config file (default: the cluster's; KAFKA_REBALANCER_CONFIG's where the DAG is parsed)."""
    return Param(cluster.config_path, type="string", description="The kafka-rebalancer config file (YAML)")


def execution_params(cluster: ClusterDags) -> dict[str, Param]:
    """The Params every DAG running the pipeline has: its config, throttle and approval timeout."""
    return {
        "config_path": config_param(cluster),
        "throttle_bytes_per_s": Param(None, type=["null", "integer"], minimum=1,
                                      description="Replication throttle per broker; empty: the config's"),
        "approval_timeout": Param(None, type=["null", "string"], pattern=r"^([0-9]+(\.[0-9]+)?\s*[smhd]\s*)+$",
                                  description="How long the approve step waits for a person (e.g. 12h, 30m); "
                                              "no answer rejects. Empty: the config's approval.response_timeout"),
    }


def notify_task_failed(context: Any) -> None:
    """The DAGs' tasks' on_failure_callback (default_args): tells the configured channels which task failed and
    the error's first line, once per run (kafka_rebalancer.airflow.notifications)."""
    from kafka_rebalancer.airflow.notifications import notify_task_failed as notify

    notify(context)


def rebalance_tasks(cluster: ClusterDags) -> None:
    """Add the pipeline's tasks to the DAG being defined (call inside `with DAG(...)`). In a fleet the execute
    tasks take a slot of the fleet's pool (its limit on executions at once)."""

    @task
    def snapshot() -> str:
        from kafka_rebalancer.airflow.tasks import snapshot_task

        return snapshot_task(get_current_context())

    plan = SparkSubmitOperator(
        task_id="plan",
        conn_id=SPARK_CONNECTION,
        application=str(PLAN_JOB),
        application_args=["--config", "{{ params.config_path }}", "--run-dir", RUN_DIR],
        py_files=str(PACKAGE_ZIP),
        env_vars={"PYSPARK_PYTHON": PYTHON, "PYSPARK_DRIVER_PYTHON": PYTHON},
        conf={**plan_spark_conf(f"-Dlog4j2.configurationFile={SPARK_LOG_CONFIG}"),
              "spark.pyspark.python": PYTHON, "spark.ui.showConsoleProgress": "false"},
        name="kafka-rebalancer-plan",
        retries=1,
    )

    @task(retries=0)  # deterministic: a retry cannot turn a failed expectation into a pass
    def validate(run_dir: str) -> list[str]:
        from kafka_rebalancer.airflow.tasks import validate_task

        return validate_task(get_current_context(), run_dir)

    approve = PlanApprovalOperator(task_id="approve", retries=0)

    @task(map_index_template="{{ broker_pool }}", pool=cluster.execution_pool)  # None: Airflow's default pool
    def execute(run_dir: str, broker_pool: str) -> dict:
        from kafka_rebalancer.airflow.tasks import execute_task

        context = get_current_context()
        context["broker_pool"] = broker_pool  # type: ignore[typeddict-unknown-key]  # names the mapped task
        return execute_task(context, run_dir, broker_pool)

    @task
    def verify(run_dir: str) -> dict:
        from kafka_rebalancer.airflow.tasks import verify_task

        return verify_task(get_current_context(), run_dir)

    @task
    def unregister(run_dir: str) -> dict | None:
        from kafka_rebalancer.airflow.tasks import unregister_task

        return unregister_task(get_current_context(), run_dir)

    @task(trigger_rule="all_done", retries=0)  # whatever happened upstream: it reports what exists
    def report() -> str | None:
        from kafka_rebalancer.airflow.tasks import report_task

        return report_task(get_current_context())

    run_dir = snapshot()
    pools = validate(run_dir)
    run_dir >> plan >> pools >> approve
    approve >> execute.partial(run_dir=run_dir).expand(broker_pool=pools) >> verify(run_dir) >> unregister(run_dir) \
        >> report()


MANUAL_DAG = "kafka_rebalance_manual"  # the base id: the cluster's is cluster.named(MANUAL_DAG)


def automation_tasks(cluster: ClusterDags) -> None:
    """The events DAG's tasks (call inside `with DAG(...)`): check the bands when due, decide what the cluster's
    events start, then start each as a run of the cluster's manual DAG, which plans, validates, approves and
    reports it like any other."""
    from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator

    @task(retries=0)  # its events are the decision's input: a retry would record them twice
    def check_bands() -> list[dict]:
        from kafka_rebalancer.airflow.tasks import check_bands_task

        return check_bands_task(get_current_context())

    @task(retries=0)  # a retry would decide the same events twice
    def decide(band_events: list[dict]) -> list[dict]:
        from kafka_rebalancer.airflow.tasks import decide_task

        return decide_task(get_current_context(), band_events)

    TriggerDagRunOperator.partial(task_id="start_runs", trigger_dag_id=cluster.named(MANUAL_DAG),
                                  retries=0).expand_kwargs(
        decide(check_bands()))
