"""DAG integrity: the DAG folder imports cleanly, the nightly and manual DAGs have their schedule, tags, retries,
Params and the one shared wiring (with the approval step), and importing them loads none of the heavy libraries
(they are imported inside the tasks)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from kafka_rebalancer.model.run_actions import ACTION_NAMES
from tests.helpers import REPO

PROBE = textwrap.dedent("""
    import json, sys
    sys.path[:0] = [{dags!r}, {plugins!r}]
    import kafka_rebalance_nightly, kafka_rebalance_manual, kafka_rebalance_events
    heavy = [n for n in ("pyspark", "pandas", "numpy", "great_expectations", "confluent_kafka", "kafka", "pyarrow")
             if n in sys.modules]
    # The light modules of the package a DAG reads at parse time: the plan job's Spark settings, the manual actions,
    # the approval operator.
    light = ("kafka_rebalancer.spark_settings", "kafka_rebalancer.model", "kafka_rebalancer.model.run_actions",
             "kafka_rebalancer.airflow", "kafka_rebalancer.airflow.operators",
             "kafka_rebalancer.airflow.cluster_watch", "kafka_rebalancer.airflow.deployment")
    heavy += [n for n in sys.modules if n.startswith("kafka_rebalancer.") and n not in light]
    from airflow.dag_processing.dagbag import DagBag
    bag = DagBag(dag_folder={dags!r})
    dag = bag.dags["kafka_rebalance_nightly"]
    def tasks_of(dag):
        return {{t.task_id: {{"type": type(t).__name__, "bases": [c.__name__ for c in type(t).__mro__],
                             "retries": t.retries, "downstream": sorted(t.downstream_task_ids),
                             "map_index_template": getattr(t, "map_index_template", None),
                             "conn_id": getattr(t, "_conn_id", None),
                             "trigger_rule": getattr(t.trigger_rule, "value", t.trigger_rule),
                             "spark_conf": getattr(t, "conf", None)}} for t in dag.tasks}}
    tasks = tasks_of(dag)
    manual = bag.dags["kafka_rebalance_manual"]
    def events_facts(events):
        assets = list(events.timetable.asset_condition.objects)
        return {{"assets": [{{"name": a.name, "watchers": [[w.name, *w.trigger.serialize()] for w in a.watchers]}}
                           for a in assets],
                 "max_active_runs": events.max_active_runs, "tags": sorted(events.tags),
                 "tasks": {{t.task_id: {{"type": type(t).__name__, "retries": t.retries,
                                        "downstream": sorted(t.downstream_task_ids),
                                        "trigger_dag_id": getattr(t, "partial_kwargs", {{}}).get("trigger_dag_id")}}
                           for t in events.tasks}}}}
    from kafka_rebalancer.airflow.hooks import KafkaClusterHook
    from kafka_rebalancer.airflow.tasks import dry_run_for
    connection = KafkaClusterHook("kafka_probe").get_conn()
    class Run:
        def __init__(self, run_type): self.run_type = run_type
    modes = {{f"{{mode}}/{{kind}}": dry_run_for({{"params": {{"mode": mode}}, "dag_run": Run(kind)}})
             for mode in ("auto", "dry-run", "execute") for kind in ("scheduled", "manual")}}
    print(json.dumps({{
        "heavy": heavy, "import_errors": {{k: str(v) for k, v in bag.import_errors.items()}},
        "dag_ids": sorted(bag.dags), "schedule": str(dag.schedule), "catchup": dag.catchup,
        "max_active_runs": dag.max_active_runs, "tags": sorted(dag.tags), "tasks": tasks,
        "params": {{k: dag.params[k] for k in dag.params}},
        "cancel": {{"schedule": str(bag.dags["kafka_rebalance_cancel"].schedule),
                    "params": sorted(bag.dags["kafka_rebalance_cancel"].params),
                    "tasks": {{t.task_id: t.retries for t in bag.dags["kafka_rebalance_cancel"].tasks}}}},
        "manual": {{"schedule": str(manual.schedule), "tasks": tasks_of(manual), "tags": sorted(manual.tags),
                    "params": {{k: {{**manual.params.get_param(k).schema,
                                   "description": manual.params.get_param(k).description}} for k in manual.params}},
                    "defaults": {{k: manual.params[k] for k in manual.params}}}},
        "connection": [connection.bootstrap_servers, dict(connection.client_config)], "modes": modes,
        "events": events_facts(bag.dags["kafka_rebalance_events"])}}))
""")


@pytest.fixture(scope="module")
def facts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    home = tmp_path_factory.mktemp("airflow-home")
    env = {**os.environ, "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
           "AIRFLOW_CONN_KAFKA_PROBE": json.dumps({"conn_type": "kafka", "extra": {
               "bootstrap.servers": "k1:9092,k2:9092", "security.protocol": "SASL_SSL"}})}
    code = PROBE.format(dags=str(REPO / "dags"), plugins=str(REPO / "plugins"))
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_dag_folder_imports_cleanly(facts: dict) -> None:
    assert facts["import_errors"] == {}
    assert facts["dag_ids"] == ["kafka_rebalance_cancel", "kafka_rebalance_events", "kafka_rebalance_manual",
                                "kafka_rebalance_nightly", "kafka_rebalance_overrides"]


def test_no_heavy_imports_at_the_top_of_dag_files(facts: dict) -> None:
    assert facts["heavy"] == []
    for dag_file in (REPO / "dags").glob("*.py"):
        top = [line for line in dag_file.read_text().splitlines() if line.startswith(("import ", "from "))]
        # The shared wiring (plugins/kafka_rebalancer_pipeline.py) and the table of manual actions are checked by
        # the probe: no heavy imports.
        top = [line for line in top if not line.startswith(("from kafka_rebalancer_pipeline import ",
                                                            "from kafka_rebalancer.model.run_actions import ",
                                                            "from kafka_rebalancer.airflow.cluster_watch import ",
                                                            "from kafka_rebalancer.airflow.deployment import "))]
        assert not any(name in line for line in top for name in ("pyspark", "pandas", "great_expectations",
                                                                  "kafka_rebalancer", "confluent_kafka"))


def test_schedule_catchup_concurrency_tags(facts: dict) -> None:
    assert "0 2 * * *" in facts["schedule"]
    assert facts["catchup"] is False and facts["max_active_runs"] == 1
    assert {"kafka", "rebalance"} <= set(facts["tags"])
    assert facts["params"]["mode"] == "auto"
    assert facts["params"]["throttle_bytes_per_s"] is None and facts["params"]["resume_cancelled"] is False


def test_cancel_dag_is_manual_only_and_never_retries(facts: dict) -> None:
    assert facts["cancel"] == {"schedule": "None", "params": ["broker_pool", "config_path", "run_id"],
                               "tasks": {"cancel": 0}}


def test_tasks_wiring_and_retries(facts: dict) -> None:
    tasks = facts["tasks"]
    assert set(tasks) == {"snapshot", "plan", "validate", "approve", "execute", "verify", "unregister", "report"}
    assert tasks["plan"]["type"] == "SparkSubmitOperator" and tasks["plan"]["conn_id"] == "spark_rebalancer"
    assert tasks["snapshot"]["downstream"] == ["execute", "plan", "unregister", "validate", "verify"]
    assert tasks["plan"]["downstream"] == ["validate"]
    assert tasks["validate"]["downstream"] == ["approve", "execute"]
    assert tasks["approve"]["downstream"] == ["execute"] and tasks["execute"]["downstream"] == ["verify"]
    # The report runs last whatever happened upstream (a failed, rejected or dry run is reported too).
    # A verified drain that asked for it unregisters its brokers (a no-op for any other run).
    assert tasks["verify"]["downstream"] == ["unregister"] and tasks["unregister"]["downstream"] == ["report"]
    assert tasks["report"]["downstream"] == []
    assert tasks["report"]["trigger_rule"] == "all_done" and tasks["report"]["retries"] == 0
    assert "ApprovalOperator" in tasks["approve"]["bases"] and tasks["approve"]["retries"] == 0
    assert tasks["execute"]["map_index_template"] == "{{ broker_pool }}"
    for idempotent in ("snapshot", "plan", "execute", "verify", "unregister"):
        assert tasks[idempotent]["retries"] >= 1, idempotent
    assert tasks["validate"]["retries"] == 0  # deterministic: a retry cannot pass a failed expectation


def test_manual_dag_shares_the_wiring_and_validates_its_params(facts: dict) -> None:
    manual = facts["manual"]
    assert manual["schedule"] == "None" and "manual" in manual["tags"]
    strip = ("spark_conf",)
    assert {k: {f: v for f, v in t.items() if f not in strip} for k, t in manual["tasks"].items()} == \
        {k: {f: v for f, v in t.items() if f not in strip} for k, t in facts["tasks"].items()}
    params, defaults = manual["params"], manual["defaults"]
    assert defaults["mode"] == "dry-run"  # safe default: a person's trigger only plans
    assert params["action"]["enum"] == list(ACTION_NAMES)
    assert params["brokers"]["items"]["type"] == "integer" and params["topics"]["type"] == "array"
    assert params["throttle_bytes_per_s"]["minimum"] == 1
    assert params["unregister"]["type"] == "boolean" and defaults["unregister"] is False
    for name in ("action", "mode", "broker_pool", "brokers", "topics", "run_id", "reason", "unregister",
                 "replication_factor"):
        assert params[name].get("description"), name


def test_manual_dag_takes_a_replication_factor(facts: dict) -> None:
    """change-replication-factor's target: a whole number of at least 1, empty for every other action."""
    params, defaults = facts["manual"]["params"], facts["manual"]["defaults"]
    assert "change-replication-factor" in params["action"]["enum"]
    assert params["replication_factor"]["type"] == ["null", "integer"] and params["replication_factor"]["minimum"] == 1
    assert defaults["replication_factor"] is None
    assert "change-replication-factor" in params["replication_factor"]["description"]


def test_the_events_dag_is_scheduled_on_the_cluster_watchers_asset_and_starts_manual_runs(facts: dict) -> None:
    events = facts["events"]
    (asset,) = events["assets"]
    (watcher, classpath, kwargs), = asset["watchers"]
    assert watcher == "kafka_rebalancer_cluster_watch" and asset["name"] == "kafka_rebalancer_cluster_events"
    assert classpath == "kafka_rebalancer.airflow.cluster_watch.ClusterWatchTrigger"
    assert set(kwargs) == {"config_path"}  # the cluster comes from the config's Airflow connection id at each look
    assert events["max_active_runs"] == 1 and "automation" in events["tags"]
    assert events["tasks"]["decide"]["downstream"] == ["start_runs"] and events["tasks"]["decide"]["retries"] == 0
    assert events["tasks"]["start_runs"]["trigger_dag_id"] == "kafka_rebalance_manual"


def test_manual_runs_are_dry_runs_unless_asked(facts: dict) -> None:
    assert facts["modes"] == {"auto/scheduled": False, "auto/manual": True, "dry-run/scheduled": True,
                              "dry-run/manual": True, "execute/scheduled": False, "execute/manual": False}


def test_kafka_connection_from_an_airflow_connection(facts: dict) -> None:
    assert facts["connection"] == ["k1:9092,k2:9092", {"security.protocol": "SASL_SSL"}]


def test_plan_task_runs_with_the_plan_jobs_spark_settings(facts: dict) -> None:
    from kafka_rebalancer.spark_settings import PLAN_JVM_OPTIONS, plan_spark_conf

    conf = facts["tasks"]["plan"]["spark_conf"]
    for key, value in plan_spark_conf().items():
        assert PLAN_JVM_OPTIONS in conf[key] if key.endswith("extraJavaOptions") else conf[key] == value
    assert "-Dlog4j2.configurationFile=" in conf["spark.driver.extraJavaOptions"]


def test_plan_job_file_exists_where_the_dag_points() -> None:
    assert (REPO / "spark" / "jobs" / "plan_job.py").is_file()
    assert Path(REPO / "spark" / "conf" / "log4j2.properties").is_file()
