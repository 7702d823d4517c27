"""Manual operations on the real local cluster, from the CLI, with producers (acks=all) and consumers running
throughout: add-brokers, drain-brokers, execute-reviewed after a hand-made change, isolate-topics, demote-brokers
and elect-leaders; after each pool change a nightly plan moves nothing back. The tests run in file order and
share the cluster's state, as an operator's successive operations would."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kafka_rebalancer.kafka_admin import ClusterAdmin, KafkaConnection
from kafka_rebalancer.model.reassignment import read_reassignment
from tests.helpers import REPO, write_config
from tests.integration.conftest import (
    assert_spread_kept,
    assert_untouched_by_execution,
    delete_topics,
    reassign_by_hand,
    wait_until,
)
from tests.live_traffic import LiveTraffic
from tools.demo_workload import TopicSpec, create_topics, produce

pytestmark = pytest.mark.kafka
NEW_BROKER = 7
TOPICS = [
    TopicSpec("mo-pay", [[1, 2], [2, 1], [1, 3], [2, 1], [1, 2], [2, 1]], [512] * 6),
    TopicSpec("mo-orders", [[1, 2] if p % 2 else [2, 1] for p in range(8)], [768, 512, 512, 384, 384, 256, 256, 256]),
    # Evenly spread over pool-b, in partitions small next to the band's width, so a new broker can be filled
    # to the band by moves from the old ones alone.
    TopicSpec("mo-clicks", [[[4, 5], [5, 6], [6, 4], [5, 4], [6, 5], [4, 6]][p % 6] for p in range(24)], [96] * 24),
]
NAMES = [t.name for t in TOPICS]


@pytest.fixture(scope="module")
def env(kafka_cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    bootstrap = kafka_cluster.load().bootstrap_servers
    create_topics(bootstrap, TOPICS)
    produce(bootstrap, TOPICS)
    root = tmp_path_factory.mktemp("manual")
    body = yaml.safe_load((REPO / "config" / "demo.yaml").read_text())
    # Equal brokers (the demo's broker 6 has twice the disk): a pool gaining a broker can then reach both bands.
    body["cluster"]["bootstrap_servers"] = bootstrap
    body.update({"run_root": str(root / "runs"), "budgets": {"max_replica_moves": 500},
                 "metrics": {"source": "none"},  # the demo's Prometheus is not part of these tests
                 "capacity": {"default": {"disk_bytes": "256MiB"}},
                 "topic_pools": [{"topics": "mo-pay*", "pool": "pool-a"}, {"topics": "mo-orders*", "pool": "pool-a"},
                                 {"topics": "mo-clicks*", "pool": "pool-b"}]})
    config_path = write_config(root / "config.yaml", body)
    traffic = LiveTraffic(bootstrap, {t.name: len(t.assignment) for t in TOPICS}, prefix="manual-ops")
    traffic.__enter__()
    try:
        yield {"bootstrap": bootstrap, "config_path": config_path, "cluster": kafka_cluster, "traffic": traffic}
    finally:
        traffic.stop()
        if any(n.node_id == NEW_BROKER for n in kafka_cluster.load().brokers):
            kafka_cluster.remove_broker(NEW_BROKER)
        delete_topics(bootstrap, NAMES)


def cli(env: dict, command: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    cmd = [str(Path(sys.executable).parent / "kafka-rebalancer"), command, "--config", str(env["config_path"]), *args]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if check:
        assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    return result


def keep_off(env: dict, brokers: set[int]) -> None:
    """Move every internal topic's replicas off `brokers`, onto pool-a's and pool-b's other brokers."""
    spare = [1, 2, 3, 4, 5, 6]
    targets = {}
    for (topic, partition), p in partitions(env).items():
        if topic.startswith("__") and brokers & set(p.replicas):
            free = iter(b for b in spare if b not in brokers and b not in p.replicas)
            targets[(topic, partition)] = [b if b not in brokers else next(free) for b in p.replicas]
    reassign_by_hand(env["bootstrap"], targets)


def run_folder(output: str) -> Path:
    return Path(re.search(r"Artifacts: `([^`]+)`", output).group(1))  # type: ignore[union-attr]


def plan_of(run: Path) -> list[tuple[str, int, list[int], list[int]]]:
    """(topic, partition, old replicas, new replicas) of every planned change."""
    old = {(e.topic, e.partition): e.replicas for e in read_reassignment(run / "plan" / "rollback.json")}
    return [(e.topic, e.partition, old[(e.topic, e.partition)], e.replicas)
            for e in read_reassignment(run / "plan" / "plan.json")]


def partitions(env: dict) -> dict[tuple[str, int], Any]:
    """Every partition of the cluster: Kafka's internal topics and other tests' too (a promise is about the broker,
    not about the topics a test made)."""
    with ClusterAdmin(KafkaConnection(env["bootstrap"])) as admin:
        return {(p.topic, p.partition): p for p in admin.describe_partitions()}


def put_on(env: dict, topic: str, partition: int, broker: int) -> None:
    """Move one replica of a partition onto `broker` by hand (as Kafka's own placement may have done): its last
    replica is replaced, and the move waited for until the broker holds it."""
    current = partitions(env)[(topic, partition)].replicas
    assert broker not in current, f"{topic}-{partition} already has a replica on broker {broker}: {current}"
    reassign_by_hand(env["bootstrap"], {(topic, partition): [*current[:-1], broker]})


def nightly_plan(env: dict, run_id: str) -> list[tuple[str, int, list[int], list[int]]]:
    """What the next nightly run would do now (its snapshot and plan steps)."""
    cli(env, "snapshot", "--run-id", run_id)
    cli(env, "plan", "--run-id", run_id)
    config = yaml.safe_load(Path(env["config_path"]).read_text())
    return plan_of(Path(config["run_root"]) / "demo" / run_id)


def assert_nothing_in_flight(env: dict) -> None:
    assert_untouched_by_execution(env["bootstrap"], NAMES)


def test_add_brokers_moves_only_onto_the_new_broker(env: dict) -> None:
    env["cluster"].add_broker(NEW_BROKER, "rack-a")
    result = cli(env, "add-brokers", "--brokers", str(NEW_BROKER), "--pool", "pool-b", "--reason", "new machine",
                 "--apply", "--yes")
    run = run_folder(result.stdout)
    moves = plan_of(run)
    assert moves, "adding an empty broker to a loaded pool should move replicas onto it"
    for topic, partition, old, new in moves:
        assert set(new) - set(old) == {NEW_BROKER}, (topic, partition, old, new)
        assert set(old) - set(new) <= {4, 5, 6}, (topic, partition, old, new)
    now = partitions(env)
    for topic, partition, _, new in moves:
        assert now[(topic, partition)].replicas == new
    summary = json.loads((run / "plan" / "summary.json").read_text())
    assert summary["pools"]["pool-b"]["resources"]["replica_count"]["out_of_band_after"] == []
    assert_spread_kept(run)
    assert_nothing_in_flight(env)


def test_drain_broker_leaves_it_empty_and_the_next_nightly_moves_nothing_back(env: dict) -> None:
    # Kafka's internal topics are excluded from balancing (the config's `__*`), never from a drain.
    put_on(env, "__consumer_offsets", 0, NEW_BROKER)
    result = cli(env, "drain", "--brokers", str(NEW_BROKER), "--reason", "being replaced", "--apply", "--yes")
    assert "pool override recorded" in result.stdout
    assert_spread_kept(run_folder(result.stdout))
    now = partitions(env)
    assert [k for k, p in now.items() if NEW_BROKER in p.replicas] == []
    assert [k for k, p in now.items() if p.leader == NEW_BROKER] == []
    pools = cli(env, "pools").stdout
    assert f"drained: broker {NEW_BROKER}" in pools
    assert [m for m in nightly_plan(env, "after-drain") if NEW_BROKER in m[3]] == []
    assert_nothing_in_flight(env)
    # A replica put back by hand: verify of the drain now fails naming it, and the run is not verified any more.
    drain_run = run_folder(result.stdout)
    original = partitions(env)[("mo-pay", 0)].replicas
    put_on(env, "mo-pay", 0, NEW_BROKER)
    try:
        failed = cli(env, "verify", "--run-id", drain_run.name, check=False)
        assert failed.returncode == 2 and "not verified" in failed.stderr, failed.stderr[-2000:]
        assert f"mo-pay-0 still has a replica on broker {NEW_BROKER}" in failed.stderr
        assert "promise not kept" in cli(env, "runs").stdout
    finally:
        put_on(env, "mo-pay", 0, original[-1])


def test_execute_reviewed_skips_a_partition_changed_by_hand_and_executes_the_rest(env: dict) -> None:
    dry = cli(env, "rebalance-pool", "--pool", "pool-a")
    assert "dry run: nothing changed" in dry.stdout
    reviewed = run_folder(dry.stdout)
    moves = plan_of(reviewed)
    assert len(moves) >= 2, moves
    before = partitions(env)
    assert all(before[(t, p)].replicas == old for t, p, old, _ in moves)  # the dry run changed nothing
    topic, partition, old, new = moves[0]
    # An operator moves one of its replicas elsewhere by hand: neither what the plan started from nor its target.
    by_hand = next(replicas for b in (1, 2, 3, 5, 6) if b not in old
                   for replicas in ([b, *old[1:]],) if replicas != new)
    reassign_by_hand(env["bootstrap"], {(topic, partition): by_hand})
    result = cli(env, "execute-reviewed", "--run-id", reviewed.name, "--apply", "--yes")
    run = run_folder(result.stdout)
    assert (run / "plan" / "plan.json").read_text() == (reviewed / "plan" / "plan.json").read_text()
    drift = json.loads((run / "review" / "drift.json").read_text())["changed_since"]
    assert [(d["topic"], d["partition"]) for d in drift] == [(topic, partition)]
    now = partitions(env)
    assert now[(topic, partition)].replicas == by_hand
    for t, p, _, planned in moves[1:]:
        assert now[(t, p)].replicas == planned, (t, p)
    skipped = [json.loads(line) for f in (run / "execute").glob("*/execution_log.jsonl")
               for line in f.read_text().splitlines()]
    assert any(e["action"] == "skipped" and e.get("topic") == topic and e.get("partition") == partition
               for e in skipped), skipped[-5:]
    assert_nothing_in_flight(env)


def test_execute_reviewed_refuses_an_unknown_or_too_old_plan(env: dict) -> None:
    result = cli(env, "execute-reviewed", "--run-id", "no-such-run", "--apply", "--yes", check=False)
    assert result.returncode == 2 and "no-such-run" in result.stderr and "Traceback" not in result.stderr


def test_isolate_topics_into_a_new_pool_isolates_both_ways(env: dict) -> None:
    # Kafka's internal topics are exempt from an isolation and stay where they are; where earlier tests of the
    # session left them decides the new pool's counts (two brokers, replicas pinned by the rack rule), so they
    # are put off its brokers first and the pool's band is the isolated topics' alone.
    keep_off(env, {3, 4})
    result = cli(env, "isolate", "--topics", "mo-pay*", "--pool", "pay", "--brokers", "3,4", "--reason",
                 "payments on their own brokers", "--apply", "--yes")
    assert "pool override recorded" in result.stdout
    assert_spread_kept(run_folder(result.stdout))
    now = partitions(env)
    for (topic, partition), p in now.items():
        if topic.startswith("__"):
            continue  # Kafka's internal topics serve every pool: an isolation leaves them (README)
        if topic == "mo-pay":
            assert set(p.replicas) <= {3, 4}, (topic, partition, p.replicas)
            assert len({3, 4} & set(p.replicas)) == 2  # two racks (c and a): rack-aware
        else:
            assert not set(p.replicas) & {3, 4}, (topic, partition, p.replicas)
    assert [m for m in nightly_plan(env, "after-isolate") if m[0] == "mo-pay"] == []
    listing = cli(env, "overrides", "list").stdout
    assert "isolate-topics" in listing and "drain-brokers" in listing and "add-brokers" in listing
    assert_nothing_in_flight(env)


def test_demote_broker_moves_leadership_off_it_without_data_moves(env: dict) -> None:
    # An internal topic led by broker 1: excluded topics are demoted too.
    internal = next(p for (topic, _), p in sorted(partitions(env).items()) if topic.startswith("__")
                    and 1 in p.replicas)
    key = (internal.topic, internal.partition)
    reassign_by_hand(env["bootstrap"], {key: [1, *[b for b in internal.replicas if b != 1]]})
    with ClusterAdmin(KafkaConnection(env["bootstrap"])) as admin:
        admin.elect_preferred_leaders([key])
    wait_until(lambda: partitions(env)[key].leader == 1, 60, f"broker 1 elected leader of {key}")
    before = partitions(env)
    cli(env, "demote", "--brokers", "1", "--apply", "--yes")
    after = partitions(env)
    assert [k for k, p in after.items() if p.leader == 1] == []
    assert {k: sorted(p.replicas) for k, p in after.items()} == {k: sorted(p.replicas) for k, p in before.items()}


def test_elect_leaders_makes_every_preferred_replica_lead_without_data_moves(env: dict) -> None:
    before = partitions(env)
    # Reorder some replica lists without an election: their leaders are no longer the preferred ones (taken from
    # partitions led by their preferred replica: the earlier operations leave some led by another).
    reordered = {k: list(reversed(p.replicas)) for k, p in sorted(before.items())
                 if len(p.replicas) > 1 and p.leader == p.replicas[0]}
    reordered = dict(list(reordered.items())[:4])
    reassign_by_hand(env["bootstrap"], reordered)
    off = partitions(env)
    assert any(off[k].leader != off[k].replicas[0] for k in reordered)
    cli(env, "elect-leaders", "--apply", "--yes")
    after = partitions(env)
    # Every balanced topic's (the excluded internal topics are left to Kafka's own leader rebalancing).
    assert all(p.leader == p.replicas[0] for (topic, _), p in after.items() if not topic.startswith("__"))
    assert {k: sorted(p.replicas) for k, p in after.items()} == {k: sorted(p.replicas) for k, p in before.items()}


def test_no_acknowledged_message_was_lost_or_duplicated(env: dict) -> None:
    env["traffic"].stop()
    env["traffic"].check()
