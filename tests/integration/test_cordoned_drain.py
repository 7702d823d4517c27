"""Cordoning a drained broker (KIP-1066) on the real local cluster, while a client keeps creating topics: a dry run
cordons nothing; executing the drain (the reviewed dry run's plan) cordons the broker before its first move, and no
partition of a topic created after that lands on it; `pools`, `status` and the next snapshot name it; `cancel`
and `overrides revert` uncordon it, after which new topics land on it again."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka.admin import AdminClient, NewTopic

from kafka_rebalancer.execute.log import ExecutionLog
from kafka_rebalancer.kafka_admin import BrokerCordon, ClusterAdmin, KafkaConnection
from kafka_rebalancer.run_folder import read_json
from tests.helpers import REPO
from tests.integration.conftest import delete_topics, demo_config, wait_until
from tools.demo_workload import TopicSpec, create_topics, produce

pytestmark = pytest.mark.kafka

DRAINED = 6
BROKERS = [1, 2, 3, 4, 5, 6]  # racks a: 1 and 4, b: 2 and 5, c: 3 and 6
# Three replicas on each of brokers 1-5 and five on broker 6, each partition on two racks: the drain moves one
# replica onto each of the others, which leaves every one of them in its bands.
DATA = [TopicSpec("cordon-data", [[6, 1], [6, 2], [6, 4], [6, 5], [6, 1], [3, 2], [3, 5], [3, 4], [2, 1], [5, 4]],
                  [256] * 10)]


class TopicCreator:
    """Creates a topic of 6 partitions, replication factor 3, about every second (Kafka places the replicas);
    notes when each was asked for."""

    def __init__(self, bootstrap: str, prefix: str) -> None:
        self.admin = AdminClient({"bootstrap.servers": bootstrap})
        self.prefix = prefix
        self.created: list[tuple[str, float]] = []  # (name, time.time() when asked)
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="topic-creator")

    def __enter__(self) -> TopicCreator:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(60)

    def _run(self) -> None:
        while not self._stop.is_set():
            name, asked = f"{self.prefix}-{len(self.created) + len(self.errors):03d}", time.time()
            try:
                self.admin.create_topics([NewTopic(name, 6, 3)], operation_timeout=30)[name].result()
                self.created.append((name, asked))
            except Exception as exc:  # noqa: BLE001 - collected, asserted empty by the test
                self.errors.append(f"{name}: {exc}")
            self._stop.wait(1.0)



def cordons(bootstrap: str) -> dict[int, BrokerCordon]:
    with ClusterAdmin(KafkaConnection(bootstrap)) as admin:
        return admin.cordoned_brokers()


def replicas_by_topic(bootstrap: str, topics: list[str]) -> dict[str, set[int]]:
    with ClusterAdmin(KafkaConnection(bootstrap)) as admin:
        out: dict[str, set[int]] = {t: set() for t in topics}
        for p in admin.describe_partitions(topics):
            out[p.topic] |= set(p.replicas)
        return out


@pytest.fixture
def env(kafka_cluster: Any, tmp_path: Path) -> Any:
    bootstrap = kafka_cluster.load().bootstrap_servers
    create_topics(bootstrap, DATA)
    produce(bootstrap, DATA)
    cluster = yaml.safe_load((REPO / "config" / "demo.yaml").read_text())["cluster"] | {
        "bootstrap_servers": bootstrap}
    config_path = demo_config(tmp_path, cluster=cluster, pools={"all": {"brokers": BROKERS}},
                              topic_pools=[{"topics": "*", "pool": "all"}],
                              execution={"poll_interval_s": 0.5, "move_timeout_s": 120})
    created: list[str] = []
    try:
        yield {"bootstrap": bootstrap, "config_path": config_path, "created": created,
               "run_root": tmp_path / "runs" / "demo"}
    finally:
        with ClusterAdmin(KafkaConnection(bootstrap)) as admin:
            admin.uncordon(admin.cordoned_brokers())
        delete_topics(bootstrap, [*(t.name for t in DATA), *created])


def cli(env: Any, command: str, *args: str, expect: int = 0) -> str:
    """The command's output (with its errors where it is expected to fail)."""
    result = subprocess.run([str(Path(sys.executable).parent / "kafka-rebalancer"), command, "--config",
                             str(env["config_path"]), *args], capture_output=True, text=True, timeout=600)
    assert result.returncode == expect, result.stdout[-4000:] + result.stderr[-4000:]
    return result.stdout + (result.stderr if expect else "")


def run_id(output: str) -> str:
    return Path(re.search(r"Artifacts: `([^`]+)`", output).group(1)).name  # type: ignore[union-attr]


def test_a_drained_broker_is_cordoned_until_cancel_or_revert_and_takes_no_new_topic(env: Any) -> None:
    bootstrap = env["bootstrap"]
    dry = run_id(cli(env, "drain", "--brokers", str(DRAINED), "--reason", "disk failing"))
    cli(env, "execute", "--run-id", dry)  # a dry run of the execution as well
    assert cordons(bootstrap) == {}

    # The reviewed plan is executed while topics are being created (created before the plan, they would be in it).
    with TopicCreator(bootstrap, "fresh") as creator:
        time.sleep(3)
        # The topics created between the review and the cordon land on the broker: the run says it is not
        # verified (exit 2), naming them.
        output = cli(env, "execute-reviewed", "--run-id", dry, "--apply", "--yes", expect=2)
        time.sleep(5)  # more topics while the cordon holds
    assert "the run is not verified" in output and f"still has a replica on broker {DRAINED}" in output
    env["created"] += [name for name, _ in creator.created]
    assert creator.errors == []
    drain = run_id(output)
    entries = ExecutionLog(env["run_root"] / drain / "execute" / "all" / "execution_log.jsonl", "", "").read()
    actions = [e["action"] for e in entries]
    assert actions.index("cordon_requested") < actions.index("cordoned") < actions.index("started")
    cordoned = next(e for e in entries if e["action"] == "cordoned")
    assert cordoned["brokers"] == [DRAINED] and cordoned["unconfirmed"] == []
    cordoned_at = datetime.fromisoformat(cordoned["ts"]).timestamp()
    requested_at = datetime.fromisoformat(next(e for e in entries if e["action"] == "cordon_requested")["ts"])

    placed = replicas_by_topic(bootstrap, [name for name, _ in creator.created])
    before = [name for name, asked in creator.created if asked < requested_at.timestamp()]
    after = [name for name, asked in creator.created if asked > cordoned_at]
    assert len(after) >= 5, (before, after)
    assert [t for t in after if DRAINED in placed[t]] == [], {t: placed[t] for t in after}
    # Without the cordon Kafka places on every broker: the topics asked for before it have replicas there.
    assert before and all(DRAINED in placed[t] for t in before), {t: placed[t] for t in before}

    assert cordons(bootstrap)[DRAINED].confirmed
    assert f"broker {DRAINED} (cordoned.log.dirs=*, confirmed)" in cli(env, "pools")
    assert f"broker {DRAINED} (cordoned.log.dirs=*, confirmed)" in cli(env, "status")
    cli(env, "snapshot", "--run-id", "after-drain")
    assert read_json(env["run_root"] / "after-drain" / "snapshot" / "manifest.json")["cordoned_brokers"] == [DRAINED]

    # A second drain takes those off; the cordon holds meanwhile, so the broker ends empty and the run verified.
    cli(env, "drain", "--brokers", str(DRAINED), "--reason", "what landed before the cordon", "--apply", "--yes")
    with ClusterAdmin(KafkaConnection(bootstrap)) as admin:
        assert [(p.topic, p.partition) for p in admin.describe_partitions() if DRAINED in p.replicas] == []
    statuses = cli(env, "runs")
    assert "promise not kept" in statuses and "verified" in statuses

    cli(env, "cancel", "--run-id", drain)
    assert cordons(bootstrap) == {}
    assert "uncordoned" in [e["action"] for e in ExecutionLog(
        env["run_root"] / drain / "execute" / "all" / "execution_log.jsonl", "", "").read()]

    with ClusterAdmin(KafkaConnection(bootstrap)) as admin:  # cordoned again, for the revert to undo
        assert admin.cordon([DRAINED]) == {}
    wait_until(lambda: DRAINED in cordons(bootstrap) and cordons(bootstrap)[DRAINED].confirmed, 30, "the cordon")
    # The later override first: it was made on top of the earlier one (which it needs to fit the config).
    first, second = re.findall(r"#(\d+) drain-brokers", cli(env, "overrides", "list"))
    held = cli(env, "overrides", "revert", second)
    assert f"broker(s) {DRAINED} stay cordoned: another active drain holds them" in held
    reverted = cli(env, "overrides", "revert", first)
    assert f"uncordoned broker(s) {DRAINED}: new partitions may land on them again" in reverted
    assert cordons(bootstrap) == {}
    time.sleep(2)  # the broker's heartbeat tells the controller
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("fresh-after-revert", 12, 3)], operation_timeout=30)["fresh-after-revert"].result()
    env["created"].append("fresh-after-revert")
    # Striped placement spreads 36 replicas over every eligible broker.
    assert DRAINED in replicas_by_topic(bootstrap, ["fresh-after-revert"])["fresh-after-revert"]
