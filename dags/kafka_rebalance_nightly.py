"""Nightly rebalancing of each Kafka cluster, per broker pool (one DAG per cluster of a fleet: README: Fleet).

snapshot -> plan (Spark) -> validate (great-expectations) -> approve -> execute[pool] -> verify

A scheduled run executes unattended when its plan is within the config's auto-approval limits and it starts
inside the execution window; otherwise it waits at `approve` for a person (the UI's required actions). A run a
person triggers is a dry run unless `mode` is "execute", and then a person approves it.
Schedule and Params only: the tasks are shared with the manual DAG (plugins/kafka_rebalancer_pipeline.py).
"""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import Param
from kafka_rebalancer_pipeline import clusters, execution_params, notify_task_failed, rebalance_tasks

from kafka_rebalancer.airflow.deployment import cluster_dag
from kafka_rebalancer.model.run_actions import Action

for cluster in clusters():
    with cluster_dag(
        cluster, "kafka_rebalance_nightly",
        description="Snapshot, plan, validate, approve and execute Kafka replica moves per broker pool",
        schedule=cluster.nightly_schedule,
        max_active_runs=1,
        tags=(Action.NIGHTLY.value,),
        default_args={"retries": 2, "retry_delay": timedelta(minutes=1), "on_failure_callback": notify_task_failed},
        params={
            "mode": Param("auto", enum=["auto", "dry-run", "execute"],
                          description="auto: scheduled runs execute (within the auto-approval limits), manual runs "
                                      "only plan; execute: a person approves the plan at the approve step"),
            "resume_cancelled": Param(False, type="boolean",
                                      description="Execute pools of this run even though they were cancelled"),
            **execution_params(cluster),
        },
    ) as dag:  # the last cluster's: tools/airflow_run.py runs the one config's with dag.test()
        rebalance_tasks(cluster)
