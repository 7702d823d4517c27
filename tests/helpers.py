"""Helpers shared by the tests."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"  # public example files (Cruise Control, kafka-kit), with their licenses


def write_config(path: Path, body: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(body, sort_keys=False))
    return path


def fake_admin(brokers: list[Any], partitions: list[Any], sizes: dict[tuple[str, int], int],
               topic_configs: dict[str, dict[str, str]] | None = None,
               broker_configs: dict[int, dict[str, str]] | None = None) -> type:
    """A stand-in for ClusterAdmin with the admin calls `capture` makes (monkeypatch it over
    kafka_rebalancer.snapshot.ClusterAdmin): this cluster, each replica as large as its partition, the configs
    set on topics and brokers (none by default)."""

    class FakeAdmin:
        def __init__(self, connection: Any) -> None:
            self.connection = connection

        def __enter__(self) -> FakeAdmin:
            return self

        def __exit__(self, *exc: object) -> None:
            return None

        def check_reachable(self) -> None:
            return None

        def describe_cluster(self) -> tuple[str, list[Any]]:
            return "cid", brokers

        def describe_partitions(self) -> list[Any]:
            return partitions

        def topic_config(self, topics: Any, name: str, why: str) -> dict[str, str | None]:
            return {t: (topic_configs or {}).get(t, {}).get(name) for t in topics}

        def broker_config(self, broker_ids: Any, name: str, why: str) -> dict[int, str | None]:
            return {b: (broker_configs or {}).get(b, {}).get(name) for b in broker_ids}

        def describe_log_dirs(self, broker_ids: list[int]) -> dict[int, dict[str, Any]]:
            out: dict[int, dict[str, Any]] = {b: {"replicas": {}} for b in broker_ids}
            for p in partitions:
                for b in p.replicas:
                    out[b]["replicas"][(p.topic, p.partition)] = sizes[(p.topic, p.partition)]
            return out

    return FakeAdmin


def write_validated_plan(run: Any, config: Any, snapshot_hash: str, moves: list[tuple[str, int, list, list]],
                         validated: bool = True) -> str:
    """Plan artifacts for hand-picked moves (topic, partition, old, new) and a validation verdict on them, as the
    plan and validate stages would leave them; returns the plan hash. For executor tests that need an exact plan."""
    from kafka_rebalancer.model.reassignment import dumps, plan_hash
    from kafka_rebalancer.run_folder import PLAN, VALIDATION, write_json

    def doc(column: int) -> dict[str, Any]:
        return {"version": 1, "partitions": [{"topic": m[0], "partition": m[1], "replicas": list(m[column])}
                                             for m in moves]}

    text = dumps(doc(3))
    digest = plan_hash(text, snapshot_hash, config.fingerprint())
    with run.stage(PLAN) as out:
        (out / "plan.json").write_text(text)
        (out / "rollback.json").write_text(dumps(doc(2)))
        write_json(out / "summary.json", {"plan_hash": digest, "snapshot_hash": snapshot_hash})
    with run.stage(VALIDATION) as out:
        write_json(out / "report.json", {"success": validated, "plan_hash": digest})
    return digest


@contextmanager
def running_cluster(name: str, **start: Any) -> Iterator[Any]:
    """A real local Kafka cluster of this name (tools.local_kafka; `start`: its start arguments), started fresh
    (whatever an interrupted session left of it stopped first) and stopped by its pids afterwards."""
    from tools.local_kafka import LocalKafkaCluster

    # Each pytest-xdist worker its own: starting a cluster stops whatever was left under its name.
    cluster = LocalKafkaCluster(name + os.environ.get("PYTEST_XDIST_WORKER", ""))
    cluster.stop(quiet=True)
    cluster.start(**start)
    try:
        yield cluster
    finally:
        cluster.stop(quiet=True)
