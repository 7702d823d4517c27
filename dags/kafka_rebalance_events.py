"""The cluster calls the pipeline (README: Automation): a watcher in the triggerer looks at the cluster's metadata
and raises events (a pool's broker lost past its grace period, a new broker a pool claims); each look with events
updates the asset this DAG is scheduled on. The run decides what they start (the config's automation modes, one
run per pool, the cooldown) and starts each as a run of the manual DAG. The watcher runs only while this DAG is
unpaused; DAGs start paused.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG, Asset, AssetWatcher
from kafka_rebalancer_pipeline import DEFAULT_CONFIG, automation_tasks, config_param

from kafka_rebalancer.airflow.cluster_watch import ClusterWatchTrigger

cluster_events = Asset("kafka_rebalancer_cluster_events", watchers=[
    AssetWatcher(name="kafka_rebalancer_cluster_watch", trigger=ClusterWatchTrigger(config_path=DEFAULT_CONFIG))])

with DAG(
    dag_id="kafka_rebalance_events",
    description="Brokers lost or added start the right operation, each with its approval policy",
    schedule=[cluster_events],
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    tags=["kafka", "rebalance", "automation"],
    params={"config_path": config_param()},
) as dag:
    automation_tasks()
