"""The cluster calls the pipeline (README: Automation), one DAG per cluster of a fleet: a watcher in the triggerer
looks at the cluster's metadata and raises events (a pool's broker lost past its grace period, a new broker a pool
claims); each look with events updates the asset this DAG is scheduled on. The run decides what they start (the
config's automation modes, one run per pool, the cooldown) and starts each as a run of its cluster's manual DAG.
The watcher runs only while this DAG is unpaused; DAGs start paused.
"""

from __future__ import annotations

from airflow.sdk import Asset, AssetWatcher
from kafka_rebalancer_pipeline import automation_tasks, clusters, config_param

from kafka_rebalancer.airflow.cluster_watch import ClusterWatchTrigger
from kafka_rebalancer.airflow.deployment import cluster_dag

for cluster in clusters():
    cluster_events = Asset(cluster.named("kafka_rebalancer_cluster_events"), watchers=[
        AssetWatcher(name=cluster.named("kafka_rebalancer_cluster_watch"),
                     trigger=ClusterWatchTrigger(config_path=cluster.config_path))])
    with cluster_dag(
        cluster, "kafka_rebalance_events",
        description="Brokers lost or added start the right operation, each with its approval policy",
        schedule=[cluster_events],
        max_active_runs=1,
        tags=("automation",),
        params={"config_path": config_param(cluster)},
    ):
        automation_tasks(cluster)
