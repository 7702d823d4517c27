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
from kafka_rebalancer_pipeline import DEFAULT_CONFIG, rebalance_tasks

with DAG(
    dag_id="kafka_rebalance_nightly",
    description="Snapshot, plan, validate, approve and execute Kafka replica moves per broker pool",
    schedule="0 2 * * *",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    tags=["kafka", "rebalance", "nightly"],
    default_args={"retries": 2, "retry_delay": timedelta(minutes=1)},
    params={
        "config_path": Param(DEFAULT_CONFIG, type="string", description="The kafka-rebalancer config file (YAML)"),
        "mode": Param("auto", enum=["auto", "dry-run", "execute"],
                      description="auto: scheduled runs execute (within the auto-approval limits), manual runs "
                                  "only plan; execute: a person approves the plan at the approve step"),
        "throttle_bytes_per_s": Param(None, type=["null", "integer"], minimum=1,
                                      description="Replication throttle per broker; empty: the config's"),
        "approval_timeout": Param(None, type=["null", "string"], pattern=r"^([0-9]+(\.[0-9]+)?\s*[smhd]\s*)+$",
                                  description="How long the approve step waits for a person (e.g. 12h, 30m); "
                                              "no answer rejects. Empty: the config's approval.response_timeout"),
        "resume_cancelled": Param(False, type="boolean",
                                  description="Execute pools of this run even though they were cancelled"),
    },
) as dag:
    rebalance_tasks()


if __name__ == "__main__":
    dag.test()
