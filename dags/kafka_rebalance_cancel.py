"""Cancel a rebalance run's reassignments in flight (the operator's brake), and clear its throttles.

A DAG of its own because the nightly DAG allows one active run: a cancel must run while the nightly run is
still executing. The executor of that run sees the cancel, starts nothing more and fails without retrying.
"""

from __future__ import annotations

from pathlib import Path

from airflow.sdk import Param, get_current_context, task

from kafka_rebalancer.airflow.deployment import cluster_dag, deployed_clusters

REPO = Path(__file__).resolve().parents[1]


@task(retries=0)
def cancel() -> dict:
    from kafka_rebalancer.airflow.tasks import cancel_task

    return cancel_task(get_current_context())


# Not the pipeline module's clusters and Params: the brake parses even when that module cannot.
for cluster in deployed_clusters(REPO / "config" / "rebalancer.yaml"):
    with cluster_dag(
        cluster, "kafka_rebalance_cancel",
        description=f"Cancel the in-flight reassignments of a {cluster.named('kafka_rebalance_nightly')} or "
                    f"{cluster.named('kafka_rebalance_manual')} run and clear its throttles",
        schedule=None,
        params={
            "config_path": Param(cluster.config_path, type="string",
                                 description="The kafka-rebalancer config file (YAML)"),
            "run_id": Param(None, type=["null", "string"], minLength=1,
                            description="The run_id of the nightly or manual run to cancel; empty: every run whose "
                                        "reassignments are in flight (else the one that executed last)"),
            "broker_pool": Param("all", type="string", description="One broker pool, or all"),
        },
    ):
        cancel()
