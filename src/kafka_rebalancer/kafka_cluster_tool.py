"""Broker registrations in KRaft, through Kafka's own ClusterTool (`kafka-cluster.sh`, in the kafka-tools jar).

Neither Python client can list fenced brokers (DescribeCluster with IncludeFencedBrokers, KIP-1073: the metadata
both clients read lists unfenced brokers only) or unregister a broker (UnregisterBroker, KIP-631). ClusterTool does
both; it runs on a JVM from the Kafka jars `cluster.kafka_libs` names (a Kafka 4.x distribution's `libs/`, or the
jars `make kafka-jars` fetches into `.cache/kafka-libs`). The connection's librdkafka settings become the Java
admin client's properties in a file only the product's user can read, deleted once the tool has run.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafka_rebalancer.errors import RebalancerError
from kafka_rebalancer.kafka_admin import KafkaConnection

CLUSTER_TOOL = "org.apache.kafka.tools.ClusterTool"
_TOOL_TIMEOUT_S = 120.0  # a JVM's start and the admin call
# librdkafka settings the Java admin client takes under the same name.
_SAME_NAME = ("security.protocol", "client.id")
_LOGIN_MODULES = {"PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
                  "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
                  "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule"}
# One broker of `list-endpoints --include-fenced-brokers`: "ID  HOST  PORT  RACK  STATE  ENDPOINT_TYPE".
_EXCEPTION = re.compile(r"(?:^|\s)(?:[\w.]+\.)?(\w+(?:Exception|Error)): (.+)$", re.MULTILINE)
_ENDPOINT = re.compile(r"^(\d+)\s+\S+\s+\d+\s+\S+\s+(\w+)\s+\w+\s*$")


class KafkaToolError(RebalancerError):
    """Kafka's own tool could not be run, or refused the call."""


@dataclass(frozen=True)
class Registration:
    """A broker the KRaft controller has registered, running or not."""

    broker_id: int
    fenced: bool  # no heartbeat within the session timeout: the broker is down (or was stopped)


def java_properties(client_config: Mapping[str, Any]) -> dict[str, str]:
    """The Java admin client's properties for a connection's librdkafka settings (KafkaToolError names a setting
    that has no translation)."""
    props = {k: str(v) for k, v in client_config.items() if k in _SAME_NAME}
    mechanism = str(client_config.get("sasl.mechanism", client_config.get("sasl.mechanisms", ""))).upper()
    if mechanism:
        if mechanism not in _LOGIN_MODULES:
            raise KafkaToolError(f"cluster.client_config: sasl.mechanism {mechanism!r} has no translation for "
                                 f"Kafka's tools (supported: {', '.join(_LOGIN_MODULES)})")
        user, password = (str(client_config.get(k, "")).replace('"', '\\"') for k in ("sasl.username",
                                                                                      "sasl.password"))
        props["sasl.mechanism"] = mechanism
        props["sasl.jaas.config"] = f'{_LOGIN_MODULES[mechanism]} required username="{user}" password="{password}";'
    if "ssl.ca.location" in client_config:
        props["ssl.truststore.type"] = "PEM"
        props["ssl.truststore.location"] = str(client_config["ssl.ca.location"])
    known = {*_SAME_NAME, "sasl.mechanism", "sasl.mechanisms", "sasl.username", "sasl.password", "ssl.ca.location"}
    unknown = sorted(set(client_config) - known)
    if unknown:
        raise KafkaToolError(f"cluster.client_config: {', '.join(unknown)} has no translation for Kafka's tools "
                             f"(which run on the Java admin client); supported: {', '.join(sorted(known))}")
    return props


def parse_registrations(output: str) -> list[Registration]:
    """ClusterTool's `list-endpoints --include-fenced-brokers` output: one line per broker endpoint."""
    found: dict[int, bool] = {}
    for line in output.splitlines():
        match = _ENDPOINT.match(line.strip())
        if match:
            found[int(match.group(1))] = match.group(2).lower() == "fenced"
    return [Registration(b, fenced) for b, fenced in sorted(found.items())]


class ClusterTool:
    """Kafka's ClusterTool on one cluster."""

    def __init__(self, connection: KafkaConnection, kafka_libs: Path | None) -> None:
        self.connection = connection
        self.kafka_libs = kafka_libs

    def registrations(self) -> list[Registration]:
        """Every registered broker, fenced ones included."""
        return parse_registrations(self._run("list-endpoints", "--include-fenced-brokers"))

    def unregister(self, broker_id: int) -> None:
        self._run("unregister", "--id", str(broker_id))

    def _classpath(self) -> str:
        if self.kafka_libs is None:
            raise KafkaToolError("cluster.kafka_libs is not set: unregistering brokers and listing fenced ones run "
                                 "Kafka's ClusterTool, from the directory of Kafka's jars (a Kafka 4.x "
                                 "distribution's libs/, or .cache/kafka-libs after `make kafka-jars`)")
        if not any(self.kafka_libs.glob("kafka-tools-*.jar")):
            raise KafkaToolError(f"cluster.kafka_libs: no kafka-tools jar in {self.kafka_libs}, expected the "
                                 "directory of Kafka's jars (a Kafka 4.x distribution's libs/)")
        return f"{self.kafka_libs}/*"

    def _run(self, *command: str) -> str:
        java = shutil.which("java")
        if java is None:
            raise KafkaToolError("no `java` on the PATH: Kafka's ClusterTool runs on a JVM (17 or later)")
        with _properties_file(java_properties(self.connection.client_config)) as props:
            cmd = [java, "-cp", self._classpath(), CLUSTER_TOOL, command[0], "--bootstrap-server",
                   self.connection.bootstrap_servers, "--command-config", str(props), *command[1:]]
            try:
                done = subprocess.run(cmd, capture_output=True, text=True, timeout=_TOOL_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                raise KafkaToolError(f"Kafka's ClusterTool {command[0]} did not finish within "
                                     f"{_TOOL_TIMEOUT_S:.0f}s (cluster {self.connection.bootstrap_servers})") from None
        if done.returncode != 0:
            raise KafkaToolError(f"Kafka's ClusterTool {' '.join(command)} failed: {_cause(done)}")
        return done.stdout


def _cause(done: subprocess.CompletedProcess[str]) -> str:
    """The innermost exception the tool printed (its stack trace aside), else its last line."""
    text = done.stderr + done.stdout
    causes = _EXCEPTION.findall(text)
    if causes:
        return f"{causes[-1][0]}: {causes[-1][1]}"
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else f"exit code {done.returncode}"


@contextmanager
def _properties_file(props: Mapping[str, str]) -> Iterator[Path]:
    """The properties in a file only this user can read (it may hold the SASL password), removed afterwards."""
    fd, name = tempfile.mkstemp(prefix="kafka-rebalancer-admin-", suffix=".properties")
    try:
        with os.fdopen(fd, "w") as out:  # mkstemp: mode 0600
            out.writelines(f"{k}={v}\n" for k, v in props.items())
        yield Path(name)
    finally:
        Path(name).unlink(missing_ok=True)
