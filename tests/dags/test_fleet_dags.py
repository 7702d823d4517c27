"""A fleet in one Airflow: Airflow's DagBag over dags/ with KAFKA_REBALANCER_CONFIG_DIR holding two clusters'
configs and a broken third builds each cluster's five DAGs (the cluster in the ids, its tag, schedule, config,
access control, watcher and the manual DAG its automation starts, the execute tasks in the fleet's pool), reports
the broken one naming its file and field, and breaks nothing else."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import REPO, write_config

PROBE = textwrap.dedent("""
    import json, sys
    sys.path[:0] = [{dags!r}, {plugins!r}]
    from airflow.dag_processing.dagbag import DagBag
    bag = DagBag(dag_folder={dags!r})
    def facts(dag):
        tasks = {{t.task_id: t for t in dag.tasks}}
        events = {{}}
        if "start_runs" in tasks:
            (asset,) = dag.timetable.asset_condition.objects
            events = {{"asset": asset.name, "watchers": [[w.name, *w.trigger.serialize()] for w in asset.watchers],
                      "trigger_dag_id": tasks["start_runs"].partial_kwargs["trigger_dag_id"]}}
        access = {{role: {{resource: sorted(permissions) for resource, permissions in resources.items()}}
                  for role, resources in (dag.access_control or {{}}).items()}}
        return {{"schedule": str(dag.schedule), "tags": sorted(dag.tags), "config_path": dag.params["config_path"],
                 "access_control": access,
                 "tasks": sorted(tasks), "params": sorted(dag.params),
                 "pools": {{t.task_id: t.pool for t in dag.tasks if t.task_id == "execute"}}, **events}}
    print(json.dumps({{"import_errors": {{k: str(v) for k, v in bag.import_errors.items()}},
                      "dags": {{dag_id: facts(dag) for dag_id, dag in bag.dags.items()}}}}))
""")
SETS = ("kafka_rebalance_nightly", "kafka_rebalance_manual", "kafka_rebalance_events", "kafka_rebalance_overrides",
        "kafka_rebalance_cancel")


def dagbag(tmp_path: Path, env: dict[str, str]) -> dict[str, Any]:
    home = tmp_path / "airflow-home"
    home.mkdir(exist_ok=True)
    base = {k: v for k, v in os.environ.items() if not k.startswith("KAFKA_REBALANCER_CONFIG")}
    code = PROBE.format(dags=str(REPO / "dags"), plugins=str(REPO / "plugins"))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                            env={**base, "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__LOAD_EXAMPLES": "False", **env})
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def cluster_config(name: str, **more: Any) -> dict[str, Any]:
    return {"cluster": {"name": name, "airflow_connection_id": f"kafka_{name}"},
            "pools": {"pool-a": {"brokers": [1, 2, 3]}}, "capacity": {"default": {"disk_bytes": "1TiB"}}, **more}


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("fleet")
    folder = tmp / "clusters"
    write_config(folder / "eu.yaml", cluster_config("prod-eu", schedule="30 1 * * *", access_control={
        "team-eu": {"dags": ["can_read", "can_edit"], "dag_runs": ["can_create"]}}))
    write_config(folder / "us.yaml", cluster_config("prod-us"))
    write_config(folder / "ap.yaml", cluster_config("prod-ap", execution={"max_moves_per_brokr": 3}))
    write_config(folder / "fleet.yaml", {"max_concurrent_executions": 2, "night": {"start": "03:00", "end": "05:00"}})
    (folder / "capacity.json").write_text("{}")
    return folder, dagbag(tmp, {"KAFKA_REBALANCER_CONFIG_DIR": str(folder)})


def test_fleet_dagbag_builds_each_clusters_dags(fleet: tuple[Path, dict[str, Any]]) -> None:
    folder, bag = fleet
    dags = bag["dags"]
    assert sorted(dags) == sorted(f"{base}__{cluster}" for base in SETS for cluster in ("prod-eu", "prod-us"))
    for cluster in ("prod-eu", "prod-us"):
        config = str(folder / f"{cluster.removeprefix('prod-')}.yaml")
        for base in SETS:
            dag = dags[f"{base}__{cluster}"]
            assert dag["config_path"] == config and f"cluster:{cluster}" in dag["tags"], (base, cluster)
            assert {"kafka", "rebalance"} <= set(dag["tags"])
        for runs_pipeline in ("kafka_rebalance_nightly", "kafka_rebalance_manual"):
            assert dags[f"{runs_pipeline}__{cluster}"]["pools"] == {"execute": "kafka_rebalancer_executions"}
        events = dags[f"kafka_rebalance_events__{cluster}"]
        assert events["asset"] == f"kafka_rebalancer_cluster_events__{cluster}"
        assert events["watchers"] == [[f"kafka_rebalancer_cluster_watch__{cluster}",
                                       "kafka_rebalancer.airflow.cluster_watch.ClusterWatchTrigger",
                                       {"config_path": config}]]
        assert events["trigger_dag_id"] == f"kafka_rebalance_manual__{cluster}"
        assert dags[f"kafka_rebalance_cancel__{cluster}"]["tasks"] == ["cancel"]
        assert dags[f"kafka_rebalance_overrides__{cluster}"]["tasks"] == ["overrides"]
        assert dags[f"kafka_rebalance_nightly__{cluster}"]["tasks"] == dags[f"kafka_rebalance_manual__{cluster}"][
            "tasks"] == ["approve", "execute", "plan", "report", "snapshot", "unregister", "validate", "verify"]
        assert "action" in dags[f"kafka_rebalance_manual__{cluster}"]["params"]
    # Each DAG of prod-eu's set carries its config's access control (FAB's resource names); prod-us names none.
    for base in SETS:
        assert dags[f"{base}__prod-eu"]["access_control"] == {
            "team-eu": {"DAGs": ["can_edit", "can_read"], "DAG Runs": ["can_create"]}}, base
        assert dags[f"{base}__prod-us"]["access_control"] == {}, base
    # The cluster's own schedule, else the first start time of fleet.yaml's night (prod-us alone without one).
    assert "30 1 * * *" in dags["kafka_rebalance_nightly__prod-eu"]["schedule"]
    assert "0 3 * * *" in dags["kafka_rebalance_nightly__prod-us"]["schedule"]


def test_fleet_dagbag_reports_the_broken_config_alone(fleet: tuple[Path, dict[str, Any]]) -> None:
    folder, bag = fleet
    (errors_file, error), = bag["import_errors"].items()
    assert errors_file.endswith("kafka_rebalance_fleet_errors.py")
    assert f"{folder / 'ap.yaml'}: execution.max_moves_per_brokr: unknown field" in error
    assert not any("prod-ap" in dag_id for dag_id in bag["dags"])


def test_fleet_dagbag_without_the_folder_is_todays_one_cluster(tmp_path: Path) -> None:
    config = str(tmp_path / "one.yaml")
    bag = dagbag(tmp_path, {"KAFKA_REBALANCER_CONFIG": config})
    assert bag["import_errors"] == {} and sorted(bag["dags"]) == sorted(SETS)
    assert all(dag["config_path"] == config for dag in bag["dags"].values())
    assert "0 2 * * *" in bag["dags"]["kafka_rebalance_nightly"]["schedule"]
    assert bag["dags"]["kafka_rebalance_nightly"]["pools"] == {"execute": None}  # Airflow's default pool
    assert bag["dags"]["kafka_rebalance_events"]["trigger_dag_id"] == "kafka_rebalance_manual"
    assert bag["dags"]["kafka_rebalance_events"]["asset"] == "kafka_rebalancer_cluster_events"
