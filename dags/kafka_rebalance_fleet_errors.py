"""The configs of the fleet folder (KAFKA_REBALANCER_CONFIG_DIR) that do not load, as this file's import error in
the Airflow UI: each file, field and what was expected. Their clusters have no DAGs until they load; every other
cluster's DAGs are built by the other DAG files as usual (README: Fleet). No DAG of its own."""

from __future__ import annotations

from kafka_rebalancer.airflow.deployment import raise_fleet_config_errors

raise_fleet_config_errors()
