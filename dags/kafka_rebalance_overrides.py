"""List or revert the pool overrides that manual operations (isolate-topics, drain-brokers, add-brokers) recorded.

Reverting changes no replica: the next run (nightly or manual) plans with the config's pools for those brokers
and topics again, and moves what that requires.
"""

from __future__ import annotations

from airflow.sdk import Param, get_current_context, task
from kafka_rebalancer_pipeline import clusters, config_param

from kafka_rebalancer.airflow.deployment import cluster_dag


@task(retries=0)
def overrides() -> list[dict]:
    from kafka_rebalancer.airflow.tasks import overrides_task

    return overrides_task(get_current_context())


for cluster in clusters():
    with cluster_dag(
        cluster, "kafka_rebalance_overrides",
        description="List or revert the pool overrides of manual operations",
        schedule=None,
        tags=("manual",),
        params={
            "action": Param("list", enum=["list", "revert"], description="list: every override; revert: one of them"),
            "override_id": Param(None, type=["null", "integer"], minimum=1,
                                 description="revert: the override's id (see the list)"),
            "config_path": config_param(cluster),
        },
    ):
        overrides()
