"""One real Airflow (API server, scheduler, DAG processor, triggerer on loopback) for the whole test session, shared
by the modules that drive it through its REST API (the `airflow` fixture of tests/integration/conftest.py starts it
for the first of them). Starting one costs a database migration, four processes and the first parse of the DAGs:
once per session instead of once per module or test.

What a module or test needs of its own is set per use, never baked into the processes:
- the config: every DAG, the cluster's watcher and the runs page read KAFKA_REBALANCER_CONFIG, which names a link
  that `use` points at the test's config file (load_config resolves it, so the runs see the test's own file);
- the Kafka connection: stored in Airflow's database through the REST API (the config's connection id, the test's
  cluster), so a module on a cluster of its own (JBOD) uses the same Airflow;
- a quiet start: every DAG paused and every unfinished run ended first (a run another test left waiting must not
  read the next test's config), and the runs that were there before are the test's to leave out.
"""

from __future__ import annotations

import json
from pathlib import Path

from kafka_rebalancer.config import load_config
from tools.airflow_run import connections
from tools.airflow_services import FINISHED, AirflowServices

NIGHTLY, MANUAL, EVENTS = "kafka_rebalance_nightly", "kafka_rebalance_manual", "kafka_rebalance_events"
DAGS = (NIGHTLY, MANUAL, EVENTS)  # the ones the tests unpause
# The approval test's timeout waits for the triggerer's check of timed-out deferrals (default 15 s).
SETTINGS = {"AIRFLOW__SCHEDULER__TRIGGER_TIMEOUT_CHECK_INTERVAL": "2"}


class SharedAirflow:
    def __init__(self, root: Path, database_template: Path) -> None:
        self.config_link = root / "current-config.yaml"
        spark_only = {k: v for k, v in connections("unused", "unused").items() if k == "spark_rebalancer"}
        self.services = AirflowServices(root / "airflow", self.config_link, spark_only, settings=SETTINGS,
                                        database_template=database_template)

    def start(self) -> None:
        self.services.start()
        for dag_id in DAGS:
            self.services.wait_for_dag(dag_id)

    def stop(self) -> None:
        self.services.stop(quiet=True)

    def use(self, config_path: Path, bootstrap: str, unpaused: tuple[str, ...] = ()) -> AirflowServices:
        """The Airflow, quiet, for a test of this config on the cluster at `bootstrap`, with these DAGs unpaused
        (in this order: the manual DAG before the events DAG, whose runs start the manual one's)."""
        self.quiet()
        self.put_connection(load_config(config_path).cluster.airflow_connection_id,
                            {"conn_type": "kafka", "extra": json.dumps({"bootstrap.servers": bootstrap})})
        for dag_id in unpaused:
            self.services.set_paused(dag_id, False)
        # The config last: a watcher still running from an earlier test (a paused DAG's watcher stops only when
        # its file is parsed again) takes its first look at this test's cluster once the events DAG would get it.
        self.config_link.symlink_to(Path(config_path).resolve())
        return self.services

    def quiet(self) -> None:
        """Every DAG paused, every unfinished run failed, and no config: a watcher still running looks at nothing
        (its looks fail and it raises no event) until the next `use`."""
        for dag_id in DAGS:
            self.services.set_paused(dag_id, True)
        for dag_id in DAGS:
            for run in self.services.runs(dag_id):
                if run["state"] not in FINISHED:
                    self.services.request("PATCH", f"/api/v2/dags/{dag_id}/dagRuns/{run['dag_run_id']}",
                                          {"state": "failed"})
        self.config_link.unlink(missing_ok=True)

    def put_connection(self, connection_id: str, fields: dict[str, object]) -> None:
        self.services.put_connection(connection_id, fields)


def run_ids(services: AirflowServices, dag_id: str) -> set[str]:
    """The DAG's runs so far: a test of the shared Airflow leaves out those of the tests before it."""
    return {run["dag_run_id"] for run in services.runs(dag_id)}
