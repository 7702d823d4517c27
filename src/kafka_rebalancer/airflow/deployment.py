"""Which clusters this Airflow serves, and what each one's DAGs are called, when they run and which config they
read (README: Fleet). The DAG files build one set of DAGs per cluster from this.

Without KAFKA_REBALANCER_CONFIG_DIR: the one config of KAFKA_REBALANCER_CONFIG, today's DAG ids and schedule (the
config is not read at parse time, as before). With it: every cluster of the folder (kafka_rebalancer.fleet), the
cluster in each DAG id (`kafka_rebalance_nightly__<cluster>`), its tag, its nightly schedule, its execute tasks
in the fleet's Airflow pool, and its config's `access_control` on every DAG of its set. The configs that do not
load are raised by one DAG file of their own (kafka_rebalance_fleet_errors.py): an import error in the UI naming
each file and field, the others' DAGs load.

Light at parse time: without the folder nothing of the package's config is imported.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pendulum
from airflow.sdk import DAG

CONFIG_ENV = "KAFKA_REBALANCER_CONFIG"
CONFIG_DIR_ENV = "KAFKA_REBALANCER_CONFIG_DIR"  # = kafka_rebalancer.fleet's, not imported from it: light without
SINGLE_CLUSTER_SCHEDULE = "0 2 * * *"
START_DATE = pendulum.datetime(2026, 1, 1, tz="UTC")


@dataclass(frozen=True)
class ClusterDags:
    """One cluster's set of DAGs."""

    cluster: str | None  # None: the one config of KAFKA_REBALANCER_CONFIG (no suffix: today's DAG ids)
    config_path: str
    nightly_schedule: str
    execution_pool: str | None  # a fleet's (kafka_rebalancer.fleet.EXECUTION_POOL); None: Airflow's default pool
    # The config's `access_control` as the DAGs' (FAB roles -> resource -> permissions); None: Airflow's defaults.
    access_control: dict[str, dict[str, set[str]]] | None = None

    def named(self, base: str) -> str:
        """A DAG id, asset or watcher name of this cluster: `<base>__<cluster>` in a fleet."""
        return base if self.cluster is None else f"{base}__{self.cluster}"

    def tags(self, *tags: str) -> list[str]:
        return ["kafka", "rebalance", *tags, *([f"cluster:{self.cluster}"] if self.cluster else [])]


def cluster_of(dag_id: str) -> str | None:
    """The fleet cluster a DAG id names (`<base>__<cluster>`); None: the one config's (no suffix)."""
    return dag_id.partition("__")[2] or None


def deployed_clusters(default_config: Path, environ: Mapping[str, str] = os.environ) -> list[ClusterDags]:
    """The clusters to build DAGs for: the fleet folder's loadable ones, else the one config."""
    folder = environ.get(CONFIG_DIR_ENV)
    if not folder:
        return [ClusterDags(None, environ.get(CONFIG_ENV, str(default_config)), SINGLE_CLUSTER_SCHEDULE, None)]
    from kafka_rebalancer.access_settings import dag_access_control
    from kafka_rebalancer.errors import ConfigError
    from kafka_rebalancer.fleet import EXECUTION_POOL, load_fleet

    try:
        fleet = load_fleet(Path(folder))
    except ConfigError:
        return []  # the folder itself is wrong: kafka_rebalance_fleet_errors.py says so
    return [ClusterDags(c.name, str(c.config_file), c.schedule, EXECUTION_POOL,
                        dag_access_control(c.config.access_control)) for c in fleet.clusters]


def raise_fleet_config_errors(environ: Mapping[str, str] = os.environ) -> None:
    """kafka_rebalance_fleet_errors.py's import error: every config of the folder that does not load, if any."""
    errors = fleet_config_errors(environ)
    if errors:
        from kafka_rebalancer.errors import RebalancerError

        raise RebalancerError(f"{len(errors)} config file(s) of the fleet folder {environ[CONFIG_DIR_ENV]} do not "
                              f"load; their clusters have no DAGs until they do:\n" + "\n".join(errors))


def fleet_config_errors(environ: Mapping[str, str] = os.environ) -> list[str]:
    """Why each config of the fleet folder that does not load gets no DAGs (file, field, what was expected)."""
    folder = environ.get(CONFIG_DIR_ENV)
    if not folder:
        return []
    from kafka_rebalancer.errors import ConfigError
    from kafka_rebalancer.fleet import load_fleet

    try:
        fleet = load_fleet(Path(folder))
    except ConfigError as exc:
        return [str(exc)]
    return [str(broken.error) for broken in fleet.broken]


def cluster_dag(cluster: ClusterDags, base_id: str, *, tags: tuple[str, ...] = (), **kwargs: Any) -> DAG:
    """A DAG of the cluster's set (use as `with cluster_dag(...):`): its id, tags, start date and access control."""
    return DAG(dag_id=cluster.named(base_id), start_date=START_DATE, catchup=False, tags=cluster.tags(*tags),
               access_control=cluster.access_control, **kwargs)
