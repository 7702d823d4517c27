"""The executor under faults, on the session's real local Kafka cluster (README: Execution, issue 4).

Each test gets a fresh topic with data and a validated plan that moves a replica of every partition (written
by hand so the moves are known exactly; the snapshot is real). A low replication throttle keeps the moves in
flight for seconds, long enough to kill the executor, stop a broker or start a second run in the middle.
Afterwards the cluster is left with no reassignment in progress and no throttle config.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka.admin import AdminClient, ConfigResource

from kafka_rebalancer.execute.executor import run_execute
from kafka_rebalancer.kafka_admin import ClusterAdmin, KafkaConnection
from kafka_rebalancer.run_folder import RunFolder
from tests.integration.conftest import BROKERS, PlannedMoves, planned_run, reset_cluster, wait_until
from tests.live_traffic import LiveTraffic
from tools.demo_workload import TopicSpec, create_topics, produce

pytestmark = [pytest.mark.kafka]

PARTITIONS = 4
# Bytes/s per broker. Kafka measures the rate over its quota window (11 one-second samples) and counts a young
# window as ten seconds long, so about ten seconds' worth passes unthrottled first: with 64 KiB/s a 1.5 MiB
# partition still takes well over ten seconds to copy.
THROTTLE = 64 * 1024
# A partition copies for over a minute at this rate.
CRAWL = 16 * 1024
# For a rerun that only has to finish: nothing needs to stay in flight any more.
UNHURRIED = 50 * 1024 * 1024


def assert_clean(bootstrap: str, topic: str) -> None:
    """No reassignment in progress, no throttle config on any broker or on the topic."""
    with ClusterAdmin(KafkaConnection(bootstrap)) as admin:
        assert admin.list_reassignments() == {}
        assert admin.throttle_configs(BROKERS, [topic]) == {}


@pytest.fixture
def scenario(kafka_cluster: Any, tmp_path: Path) -> Iterator[PlannedMoves]:
    bootstrap = kafka_cluster.load().bootstrap_servers
    topic = f"fault-{uuid.uuid4().hex[:8]}"
    # Partition p sits on three consecutive brokers; the plan swaps its last replica for the next broker and
    # makes the second one the preferred leader, so every move copies data and changes the leader.
    assignment = [[BROKERS[(p + i) % 6] for i in range(3)] for p in range(PARTITIONS)]
    create_topics(bootstrap, [TopicSpec(topic, assignment, [1536] * PARTITIONS)])
    _set_min_isr(bootstrap, topic)
    produce(bootstrap, [TopicSpec(topic, assignment, [1536] * PARTITIONS)])
    moves = [(topic, p, old, [old[1], old[0], BROKERS[(p + 3) % 6]]) for p, old in enumerate(assignment)]
    try:
        yield planned_run(
            bootstrap, tmp_path, f"faults-{topic}", topic, moves,
            {"max_moves_per_broker": 5, "poll_interval_s": 0.5, "move_timeout_s": 45, "urp_wait_timeout_s": 60})
    finally:
        reset_cluster(bootstrap, [topic])


def _set_min_isr(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ResourceType

    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("min.insync.replicas", "2", incremental_operation=AlterConfigOpType.SET)])
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the futures are done
    for future in admin.incremental_alter_configs([resource]).values():
        future.result()


def started_per_partition(actions: list[dict[str, Any]]) -> Counter:
    return Counter(e["partition"] for e in actions if e["action"] == "started")


def test_killed_executor_is_rerun_to_completion_without_repeats_or_leftovers(scenario: PlannedMoves) -> None:
    # Crawling, so the moves are still in flight when the rerun (a new process, slow to start on a loaded machine)
    # looks: at THROTTLE they finished first once, and the rerun had nothing to adopt.
    first = subprocess.Popen(scenario.execute_cmd(throttle=CRAWL), stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
    try:
        scenario.wait_for_action("started", first)
        time.sleep(1.0)
        assert first.poll() is None, f"the executor ended before it could be killed: {first.stderr.read()[-2000:]}"
        first.kill()
    finally:
        first.wait(30)
    with ClusterAdmin(KafkaConnection(scenario.bootstrap)) as admin:  # what a crash leaves behind
        assert admin.list_reassignments() and admin.throttle_configs(BROKERS, [scenario.topic])

    rerun = subprocess.run(scenario.execute_cmd(throttle=UNHURRIED), capture_output=True, text=True, timeout=240)
    assert rerun.returncode == 0, rerun.stderr[-4000:]
    assert scenario.replicas() == {p: new for _, p, _, new in scenario.moves}
    assert_clean(scenario.bootstrap, scenario.topic)
    actions = scenario.log_actions()
    assert set(started_per_partition(actions).values()) == {1}  # no move issued twice
    adopted = [e for e in actions if e["action"] == "execute_started"][-1]["adopted"]
    assert adopted, "the rerun should have adopted the reassignments the killed run left in flight"


def test_stopped_target_broker_fails_the_run_naming_the_stuck_moves_then_cancel_and_rerun(
        scenario: PlannedMoves, kafka_cluster: Any) -> None:
    # Broker 4 is the one new replica of partition 0; partitions 2 and 3 keep a replica on it and gain one
    # elsewhere, so Kafka can finish those reassignments without it (but not get 4 back into their ISR).
    stopped = 4
    execution = subprocess.Popen(scenario.execute_cmd(throttle=THROTTLE), stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: len(started_per_partition(scenario.log_actions())) == PARTITIONS, 60, "all moves started")
        kafka_cluster.stop_broker(stopped, hard=True)
        started = time.monotonic()
        _, stderr = execution.communicate(timeout=180)
    finally:
        execution.kill()
    try:
        assert execution.returncode == 2, stderr[-3000:]
        assert time.monotonic() - started < 45 + 60  # the move timeout, plus clearing what can be cleared
        stuck = next(e["stuck"] for e in scenario.log_actions() if e["action"] == "timeout")
        assert f"{scenario.topic}-0" in stuck and f"{scenario.topic}-1" not in stuck
        assert "not complete after 45s" in stderr and all(name in stderr for name in stuck), stderr[-3000:]
        live = [b for b in BROKERS if b != stopped]
        with ClusterAdmin(KafkaConnection(scenario.bootstrap)) as admin:
            assert admin.throttle_configs(live, [scenario.topic]) == {}

        # The brake works whatever changed in the config since the plan (which changes the plan's hash), and
        # without --run-id it finds the run whose reassignment is in flight.
        planned_config = scenario.config_path.read_text()
        changed = yaml.safe_load(planned_config)
        changed["budgets"] = {"max_replica_moves": 7}
        scenario.config_path.write_text(yaml.safe_dump(changed))
        try:
            cancel = subprocess.run([sys.executable, "-m", "kafka_rebalancer.cli", "cancel", "--config",
                                     str(scenario.config_path), "--bootstrap-servers", scenario.bootstrap],
                                    capture_output=True, text=True, timeout=180)
        finally:
            scenario.config_path.write_text(planned_config)
        assert cancel.returncode == 0, cancel.stderr[-3000:]
        assert f"cancelling run {scenario.run.path.name}" in cancel.stdout
        assert "cancelled 1 reassignment(s)" in cancel.stdout
        replicas = scenario.replicas()
        assert replicas[0] == scenario.moves[0][2]  # cancelled: the original replicas, in their order
        assert all(replicas[p] == new for _, p, _, new in scenario.moves[1:])  # these Kafka had finished
    finally:
        kafka_cluster.start_broker(stopped)

    def in_sync() -> bool:
        with ClusterAdmin(KafkaConnection(scenario.bootstrap)) as admin:
            return all(len(i.isr) == len(i.replicas) for i in admin.describe_partitions([scenario.topic]))

    wait_until(in_sync, 120, f"broker {stopped} back in every ISR")
    refused = subprocess.run(scenario.execute_cmd(throttle=THROTTLE), capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "--resume-cancelled" in refused.stderr  # a cancel is not undone silently
    rerun = subprocess.run(scenario.execute_cmd("--resume-cancelled", throttle=UNHURRIED), capture_output=True,
                           text=True, timeout=240)
    assert rerun.returncode == 0, rerun.stderr[-4000:]
    assert scenario.replicas() == {p: new for _, p, _, new in scenario.moves}
    assert_clean(scenario.bootstrap, scenario.topic)


def test_partition_reassigned_by_hand_after_planning_is_skipped_as_drifted(scenario: PlannedMoves) -> None:
    _, p, old, _ = scenario.moves[1]
    by_hand = [old[0], old[1], BROKERS[(p + 4) % 6]]
    with ClusterAdmin(KafkaConnection(scenario.bootstrap)) as admin:
        assert admin.alter_reassignments({(scenario.topic, p): by_hand}) == {}
    wait_until(lambda: scenario.replicas()[p] == by_hand, 60, "the manual reassignment")
    with ClusterAdmin(KafkaConnection(scenario.bootstrap)) as admin:
        wait_until(lambda: admin.list_reassignments() == {}, 60, "the manual reassignment to finish")

    result = run_execute(scenario.config, KafkaConnection(scenario.bootstrap), scenario.run, "all", dry_run=False,
                         throttle_bytes_per_s=THROTTLE)
    assert [(s["partition"], s["reason"].split(":")[0]) for s in result["skipped"]] == [(p, "drifted")]
    assert result["completed"] == PARTITIONS - 1
    expected = {q: new for _, q, _, new in scenario.moves} | {p: by_hand}  # the operator's change is kept
    assert scenario.replicas() == expected
    assert_clean(scenario.bootstrap, scenario.topic)


def test_producers_and_consumers_lose_and_duplicate_nothing_during_execution(scenario: PlannedMoves) -> None:
    with LiveTraffic(scenario.bootstrap, {scenario.topic: PARTITIONS}) as traffic:
        result = run_execute(scenario.config, KafkaConnection(scenario.bootstrap), scenario.run, "all",
                             dry_run=False, throttle_bytes_per_s=THROTTLE)
        time.sleep(1.0)
    assert result["completed"] == PARTITIONS and result["skipped"] == []
    traffic.check()
    assert scenario.replicas() == {p: new for _, p, _, new in scenario.moves}
    assert_clean(scenario.bootstrap, scenario.topic)


def test_second_run_at_once_refuses_before_touching_the_cluster(scenario: PlannedMoves) -> None:
    other = RunFolder(scenario.run.path.parent / f"{scenario.run.path.name}-again")
    shutil.copytree(scenario.run.path, other.path)
    first = subprocess.Popen(scenario.execute_cmd(throttle=THROTTLE), stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
    try:
        scenario.wait_for_action("started", first)
        # An address nothing listens on: had the second run contacted the cluster, it would fail differently.
        second = subprocess.run(scenario.execute_cmd(run=other, bootstrap="127.0.0.1:1", throttle=THROTTLE),
                                capture_output=True, text=True, timeout=60)
        assert second.returncode == 2
        assert "refusing to start: another execution for pool 'all'" in second.stderr, second.stderr[-2000:]
        assert scenario.log_actions(other) == []
        _, stderr = first.communicate(timeout=240)
    finally:
        first.kill()
    assert first.returncode == 0, stderr[-3000:]
    assert scenario.replicas() == {p: new for _, p, _, new in scenario.moves}
    assert_clean(scenario.bootstrap, scenario.topic)
