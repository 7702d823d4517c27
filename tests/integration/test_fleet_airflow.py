"""A fleet in one real Airflow (its own: the shared one serves one config), started with KAFKA_REBALANCER_CONFIG_DIR
holding two clusters' configs, a broken third and fleet.yaml. Parsing first, no Kafka: its API server creates the
execution pool at fleet.yaml's size and resizes it when fleet.yaml changes (Pools REST API), both clusters' DAGs
are listed while the broken file is the one import error, and the runs page shows every cluster of the folder at a
glance and takes its filters. Then on two real local Kafka clusters (three brokers each, started for the last
tests only): each cluster's nightly DAG, unpaused, runs its scheduled run unattended (within the default
auto-approval limits) and executes and verifies its plan on its own cluster only; each events DAG's watcher, as
the triggerer runs it, reads its own cluster's config; the runs page with both runs opened in Chromium after a
login."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kafka_rebalancer.config import safe_run_id
from kafka_rebalancer.fleet import EXECUTION_POOL
from kafka_rebalancer.kafka_admin import ClusterAdmin, KafkaConnection
from kafka_rebalancer.model.reassignment import read_reassignment
from tests.helpers import REPO, running_cluster, write_config
from tests.integration.conftest import wait_until
from tools.airflow_run import VENV_BIN, connections
from tools.airflow_services import USER, AirflowError, AirflowServices
from tools.demo_workload import TopicSpec, create_topics, produce

pytestmark = [pytest.mark.airflow]  # Kafka only for the tests marked kafka (fleet_clusters)
CLUSTERS = ("fleet-a", "fleet-b")
RUN = "cli__2026-11-29"
SETS = ("kafka_rebalance_nightly", "kafka_rebalance_manual", "kafka_rebalance_events", "kafka_rebalance_overrides",
        "kafka_rebalance_cancel")


# Each cluster's topic on two of its three brokers (a different two): its nightly plan fills the third.
TOPICS = {"fleet-a": TopicSpec("fleet-a-orders", [[1, 2], [2, 1]] * 3, [64] * 6),
          "fleet-b": TopicSpec("fleet-b-orders", [[2, 3], [3, 2]] * 3, [64] * 6)}


def cluster_config(name: str, runs: Path, **more: Any) -> dict[str, Any]:
    """The demo's settings (default approval: a scheduled run within its limits executes unattended, no window), on
    a cluster of three brokers in one pool; the DAGs take the servers from the Airflow connection."""
    body = yaml.safe_load((REPO / "config" / "demo.yaml").read_text())
    body["cluster"].update({"name": name, "airflow_connection_id": f"kafka_{name}",
                            "kafka_libs": str(REPO / ".cache" / "kafka-libs")})
    body.update({"run_root": str(runs), "metrics": {"source": "none"}, "pools": {"pool-a": {"brokers": [1, 2, 3]}},
                 "topic_pools": [{"topics": "*", "pool": "pool-a"}], "capacity": {"default": {"disk_bytes": "256MiB"}},
                 **more})
    return body


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
        yield {"services": services, "folder": folder, "runs": root / "runs"}
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


@pytest.fixture(scope="module")
def fleet_clusters(fleet_airflow: dict[str, Any]) -> Iterator[dict[str, str]]:
    """Two real clusters, each with its topic, stored as its config's Airflow connection; their bootstrap servers."""
    base = os.environ.get("KAFKA_REBALANCER_TEST_CLUSTER", "pytest")
    with running_cluster(f"{base}-air-{CLUSTERS[0]}", n_brokers=3) as first, \
            running_cluster(f"{base}-air-{CLUSTERS[1]}", n_brokers=3) as second:
        bootstrap = {}
        for name, cluster in zip(CLUSTERS, (first, second), strict=True):
            bootstrap[name] = cluster.load().bootstrap_servers
            create_topics(bootstrap[name], [TOPICS[name]])
            produce(bootstrap[name], [TOPICS[name]])
            fleet_airflow["services"].put_connection(f"kafka_{name}", {
                "conn_type": "kafka", "extra": json.dumps({"bootstrap.servers": bootstrap[name]})})
        yield bootstrap


def assignment(bootstrap: str) -> dict[tuple[str, int], list[int]]:
    with ClusterAdmin(KafkaConnection(bootstrap)) as admin:
        return {(p.topic, p.partition): p.replicas for p in admin.describe_partitions()}


def first_run(services: AirflowServices, dag_id: str) -> str:
    found: list[str] = []

    def started() -> bool:
        found[:] = [run["dag_run_id"] for run in services.runs(dag_id)]
        return bool(found)

    wait_until(started, 180, f"a run of {dag_id}", poll_s=3)
    return found[0]


@pytest.mark.kafka
def test_fleet_airflow_each_nightly_run_executes_and_verifies_on_its_own_cluster(
        fleet_airflow: dict[str, Any], fleet_clusters: dict[str, str]) -> None:
    services = fleet_airflow["services"]
    before = {name: assignment(fleet_clusters[name]) for name in CLUSTERS}
    dags = {name: f"kafka_rebalance_nightly__{name}" for name in CLUSTERS}
    for dag_id in dags.values():
        services.set_paused(dag_id, False)  # each starts its latest missed night at once, in auto mode
    try:
        runs = {name: first_run(services, dag_id) for name, dag_id in dags.items()}
        for name, dag_id in dags.items():
            state = services.wait_for_run(dag_id, runs[name], timeout_s=1500)
            assert state == "success", (name, services.task_states(dag_id, runs[name]))
    finally:
        for dag_id in dags.values():
            services.set_paused(dag_id, True)
    folders = {name: safe_run_id(run_id) for name, run_id in runs.items()}  # Airflow's ids, without ':' and '+'
    fleet_airflow["nightly_runs"] = folders
    for name, other in (CLUSTERS, CLUSTERS[::-1]):
        assert runs[name].startswith("scheduled__"), runs
        states = services.task_states(dags[name], runs[name])
        assert states["approve"] == states["execute[0]"] == states["verify"] == "success", states
        run_dir = fleet_airflow["runs"] / name / folders[name]
        assert json.loads((run_dir / "approval" / "decision.json").read_text())["state"] == "auto-approved"
        plan = read_reassignment(run_dir / "plan" / "plan.json")
        assert plan and {entry.topic for entry in plan} == {TOPICS[name].name}, plan  # its own topic only
        verify = json.loads((run_dir / "verify" / "summary.json").read_text())
        assert verify["partitions_not_at_plan"] == [], verify
        now = assignment(fleet_clusters[name])
        assert all(now[(entry.topic, entry.partition)] == entry.replicas for entry in plan)
        assert now != before[name] and (TOPICS[other].name, 0) not in now  # moved here, and nothing of the other's


# Each asset watcher as Airflow stored it (the trigger's class and arguments, decrypted) and the triggerer running it.
WATCHERS = """
import json
from airflow.models.asset import AssetWatcherModel
from airflow.utils.session import create_session
with create_session() as session:
    print(json.dumps([{"name": w.name, "asset": w.asset.name, "classpath": w.trigger.classpath,
                       "kwargs": w.trigger.kwargs, "triggerer": w.trigger.triggerer_id}
                      for w in session.query(AssetWatcherModel)], default=str))
"""


def stored_watchers(services: AirflowServices) -> list[dict[str, Any]]:
    result = subprocess.run([str(VENV_BIN / "python"), "-c", WATCHERS], env=services.env, cwd=REPO,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.kafka
def test_fleet_airflow_each_events_dag_watches_only_its_own_cluster(
        fleet_airflow: dict[str, Any], fleet_clusters: dict[str, str]) -> None:
    services, folder = fleet_airflow["services"], fleet_airflow["folder"]
    dags = [f"kafka_rebalance_events__{name}" for name in CLUSTERS]
    for dag_id in dags:
        services.set_paused(dag_id, False)  # a paused DAG's watcher does not run
    watchers: list[dict[str, Any]] = []

    def running() -> bool:
        watchers[:] = stored_watchers(services)
        return len(watchers) == 2 and all(w["triggerer"] is not None for w in watchers)

    try:
        wait_until(running, 240, "both clusters' watchers running in the triggerer", poll_s=5)
        for name in CLUSTERS:  # each took a look: its state file beside its own cluster's runs
            wait_until((fleet_airflow["runs"] / name / ".automation" / "watch_state.json").is_file, 90,
                       f"{name}'s watch state")
    finally:
        for dag_id in dags:
            services.set_paused(dag_id, True)
    assert {w["name"]: (w["asset"], w["classpath"], Path(w["kwargs"]["config_path"]).resolve()) for w in watchers} == {
        f"kafka_rebalancer_cluster_watch__{name}": (
            f"kafka_rebalancer_cluster_events__{name}", "kafka_rebalancer.airflow.cluster_watch.ClusterWatchTrigger",
            (folder / f"{name}.yaml").resolve()) for name in CLUSTERS}, watchers


@pytest.mark.browser
@pytest.mark.kafka
def test_fleet_airflow_runs_page_shows_both_clusters_runs_in_a_browser_after_a_login(
        fleet_airflow: dict[str, Any], fleet_clusters: dict[str, str]) -> None:
    from tests.browser import open_airflow_link_logged_in

    services = fleet_airflow["services"]
    runs = fleet_airflow.get("nightly_runs")
    if not runs:
        pytest.skip("needs the nightly runs of test_fleet_airflow_each_nightly_run_executes_and_verifies_...")
    password = json.loads(services.password_file.read_text())[USER]
    page = f"{services.url}/kafka-rebalancer/"
    shown = open_airflow_link_logged_in(f"{services.url}/auth/login?next={page}", USER, password,
                                        ["fleet-a", "fleet-b", *runs.values()], "fleet-runs-page")
    assert shown["url"] == page and shown["errors"] == [], shown
    rows = {line.split("\t")[0]: line for line in shown["text"].splitlines() if "\t" in line}  # a table's cells
    for name in CLUSTERS:  # the glance: each cluster's latest run, verified, inside its bands
        assert runs[name] in rows[name] and "\tverified\t0 out of band" in rows[name], shown["text"][:3000]
