"""A fleet in one real Airflow (its own: the shared one serves one config), parsing only, no DAG runs: started
with KAFKA_REBALANCER_CONFIG_DIR holding two clusters' configs, a broken third and fleet.yaml, its API server
creates the execution pool at fleet.yaml's size and resizes it when fleet.yaml changes (Pools REST API), and both
clusters' DAGs are listed while the broken file is the one import error; the runs page shows every cluster of the
folder at a glance and takes its filters."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafka_rebalancer.fleet import EXECUTION_POOL
from tests.helpers import write_config
from tests.integration.conftest import wait_until
from tools.airflow_run import connections
from tools.airflow_services import AirflowError, AirflowServices

pytestmark = [pytest.mark.airflow]  # no Kafka cluster: the DAGs only parse
CLUSTERS = ("fleet-a", "fleet-b")
RUN = "cli__2026-11-29"
SETS = ("kafka_rebalance_nightly", "kafka_rebalance_manual", "kafka_rebalance_events", "kafka_rebalance_overrides",
        "kafka_rebalance_cancel")


def cluster_config(name: str, runs: Path, **more: Any) -> dict[str, Any]:
    return {"cluster": {"name": name, "airflow_connection_id": f"kafka_{name}"}, "run_root": str(runs),
            "pools": {"pool-a": {"brokers": [1, 2, 3]}}, "capacity": {"default": {"disk_bytes": "1TiB"}}, **more}


@pytest.fixture(scope="module")
def fleet_airflow(airflow_database: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("fleet-airflow")
    folder = root / "clusters"
    for name in CLUSTERS:
        write_config(folder / f"{name}.yaml", cluster_config(name, root / "runs"))
    write_config(folder / "broken.yaml", cluster_config("fleet-c", root / "runs", default_pool="nope"))
    write_config(folder / "fleet.yaml", {"max_concurrent_executions": 2})
    manifest = root / "runs" / "fleet-a" / RUN / "snapshot" / "manifest.json"  # a run of fleet-a, its snapshot taken
    manifest.parent.mkdir(parents=True)
    manifest.write_text('{"taken_at": "2026-11-29T01:00:00+00:00"}')
    spark_only = {k: v for k, v in connections("unused", "unused").items() if k == "spark_rebalancer"}
    services = AirflowServices(root / "airflow", folder / "fleet-a.yaml", spark_only,
                               database_template=airflow_database, settings={"KAFKA_REBALANCER_CONFIG_DIR": str(folder),
                                         "KAFKA_REBALANCER_POOL_SYNC_S": "2"})
    try:
        services.start()
        yield {"services": services, "folder": folder}
    finally:
        services.stop(quiet=True)


def pool_slots(services: AirflowServices) -> int | None:
    try:
        return services.request("GET", f"/api/v2/pools/{EXECUTION_POOL}")["slots"]
    except AirflowError as exc:
        if "HTTP 404" in str(exc):
            return None
        raise


def test_fleet_airflow_api_server_creates_and_resizes_the_execution_pool(fleet_airflow: dict[str, Any]) -> None:
    services = fleet_airflow["services"]
    # Nobody ran `airflow pools set`: the API server made it, at fleet.yaml's size.
    wait_until(lambda: pool_slots(services) == 2, 60, f"the pool {EXECUTION_POOL} with 2 slots")
    write_config(fleet_airflow["folder"] / "fleet.yaml", {"max_concurrent_executions": 3})
    wait_until(lambda: pool_slots(services) == 3, 60, "the pool resized to 3 slots after fleet.yaml changed")
    pool = services.request("GET", f"/api/v2/pools/{EXECUTION_POOL}")
    assert "max_concurrent_executions" in pool["description"] and pool["include_deferred"] is False


def test_fleet_airflow_parses_both_clusters_dags_and_reports_the_broken_config(
        fleet_airflow: dict[str, Any]) -> None:
    services = fleet_airflow["services"]
    wanted = {f"{base}__{name}" for base in SETS for name in CLUSTERS}

    def listed() -> set[str]:
        return {d["dag_id"] for d in services.request("GET", "/api/v2/dags?limit=100")["dags"]}

    wait_until(lambda: wanted <= listed(), 240, f"the DAGs {sorted(wanted)}", poll_s=3)
    assert {d for d in listed() if d.startswith("kafka_rebalance")} == wanted  # no fleet-c, no single-config ids
    tagged = services.request("GET", "/api/v2/dags?tags=cluster:fleet-b&limit=100")["dags"]
    assert {d["dag_id"] for d in tagged} == {f"{base}__fleet-b" for base in SETS}
    errors = services.request("GET", "/api/v2/importErrors")["import_errors"]
    (error,) = errors
    assert error["filename"].endswith("kafka_rebalance_fleet_errors.py")
    assert f"{fleet_airflow['folder'] / 'broken.yaml'}: default_pool" in error["stack_trace"]


def test_fleet_airflow_runs_page_shows_every_cluster_and_filters(fleet_airflow: dict[str, Any]) -> None:
    services = fleet_airflow["services"]
    page = services.request_text("GET", "/kafka-rebalancer/?cluster=fleet-b")
    glance = page.split("<h2>clusters</h2>", 1)[1].split("</table>", 1)[0]
    assert '?cluster=fleet-a">fleet-a</a>' in glance and RUN in glance and "no run yet" in glance  # fleet-b's
    assert "Left out, its config does not load" in page and "broken.yaml: default_pool" in page
    assert "No run matches the filter." in page  # fleet-b has none
    assert "<h2>cluster fleet-a</h2>" in services.request_text("GET", "/kafka-rebalancer/?trigger=cli")
