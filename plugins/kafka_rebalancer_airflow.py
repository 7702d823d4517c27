"""Airflow glue for kafka-rebalancer: the Kafka connection from an Airflow connection, and the bodies of the
DAG's Python tasks (thin: each calls the library step with the run's config, folder and connection).

The Kafka connection uses the apache-kafka provider's connection type ("kafka"): its extra is a librdkafka
config, e.g. {"bootstrap.servers": "broker1:9092,broker2:9092", "security.protocol": "SASL_SSL", ...}.
"""

from __future__ import annotations

import logging
from typing import Any

from airflow.sdk import BaseHook

log = logging.getLogger(__name__)


class KafkaClusterHook(BaseHook):
    """Connection settings for one Kafka cluster, from an Airflow connection of type kafka."""

    conn_name_attr = "kafka_config_id"
    default_conn_name = "kafka_default"
    conn_type = "kafka"
    hook_name = "Kafka cluster (kafka-rebalancer)"

    def __init__(self, kafka_config_id: str = default_conn_name, request_timeout_s: float = 30.0) -> None:
        super().__init__()
        self.kafka_config_id = kafka_config_id
        self.request_timeout_s = request_timeout_s

    def get_conn(self) -> Any:
        from kafka_rebalancer.errors import KafkaUnreachableError
        from kafka_rebalancer.kafka_admin import KafkaConnection

        conn = self.get_connection(self.kafka_config_id)
        settings = dict(conn.extra_dejson)
        if "bootstrap.servers" not in settings and conn.host:
            settings["bootstrap.servers"] = f"{conn.host}:{conn.port}" if conn.port else conn.host
        if "bootstrap.servers" not in settings:
            raise KafkaUnreachableError(f"Airflow connection {self.kafka_config_id!r} has no bootstrap.servers "
                                        "in its extra (nor a host)")
        return KafkaConnection.from_settings(settings, self.request_timeout_s)


def _config(context: Any) -> Any:
    from kafka_rebalancer.config import load_config

    return load_config(context["params"]["config_path"])


def _connection(config: Any) -> Any:
    return KafkaClusterHook(config.cluster.airflow_connection_id, config.cluster.request_timeout_s).get_conn()


def dry_run_for(context: Any) -> bool:
    """mode=auto: scheduled runs execute, runs a person triggers only plan (safe default)."""
    mode = context["params"]["mode"]
    if mode == "auto":
        return str(getattr(context["dag_run"].run_type, "value", context["dag_run"].run_type)) != "scheduled"
    return mode == "dry-run"


def snapshot_task(context: Any) -> str:
    from kafka_rebalancer.run_folder import RunFolder
    from kafka_rebalancer.snapshot import take_snapshot

    config = _config(context)
    run = RunFolder(config.run_dir(context["run_id"]))
    take_snapshot(config, _connection(config), run)
    return str(run.path)


def validate_task(context: Any, run_dir: str) -> list[str]:
    """Validate the plan; returns the pools the execute task is mapped over."""
    from kafka_rebalancer.quality.suite import validate_plan
    from kafka_rebalancer.run_folder import RunFolder

    config = _config(context)
    validate_plan(config, RunFolder(run_dir))
    return sorted(config.pools)


def execute_task(context: Any, run_dir: str, broker_pool: str) -> dict[str, Any]:
    from airflow.exceptions import AirflowFailException

    from kafka_rebalancer.errors import ExecutionCancelled
    from kafka_rebalancer.execute.executor import run_execute
    from kafka_rebalancer.run_folder import RunFolder

    config = _config(context)
    params = context["params"]
    dry_run = dry_run_for(context)
    log.info("pool %s: %s (mode=%s, run type %s)", broker_pool, "dry run" if dry_run else "executing",
             params["mode"], context["dag_run"].run_type)
    try:
        result = run_execute(config, _connection(config), RunFolder(run_dir), broker_pool, dry_run=dry_run,
                             throttle_bytes_per_s=params.get("throttle_bytes_per_s"),
                             resume_cancelled=bool(params.get("resume_cancelled")))
    except ExecutionCancelled as exc:
        raise AirflowFailException(str(exc)) from exc  # no retry: a retry would undo the operator's cancel
    return {k: v for k, v in result.items() if k != "moves" or not dry_run}


def cancel_task(context: Any) -> dict[str, Any]:
    """Cancel the executions of one run (params run_id, broker_pool) and clear their throttles."""
    from kafka_rebalancer.execute.executor import run_cancel
    from kafka_rebalancer.run_folder import RunFolder

    config = _config(context)
    params = context["params"]
    run = RunFolder(config.run_dir(params["run_id"]))
    if not run.path.is_dir():
        raise FileNotFoundError(f"no run folder {run.path} for run_id {params['run_id']!r}")
    pools = sorted(config.pools) if params["broker_pool"] == "all" else [params["broker_pool"]]
    return {pool: run_cancel(config, _connection(config), run, pool) for pool in pools}


def verify_task(context: Any, run_dir: str) -> dict[str, Any]:
    from kafka_rebalancer.run_folder import RunFolder
    from kafka_rebalancer.verify import verify_run

    config = _config(context)
    summary = verify_run(config, _connection(config), RunFolder(run_dir))
    return {k: summary[k] for k in ("plan_hash", "out_of_band_before", "out_of_band_after")}
