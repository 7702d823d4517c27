"""A secured cluster (SASL/SCRAM-SHA-512 only, KRaft StandardAuthorizer, nothing allowed without an ACL): the
pipeline runs end to end as a user holding exactly the ACLs the README lists; a user missing one is refused
before anything changes; a snapshot without DESCRIBE on the cluster is a clear error; the Airflow connection's
extra carries the SASL settings to the library; and the password shows up in no file, output or command line.
The tests run in file order on the module's own cluster."""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kafka_rebalancer.kafka_admin import ClusterAdmin, KafkaConnection
from kafka_rebalancer.model.reassignment import read_reassignment
from tests.helpers import REPO, running_cluster, write_config
from tests.integration.conftest import reassign_by_hand, wait_until

pytestmark = [pytest.mark.kafka]
TOPIC = "orders"
ASSIGNMENT = [[1, 2] if p % 2 else [2, 1] for p in range(6)]  # broker 3 holds nothing
SIZES_KIB = [1024, 768, 512, 512, 256, 256]
# The README's ACLs for a config without sampled metrics: (resource type, name, operation), nothing more.
PRODUCT_ACLS = [("BROKER", "kafka-cluster", "DESCRIBE"), ("BROKER", "kafka-cluster", "ALTER"),
                ("BROKER", "kafka-cluster", "ALTER_CONFIGS"), ("TOPIC", "*", "DESCRIBE"),
                ("TOPIC", "*", "ALTER_CONFIGS")]
USERS = {
    "rebalancer": PRODUCT_ACLS,
    "rebalancer-noalter": [acl for acl in PRODUCT_ACLS if acl != ("BROKER", "kafka-cluster", "ALTER")],
    # ALTER on the cluster implies DESCRIBE on it, so a user without DESCRIBE there has neither.
    "rebalancer-nodescribe": [("TOPIC", "*", "DESCRIBE")],
}


def _grant(admin: Any, user: str, acls: list[tuple[str, str, str]]) -> None:
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

    bindings = [AclBinding(ResourceType[kind], name, ResourcePatternType.LITERAL, f"User:{user}", "*",
                           AclOperation[operation], AclPermissionType.ALLOW) for kind, name, operation in acls]
    for future in admin.create_acls(bindings).values():
        future.result()


def _create_and_fill_topic(admin_config: dict[str, str]) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(admin_config)
    for future in admin.create_topics([NewTopic(TOPIC, num_partitions=len(ASSIGNMENT),
                                                replica_assignment=ASSIGNMENT)]).values():
        future.result()

    def led() -> bool:
        partitions = admin.list_topics(timeout=10).topics.get(TOPIC)
        return partitions is not None and all(p.leader >= 0 for p in partitions.partitions.values())

    wait_until(led, 120, f"a leader for every partition of {TOPIC}", poll_s=0.2)
    producer = Producer({**admin_config, "acks": "all", "linger.ms": 5, "log_level": 3})
    for partition, kib in enumerate(SIZES_KIB):
        for _ in range(kib):
            producer.produce(TOPIC, os.urandom(1024), partition=partition)
            producer.poll(0)
    assert producer.flush(120) == 0


def _wait_for_acls(connection: KafkaConnection, expected: set[str]) -> None:
    """Each broker applies new ACLs from the metadata log on its own; wait until the cluster grants them."""
    with ClusterAdmin(connection) as admin:
        wait_until(lambda: expected <= (admin.authorized_operations([])[0] or set()), 120,
                   f"the cluster to grant {sorted(expected)} to {connection.client_config.get('sasl.username')}")


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    from confluent_kafka.admin import AdminClient

    with running_cluster("pytest-secured", n_brokers=3, secured=True) as cluster:
        admin_config = cluster.admin_config()
        bootstrap = admin_config["bootstrap.servers"]
        _create_and_fill_topic(admin_config)
        passwords = {user: secrets.token_urlsafe(18) for user in USERS}
        admin = AdminClient(admin_config)
        for user, acls in USERS.items():
            cluster.add_user(user, passwords[user])
            _grant(admin, user, acls)
        _wait_for_acls(KafkaConnection(bootstrap, {"security.protocol": "SASL_PLAINTEXT",
                                                   "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "rebalancer",
                                                   "sasl.password": passwords["rebalancer"]}),
                       {"DESCRIBE", "ALTER", "ALTER_CONFIGS"})
        root = tmp_path_factory.mktemp("secured")
        body = {
            "cluster": {"name": "secured", "bootstrap_servers": bootstrap,
                        # The secrets come from the environment, never from the file.
                        "client_config": {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
                                          "sasl.username": "${REBALANCER_KAFKA_USER}",
                                          "sasl.password": "${REBALANCER_KAFKA_PASSWORD}"}},
            "pools": {"pool-a": {"brokers": [1, 2, 3]}},
            "topic_pools": [{"topics": "orders*", "pool": "pool-a"}],
            "capacity": {"default": {"disk_bytes": "256MiB"}},
            "resources": {"disk": {"threshold": 1.10}, "replica_count": {"threshold": 1.10}},
            "priority": ["disk", "replica_count"],
            "execution": {"max_moves_per_broker": 5, "poll_interval_s": 1, "move_timeout_s": 300},
            "run_root": str(root / "runs"),
        }
        yield {"cluster": cluster, "bootstrap": bootstrap, "root": root, "passwords": passwords,
               "config_path": write_config(root / "config.yaml", body),
               "admin": KafkaConnection.from_settings(admin_config), "cmdline_leaks": [], "outputs": 0}


def _cmdlines_holding(needles: list[bytes]) -> list[str]:
    """The processes (pid and program, not the secret) whose command line contains one of the needles."""
    hits = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            raw = cmdline.read_bytes()
        except OSError:  # the process has ended
            continue
        if any(n in raw for n in needles):
            program = raw.split(b"\0", 1)[0].decode(errors="replace")
            hits.append(f"pid {cmdline.parent.name}: {program}")
    return hits


def cli(env: dict[str, Any], user: str, step: str, *args: str, expect: int = 0, debug: bool = False) -> tuple[str, str]:
    """Run a CLI step as `user` (password in the environment), watching every command line while it runs; its
    output is kept under the module's root, so the final test greps it with everything else. `debug`: with the
    libraries' debug logs too (kafka-python logs its configuration)."""
    env["outputs"] += 1
    out_path = env["root"] / "outputs" / f"{env['outputs']:02d}-{step}.out"
    err_path = out_path.with_suffix(".err")
    out_path.parent.mkdir(exist_ok=True)
    cmd = [str(Path(sys.executable).parent / "kafka-rebalancer"), *(["-v"] if debug else []), step,
           "--config", str(env["config_path"]), *args]
    proc_env = {**os.environ, "REBALANCER_KAFKA_USER": user, "REBALANCER_KAFKA_PASSWORD": env["passwords"][user],
                "KAFKA_REBALANCER_DEBUG_LOGS": "1" if debug else "0"}
    needles = [p.encode() for p in env["passwords"].values()]
    with out_path.open("w") as out, err_path.open("w") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=proc_env, cwd=env["root"])
        deadline = time.monotonic() + 900
        while proc.poll() is None and time.monotonic() < deadline:
            env["cmdline_leaks"] += _cmdlines_holding(needles)
            time.sleep(0.1)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    stdout, stderr = out_path.read_text(), err_path.read_text()
    assert proc.returncode == expect, f"{step} as {user}: exit {proc.returncode}\n{stdout[-3000:]}\n{stderr[-3000:]}"
    return stdout, stderr


def _assignment(env: dict[str, Any]) -> dict[tuple[str, int], list[int]]:
    with ClusterAdmin(env["admin"]) as admin:
        return {(p.topic, p.partition): p.replicas for p in admin.describe_partitions([TOPIC])}


def _assert_untouched(env: dict[str, Any]) -> None:
    """No reassignment in flight, no replication throttle on any broker nor on the topic (read as admin)."""
    with ClusterAdmin(env["admin"]) as admin:
        assert admin.list_reassignments() == {}
        assert admin.throttle_configs([1, 2, 3], [TOPIC]) == {}


def test_the_airflow_connection_extra_carries_the_sasl_settings(secured: dict[str, Any], tmp_path: Path) -> None:
    """The DAG's tasks build their connection with the plugin's hook from the Airflow connection (type kafka,
    extra = librdkafka config); with SASL settings in the extra, the library logs in and reads the cluster."""
    code = textwrap.dedent(f"""
        import json, sys
        sys.path[:0] = [{str(REPO / "plugins")!r}]
        from kafka_rebalancer.airflow.hooks import KafkaClusterHook
        from kafka_rebalancer.kafka_admin import ClusterAdmin
        connection = KafkaClusterHook("kafka_secured", 20).get_conn()
        with ClusterAdmin(connection) as admin:
            partitions = admin.describe_partitions([{TOPIC!r}])
        print(json.dumps({{"keys": sorted(connection.client_config), "repr": repr(connection),
                          "kafka_python": sorted(connection.kafka_python_config()), "partitions": len(partitions)}}))
    """)
    extra = {"bootstrap.servers": secured["bootstrap"], "security.protocol": "SASL_PLAINTEXT",
             "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "rebalancer",
             "sasl.password": secured["passwords"]["rebalancer"]}
    proc_env = {**os.environ, "AIRFLOW_HOME": str(tmp_path), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "AIRFLOW_CONN_KAFKA_SECURED": json.dumps({"conn_type": "kafka", "extra": extra})}
    result = subprocess.run([sys.executable, "-c", code], env=proc_env, capture_output=True, text=True, timeout=300,
                            cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    facts = json.loads(result.stdout.strip().splitlines()[-1])
    assert facts["keys"] == ["sasl.mechanism", "sasl.password", "sasl.username", "security.protocol"]
    assert {"sasl_mechanism", "sasl_plain_username", "sasl_plain_password", "security_protocol"} \
        <= set(facts["kafka_python"])
    assert facts["partitions"] == len(ASSIGNMENT)
    assert extra["sasl.password"] not in result.stdout + result.stderr
    assert "client_config" not in facts["repr"]


def test_a_snapshot_without_describe_on_the_cluster_is_a_clear_error(secured: dict[str, Any]) -> None:
    _, stderr = cli(secured, "rebalancer-nodescribe", "snapshot", "--run-id", "nodescribe", expect=2)
    assert "error: Kafka user 'rebalancer-nodescribe' lacks DESCRIBE on the cluster" in stderr, stderr
    assert "--operation Describe --cluster" in stderr and "Traceback" not in stderr


@pytest.fixture(scope="module")
def planned(secured: dict[str, Any]) -> Path:
    """A validated plan for the skewed topic (run "full"), made as the least-privileged user."""
    cli(secured, "rebalancer", "snapshot", "--run-id", "full", debug=True)
    for step in ("plan", "validate"):
        cli(secured, "rebalancer", step, "--run-id", "full")
    return secured["root"] / "runs" / "secured" / "full"


def test_a_missing_acl_is_refused_before_anything_changes(secured: dict[str, Any], planned: Path) -> None:
    before = _assignment(secured)
    _, stderr = cli(secured, "rebalancer-noalter", "execute", "--run-id", "full", "--apply", expect=2)
    assert "refusing to execute pool-a, nothing on the cluster was changed: Kafka user 'rebalancer-noalter' lacks " \
           "ALTER on the cluster (needed to start reassignments and elect preferred leaders)" in stderr, stderr
    assert "--allow-principal User:rebalancer-noalter --operation Alter --cluster" in stderr
    assert "Traceback" not in stderr
    _assert_untouched(secured)
    assert _assignment(secured) == before
    assert not (planned / "execute" / "pool-a" / "execution_log.jsonl").exists()


def test_the_pipeline_runs_with_exactly_the_documented_acls(secured: dict[str, Any], planned: Path) -> None:
    plan = read_reassignment(planned / "plan" / "plan.json")
    assert plan, "the skewed topic should need moves"
    stdout, stderr = cli(secured, "rebalancer", "execute", "--run-id", "full", "--apply", debug=True)
    assert f"pool-a: {len(plan)}/{len(plan)} moves complete, 0 skipped" in stdout, stdout
    assert "'sasl_plain_password': '[redacted]'" in stderr  # kafka-python's debug line of its configuration
    after = _assignment(secured)
    assert all(after[(e.topic, e.partition)] == e.replicas for e in plan)
    assert any(3 in replicas for replicas in after.values())
    _assert_untouched(secured)  # done, throttles cleared
    stdout, _ = cli(secured, "rebalancer", "verify", "--run-id", "full")
    assert "out of band:" in stdout


def test_the_nightly_dag_runs_as_the_least_privileged_user_through_the_connection_extra(
        secured: dict[str, Any], airflow_database: Path) -> None:
    """The same pipeline from Airflow (dag.test): the credentials only in the Kafka connection's extra (an
    environment connection), the config holding none; Airflow's database, logs and the run folder are under the
    module's root, so the password test below searches them too."""
    from tools.airflow_run import airflow_env, connections, ensure_database, run_dag

    # Skew the topic again, as admin.
    reassign_by_hand(secured["admin"], {(TOPIC, p): replicas for p, replicas in enumerate(ASSIGNMENT)})
    root = secured["root"]
    body = yaml.safe_load(Path(secured["config_path"]).read_text())
    body["cluster"] = {"name": "secured", "airflow_connection_id": "kafka_secured"}  # no client_config at all
    config_path = write_config(root / "dag-config.yaml", body)
    env = airflow_env(root / "airflow", config_path)
    ensure_database(env, airflow_database)
    extra = {"bootstrap.servers": secured["bootstrap"], "security.protocol": "SASL_PLAINTEXT",
             "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "rebalancer",
             "sasl.password": secured["passwords"]["rebalancer"]}
    env["AIRFLOW_CONN_KAFKA_SECURED"] = json.dumps({"conn_type": "kafka", "extra": extra})
    spark_only = {k: v for k, v in connections("unused", "unused").items() if k == "spark_rebalancer"}
    connection_file = root / "airflow-connections.json"
    connection_file.write_text(json.dumps(spark_only))
    result = run_dag(env, connection_file, {"mode": "execute"}, root / "outputs" / "dag-run.log")
    log = (root / "outputs" / "dag-run.log").read_text()
    assert result["state"] == "success", log[-6000:]
    run_dir = root / "runs" / "secured" / re.sub(r"[^A-Za-z0-9._-]", "_", result["run_id"])
    plan = read_reassignment(run_dir / "plan" / "plan.json")
    assert plan, "the re-skewed topic should need moves"
    after = _assignment(secured)
    assert all(after[(e.topic, e.partition)] == e.replicas for e in plan)
    assert (run_dir / "report" / "index.html").exists()
    _assert_untouched(secured)


def test_the_password_is_nowhere(secured: dict[str, Any]) -> None:
    """Every file the runs wrote (run folders, locks, the CLI's captured output, Spark's leftovers in the working
    folder), binary ones too, and the Kafka nodes' logs; and no command line seen while the steps ran."""
    assert secured["outputs"] >= 7  # the tests above ran their steps
    needles = [p.encode() for p in secured["passwords"].values()]
    holding = [str(f) for root in (secured["root"], secured["cluster"].dir) for f in root.rglob("*")
               if f.is_file() and any(n in f.read_bytes() for n in needles)]
    assert holding == []
    assert secured["cmdline_leaks"] == []
