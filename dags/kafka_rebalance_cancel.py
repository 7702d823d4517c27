"""Cancel a rebalance run's reassignments in flight (the operator's brake), and clear its throttles.

A DAG of its own because the nightly DAG allows one active run: a cancel must run while the nightly run is
still executing. The executor of that run sees the cancel, starts nothing more and fails without retrying.
"""

from __future__ import annotations

import os
from pathlib import Path

import pendulum
from airflow.sdk import DAG, Param, get_current_context, task

REPO = Path(__file__).resolve().parents[1]

with DAG(
    dag_id="kafka_rebalance_cancel",
    description="Cancel the in-flight reassignments of a kafka_rebalance_nightly run and clear its throttles",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["kafka", "rebalance"],
    params={
        # Its own Param, not the pipeline module's: the brake parses even when that module cannot.
        "config_path": Param(os.environ.get("KAFKA_REBALANCER_CONFIG", str(REPO / "config" / "rebalancer.yaml")),
                             type="string", description="The kafka-rebalancer config file (YAML)"),
        "run_id": Param(None, type=["null", "string"], minLength=1,
                        description="The run_id of the nightly or manual run to cancel; empty: every run whose "
                                    "reassignments are in flight (else the one that executed last)"),
        "broker_pool": Param("all", type="string", description="One broker pool, or all"),
    },
) as dag:

    @task(retries=0)
    def cancel() -> dict:
        from kafka_rebalancer.airflow.tasks import cancel_task

        return cancel_task(get_current_context())

    cancel()
