"""The preflight permission check against a fake view of the ACLs (the real authorizer is in
tests/integration/test_security.py)."""

from __future__ import annotations

import logging
from collections.abc import Iterable

import pytest

from kafka_rebalancer.errors import PermissionDenied
from kafka_rebalancer.execute.moves import PartitionMove
from kafka_rebalancer.execute.throttle import Throttle, throttle_for
from kafka_rebalancer.kafka_admin import KafkaConnection
from kafka_rebalancer.permissions import CLUSTER, TOPIC, Need, check_permissions, denial, execution_needs

SECRET = "s3cret-pw"
MOVES = [PartitionMove("orders", 0, (1, 2), (1, 3), 100), PartitionMove("clicks", 1, (2, 1), (1, 2), 100)]


class FakeAcls:
    def __init__(self, cluster: set[str] | None, topics: dict[str, set[str] | None]) -> None:
        self.connection = KafkaConnection("b1:9092", {"sasl.username": "rebalancer", "sasl.password": SECRET})
        self.cluster, self.topics = cluster, topics
        self.asked: list[str] = []

    def authorized_operations(self, topics: Iterable[str]) -> tuple[
            frozenset[str] | None, dict[str, frozenset[str] | None]]:
        self.asked = sorted(topics)
        return (None if self.cluster is None else frozenset(self.cluster),
                {t: None if self.topics[t] is None else frozenset(self.topics[t])  # type: ignore[arg-type]
                 for t in self.asked if t in self.topics})


def test_execution_needs_follow_the_moves_and_the_throttle() -> None:
    throttled = execution_needs(MOVES, ["orders", "payments"], throttle_for(MOVES, 1000))
    assert [(n.operation, n.resource, n.names) for n in throttled] == [
        ("DESCRIBE", CLUSTER, ()), ("ALTER", CLUSTER, ()), ("DESCRIBE", TOPIC, ("clicks", "orders", "payments")),
        ("ALTER_CONFIGS", CLUSTER, ()), ("ALTER_CONFIGS", TOPIC, ("orders",))]  # clicks-1 only changes leaders
    unthrottled = execution_needs(MOVES, ["orders"], Throttle(None))
    assert {n.operation for n in unthrottled} == {"DESCRIBE", "ALTER"}
    assert [n.operation for n in execution_needs([], ["orders"], Throttle(None))] == ["DESCRIBE"]


def test_all_permissions_present_passes() -> None:
    ops = {"DESCRIBE", "ALTER", "ALTER_CONFIGS", "DESCRIBE_CONFIGS"}
    acls = FakeAcls(ops, {"orders": {"DESCRIBE", "ALTER_CONFIGS", "DESCRIBE_CONFIGS"}, "clicks": {"DESCRIBE"}})
    check_permissions(acls, execution_needs(MOVES, [], throttle_for(MOVES, 1000)), "to execute a")
    assert acls.asked == ["clicks", "orders"]


def test_a_missing_permission_is_named_with_the_command_granting_it() -> None:
    acls = FakeAcls({"DESCRIBE", "ALTER_CONFIGS"}, {"orders": {"DESCRIBE"}, "clicks": {"DESCRIBE"}})
    with pytest.raises(PermissionDenied) as info:
        check_permissions(acls, execution_needs(MOVES, [], throttle_for(MOVES, 1000)), "to execute a")
    text = str(info.value)
    assert text.startswith("refusing to execute a, nothing on the cluster was changed: Kafka user 'rebalancer' "
                           "lacks these permissions:\n")
    assert ("  - ALTER on the cluster (needed to start reassignments and elect preferred leaders); grant it with: "
            "kafka-acls --bootstrap-server b1:9092 --command-config ADMIN.properties --add "
            "--allow-principal User:rebalancer --operation Alter --cluster") in text
    assert "ALTER_CONFIGS on topic orders (needed to set the throttled replicas of the moving partitions)" in text
    assert "--operation AlterConfigs --topic 'orders'" in text
    assert SECRET not in text


def test_without_describe_only_what_it_implies_is_reported_the_rest_is_unchecked() -> None:
    """Kafka tells a user its permissions on a resource only if it may DESCRIBE it; ALTER implies DESCRIBE, so
    it is surely missing too, ALTER_CONFIGS may be granted: reported as not checked. Unknown topics are skipped."""
    acls = FakeAcls(None, {"orders": None})
    with pytest.raises(PermissionDenied) as info:
        check_permissions(acls, execution_needs(MOVES, [], throttle_for(MOVES, 1000)), "to execute a")
    lines = str(info.value).splitlines()
    assert [line.split(" (")[0] for line in lines[1:4]] == [
        "  - DESCRIBE on the cluster", "  - ALTER on the cluster", "  - DESCRIBE on topic orders"]
    assert lines[4] == ("  not checked, as Kafka shows permissions only on resources the user may DESCRIBE: "
                        "ALTER_CONFIGS on the cluster; ALTER_CONFIGS on topic orders")


def test_a_single_denial_reads_as_one_sentence_and_long_topic_lists_are_cut() -> None:
    connection = KafkaConnection("b1:9092", {"sasl.username": "u", "sasl.password": SECRET})
    many = tuple(f"t{i:02d}" for i in range(12))
    text = str(denial(connection, [Need("DESCRIBE", TOPIC, "to read them", many)]))
    assert text.startswith("Kafka user 'u' lacks DESCRIBE on topics t00, t01, t02, t03, t04, t05, t06, t07, t08, "
                           "t09 and 2 more (needed to read them); grant it with: ")
    assert text.endswith("--operation Describe --topic '*'")


def test_the_connection_repr_hides_the_client_config() -> None:
    connection = KafkaConnection("b1:9092", {"sasl.username": "u", "sasl.password": SECRET})
    assert SECRET not in repr(connection) and SECRET not in str(connection)
    assert connection.kafka_python_config()["sasl_plain_password"] == SECRET  # still handed to the clients


def test_kafka_pythons_debug_line_with_its_configuration_hides_the_password(caplog: pytest.LogCaptureFixture) -> None:
    connection = KafkaConnection("b1:9092", {"sasl.username": "u", "sasl.password": SECRET})
    with caplog.at_level(logging.DEBUG, logger="kafka.admin.client"):
        # What KafkaAdminClient.__init__ logs (the filter sits on its logger once kafka_admin is imported).
        logging.getLogger("kafka.admin.client").debug("Starting KafkaAdminClient with configuration: %s",
                                                      connection.kafka_python_config())
    assert "'sasl_plain_password': '[redacted]'" in caplog.text and SECRET not in caplog.text
