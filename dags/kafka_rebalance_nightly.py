"""Nightly rebalancing of one Kafka cluster, per broker pool.

snapshot -> plan (Spark) -> validate (great-expectations) -> approve -> execute[pool] -> verify

A scheduled run executes unattended when its plan is within the config's auto-approval limits and it starts
inside the execution window; otherwise it waits at `approve` for a person (the UI's required actions). A run a
person triggers is a dry run unless `mode` is "execute", and then a person approves it.
Schedule and Params only: the tasks are shared with the manual DAG (plugins/kafka_rebalancer_pipeline.py).
"""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import DAG, Param
from kafka_rebalancer_pipeline import execution_params, notify_task_failed, rebalance_tasks

from kafka_rebalancer.model.run_actions import Action

with DAG(
    dag_id="kafka_rebalance_nightly",
    description="Snapshot, plan, validate, approve and execute Kafka replica moves per broker pool",
    schedule="0 2 * * *",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    tags=["kafka", "rebalance", Action.NIGHTLY.value],
    default_args={"retries": 2, "retry_delay": timedelta(minutes=1), "on_failure_callback": notify_task_failed},
    params={
        "mode": Param("auto", enum=["auto", "dry-run", "execute"],
                      description="auto: scheduled runs execute (within the auto-approval limits), manual runs "
                                  "only plan; execute: a person approves the plan at the approve step"),
        "resume_cancelled": Param(False, type="boolean",
                                  description="Execute pools of this run even though they were cancelled"),
        **execution_params(),
    },
) as dag:
    rebalance_tasks()


if __name__ == "__main__":
    dag.test()
