"""Integration fixtures: workloads on the session's real local Kafka cluster, removed again afterwards."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers import REPO, write_config

# The session cluster's brokers (tools.local_kafka's default of six): the pool of the executor tests.
BROKERS = [1, 2, 3, 4, 5, 6]


def wait_until(condition: Callable[[], bool], timeout_s: float, what: str, poll_s: float = 0.3) -> None:
    """Until `condition` holds; an error it raises counts as not yet (a broker that has not seen a new topic's
    metadata answers UNKNOWN_TOPIC_OR_PART for a moment) and is named if time runs out."""
    deadline = time.monotonic() + timeout_s
    last_error: Exception | None = None
    while True:
        try:
            if condition():
                return
        except Exception as exc:  # noqa: BLE001 - retried until the deadline, then reported
            last_error = exc
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what}"
                                 + (f" (last error: {last_error})" if last_error else ""))
        time.sleep(poll_s)


def reassign_by_hand(connection: Any, targets: dict[tuple[str, int], list[int]], timeout_s: float = 300.0) -> None:
    """Reassign partitions as an operator would by hand, and wait until each has exactly its target replicas and
    none is still moving. Refused targets fail here, with the controller's reason; the bound is generous (copies are
    slow on a loaded machine) and its error names what had not arrived. `connection`: bootstrap servers or a
    KafkaConnection."""
    from kafka_rebalancer.kafka_admin import ClusterAdmin, KafkaConnection

    if isinstance(connection, str):
        connection = KafkaConnection(connection)
    with ClusterAdmin(connection) as admin:
        live = admin.live_broker_ids()
        absent = {key: replicas for key, replicas in targets.items() if not set(replicas) <= live}
        assert not absent, f"targets on brokers the cluster does not list ({sorted(live)}): {absent}"
        refused = admin.alter_reassignments(targets)
        assert refused == {}, f"the controller refused reassignments: {refused}"
        topics = sorted({topic for topic, _ in targets})

        def missing() -> dict[tuple[str, int], list[int]]:
            moving = admin.list_reassignments()
            now = {(p.topic, p.partition): p.replicas for p in admin.describe_partitions(topics)}
            return {key: now.get(key, []) for key, replicas in targets.items() if now.get(key) != replicas
                    or key in moving}

        try:
            wait_until(lambda: not missing(), timeout_s, f"hand-made reassignments to {targets}")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; not there (partition: its replicas now): {missing()}") from None


def delete_topics(bootstrap: str, names: list[str], timeout_s: float = 180.0) -> None:
    """Delete the topics and wait until the cluster lists none of them (the next test may create them again)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_topics(names, operation_timeout=30).values():
        future.result()
    wait_until(lambda: not set(names) & set(admin.list_topics(timeout=10).topics), timeout_s,
               f"topics {names} deleted")


def assert_untouched_by_execution(bootstrap: str, topics: list[str]) -> None:
    """No reassignment in flight and no replication throttle left on any broker or on these topics."""
    from confluent_kafka.admin import AdminClient, ConfigResource

    from kafka_rebalancer.kafka_admin import ClusterAdmin, KafkaConnection

    with ClusterAdmin(KafkaConnection(bootstrap)) as admin:
        assert admin.list_reassignments() == {}
    client = AdminClient({"bootstrap.servers": bootstrap})
    # One broker per call (the client's rule); the topics together.
    calls = [[ConfigResource("BROKER", str(b))] for b in client.list_topics(timeout=10).brokers]
    calls.append([ConfigResource("TOPIC", topic) for topic in topics])
    for resources in calls:
        for resource, future in client.describe_configs(resources).items():
            entries = future.result()
            for name in ("leader.replication.throttled.rate", "follower.replication.throttled.rate",
                         "leader.replication.throttled.replicas", "follower.replication.throttled.replicas"):
                assert name not in entries or entries[name].value in (None, ""), (resource, name, entries[name])


def assert_spread_kept(run_dir: Path) -> None:
    """The run ends inside the topic spread's target (issue 52, on by default): verify found no (topic, broker)
    above its cap, the plan's doing or not (summary's `topic_spread`, and verify/topic_spread.csv holds no row)."""
    verify = json.loads((run_dir / "verify" / "summary.json").read_text())
    over_cap = (run_dir / "verify" / "topic_spread.csv").read_text().strip().splitlines()[1:]
    assert verify["topic_spread"]["kept"] and verify["topic_spread_violations"] == 0 and over_cap == [], over_cap
    for pool, kinds in verify["topic_spread"]["pools"].items():
        assert {kind: f["over_cap_after"] for kind, f in kinds.items()} == {"replicas": 0, "leaders": 0}, pool


def demo_config(tmp_path: Path, **overrides: Any) -> Path:
    """The demo config, with run folders under tmp_path; its metrics source is none unless `metrics` is given (the
    demo's Prometheus is not there: a test that wants one passes the `prometheus` fixture's URL)."""
    body = yaml.safe_load((REPO / "config" / "demo.yaml").read_text())
    body["capacity"]["cruise_control_file"] = str(REPO / "config" / "demo-capacity.json")
    body["cluster"]["kafka_libs"] = str(REPO / ".cache" / "kafka-libs")
    body.update({"run_root": str(tmp_path / "runs"), "metrics": {"source": "none"}, **overrides})
    return write_config(tmp_path / "config.yaml", body)


@dataclass
class PlannedMoves:
    """A topic on a real cluster and a validated plan of exactly these moves of it (planned_run): what the executor
    tests execute, in process or as the CLI, and look at afterwards."""

    bootstrap: str
    config_path: Path
    config: Any  # RebalancerConfig
    run: Any  # RunFolder
    topic: str
    moves: list[tuple[str, int, list[int], list[int]]]

    def execute(self, throttle: int) -> dict[str, Any]:
        from kafka_rebalancer.execute.executor import run_execute
        from kafka_rebalancer.kafka_admin import KafkaConnection

        return run_execute(self.config, KafkaConnection(self.bootstrap), self.run, "all", dry_run=False,
                           throttle_bytes_per_s=throttle)

    def cancel(self) -> dict[str, Any]:
        from kafka_rebalancer.execute.cancel import run_cancel
        from kafka_rebalancer.kafka_admin import KafkaConnection

        return run_cancel(self.config, KafkaConnection(self.bootstrap), self.run, "all")

    def execute_cmd(self, *extra: str, throttle: int, run: Any = None, bootstrap: str | None = None) -> list[str]:
        """The CLI's execute of pool `all` of this run (or `run`), to start as a process of its own."""
        return [sys.executable, "-m", "kafka_rebalancer.cli", "execute", "--config", str(self.config_path),
                "--run-id", (run or self.run).path.name, "--pool", "all", "--apply",
                "--bootstrap-servers", bootstrap or self.bootstrap, "--throttle-bytes-per-s", str(throttle), *extra]

    def log_actions(self, run: Any = None) -> list[dict[str, Any]]:
        return execution_log(run or self.run)

    def wait_for_action(self, action: str, executor: subprocess.Popen, timeout_s: float = 120.0) -> None:
        """Until the execution log has `action`; an executor that ended first fails the wait with its output."""
        def seen() -> bool:
            if executor.poll() is not None:
                raise AssertionError(f"the executor ended (exit {executor.returncode}) before '{action}': "
                                     f"{executor.stderr.read()[-3000:] if executor.stderr else ''}")
            return any(e["action"] == action for e in self.log_actions())

        wait_until(seen, timeout_s, f"'{action}' in the execution log")

    def replicas(self) -> dict[int, list[int]]:
        from kafka_rebalancer.kafka_admin import ClusterAdmin, KafkaConnection

        with ClusterAdmin(KafkaConnection(self.bootstrap)) as admin:
            return {p.partition: p.replicas for p in admin.describe_partitions([self.topic])}


def planned_run(bootstrap: str, tmp_path: Path, run_id: str, topic: str,
                moves: list[tuple[str, int, list[int], list[int]]], execution: dict[str, Any]) -> PlannedMoves:
    """For executor tests that need an exact plan: a config of one pool `all` of BROKERS taking every topic (with
    these execution settings), a real snapshot of the cluster now and a validated plan of exactly these moves
    (topic, partition, old replicas, new replicas) of the topic."""
    from kafka_rebalancer.config import load_config
    from kafka_rebalancer.kafka_admin import KafkaConnection
    from kafka_rebalancer.run_folder import RunFolder
    from kafka_rebalancer.snapshot import take_snapshot
    from tests.helpers import write_validated_plan

    cluster = yaml.safe_load((REPO / "config" / "demo.yaml").read_text())["cluster"] | {
        "bootstrap_servers": bootstrap, "request_timeout_s": 10}
    config_path = demo_config(tmp_path, cluster=cluster, pools={"all": {"brokers": BROKERS}},
                              topic_pools=[{"topics": "*", "pool": "all"}], execution=execution)
    config = load_config(config_path)
    run = RunFolder(config.run_dir(run_id))
    manifest = take_snapshot(config, KafkaConnection(bootstrap), run)
    write_validated_plan(run, config, manifest["content_hash"], moves)
    return PlannedMoves(bootstrap, config_path, config, run, topic, moves)


def execution_log(run: Any, pool: str = "all") -> list[dict[str, Any]]:
    """The pool's execution log entries so far (none before it starts)."""
    from kafka_rebalancer.execute.log import ExecutionLog

    return ExecutionLog(run.stage_path(f"execute/{pool}") / "execution_log.jsonl", pool, "").read()


def reset_cluster(bootstrap: str, topics: list[str]) -> None:
    """Whatever a failed executor test left: reassignments cancelled, throttles removed, the topics deleted."""
    from kafka_rebalancer.kafka_admin import ClusterAdmin, KafkaConnection

    with ClusterAdmin(KafkaConnection(bootstrap)) as admin:
        ongoing = admin.list_reassignments()
        if ongoing:
            admin.alter_reassignments({k: None for k in ongoing})
        admin.alter_throttles({b: None for b in BROKERS}, {})
    delete_topics(bootstrap, topics)


@pytest.fixture(scope="module")
def demo_workload(kafka_cluster: Any) -> Iterator[tuple[str, dict]]:
    """The demo's skewed topics with data; yields (bootstrap servers, manifest of counts and checksums)."""
    from tools.demo_workload import create_topics, demo_topics, produce

    bootstrap = kafka_cluster.load().bootstrap_servers
    topics = demo_topics()
    create_topics(bootstrap, topics)
    manifest = produce(bootstrap, topics)
    yield bootstrap, manifest
    delete_topics(bootstrap, [t.name for t in topics])


@pytest.fixture(scope="session")
def prometheus(kafka_cluster: Any) -> Iterator[Any]:
    """A real Prometheus (Debian's package, installed if missing) scraping the session cluster's JMX exporters
    every 2 s; stopped by its pid at the end."""
    from tools.prometheus import LocalPrometheus

    server = LocalPrometheus("pytest")
    server.stop(quiet=True)  # a server left behind by an interrupted session
    server.start(kafka_cluster)
    try:
        yield server
    finally:
        server.stop(quiet=True)


@pytest.fixture(scope="session")
def airflow_database(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An Airflow metadata database migrated once for the session: every Airflow home of the tests (the shared
    services', each dag.test's) starts from a copy of it."""
    from tools.airflow_run import DATABASE, airflow_env, ensure_database

    home = tmp_path_factory.mktemp("airflow-database")
    ensure_database(airflow_env(home, home / "unused-config.yaml"))
    return home / DATABASE


@pytest.fixture(scope="session")
def shared_airflow(airflow_database: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The session's one real Airflow (tests/integration/shared_airflow.py), started for the first test that asks
    for it and stopped by its pids at the end of the session (on SIGTERM too: tests/sigterm.py)."""
    from tests.integration.shared_airflow import SharedAirflow

    shared = SharedAirflow(tmp_path_factory.mktemp("shared-airflow"), airflow_database)
    try:
        shared.start()
        yield shared
    finally:
        shared.stop()
