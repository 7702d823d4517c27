"""The cluster calls the pipeline, on a real Airflow (scheduler, triggerer, DAG processor, API server) and the
real local cluster, with the events DAG unpaused (the watcher in the triggerer starts with it):

1. broker 8 is started into the cluster; pool-b's rule claims it (mode execute): the events DAG starts an
   add-brokers run of the manual DAG, which executes unattended within the auto-approval limits; broker 8 holds
   replicas after it, every message is still there, and pool-b holds it from then on;
2. while a person's run on pool-b waits for its approval (holding the pool), broker 5 is killed: past the grace
   period it is lost, and its drain is held back (the pool is held); broker 2, stopped and started again inside
   the grace period, starts nothing;
3. the person rejects their run: the pool is free, and at the retry the lost broker (still gone) starts one drain
   of it, which waits for a person (mode approve);
4. two brokers of one pool lost seconds apart, each past the grace period on a different look, start one drain of
   both.
Each test has a config (and run folders) of its own on the session's Airflow (tests/integration/shared_airflow.py),
with both DAGs unpaused (the manual one, whose runs the events DAG starts, first); the runs of the tests before it
are left out.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kafka_rebalancer.automation.events_log import read_events
from kafka_rebalancer.cli import main
from kafka_rebalancer.config import load_config
from kafka_rebalancer.kafka_admin import ClusterAdmin, KafkaConnection
from kafka_rebalancer.operations.request import run_config
from tests.integration.conftest import delete_topics, demo_config, reassign_by_hand, wait_until
from tests.integration.shared_airflow import EVENTS, MANUAL, SharedAirflow, run_ids
from tools.airflow_services import AirflowServices
from tools.demo_workload import TopicSpec, consume_and_check, create_topics, produce

pytestmark = [pytest.mark.kafka, pytest.mark.airflow]
TOPIC, SKEW = "clicks-automation", "clicks-automation-skew"
GRACE_S, COOLDOWN_S = 60, 30
NEW = 8  # the broker started into the cluster (test_manual_operations adds 7)


def _new_runs(services: AirflowServices, dag_id: str, known: set[str], timeout_s: float) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        runs = [r for r in services.runs(dag_id) if r["dag_run_id"] not in known]
        if runs:
            return runs
        time.sleep(2)
    raise AssertionError(f"no new run of {dag_id} within {timeout_s:.0f}s")


def _decisions(config: Any, broker_id: int) -> list[tuple[str, str, str]]:
    return [(e["kind"], e["decision"], e.get("why", "")) for e in read_events(config) if e["broker_id"] == broker_id]


def _wait_for_decision(config: Any, broker_id: int, matches: Callable[[tuple[str, str, str]], bool],
                       timeout_s: float) -> None:
    wait_until(lambda: any(matches(d) for d in _decisions(config, broker_id)), timeout_s,
               f"a decision on broker {broker_id}", poll_s=2)


def _replicas_on(bootstrap: str, broker_id: int) -> int:
    with ClusterAdmin(KafkaConnection(bootstrap)) as admin:
        partitions = admin.describe_partitions([TOPIC])
    return sum(broker_id in p.replicas for p in partitions)


def _move_off(bootstrap: str, broker_id: int) -> None:
    """Reassign every replica on the broker to another live broker, and wait until it holds none."""
    with ClusterAdmin(KafkaConnection(bootstrap)) as admin:
        live = sorted(admin.live_broker_ids() - {broker_id})
        targets = {(p.topic, p.partition): [b if b != broker_id else next(x for x in live if x not in p.replicas)
                                            for b in p.replicas]
                   for p in admin.describe_partitions() if broker_id in p.replicas}
    reassign_by_hand(bootstrap, targets)


def test_brokers_added_and_lost_start_their_operations_one_per_pool(kafka_cluster: Any, shared_airflow: SharedAirflow,
                                                                    tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    bootstrap = kafka_cluster.load().bootstrap_servers
    topic = TopicSpec(TOPIC, [[4, 5] if p % 2 else [5, 4] for p in range(8)], [1024] * 4 + [384] * 4)
    skew = TopicSpec(SKEW, [[4, 5]] * 6, [2048] * 6)
    create_topics(bootstrap, [topic])
    created = [TOPIC]
    manifest = produce(bootstrap, [topic])
    config_path = demo_config(
        tmp_path, cluster={"name": "watched", "bootstrap_servers": bootstrap},
        pools={"pool-a": {"brokers": [1, 2, 3, 6]}, "pool-b": {"brokers": [4, 5], "claim": {"broker_ids": ["8"]}}},
        approval={"auto_approve": {"max_replica_moves": 50}}, exclude={"topics": ["__*"], "brokers": []},
        automation={"poll_interval_s": 2, "cooldown_s": COOLDOWN_S,
                    "broker_added": {"mode": "execute", "settle_s": 4},
                    "broker_lost": {"mode": "approve", "grace_period_s": GRACE_S}})
    config = load_config(config_path)
    killed: list[int] = []
    started: list[int] = []
    services = shared_airflow.use(config_path, bootstrap, unpaused=(MANUAL, EVENTS))
    before = run_ids(services, MANUAL)
    try:
        kafka_cluster.add_broker(NEW, "rack-c")  # a new machine
        started.append(NEW)
        (added,) = _new_runs(services, MANUAL, before, 300)
        conf = added["conf"]
        assert added["dag_run_id"].startswith("automatic__pool-b__"), added
        assert (conf["action"], conf["broker_pool"], conf["brokers"], conf["mode"]) == (
            "add-brokers", "pool-b", [NEW], "execute"), conf
        assert f"broker {NEW} (rack" in conf["reason"] and "pool pool-b's claim takes it" in conf["reason"]
        assert services.wait_for_run(MANUAL, added["dag_run_id"], 900) == "success", \
            services.task_states(MANUAL, added["dag_run_id"])
        decision = json.loads((config.run_dir(added["dag_run_id"]) / "approval" / "decision.json").read_text())
        assert decision["state"] == "auto-approved" and "mode execute" in " ".join(decision["why"]), decision
        assert _replicas_on(bootstrap, NEW) > 0  # filled
        consume_and_check(bootstrap, manifest)  # nothing lost
        assert run_config(config_path).pools["pool-b"].brokers == [4, 5, NEW]  # the override, recorded

        # A person's run on pool-b (now out of balance) waits for its approval: the pool is held from its snapshot.
        create_topics(bootstrap, [skew])
        created.append(SKEW)
        produce(bootstrap, [skew])
        held_by = services.trigger(MANUAL, {"action": "rebalance-pool", "broker_pool": "pool-b", "mode": "execute"})
        services.wait_for_input(MANUAL, held_by)
        kafka_cluster.stop_broker(5, hard=True)
        killed.append(5)
        kafka_cluster.stop_broker(2)  # a controlled shutdown: it leaves the registered brokers at once
        killed.append(2)
        time.sleep(20)  # several looks see it gone (one may time out as it goes down)
        kafka_cluster.start_broker(2)  # back well inside the grace period
        killed.remove(2)
        _wait_for_decision(config, 5, lambda d: d[1] == "suppressed" and f"held by run {held_by}" in d[2],
                           GRACE_S + 120)
        services.respond(MANUAL, held_by, "approve", ["Reject"])
        assert services.wait_for_run(MANUAL, held_by, 300) in ("success", "failed")

        # The retry after the cooldown: broker 5 is still gone, so its drain starts, and waits for a person.
        known = before | {added["dag_run_id"], held_by}
        (drain,) = _new_runs(services, MANUAL, known, COOLDOWN_S + 180)
        assert (drain["conf"]["action"], drain["conf"]["brokers"]) == ("drain-brokers", [5]), drain
        waiting = services.wait_for_input(MANUAL, drain["dag_run_id"])
        assert "an automatic run in mode approve" in waiting["body"], waiting["body"]
        services.respond(MANUAL, drain["dag_run_id"], "approve", ["Reject"])
        services.wait_for_run(MANUAL, drain["dag_run_id"], 300)
        assert [r["dag_run_id"] for r in services.runs(MANUAL)
                if r["dag_run_id"] not in known | {drain["dag_run_id"]}] == []  # one run for the lost broker
        page = services.request_text("GET", "/kafka-rebalancer/")
        assert "events of the cluster's watcher" in page and f"held by run {held_by}" in page, page
        assert f'href="/kafka-rebalancer/report/{added["dag_run_id"]}"' in page
    finally:
        shared_airflow.quiet()
        for broker_id in killed:
            kafka_cluster.start_broker(broker_id)
        delete_topics(bootstrap, created)  # before broker 8 goes: nothing of them left on it
        for broker_id in started:
            _move_off(bootstrap, broker_id)  # whatever else landed there: the session's next tests need it whole
            kafka_cluster.remove_broker(broker_id)
    back = [e for e in read_events(config) if e["broker_id"] == 2]  # restarted inside the grace period
    assert back and all(e["kind"] == "broker_back" and e["decision"] != "started" for e in back), back
    assert "inside the grace period" in back[0]["observed"], back
    assert [d[1] for d in _decisions(config, 5) if d[0] == "broker_lost"].count("started") == 1
    assert [d[1] for d in _decisions(config, NEW) if d[0] == "broker_added"].count("started") == 1
    assert main(["runs", "--config", str(config_path)]) == 0
    listed = capsys.readouterr().out
    assert "automatic" in listed and "latest events of the cluster's watcher" in listed, listed
    assert f"started drain-brokers: drain-brokers of broker(s) [5] in pool pool-b (run {drain['dag_run_id']})" \
        in listed, listed


def test_a_pool_out_of_band_starts_a_rebalance_of_it(kafka_cluster: Any, shared_airflow: SharedAirflow,
                                                     tmp_path: Path) -> None:
    # Pool-a's topic sits on brokers 1 and 2 only: at the first band check (due at the watcher's first look) the
    # events DAG's check_bands task finds pool-a out of band and its decision starts a rebalance-pool (dry run).
    bootstrap = kafka_cluster.load().bootstrap_servers
    skewed = TopicSpec("watched-skew", [[1, 2]] * 4, [2048] * 4)
    create_topics(bootstrap, [skewed])
    produce(bootstrap, [skewed])
    config_path = demo_config(
        tmp_path, cluster={"name": "banded", "bootstrap_servers": bootstrap},
        pools={"pool-a": {"brokers": [1, 2, 3]}}, topic_pools=[{"topics": "watched-*", "pool": "pool-a"}],
        automation={"poll_interval_s": 2, "out_of_band": {"mode": "dry-run", "share": 0.3, "sustained_s": 0,
                                                          "check_interval_s": 3600}})
    config = load_config(config_path)
    services = shared_airflow.use(config_path, bootstrap, unpaused=(MANUAL, EVENTS))
    before, events_before = run_ids(services, MANUAL), run_ids(services, EVENTS)
    try:
        (rebalance,) = _new_runs(services, MANUAL, before, 300)
        conf = rebalance["conf"]
        assert (conf["action"], conf["broker_pool"], conf["brokers"], conf["mode"]) == (
            "rebalance-pool", "pool-a", [], "dry-run"), conf
        assert "brokers of pool pool-a out of band" in conf["reason"], conf
        assert services.wait_for_run(MANUAL, rebalance["dag_run_id"], 600) == "success", \
            services.task_states(MANUAL, rebalance["dag_run_id"])
        (event_run,) = [r for r in services.runs(EVENTS)
                        if r["state"] == "success" and r["dag_run_id"] not in events_before][:1]
        assert services.task_states(EVENTS, event_run["dag_run_id"])["check_bands"] == "success"
    finally:
        shared_airflow.quiet()
        delete_topics(bootstrap, [skewed.name])
    decided = [(e["kind"], e["decision"]) for e in read_events(config)]
    assert ("pool_out_of_band", "started") in decided and decided.count(("pool_out_of_band", "started")) == 1


def test_two_brokers_of_a_pool_lost_a_few_looks_apart_make_one_drain(kafka_cluster: Any, shared_airflow: SharedAirflow,
                                                                     tmp_path: Path) -> None:
    # Broker 5 crashes (unregistered once its session times out, ~9 s), broker 6 of the same pool is shut down 25 s
    # later: each passes the grace period on a look of its own, yet the first waits for the second (still inside its
    # grace period) and one drain takes both.
    bootstrap = kafka_cluster.load().bootstrap_servers
    config_path = demo_config(
        tmp_path, cluster={"name": "two-lost", "bootstrap_servers": bootstrap},
        pools={"pool-a": {"brokers": [1, 2, 3]}, "pool-b": {"brokers": [4, 5, 6]}},
        exclude={"topics": ["__*"], "brokers": []},
        automation={"poll_interval_s": 2, "cooldown_s": 30, "broker_lost": {"mode": "approve", "grace_period_s": 30}})
    config = load_config(config_path)
    killed: list[int] = []
    services = shared_airflow.use(config_path, bootstrap, unpaused=(MANUAL, EVENTS))
    before = run_ids(services, MANUAL)
    try:
        state = config.run_root / config.cluster.name / ".automation" / "watch_state.json"
        wait_until(state.exists, 180, "the watcher's first look", poll_s=1)
        kafka_cluster.stop_broker(5, hard=True)
        killed.append(5)
        time.sleep(25)
        kafka_cluster.stop_broker(6)
        killed.append(6)
        (drain,) = _new_runs(services, MANUAL, before, 240)
        assert (drain["conf"]["action"], drain["conf"]["brokers"]) == ("drain-brokers", [5, 6]), drain
        time.sleep(15)  # several more looks: nothing else starts
        assert run_ids(services, MANUAL) - before == {drain["dag_run_id"]}
    finally:
        shared_airflow.quiet()
        for broker_id in killed:
            kafka_cluster.start_broker(broker_id)

    def in_sync() -> bool:
        with ClusterAdmin(KafkaConnection(bootstrap)) as admin:
            return all(len(p.isr) == len(p.replicas) for p in admin.describe_partitions())

    wait_until(in_sync, 180, "brokers 5 and 6 back in every ISR", poll_s=2)  # the session's next tests need them
    lost = [e for e in read_events(config) if e["kind"] == "broker_lost" and e["decision"] == "started"]
    assert sorted((e["broker_id"], e["run_id"]) for e in lost) == [(5, drain["dag_run_id"]), (6, drain["dag_run_id"])]
