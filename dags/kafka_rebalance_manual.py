"""Manual operations on one Kafka cluster, each planned, validated and approved before it touches the cluster.

snapshot -> plan (Spark) -> validate (great-expectations) -> approve -> execute[pool] -> verify -> unregister

The action's parameters are checked before the snapshot (a missing or wrong one fails the run, naming it). In
`dry-run` mode (the default) the run stops after the summary; its plan can later be executed with the action
`execute-reviewed`. In `execute` mode a person approves the plan at `approve` (the UI's required actions);
reject, or no answer within the config's approval.response_timeout, ends the run without touching the cluster.
Pool changes (isolating topics, draining or adding brokers) are recorded as pool overrides when approved.
Params only: the tasks are shared with the nightly DAG (plugins/kafka_rebalancer_pipeline.py).
"""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import Param
from kafka_rebalancer_pipeline import clusters, execution_params, notify_task_failed, rebalance_tasks

from kafka_rebalancer.airflow.deployment import ClusterDags, cluster_dag
from kafka_rebalancer.model.run_actions import ACTION_NAMES, MANUAL_ACTIONS, Action, taking

POOL_CHANGING_ACTIONS = ", ".join(a.name for a in MANUAL_ACTIONS if a.changes_pools)


def manual_params(cluster: ClusterDags) -> dict[str, Param]:
    return {
        "action": Param(Action.REBALANCE_POOL.value, enum=list(ACTION_NAMES),
                        description="; ".join(f"{a.name}: {a.help}" for a in MANUAL_ACTIONS)),
        "mode": Param("dry-run", enum=["dry-run", "execute"],
                      description="dry-run: plan, validate, summarise, stop; execute: a person approves, then it "
                                  "executes"),
        "broker_pool": Param(None, type=["null", "string"], pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
                             description=f"{taking('broker_pool')} (elect-leaders: optional)"),
        "brokers": Param([], type="array", items={"type": "integer", "minimum": 0}, uniqueItems=True,
                         description=f"Broker ids: {taking('brokers')} (isolate-topics: into a new pool)"),
        "topics": Param([], type="array", items={"type": "string", "minLength": 1},
                        description=f"Topic names or glob patterns such as 'payments.*': {taking('topics')} "
                                    "(elect-leaders: optional filter)"),
        "log_dirs": Param([], type="array", items={"type": "string", "pattern": r"^[0-9]+:/.+$"},
                          description=f"{taking('log_dirs')}: broker:path of each log dir to empty (the path as "
                                      "in the broker's log.dirs), e.g. 3:/data/d2"),
        "run_id": Param(None, type=["null", "string"],
                        description=f"{taking('reviewed_run_id')}: the run id of the reviewed dry run (nightly or "
                                    "manual)"),
        "unregister": Param(False, type="boolean",
                            description=f"{taking('unregister')}: once executed and verified, unregister the drained "
                                        "brokers from the KRaft controller (dead brokers holding nothing only)"),
        "replication_factor": Param(None, type=["null", "integer"], minimum=1,
                                    description=f"{taking('replication_factor')}: the topics' target replication "
                                                "factor (internal topics too: __consumer_offsets to 3)"),
        "reason": Param("", type="string",
                        description=f"Why (required for {POOL_CHANGING_ACTIONS}; recorded with the pool override)"),
        **execution_params(cluster),
    }


for cluster in clusters():
    with cluster_dag(
        cluster, "kafka_rebalance_manual",
        description="Isolate topics, drain or add brokers, rebalance a pool, move leadership, change a replication "
                    "factor: reviewed and approved",
        schedule=None,
        tags=("manual",),
        default_args={"retries": 2, "retry_delay": timedelta(minutes=1), "on_failure_callback": notify_task_failed},
        params=manual_params(cluster),
    ):
        rebalance_tasks(cluster)
