"""JBOD on a real local cluster whose brokers each have two log directories (`tools/local_kafka.py --log-dirs 2`;
README: JBOD). The snapshot: each directory's usage and its capacity from the capacity file, each replica's
directory, and a replica moving between directories (AlterReplicaLogDirs under the broker's intra-broker throttle)
counted once, where it is, with its future directory beside it. The executor of moves between directories: done
under the throttle, resumed after the broker restarts mid-move, and cancelled back to where the replicas were."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from kafka_rebalancer.config import load_config
from kafka_rebalancer.execute.log_dir_moves import LogDirExecution, LogDirLimits, LogDirMove, cancel_log_dir_moves
from kafka_rebalancer.kafka_admin import ClusterAdmin, KafkaConnection
from kafka_rebalancer.run_folder import RunFolder
from kafka_rebalancer.snapshot import read_snapshot, take_snapshot
from tests.helpers import running_cluster
from tests.integration.conftest import demo_config, wait_until
from tests.integration.shared_airflow import MANUAL, SharedAirflow
from tools.demo_workload import TopicSpec, create_topics

pytestmark = [pytest.mark.kafka]

TOPIC = "jbod"
MIB = 2**20


@pytest.fixture(scope="module")
def jbod_cluster() -> Iterator[Any]:
    """Three brokers with two log directories each (the session's cluster has one): the module's own."""
    with running_cluster("pytest-jbod", n_brokers=3, log_dirs=2) as cluster:
        yield cluster


def _intra_broker_throttle(bootstrap: str, broker: int, rate: int | None) -> None:
    op = AlterConfigOpType.SET if rate is not None else AlterConfigOpType.DELETE
    resource = ConfigResource(ResourceType.BROKER, str(broker), incremental_configs=[
        ConfigEntry("replica.alter.log.dirs.io.max.bytes.per.second", str(rate or ""), incremental_operation=op)])
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.incremental_alter_configs([resource]).values():
        future.result()


def _capacity_file(path: Path, cluster: Any) -> Path:
    """DISK per log dir, as Cruise Control's capacityJBOD.json gives it: 1 GiB and 3 GiB on every broker."""
    state = cluster.load()
    path.write_text(json.dumps({"brokerCapacities": [
        {"brokerId": str(node.node_id), "capacity": {
            "DISK": {str(d): str(size) for d, size in zip(cluster.log_dirs(node, state), (1024, 3072), strict=True)},
            "CPU": {"num.cores": "4"}, "NW_IN": "100000", "NW_OUT": "100000"}}
        for node in state.brokers]}))
    return path


def _topic_with_data(bootstrap: str, topic: str, assignment: list[list[int]], mib: int) -> None:
    """The topic, and about `mib` MiB written into each partition."""
    create_topics(bootstrap, [TopicSpec(topic, assignment, [0] * len(assignment))])
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for i in range(mib * 1024 * len(assignment)):
        producer.produce(topic, b"x" * 1000, partition=i % len(assignment))
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0


def _moves_to_the_other_directory(cluster: Any, topic: str, partitions: list[tuple[int, int]]) -> list[LogDirMove]:
    """For each (partition, broker), a move of its replica into the broker's other log directory."""
    state = cluster.load()
    with ClusterAdmin(KafkaConnection(state.bootstrap_servers)) as admin:
        where = admin.describe_log_dirs(sorted({b for _, b in partitions}))
    moves = []
    for partition, broker in partitions:
        node = next(n for n in state.brokers if n.node_id == broker)
        source = where[broker]["replica_dirs"][(topic, partition)]
        target = next(str(d) for d in cluster.log_dirs(node, state) if str(d) != source)
        moves.append(LogDirMove(topic, partition, broker, source, target, MIB))
    return moves


def _executed(bootstrap: str, moves: list[LogDirMove], records: list[dict[str, Any]],
              rate: int | None = None) -> list[LogDirMove]:
    import time

    with ClusterAdmin(KafkaConnection(bootstrap)) as admin:
        execution = LogDirExecution(admin, moves, lambda action, **e: records.append({"action": action, **e}),
                                    LogDirLimits(rate, 2, 0.5, 120.0), time.sleep, time.monotonic)
        return execution.run()


def _dirs_now(bootstrap: str, moves: list[LogDirMove]) -> dict[tuple[str, int, int], tuple[str, str | None]]:
    with ClusterAdmin(KafkaConnection(bootstrap)) as admin:
        where = admin.describe_log_dirs(sorted({m.broker for m in moves}))
    return {m.replica: (where[m.broker]["replica_dirs"].get((m.topic, m.partition)),
                        where[m.broker]["future_dirs"].get((m.topic, m.partition))) for m in moves}


def test_replicas_arriving_from_another_broker_land_in_the_directory_the_plan_names(jbod_cluster: Any,
                                                                                     tmp_path: Path) -> None:
    """Broker 3's small directory holds one large replica, its large directory many small ones: left to itself,
    Kafka puts a new replica where the fewest partitions are (the small one); the plan, by bytes against capacity,
    names the large one, and the replicas a drain of broker 1 sends to broker 3 land there. First in the module: a
    drain of one of three brokers needs every topic at RF 2 or less (no __consumer_offsets yet)."""
    import subprocess
    import sys

    state = jbod_cluster.load()
    bootstrap = state.bootstrap_servers
    broker_3 = next(n for n in state.brokers if n.node_id == 3)
    small, large = (str(d) for d in jbod_cluster.log_dirs(broker_3, state))  # 1 GiB and 3 GiB in the capacity file
    _topic_with_data(bootstrap, "jbod-big", [[3]], 48)
    create_topics(bootstrap, [TopicSpec("jbod-many", [[3]] * 6, [0] * 6)])
    _topic_with_data(bootstrap, "jbod-arrive", [[1, 2]] * 4, 4)
    with ClusterAdmin(KafkaConnection(bootstrap)) as admin:
        wait_until(lambda: sum(t == "jbod-many" for t, _ in admin.describe_log_dirs([3])[3]["replica_dirs"]) == 6, 30,
                   "jbod-many's six replicas on broker 3")
        on_3 = admin.describe_log_dirs([3])[3]["replica_dirs"]
        placed = {(t, p, 3): small if t == "jbod-big" else large for t, p in on_3}
        assert admin.alter_replica_log_dirs(placed) == {}

        def settled() -> bool:
            now = admin.describe_log_dirs([3])[3]
            return not now["future_dirs"] and all(now["replica_dirs"][(t, p)] == d for (t, p, _), d in placed.items())

        wait_until(settled, 60, "broker 3's replicas in their directories")
    config_path = demo_config(
        tmp_path, cluster={"name": "jbod", "bootstrap_servers": bootstrap}, pools={"all": {"brokers": [1, 2, 3]}},
        topic_pools=[{"topics": "*", "pool": "all"}], execution={"poll_interval_s": 0.5},
        capacity={"cruise_control_file": str(_capacity_file(tmp_path / "capacity.json", jbod_cluster))})
    result = subprocess.run(
        [str(Path(sys.executable).parent / "kafka-rebalancer"), "drain", "--config", str(config_path), "--brokers",
         "1", "--reason", "arrivals test", "--apply", "--yes"], capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    run = Path(re.search(r"Artifacts: `([^`]+)`", result.stdout).group(1))  # type: ignore[union-attr]
    plan = {(e["topic"], e["partition"]): e for e in json.loads((run / "plan" / "plan.json").read_text())["partitions"]}
    for partition in range(4):
        entry = plan[("jbod-arrive", partition)]
        assert entry["replicas"][entry["log_dirs"].index(large)] == 3, entry
    named = {(t, p, b): d for (t, p), e in plan.items() for b, d in zip(e["replicas"], e.get("log_dirs", []),
                                                                           strict=True) if d != "any"}
    with ClusterAdmin(KafkaConnection(bootstrap)) as admin:
        where = admin.describe_log_dirs([1, 2, 3])
        assert not where[1]["replica_dirs"], where[1]["replica_dirs"]  # drained
        assert {r: where[r[2]]["replica_dirs"].get((r[0], r[1])) for r in named} == named
        assert all(not where[b]["future_dirs"] for b in (2, 3))
        admin.uncordon([1])
        # The other tests' brokers as they were.
        for future in admin._admin.delete_topics(["jbod-big", "jbod-many", "jbod-arrive"]).values():
            future.result()
    actions = [json.loads(line)["action"] for line in (run / "execute" / "all" / "execution_log.jsonl").read_text()
               .splitlines()]
    assert "log_dirs_misplaced" not in actions, actions
    assert "log_dirs_named" in actions, actions
    verified = json.loads((run / "verify" / "summary.json").read_text())
    assert verified["promises_kept"], verified["promises"]


def test_moves_between_directories_run_under_their_throttle_and_resume_after_a_broker_restart(
        jbod_cluster: Any) -> None:
    bootstrap = jbod_cluster.load().bootstrap_servers
    _topic_with_data(bootstrap, "jbod-moves", [[1, 2], [1, 3]], 8)
    moves = _moves_to_the_other_directory(jbod_cluster, "jbod-moves", [(0, 1), (1, 1), (0, 2)])
    records: list[dict[str, Any]] = []
    assert sorted(m.replica for m in _executed(bootstrap, moves, records, rate=4 * MIB)) == \
        sorted(m.replica for m in moves)
    assert _dirs_now(bootstrap, moves) == {m.replica: (m.target_dir, None) for m in moves}
    assert records[0] == {"action": "log_dir_throttle_set", "brokers": [1, 2], "rate_bytes_per_s": 4 * MIB,
                          "failed": {}}
    assert records[-1]["action"] == "log_dir_throttle_cleared" and records[-1]["failed"] == {}
    with ClusterAdmin(KafkaConnection(bootstrap)) as admin:
        configs = admin._admin.describe_configs([ConfigResource(ResourceType.BROKER, "1")])
        entry = next(iter(configs.values())).result().get("replica.alter.log.dirs.io.max.bytes.per.second")
        assert entry is None or entry.is_default, entry  # the throttle is gone

    # Back again at 1 MiB/s, and broker 1 restarted while its first copy is in flight.
    back = [LogDirMove(m.topic, m.partition, m.broker, m.target_dir, m.source_dir, m.size_bytes) for m in moves[:1]]
    _intra_broker_throttle(bootstrap, 1, MIB)
    with ClusterAdmin(KafkaConnection(bootstrap)) as admin:
        assert admin.alter_replica_log_dirs({back[0].replica: back[0].target_dir}) == {}
    wait_until(lambda: _dirs_now(bootstrap, back)[back[0].replica][1] == back[0].target_dir, 30, "the future copy")
    jbod_cluster.stop_broker(1, hard=True)
    jbod_cluster.start_broker(1)
    records.clear()
    assert _executed(bootstrap, back, records, rate=8 * MIB) == back
    # Restarted, the broker either resumes the future copy it finds on disk or forgets the move (then the executor
    # asks again: `log_dir_reissued`); either way the replica ends in its directory.
    assert {"log_dir_started", "log_dir_completed"} <= {r["action"] for r in records}
    assert _dirs_now(bootstrap, back) == {back[0].replica: (back[0].target_dir, None)}


def test_cancel_takes_moved_and_moving_replicas_back_to_their_directories(jbod_cluster: Any) -> None:
    bootstrap = jbod_cluster.load().bootstrap_servers
    _topic_with_data(bootstrap, "jbod-cancel", [[2, 3], [3, 1]], 8)
    moved, moving = _moves_to_the_other_directory(jbod_cluster, "jbod-cancel", [(0, 2), (1, 3)])
    assert _executed(bootstrap, [moved], []) == [moved]
    _intra_broker_throttle(bootstrap, 3, 256 * 1024)  # about 30 s for the copy: still in flight at the cancel
    try:
        with ClusterAdmin(KafkaConnection(bootstrap)) as admin:
            assert admin.alter_replica_log_dirs({moving.replica: moving.target_dir}) == {}
            wait_until(lambda: _dirs_now(bootstrap, [moving])[moving.replica][1] == moving.target_dir, 30,
                       "the future copy")
            records: list[dict[str, Any]] = []
            assert cancel_log_dir_moves(admin, [moved, moving],
                                        lambda action, **e: records.append({"action": action, **e})) == 2
        wait_until(lambda: _dirs_now(bootstrap, [moved, moving]) == {moved.replica: (moved.source_dir, None),
                                                                     moving.replica: (moving.source_dir, None)},
                   60, "both replicas back in their source directories, no future copy")
    finally:
        _intra_broker_throttle(bootstrap, 3, None)


def test_a_replica_moving_between_directories_counts_once_where_it_is(jbod_cluster: Any, tmp_path: Path) -> None:
    state = jbod_cluster.load()
    bootstrap = state.bootstrap_servers
    _topic_with_data(bootstrap, TOPIC, [[1, 2], [2, 3]], 12)
    config = load_config(demo_config(
        tmp_path, pools={"all": {"brokers": [1, 2, 3]}}, topic_pools=[{"topics": "*", "pool": "all"}],
        capacity={"cruise_control_file": str(_capacity_file(tmp_path / "capacity.json", jbod_cluster))}))
    broker_1 = next(n for n in state.brokers if n.node_id == 1)
    first, second = (str(d) for d in jbod_cluster.log_dirs(broker_1, state))
    with ClusterAdmin(KafkaConnection(bootstrap)) as admin:
        now_in = admin.describe_log_dirs([1])[1]["replica_dirs"][(TOPIC, 0)]
        target = second if now_in == first else first
        _intra_broker_throttle(bootstrap, 1, MIB)  # about 12 s for the copy: long enough to look at it
        try:
            assert admin.alter_replica_log_dirs({(TOPIC, 0, 1): target}) == {}
            wait_until(lambda: (TOPIC, 0) in admin.describe_log_dirs([1])[1]["future_dirs"], 30,
                       "the future copy in the target directory")
            run = RunFolder(config.run_dir("jbod-moving"))
            take_snapshot(config, KafkaConnection(bootstrap), run)
            tables, manifest = read_snapshot(run)
            wait_until(lambda: admin.describe_log_dirs([1])[1]["replica_dirs"].get((TOPIC, 0)) == target, 90,
                       "the replica in its new directory")
        finally:
            _intra_broker_throttle(bootstrap, 1, None)

    assert tables.log_dirs is not None and tables.replica_log_dirs is not None
    dirs = tables.log_dirs.set_index(["broker_id", "log_dir"])
    assert dirs.loc[(1, first), "capacity_bytes"] == 1024 * MIB
    assert dirs.loc[(1, second), "capacity_bytes"] == 3072 * MIB
    assert set(dirs["capacity_source"]) == {"capacity file"}
    moving = tables.replica_log_dirs.set_index(["topic", "partition", "broker_id"]).loc[(TOPIC, 0, 1)]
    assert moving["log_dir"] == now_in and moving["future_log_dir"] == target
    size = int(moving["size_bytes"])
    assert size > 10 * MIB
    # Counted once: one row, in its directory's usage only, and once in the broker's disk use.
    on_1 = tables.replica_log_dirs[tables.replica_log_dirs["broker_id"] == 1]
    assert len(on_1[(on_1["topic"] == TOPIC) & (on_1["partition"] == 0)]) == 1
    for log_dir in (now_in, target):
        assert dirs.loc[(1, log_dir), "used_bytes"] == on_1.loc[on_1["log_dir"] == log_dir, "size_bytes"].sum()
    assert tables.brokers.set_index("broker_id").loc[1, "disk_used_bytes"] <= on_1["size_bytes"].sum()
    assert any("moving between log dirs" in w and f"{TOPIC}-0 to {target}" in w for w in manifest["warnings"])

    after = RunFolder(config.run_dir("jbod-moved"))
    take_snapshot(config, KafkaConnection(bootstrap), after)
    moved = read_snapshot(after)[0].replica_log_dirs
    assert moved is not None
    row = moved.set_index(["topic", "partition", "broker_id"]).loc[(TOPIC, 0, 1)]
    assert row["log_dir"] == target and row["future_log_dir"] is None


def test_remove_disks_empties_a_directory_under_live_traffic_and_cordons_it(jbod_cluster: Any,
                                                                            tmp_path: Path) -> None:
    import subprocess
    import sys

    from tests.live_traffic import LiveTraffic

    state = jbod_cluster.load()
    bootstrap = state.bootstrap_servers
    _topic_with_data(bootstrap, "jbod-remove", [[2, 1], [2, 3], [3, 2], [1, 2]], 4)
    broker_2 = next(n for n in state.brokers if n.node_id == 2)
    removed, kept = (str(d) for d in jbod_cluster.log_dirs(broker_2, state))
    config_path = demo_config(
        tmp_path, cluster={"name": "jbod", "bootstrap_servers": bootstrap}, pools={"all": {"brokers": [1, 2, 3]}},
        topic_pools=[{"topics": "*", "pool": "all"}], execution={"poll_interval_s": 0.5},
        capacity={"cruise_control_file": str(_capacity_file(tmp_path / "capacity.json", jbod_cluster))})
    with ClusterAdmin(KafkaConnection(bootstrap)) as admin:
        before = admin.describe_log_dirs([2])[2]["replica_dirs"]
    assert removed in before.values(), "the test needs replicas in the directory it removes"
    with LiveTraffic(bootstrap, {"jbod-remove": 4}, prefix="remove-disks") as traffic:
        result = subprocess.run(
            [str(Path(sys.executable).parent / "kafka-rebalancer"), "remove-disks", "--config", str(config_path),
             "--log-dirs", f"2:{removed}", "--reason", "disk failing", "--apply", "--yes"],
            capture_output=True, text=True, timeout=900)
        assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    traffic.check()
    assert "Moves between a broker's log dirs (remove-disks):" in result.stdout  # in the summary a person approves
    with ClusterAdmin(KafkaConnection(bootstrap)) as admin:
        after = admin.describe_log_dirs([2])[2]
        assert removed not in after["replica_dirs"].values() and not after["future_dirs"], after["replica_dirs"]
        assert set(after["replica_dirs"]) >= set(before)  # nothing left the broker
        cordon = admin.cordoned_brokers([2])
        assert cordon[2].config == removed, cordon
        # A new topic's partitions on broker 2 all land in the directory still in use.
        create_topics(bootstrap, [TopicSpec("jbod-after-remove", [[2]] * 6, [0] * 6)])

        def placed() -> set[str]:
            dirs = admin.describe_log_dirs([2])[2]["replica_dirs"]
            return {d for (topic, _), d in dirs.items() if topic == "jbod-after-remove"} \
                if sum(topic == "jbod-after-remove" for topic, _ in dirs) == 6 else set()

        wait_until(lambda: bool(placed()), 30, "the new topic's six replicas on broker 2")
        assert placed() == {kept}
        admin.uncordon([2])
    run = Path(re.search(r"Artifacts: `([^`]+)`", result.stdout).group(1))  # type: ignore[union-attr]
    summary = json.loads((run / "plan" / "summary.json").read_text())["log_dir_moves"]
    assert summary["removed"] == [f"2:{removed}"] and summary["moves"] >= 1 and summary["stranded"] == []
    verified = json.loads((run / "verify" / "summary.json").read_text())
    assert verified["promises_kept"], verified["promises"]


def test_rebalance_pool_balances_an_overfull_directory_inside_its_broker(jbod_cluster: Any, tmp_path: Path) -> None:
    import subprocess
    import sys

    state = jbod_cluster.load()
    bootstrap = state.bootstrap_servers
    _topic_with_data(bootstrap, "jbod-overfull", [[3, 1], [3, 2], [1, 3], [2, 3]], 4)
    broker_3 = next(n for n in state.brokers if n.node_id == 3)
    small, large = (str(d) for d in jbod_cluster.log_dirs(broker_3, state))  # 1 GiB and 3 GiB in the capacity file
    with ClusterAdmin(KafkaConnection(bootstrap)) as admin:
        on_3 = admin.describe_log_dirs([3])[3]["replica_dirs"]
        admin.alter_replica_log_dirs({(t, p, 3): small for t, p in on_3})  # every replica of broker 3 in one dir
        wait_until(lambda: set(admin.describe_log_dirs([3])[3]["replica_dirs"].values()) == {small}, 60,
                   "broker 3's replicas all in its small directory")
    config_path = demo_config(
        tmp_path, cluster={"name": "jbod", "bootstrap_servers": bootstrap}, pools={"all": {"brokers": [1, 2, 3]}},
        topic_pools=[{"topics": "*", "pool": "all"}], execution={"poll_interval_s": 0.5},
        # ±50 %: broker 3 holds a few dozen MiB in replicas of 4 to 16 MiB, too coarse for a ±10 % band of a
        # directory's share to exist.
        resources={"disk": {"threshold": 1.5}}, priority=["disk"],
        capacity={"cruise_control_file": str(_capacity_file(tmp_path / "capacity.json", jbod_cluster))})
    result = subprocess.run(
        [str(Path(sys.executable).parent / "kafka-rebalancer"), "rebalance-pool", "--config", str(config_path),
         "--pool", "all", "--apply", "--yes"], capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    run = Path(re.search(r"Artifacts: `([^`]+)`", result.stdout).group(1))  # type: ignore[union-attr]
    planned = json.loads((run / "plan" / "summary.json").read_text())["log_dir_moves"]
    assert planned["moves"] >= 1 and planned["why"] == "each broker's log dirs into their band"
    with ClusterAdmin(KafkaConnection(bootstrap)) as admin:
        dirs = admin.describe_log_dirs([3])[3]["dirs"]
    capacity = {small: 1024 * MIB, large: 3072 * MIB}
    mean = sum(dirs[d]["used_bytes"] for d in capacity) / sum(capacity.values())
    usage = {d: dirs[d]["used_bytes"] / capacity[d] for d in capacity}
    assert all(mean * 0.5 <= u <= mean * 1.5 for u in usage.values()), (usage, mean)
    verified = json.loads((run / "verify" / "summary.json").read_text())["log_dirs"]
    assert any(line.startswith(f"3:{small} ") for line in verified["out_of_band_before"]), verified
    assert not any(line.startswith("3:") for line in verified["out_of_band_after"]), verified



@pytest.mark.airflow
def test_remove_disks_through_the_manual_dag_waits_for_a_person_then_empties_the_directory(
        jbod_cluster: Any, shared_airflow: SharedAirflow, tmp_path: Path) -> None:
    """The manual DAG's remove-disks on a real Airflow: it plans, waits under Required Actions with the moves in
    the body (no replica changes broker, yet it is not "a plan that changes nothing"), and once approved empties
    the directory. On the session's Airflow, its Kafka connection pointed at this module's cluster."""
    from collections import Counter

    bootstrap = jbod_cluster.load().bootstrap_servers
    _topic_with_data(bootstrap, "jbod-dag", [[1, 2], [1, 3], [1, 2]], 2)
    with ClusterAdmin(KafkaConnection(bootstrap)) as admin:
        removed = Counter(admin.describe_log_dirs([1])[1]["replica_dirs"].values()).most_common(1)[0][0]
    config_path = demo_config(
        tmp_path, cluster={"name": "jbod", "bootstrap_servers": bootstrap}, pools={"all": {"brokers": [1, 2, 3]}},
        topic_pools=[{"topics": "*", "pool": "all"}], execution={"poll_interval_s": 0.5},
        capacity={"cruise_control_file": str(_capacity_file(tmp_path / "capacity.json", jbod_cluster))})
    config = load_config(config_path)
    services = shared_airflow.use(config_path, bootstrap, unpaused=(MANUAL,))
    try:
        run_id = services.trigger(MANUAL, {"action": "remove-disks", "log_dirs": [f"1:{removed}"],
                                           "reason": "disk failing", "mode": "execute"})
        waiting = services.wait_for_input(MANUAL, run_id)
        assert "Moves between a broker's log dirs (remove-disks)" in waiting["body"], waiting["body"]
        services.respond(MANUAL, run_id, "approve", ["Approve"])
        assert services.wait_for_run(MANUAL, run_id) == "success", services.task_states(MANUAL, run_id)
    finally:
        shared_airflow.quiet()
    with ClusterAdmin(KafkaConnection(bootstrap)) as admin:
        after = admin.describe_log_dirs([1])[1]
        assert removed not in after["replica_dirs"].values() and not after["future_dirs"], after["replica_dirs"]
        admin.uncordon([1])
    verified = json.loads((config.run_dir(run_id) / "verify" / "summary.json").read_text())
    assert verified["promises_kept"], verified["promises"]
