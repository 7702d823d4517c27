"""A drain's `--unregister`: the request's field, the refusal rules, the step after verify (its stage, retry-safe)
and what Kafka's ClusterTool is given and what is read from it. The real cluster: tests/integration/
test_dead_broker_drain.py (`-k unregister`)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest

from kafka_rebalancer.cli import main
from kafka_rebalancer.kafka_admin import KafkaConnection, PartitionInfo
from kafka_rebalancer.kafka_cluster_tool import (
    ClusterTool,
    KafkaToolError,
    Registration,
    java_properties,
    parse_registrations,
)
from kafka_rebalancer.operations.request import (
    RequestError,
    check_brokers_in_cluster,
    make_request,
    run_config,
    write_request,
)
from kafka_rebalancer.run_folder import VERIFY, RunFolder, write_json
from kafka_rebalancer.verify import unregister as step
from kafka_rebalancer.verify.unregister import UNREGISTER, UnregisterRefused, fenced_report, unregister_refusals
from tests.helpers import write_config

BODY = {"cluster": {"name": "c1"}, "pools": {"a": {"brokers": [1, 2, 3]}, "b": {"brokers": [4, 5, 6]}},
        "topic_pools": [{"topics": "*", "pool": "a"}], "resources": {"replica_count": {}}}


@pytest.fixture
def config_path(tmp_path: Path) -> Path:
    return write_config(tmp_path / "config.yaml", {**BODY, "run_root": str(tmp_path / "runs")})


# -- the request ---------------------------------------------------------------------------------------------
def test_a_drain_may_ask_to_unregister_its_brokers_and_no_other_action_may(config_path: Path) -> None:
    config = run_config(config_path)
    assert make_request(config, action="drain-brokers", brokers=[3], reason="dead", unregister=True).unregister
    assert not make_request(config, action="drain-brokers", brokers=[3], reason="dead").unregister  # off by default
    with pytest.raises(RequestError, match="'unregister': not used by rebalance-pool"):
        make_request(config, action="rebalance-pool", broker_pool="a", unregister=True)


def test_unregistering_a_running_broker_is_refused_before_anything_is_planned(config_path: Path) -> None:
    config = run_config(config_path)
    brokers = pd.DataFrame({"broker_id": [1, 2, 3, 4, 5, 6], "alive": [True, True, False, True, True, True]})
    check_brokers_in_cluster(make_request(config, action="drain-brokers", brokers=[3], reason="x", unregister=True),
                             brokers)
    live = make_request(config, action="drain-brokers", brokers=[2, 3], reason="x", unregister=True)
    with pytest.raises(RequestError, match=r"'unregister': broker\(s\) \[2\] are running"):
        check_brokers_in_cluster(live, brokers)
    check_brokers_in_cluster(make_request(config, action="drain-brokers", brokers=[2], reason="x"), brokers)


def test_the_cli_drain_takes_unregister_and_refuses_it_elsewhere(config_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["rebalance-pool", "--config", str(config_path), "--pool", "a", "--unregister"])
    assert exited.value.code == 2
    assert "unrecognized arguments: --unregister" in capsys.readouterr().err


# -- the refusal rules ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(("live", "fenced", "held", "refused"), [
    ({1, 2}, {1: False, 2: False, 3: True}, {1: 5, 2: 5}, []),  # down, fenced, empty
    ({1, 2}, {1: False, 2: False}, {}, []),  # no longer registered: nothing to refuse
    ({1, 2, 3}, {3: False}, {}, ["broker 3 is running"]),
    ({1, 2}, {3: False}, {}, ["broker 3 is running"]),  # registered unfenced: a heartbeat is due
    ({1, 2}, {3: True}, {3: 2}, ["broker 3 still holds 2 replica(s)"]),
])
def test_a_broker_is_unregistered_only_when_down_and_empty(live: set[int], fenced: dict[int, bool],
                                                           held: dict[int, int], refused: list[str]) -> None:
    reasons = unregister_refusals([3], live, fenced, held)
    assert len(reasons) == len(refused) and all(r.startswith(want) for r, want in zip(reasons, refused, strict=True))


# -- Kafka's ClusterTool: its input and output ---------------------------------------------------------------
def test_the_connection_settings_become_the_java_admin_clients() -> None:
    props = java_properties({"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                             "sasl.username": "admin", "sasl.password": 'pa"ss', "ssl.ca.location": "/ca.pem"})
    assert props["security.protocol"] == "SASL_SSL" and props["sasl.mechanism"] == "SCRAM-SHA-512"
    assert props["sasl.jaas.config"] == ('org.apache.kafka.common.security.scram.ScramLoginModule required '
                                         'username="admin" password="pa\\"ss";')
    assert props["ssl.truststore.type"] == "PEM" and props["ssl.truststore.location"] == "/ca.pem"
    assert java_properties({}) == {}
    with pytest.raises(KafkaToolError, match=r"ssl\.engine\.id has no translation"):
        java_properties({"ssl.engine.id": "x"})
    with pytest.raises(KafkaToolError, match=r"sasl\.mechanism 'GSSAPI'"):
        java_properties({"sasl.mechanism": "GSSAPI"})


def test_registered_brokers_are_read_from_list_endpoints() -> None:
    output = """ID         HOST      PORT       RACK   STATE      ENDPOINT_TYPE
1          127.0.0.1 28012      rack-a unfenced   broker
3          127.0.0.1 21713      null   fenced     broker
"""
    assert parse_registrations(output) == [Registration(1, False), Registration(3, True)]


def test_the_tool_needs_the_kafka_jars(tmp_path: Path) -> None:
    with pytest.raises(KafkaToolError, match=r"cluster\.kafka_libs is not set"):
        ClusterTool(KafkaConnection("127.0.0.1:1"), None).registrations()
    with pytest.raises(KafkaToolError, match=f"no kafka-tools jar in {re.escape(str(tmp_path))}"):
        ClusterTool(KafkaConnection("127.0.0.1:1"), tmp_path).registrations()


# -- the step after verify -----------------------------------------------------------------------------------
class FakeCluster:
    """The cluster as the step sees it: the admin calls and the ClusterTool."""

    def __init__(self, live: set[int], fenced: dict[int, bool], replicas: dict[str, list[int]],
                 metadata_version: int | None = 30) -> None:
        self.live, self.fenced, self.replicas, self.level = live, fenced, replicas, metadata_version
        self.unregistered: list[int] = []

    # ClusterAdmin
    def __call__(self, *_: Any) -> FakeCluster:
        return self

    def __enter__(self) -> FakeCluster:
        return self

    def __exit__(self, *_: object) -> None:
        pass

    def metadata_version(self) -> int | None:
        return self.level

    def live_broker_ids(self) -> frozenset[int]:
        return frozenset(self.live)

    def describe_partitions(self, topics: Iterable[str] | None = None) -> list[PartitionInfo]:
        return [PartitionInfo(t, 0, r, r, r[0]) for t, r in self.replicas.items()]

    # ClusterTool
    def registrations(self) -> list[Registration]:
        return [Registration(b, f) for b, f in sorted(self.fenced.items())]

    def unregister(self, broker_id: int) -> None:
        self.unregistered.append(broker_id)
        del self.fenced[broker_id]


def _drain_run(config_path: Path, *, unregister: bool = True, verified: bool = True) -> tuple[Any, RunFolder]:
    config = run_config(config_path)
    run = RunFolder(config.run_dir("drain"))
    write_request(run, make_request(config, action="drain-brokers", brokers=[3], reason="dead",
                                    unregister=unregister))
    with run.stage(VERIFY) as out:
        write_json(out / "summary.json", {"promises_kept": verified})
    return run_config(config_path, run), run


def _on(cluster: FakeCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(step, "ClusterAdmin", cluster)
    monkeypatch.setattr(step, "ClusterTool", cluster)


def test_a_verified_drain_unregisters_its_dead_brokers_once(config_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = FakeCluster({1, 2, 4, 5, 6}, {1: False, 3: True}, {"t": [1, 2]})
    _on(cluster, monkeypatch)
    config, run = _drain_run(config_path)
    summary = step.unregister_drained(config, KafkaConnection("x:1"), run)
    assert summary is not None and summary["brokers"] == {"3": "unregistered"} and cluster.unregistered == [3]
    assert summary["pool_override"] == 1  # stays active: the broker stays out of its pool (README)
    assert run.has(UNREGISTER)
    # A retry finds the stage written: the same answer, nothing called again.
    assert step.unregister_drained(config, KafkaConnection("x:1"), run) == summary and cluster.unregistered == [3]


def test_a_retry_before_the_stage_was_written_finds_the_broker_gone(config_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    _on(FakeCluster({1, 2}, {1: False}, {}), monkeypatch)
    config, run = _drain_run(config_path)
    summary = step.unregister_drained(config, KafkaConnection("x:1"), run)
    assert summary is not None and summary["brokers"] == {"3": "was not registered"}


@pytest.mark.parametrize(("cluster", "verified", "error"), [
    (FakeCluster({1, 2, 3}, {3: False}, {}), True, "broker 3 is running"),
    (FakeCluster({1, 2}, {3: True}, {"t": [3, 1]}), True, r"broker 3 still holds 1 replica\(s\)"),
    (FakeCluster({1, 2}, {3: True}, {}, metadata_version=None), True, "KRaft controller only"),
    (FakeCluster({1, 2}, {3: True}, {}), False, "is not verified"),
])
def test_the_step_refuses_and_unregisters_nothing(config_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  cluster: FakeCluster, verified: bool, error: str) -> None:
    _on(cluster, monkeypatch)
    config, run = _drain_run(config_path, verified=verified)
    with pytest.raises(UnregisterRefused, match=error):
        step.unregister_drained(config, KafkaConnection("x:1"), run)
    assert cluster.unregistered == [] and not run.has(UNREGISTER)


def test_a_drain_that_did_not_ask_unregisters_nothing(config_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = FakeCluster({1, 2}, {3: True}, {})
    _on(cluster, monkeypatch)
    config, run = _drain_run(config_path, unregister=False)
    assert step.unregister_drained(config, KafkaConnection("x:1"), run) is None and cluster.unregistered == []


def test_the_airflow_task_runs_the_step_on_its_run(config_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kafka_rebalancer.airflow import tasks

    cluster = FakeCluster({1, 2}, {3: True}, {})
    _on(cluster, monkeypatch)
    _, run = _drain_run(config_path)
    monkeypatch.setattr(tasks, "_connection", lambda config: KafkaConnection("x:1"))
    context: Any = {"params": {"config_path": str(config_path)}, "run_id": "drain", "dag_run": SimpleNamespace()}
    assert tasks.unregister_task(context, str(run.path)) == {"brokers": {"3": "unregistered"}, "pool_override": 1}


def test_fenced_brokers_holding_nothing_are_listed() -> None:
    cluster = FakeCluster({1, 2}, {1: False, 2: False, 3: True, 4: True}, {"t": [4, 1]})
    assert fenced_report(cluster, cluster).startswith("fenced brokers holding nothing: 3 (")  # type: ignore[arg-type]
    assert fenced_report(FakeCluster({1}, {1: False}, {}), FakeCluster({1}, {1: False}, {})) \
        == "fenced brokers holding nothing: none"  # type: ignore[arg-type]


def test_execute_reviewed_of_a_drain_keeps_its_unregister(config_path: Path) -> None:
    from kafka_rebalancer.snapshot.reviewed import adopted_request

    config = run_config(config_path)
    reviewed = make_request(config, action="execute-reviewed", reviewed_run_id="dry")
    drain = make_request(config, action="drain-brokers", brokers=[3], reason="dead", unregister=True)
    adopted = adopted_request(reviewed, drain)
    assert adopted.unregister and adopted.scope.drained == {3: "a"} and adopted.override == drain.override
    assert not adopted_request(reviewed, None).unregister  # a nightly run's plan
