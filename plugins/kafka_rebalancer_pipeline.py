"""The rebalancing pipeline's tasks, wired once for every DAG that runs it (nightly and manual):

    snapshot -> plan (Spark) -> validate (great-expectations) -> approve -> execute[pool] -> verify -> report

`approve` is the standard provider's ApprovalOperator (it shows up under the UI's required actions), taught to
decide first: a dry run stops there (execute and verify are skipped), a scheduled run within the auto-approval
limits and the execution window goes on unattended, anything else waits for a person, whose answer (or the
timeout, which rejects) is recorded in the run folder with the plan hash it approves. `report` runs last
whatever happened and writes the run's report/index.html.

Light at parse time: the kafka_rebalancer package is imported inside the tasks.
"""

from __future__ import annotations

import logging
import os
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.providers.standard.operators.hitl import ApprovalOperator
from airflow.sdk import Param, get_current_context, task

from kafka_rebalancer.spark_settings import plan_spark_conf

REPO = Path(__file__).resolve().parents[1]
PLAN_JOB = REPO / "spark" / "jobs" / "plan_job.py"
SPARK_LOG_CONFIG = REPO / "spark" / "conf" / "log4j2.properties"
PACKAGE_ZIP = REPO / "dist" / "kafka_rebalancer.zip"  # built by make (tools/package_zip.py), for the workers
SPARK_CONNECTION = "spark_rebalancer"  # master URL: local[2] for the demo, spark://host:7077 for a cluster
PYTHON = os.environ.get("PYSPARK_PYTHON", sys.executable)
DEFAULT_CONFIG = os.environ.get("KAFKA_REBALANCER_CONFIG", str(REPO / "config" / "rebalancer.yaml"))
RUN_DIR = "{{ ti.xcom_pull(task_ids='snapshot') }}"
DEFAULT_RESPONSE_TIMEOUT = timedelta(hours=12)

log = logging.getLogger(__name__)


class PlanApprovalOperator(ApprovalOperator):
    """Approval of exactly the validated plan (see the module docstring). Reject is also the answer on timeout."""

    template_fields = (*ApprovalOperator.template_fields, "run_dir")

    def __init__(self, *, run_dir: str = RUN_DIR, **kwargs: Any) -> None:
        super().__init__(subject="Execute this Kafka rebalance plan?", body="(filled in from the validated plan)",
                         defaults="Reject", response_timeout=DEFAULT_RESPONSE_TIMEOUT, **kwargs)
        self.run_dir = run_dir

    def execute(self, context: Any) -> Any:
        from kafka_rebalancer_airflow import approval_decision

        decision = approval_decision(context, self.run_dir)
        if decision["state"] == "dry-run" or decision["state"] == "auto-approved":
            if decision["state"] == "dry-run":
                self.skip(ti=context["ti"], tasks=list(context["task"].get_direct_relatives(upstream=False)))
            return decision
        self.body = decision["body"]
        self.subject = decision["subject"]
        self.response_timeout = decision["response_timeout"]
        return super().execute(context)

    def skip(self, ti: Any, tasks: Any) -> None:
        """Without an approval everything downstream that needs one is skipped here (execute and verify), not only
        the next task, so no task's outcome depends on how the scheduler propagates a skip through the mapped
        execute (CI once saw verify end upstream_failed); `report` (all_done) still runs."""
        needs_approval = [t for t in self.get_flat_relatives(upstream=False) if t.trigger_rule == "all_success"]
        super().skip(ti=ti, tasks=needs_approval)

    def execute_complete(self, context: Any, event: dict[str, Any]) -> Any:
        from kafka_rebalancer_airflow import record_answer

        timed_out = bool(event.get("timedout"))  # the scheduler applied the default answer, Reject
        user = event.get("responded_by_user") or {}
        record_answer(context, self.run_dir, approved=event["chosen_options"] == [self.APPROVE] and not timed_out,
                      by=user.get("name") or user.get("id"), timed_out=timed_out)
        return super().execute_complete(context, event)


def config_param() -> Param:
    """Every DAG's config file (default: KAFKA_REBALANCER_CONFIG where the DAG is parsed)."""
    return Param(DEFAULT_CONFIG, type="string", description="The kafka-rebalancer config file (YAML)")


def execution_params() -> dict[str, Param]:
    """The Params every DAG running the pipeline has: its config, throttle and approval timeout."""
    return {
        "config_path": config_param(),
        "throttle_bytes_per_s": Param(None, type=["null", "integer"], minimum=1,
                                      description="Replication throttle per broker; empty: the config's"),
        "approval_timeout": Param(None, type=["null", "string"], pattern=r"^([0-9]+(\.[0-9]+)?\s*[smhd]\s*)+$",
                                  description="How long the approve step waits for a person (e.g. 12h, 30m); "
                                              "no answer rejects. Empty: the config's approval.response_timeout"),
    }


def rebalance_tasks() -> None:
    """Add the pipeline's tasks to the DAG being defined (call inside `with DAG(...)`)."""

    @task
    def snapshot() -> str:
        from kafka_rebalancer_airflow import snapshot_task

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
        from kafka_rebalancer_airflow import validate_task

        return validate_task(get_current_context(), run_dir)

    approve = PlanApprovalOperator(task_id="approve", retries=0)

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

    @task(trigger_rule="all_done", retries=0)  # whatever happened upstream: it reports what exists
    def report() -> str | None:
        from kafka_rebalancer_airflow import report_task

        return report_task(get_current_context())

    run_dir = snapshot()
    pools = validate(run_dir)
    run_dir >> plan >> pools >> approve
    approve >> execute.partial(run_dir=run_dir).expand(broker_pool=pools) >> verify(run_dir) >> report()
