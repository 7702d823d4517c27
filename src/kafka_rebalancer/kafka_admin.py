"""Kafka admin access for the snapshot and the executor.

confluent-kafka is used wherever it has the call (cluster and topic descriptions with ISR, preferred leader
elections, configs). It lacks AlterPartitionReassignments, ListPartitionReassignments and DescribeLogDirs, so
exactly those go through kafka-python, built from the same connection settings (README: Execution).

A call the broker refuses for want of an ACL raises PermissionDenied naming the permission (kafka_rebalancer.
permissions); the connection's secrets (sasl.password, ssl.key.password) stay out of every message and repr.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka_rebalancer.errors import ExecutionError, KafkaUnreachableError
from kafka_rebalancer.kafka_log_dirs import broker_log_dirs
from kafka_rebalancer.permissions import CLUSTER, GROUP, TOPIC, Need, denial

log = logging.getLogger(__name__)

BROKER_THROTTLE_CONFIGS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
TOPIC_THROTTLE_CONFIGS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")
# The rate of copies between a broker's log directories (AlterReplicaLogDirs), per broker.
LOG_DIR_THROTTLE_CONFIG = "replica.alter.log.dirs.io.max.bytes.per.second"
CORDON_CONFIG = "cordoned.log.dirs"  # KIP-1066: a broker's log dirs that take no new partitions; "*" for all

# librdkafka setting -> kafka-python keyword, for the settings that decide whether a connection works at all.
_KAFKA_PYTHON_KEYS = {
    "security.protocol": "security_protocol",
    "sasl.mechanism": "sasl_mechanism",
    "sasl.mechanisms": "sasl_mechanism",
    "sasl.username": "sasl_plain_username",
    "sasl.password": "sasl_plain_password",
    "ssl.ca.location": "ssl_cafile",
    "ssl.certificate.location": "ssl_certfile",
    "ssl.key.location": "ssl_keyfile",
    "ssl.key.password": "ssl_password",
    "client.id": "client_id",
}
_SECRET_KEYS = frozenset({"sasl.password", "ssl.key.password", "sasl_plain_password", "ssl_password"})


class _RedactSecrets(logging.Filter):
    """kafka-python logs its whole configuration (the record's one argument), password included, at DEBUG when
    a client starts."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, Mapping):
            record.args = {k: "[redacted]" if k in _SECRET_KEYS else v for k, v in record.args.items()}
        return True


logging.getLogger("kafka.admin.client").addFilter(_RedactSecrets())


@dataclass(frozen=True)
class KafkaConnection:
    """Where and how to reach a cluster: librdkafka-style settings, as an Airflow Kafka connection holds them."""

    bootstrap_servers: str
    client_config: Mapping[str, Any] = field(default_factory=dict, repr=False)  # may hold a password
    request_timeout_s: float = 30.0

    def confluent_config(self) -> dict[str, Any]:
        return {**self.client_config, "bootstrap.servers": self.bootstrap_servers,
                "logger": logging.getLogger("kafka_rebalancer.librdkafka")}

    def kafka_python_config(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"bootstrap_servers": self.bootstrap_servers.split(","),
                                  "request_timeout_ms": int(self.request_timeout_s * 1000)}
        for key, value in self.client_config.items():
            if key in _KAFKA_PYTHON_KEYS:
                kwargs[_KAFKA_PYTHON_KEYS[key]] = value
        return kwargs

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any], request_timeout_s: float = 30.0) -> KafkaConnection:
        """From a librdkafka-style dict holding `bootstrap.servers` (an Airflow Kafka connection's extra)."""
        rest = {k: v for k, v in settings.items() if k != "bootstrap.servers"}
        servers = settings.get("bootstrap.servers")
        if not servers:
            raise KafkaUnreachableError("the Kafka connection settings have no 'bootstrap.servers'")
        return cls(str(servers), rest, request_timeout_s)


@dataclass(frozen=True)
class BrokerInfo:
    broker_id: int
    rack: str | None
    host: str
    port: int


@dataclass(frozen=True)
class PartitionInfo:
    topic: str
    partition: int
    replicas: list[int]
    isr: list[int]
    leader: int  # -1 when the partition has no leader


@dataclass(frozen=True)
class BrokerCordon:
    """A broker's cordon: its cordoned.log.dirs config, and how many of its log dirs the broker itself reports
    cordoned (DescribeLogDirs), which it tells the controller at once, in a heartbeat."""

    broker_id: int
    config: str | None  # the config's value; None when not set
    cordoned_dirs: int
    log_dirs: int

    @property
    def confirmed(self) -> bool:
        """The broker reports every log dir cordoned: the controller places no new partition on it."""
        return 0 < self.log_dirs == self.cordoned_dirs


def _error_code(exc: Exception) -> Any:
    """The KafkaError code of a confluent-kafka exception (None for another exception)."""
    error: Any = exc.args[0] if exc.args else None
    return error.code() if hasattr(error, "code") else None


def _op_names(operations: list[Any] | None) -> frozenset[str] | None:
    return None if operations is None else frozenset(op.name for op in operations)


def _config_batches(topics: list[Any], brokers: list[Any]) -> list[list[Any]]:
    """Config requests for a broker go to that broker: librdkafka takes one broker resource per call."""
    return ([topics] if topics else []) + [[b] for b in brokers]


class ClusterAdmin:
    """The admin calls the product makes, on one cluster."""

    def __init__(self, connection: KafkaConnection) -> None:
        self.connection = connection
        self._login_error: str | None = None
        self._admin = self._client()
        self._legacy: Any = None

    def _client(self) -> Any:
        from confluent_kafka.admin import AdminClient

        # Any: confluent-kafka types the config's values as str/int/float/bool; librdkafka's callbacks are functions.
        config: dict[str, Any] = {**self.connection.confluent_config(), "error_cb": self._on_error}
        return AdminClient(config)

    def _on_error(self, error: Any) -> None:
        """librdkafka reports a refused login only here (served by poll); the calls themselves just time out."""
        from confluent_kafka import KafkaError

        if error.code() == KafkaError._AUTHENTICATION:
            self._login_error = error.str()

    def _denied(self, *needs: Need) -> Exception:
        return denial(self.connection, list(needs))

    # -- reachability --------------------------------------------------------------------------
    def check_reachable(self, timeout_s: float | None = None) -> None:
        from confluent_kafka import KafkaException

        timeout_s = timeout_s or self.connection.request_timeout_s
        started = time.monotonic()
        try:
            self._admin.list_topics(timeout=timeout_s)
        except KafkaException as exc:
            self._admin.poll(0)  # serves the error callback
            if self._login_error:
                raise KafkaUnreachableError(
                    f"Kafka at {self.connection.bootstrap_servers} refused the login ({self._login_error}); check "
                    "the connection's sasl.username and sasl.password") from exc
            raise KafkaUnreachableError(
                f"no Kafka broker at {self.connection.bootstrap_servers} answered within "
                f"{time.monotonic() - started:.0f}s ({exc})") from exc

    def _kafka_python(self) -> Any:
        if self._legacy is None:
            from kafka import KafkaAdminClient
            from kafka.errors import KafkaError

            try:
                self._legacy = KafkaAdminClient(**self.connection.kafka_python_config())
            except KafkaError as exc:
                raise KafkaUnreachableError(
                    f"no Kafka broker at {self.connection.bootstrap_servers} answered (kafka-python: {exc})") from exc
        return self._legacy

    def _renew_client(self, exc: Exception) -> None:
        """A fresh confluent-kafka client. Topic descriptions and config changes go to the broker the cached
        metadata names as controller; when that broker dies the name can outlive it for minutes."""
        log.warning("admin call failed (%s); retrying once with fresh metadata", exc)
        self._admin = self._client()

    def close(self) -> None:
        if self._legacy is not None:
            self._legacy.close()
            self._legacy = None

    def __enter__(self) -> ClusterAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- cluster and topics (confluent-kafka) -----------------------------------------------------
    def describe_cluster(self) -> tuple[str, list[BrokerInfo]]:
        result = self._admin.describe_cluster(request_timeout=self.connection.request_timeout_s).result()
        brokers = [BrokerInfo(n.id, n.rack or None, n.host, n.port) for n in result.nodes]
        return result.cluster_id, sorted(brokers, key=lambda b: b.broker_id)

    def topic_names(self) -> list[str]:
        metadata = self._admin.list_topics(timeout=self.connection.request_timeout_s)
        return sorted(metadata.topics)

    def live_broker_ids(self) -> frozenset[int]:
        """The brokers the cluster's metadata lists now: a dead one drops out once the controller fences it. From
        any broker: describe_cluster waits for the controller the cached metadata names, which may be the dead one."""
        return frozenset(self._admin.list_topics(timeout=self.connection.request_timeout_s).brokers)

    def describe_partitions(self, topics: Iterable[str] | None = None) -> list[PartitionInfo]:
        from confluent_kafka import KafkaError, KafkaException, TopicCollection

        names = sorted(topics) if topics is not None else self.topic_names()
        if not names:
            return []
        def describe() -> list[Any]:
            futures = self._admin.describe_topics(TopicCollection(names),
                                                  request_timeout=self.connection.request_timeout_s)
            out, denied = [], []
            for name in names:
                try:
                    out.append(futures[name].result())
                except KafkaException as exc:
                    if _error_code(exc) != KafkaError.TOPIC_AUTHORIZATION_FAILED:
                        raise
                    denied.append(name)
            if denied:
                raise self._denied(Need("DESCRIBE", TOPIC, "to read the partitions' replicas and ISR", tuple(denied)))
            return out

        try:
            descriptions = describe()
        except KafkaException as exc:
            self._renew_client(exc)
            descriptions = describe()
        out: list[PartitionInfo] = []
        for name, description in zip(names, descriptions, strict=True):
            for p in description.partitions:
                out.append(PartitionInfo(
                    topic=name, partition=p.id, replicas=[r.id for r in p.replicas], isr=[r.id for r in p.isr],
                    leader=p.leader.id if p.leader is not None else -1))
        return sorted(out, key=lambda p: (p.topic, p.partition))

    def min_insync_replicas(self, topics: Iterable[str]) -> dict[str, int]:
        """Each topic's min.insync.replicas in effect: the topic's own, else the brokers' default (Kafka's: 1)."""
        values = self.topic_config(topics, "min.insync.replicas", "to read min.insync.replicas of partitions short "
                                   "of in-sync replicas")
        return {t: int(value) if value else 1 for t, value in values.items()}

    def topic_config(self, topics: Iterable[str], name: str, why: str) -> dict[str, str | None]:
        """Each topic's value in effect of the config `name` (None: none); `why` says what for when denied."""
        from confluent_kafka import KafkaError, KafkaException
        from confluent_kafka.admin import ConfigResource, ResourceType

        names = sorted(set(topics))
        if not names:
            return {}

        def describe() -> dict[str, Any]:
            futures = self._admin.describe_configs([ConfigResource(ResourceType.TOPIC, t) for t in names],
                                                   request_timeout=self.connection.request_timeout_s)
            entries, denied = {}, []
            for resource, future in futures.items():
                try:
                    entries[resource.name] = future.result().get(name)
                except KafkaException as exc:
                    if _error_code(exc) != KafkaError.TOPIC_AUTHORIZATION_FAILED:
                        raise
                    denied.append(resource.name)
            if denied:
                raise self._denied(Need("DESCRIBE_CONFIGS", TOPIC, why, tuple(sorted(denied))))
            return entries

        try:
            entries = describe()
        except KafkaException as exc:  # as describe_partitions: the cached controller may be the dead broker
            self._renew_client(exc)
            entries = describe()
        return {t: e.value if e is not None and e.value else None for t, e in entries.items()}

    def authorized_operations(self, topics: Iterable[str]) -> tuple[
            frozenset[str] | None, dict[str, frozenset[str] | None]]:
        """The operations (AclOperation names) this client may perform on the cluster and on each topic, as the
        brokers evaluate the ACLs. None where Kafka does not tell: on a resource the client may not DESCRIBE.
        Topics that do not exist are left out."""
        from confluent_kafka import KafkaError, KafkaException, TopicCollection

        timeout = self.connection.request_timeout_s
        cluster = self._admin.describe_cluster(include_authorized_operations=True, request_timeout=timeout).result()
        names = sorted(set(topics))
        out: dict[str, frozenset[str] | None] = {}
        if names:
            futures = self._admin.describe_topics(TopicCollection(names), include_authorized_operations=True,
                                                  request_timeout=timeout)
            for name in names:
                try:
                    out[name] = _op_names(futures[name].result().authorized_operations)
                except KafkaException as exc:
                    if _error_code(exc) == KafkaError.TOPIC_AUTHORIZATION_FAILED:
                        out[name] = None
                    elif _error_code(exc) != KafkaError.UNKNOWN_TOPIC_OR_PART:
                        raise
        return _op_names(cluster.authorized_operations), out

    def offsets(self, partitions: Iterable[tuple[str, int]], which: str) -> dict[tuple[str, int], int]:
        """The earliest or latest offset of each partition."""
        from confluent_kafka import TopicPartition
        from confluent_kafka.admin import OffsetSpec

        spec = OffsetSpec.earliest() if which == "earliest" else OffsetSpec.latest()
        request = {TopicPartition(t, p): spec for t, p in partitions}
        if not request:
            return {}
        futures = self._admin.list_offsets(request, request_timeout=self.connection.request_timeout_s)
        return {(tp.topic, tp.partition): future.result().offset for tp, future in futures.items()}

    def committed_offsets(self) -> dict[str, dict[tuple[str, int], int]]:
        """Every consumer group's committed offsets. A client with DESCRIBE on the cluster lists every group; one
        it may not DESCRIBE then raises PermissionDenied (without it, Kafka lists only the groups it may)."""
        from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException

        groups = self._admin.list_consumer_groups(request_timeout=self.connection.request_timeout_s).result()
        out: dict[str, dict[tuple[str, int], int]] = {}
        denied = []
        for listing in groups.valid:
            future = self._admin.list_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(listing.group_id)],
                request_timeout=self.connection.request_timeout_s)[listing.group_id]
            try:
                out[listing.group_id] = {(tp.topic, tp.partition): tp.offset
                                         for tp in future.result().topic_partitions if tp.offset >= 0}
            except KafkaException as exc:
                if _error_code(exc) != KafkaError.GROUP_AUTHORIZATION_FAILED:
                    raise
                denied.append(listing.group_id)
        if denied:
            raise self._denied(Need("DESCRIBE", GROUP, "to read committed offsets for the sampled traffic metrics",
                                    tuple(sorted(denied))))
        return out

    def elect_preferred_leaders(self, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], str | None]:
        """Preferred leader election; value None when done or not needed, else the error text."""
        from confluent_kafka import ElectionType, KafkaError, KafkaException, TopicPartition

        tps = [TopicPartition(t, p) for t, p in partitions]
        if not tps:
            return {}
        # No request_timeout here: confluent-kafka 2.16 documents it but its C binding rejects any keyword
        # argument to elect_leaders (SystemError); socket.timeout.ms bounds the call instead.
        try:
            result = self._admin.elect_leaders(ElectionType.PREFERRED, tps).result()
        except KafkaException as exc:
            if _error_code(exc) == KafkaError.CLUSTER_AUTHORIZATION_FAILED:
                raise self._denied(Need("ALTER", CLUSTER, "to elect preferred leaders")) from exc
            raise
        out: dict[tuple[str, int], str | None] = {}
        for tp, err in result.items():
            ok = err is None or err.code() == KafkaError.ELECTION_NOT_NEEDED
            out[(tp.topic, tp.partition)] = None if ok else str(err)
        return out

    # -- replication throttles (IncrementalAlterConfigs) --------------------------------------------
    def alter_throttles(self, broker_rate: Mapping[int, int | tuple[int, int] | None],
                        topic_replicas: Mapping[str, tuple[str, str] | None]) -> None:
        """Set the throttle configs (a value) or remove them (None): per broker the leader and follower rates (one
        rate for both, or (leader, follower)), per topic the leader and follower throttled replicas
        ("partition:broker,...")."""
        from confluent_kafka import KafkaError, KafkaException
        from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

        def entries(names: tuple[str, ...], values: tuple[str, ...] | None) -> list[Any]:
            if values is None:
                return [ConfigEntry(n, None, incremental_operation=AlterConfigOpType.DELETE) for n in names]
            return [ConfigEntry(n, v, incremental_operation=AlterConfigOpType.SET)
                    for n, v in zip(names, values, strict=True)]

        def rates(rate: int | tuple[int, int] | None) -> tuple[str, str] | None:
            if rate is None:
                return None
            leader, follower = rate if isinstance(rate, tuple) else (rate, rate)
            return str(leader), str(follower)

        brokers = [ConfigResource(ResourceType.BROKER, str(b),
                                  incremental_configs=entries(BROKER_THROTTLE_CONFIGS, rates(rate)))
                   for b, rate in sorted(broker_rate.items())]
        topics = [ConfigResource(ResourceType.TOPIC, t, incremental_configs=entries(TOPIC_THROTTLE_CONFIGS, v))
                  for t, v in sorted(topic_replicas.items())]
        refusals = (KafkaError.CLUSTER_AUTHORIZATION_FAILED, KafkaError.TOPIC_AUTHORIZATION_FAILED)
        errors: list[str] = []
        denied: list[Any] = []
        for batch in _config_batches(topics, brokers):  # topics first: a dead broker does not hold them up
            for attempt in (1, 2):
                futures = self._admin.incremental_alter_configs(batch,
                                                                request_timeout=self.connection.request_timeout_s)
                failed: list[tuple[Any, Exception]] = []
                for resource, future in futures.items():
                    try:
                        future.result()
                    except KafkaException as exc:
                        if _error_code(exc) in refusals:  # final: a retry would be refused as well
                            denied.append(resource)
                        else:
                            failed.append((resource, exc))
                if failed and attempt == 1:
                    self._renew_client(failed[0][1])
                    batch = [resource for resource, _ in failed]
                    continue
                errors += [f"{r.restype.name.lower()} {r.name}: {exc}" for r, exc in failed]
                break
        needs = []
        if any(r.restype == ResourceType.BROKER for r in denied):
            needs.append(Need("ALTER_CONFIGS", CLUSTER, "to change the replication throttle rate on the brokers"))
        if denied_topics := tuple(sorted(r.name for r in denied if r.restype == ResourceType.TOPIC)):
            needs.append(Need("ALTER_CONFIGS", TOPIC, "to change the throttled replicas", denied_topics))
        if needs:
            raise self._denied(*needs)
        if errors:
            raise ExecutionError(f"changing replication throttles failed for {len(errors)} resource(s): {errors}")

    def throttle_configs(self, broker_ids: Iterable[int], topics: Iterable[str]) -> dict[str, dict[str, str]]:
        """The throttle configs set (not defaults) on these brokers ("broker 1") and topics ("topic t")."""
        from confluent_kafka.admin import ConfigResource, ResourceType

        brokers = [ConfigResource(ResourceType.BROKER, str(b)) for b in sorted(broker_ids)]
        topic_resources = [ConfigResource(ResourceType.TOPIC, t) for t in sorted(topics)]
        out: dict[str, dict[str, str]] = {}
        names = set(BROKER_THROTTLE_CONFIGS) | set(TOPIC_THROTTLE_CONFIGS)
        for batch in _config_batches(topic_resources, brokers):
            for resource, future in self._admin.describe_configs(
                    batch, request_timeout=self.connection.request_timeout_s).items():
                found = {name: entry.value for name, entry in future.result().items()
                         if name in names and not entry.is_default and entry.value not in (None, "")}
                if found:
                    out[f"{resource.restype.name.lower()} {resource.name}"] = found
        return out

    def broker_config(self, broker_ids: Iterable[int], name: str, why: str) -> dict[int, str | None]:
        """Each running broker's value of the config `name` (None: not set). A broker that is down, or does not
        answer, is left out (logged): only the broker itself answers for its config."""
        from confluent_kafka import KafkaError, KafkaException
        from confluent_kafka.admin import ConfigResource, ResourceType

        futures = [f for b in sorted(broker_ids) for f in self._admin.describe_configs(
            [ConfigResource(ResourceType.BROKER, str(b))], request_timeout=self.connection.request_timeout_s).items()]
        configs: dict[int, str | None] = {}
        for resource, future in futures:
            try:
                entry = future.result().get(name)
            except KafkaException as exc:
                if _error_code(exc) == KafkaError.CLUSTER_AUTHORIZATION_FAILED:
                    raise self._denied(Need("DESCRIBE_CONFIGS", CLUSTER, why)) from exc
                log.warning("broker %s did not tell its config (%s): its %s is not known", resource.name, exc, name)
                continue
            configs[int(resource.name)] = entry.value if entry is not None and entry.value else None
        return configs

    # -- cordons (KIP-1066) ----------------------------------------------------------------------------
    def metadata_version(self) -> int | None:
        """The cluster's finalized metadata.version feature level (None when the brokers report none)."""
        features = self._legacy_call(lambda client: client.describe_features(),
                                     Need("DESCRIBE", CLUSTER, "to read the cluster's metadata.version"))
        finalized = features.get("metadata.version", {}).get("finalized")
        return int(finalized[1]) if finalized else None

    def cordon(self, broker_ids: Iterable[int]) -> dict[int, str]:
        """Cordon every log dir of these brokers (cordoned.log.dirs=*); returns the brokers it failed on, with why
        (a broker that is down cannot take it: the config goes to the broker itself)."""
        return self.alter_broker_config(CORDON_CONFIG, dict.fromkeys(broker_ids, "*"),
                                        "to cordon and uncordon drained brokers")

    def uncordon(self, broker_ids: Iterable[int]) -> dict[int, str]:
        """Remove these brokers' cordoned.log.dirs; returns the brokers it failed on, with why."""
        return self.alter_broker_config(CORDON_CONFIG, dict.fromkeys(broker_ids), "to cordon and uncordon drained "
                                                                                  "brokers")

    def alter_broker_config(self, name: str, values: Mapping[int, str | None], why: str) -> dict[int, str]:
        """Set a dynamic broker config per broker (None: remove it); returns the brokers it failed on, with why.
        Refused, it raises PermissionDenied naming ALTER_CONFIGS on the cluster and `why`."""
        from confluent_kafka import KafkaError, KafkaException
        from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

        resources = [ConfigResource(ResourceType.BROKER, str(b), incremental_configs=[
            ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET if value is not None
                        else AlterConfigOpType.DELETE)]) for b, value in sorted(values.items())]
        # One broker resource per call (librdkafka's rule), all sent before the first answer is awaited.
        futures = [f for resource in resources for f in self._admin.incremental_alter_configs(
            [resource], request_timeout=self.connection.request_timeout_s).items()]
        failed: dict[int, str] = {}
        for resource, future in futures:
            try:
                future.result()
            except KafkaException as exc:
                if _error_code(exc) == KafkaError.CLUSTER_AUTHORIZATION_FAILED:
                    raise self._denied(Need("ALTER_CONFIGS", CLUSTER, why)) from exc
                failed[int(resource.name)] = str(exc)
        return failed

    def cordoned_brokers(self, broker_ids: Iterable[int] | None = None) -> dict[int, BrokerCordon]:
        """The running brokers (of broker_ids; default: all) with a cordon: set in their config, or reported by
        the broker. A broker that is down, or does not answer, is left out (logged): only the broker itself
        answers for its config."""
        live = self.live_broker_ids()
        configs = self.broker_config(live & set(broker_ids) if broker_ids is not None else live, CORDON_CONFIG,
                                     "to read which brokers are cordoned")
        if not configs:
            return {}
        # No topics asked: the answer is the log dirs alone, not every replica's size.
        raw = self._legacy_call(lambda client: client.describe_log_dirs(topic_partitions={}, brokers=sorted(configs)),
                                Need("DESCRIBE", CLUSTER, "to read which log dirs the brokers report cordoned"))
        out: dict[int, BrokerCordon] = {}
        for entry in raw:
            broker = int(entry["broker"])
            dirs = [d for d in entry["log_dirs"] if not d.get("error_code", 0)]
            cordoned = sum(1 for d in dirs if d.get("is_cordoned"))
            if configs.get(broker) is not None or cordoned:
                out[broker] = BrokerCordon(broker, configs.get(broker), cordoned, len(dirs))
        return out

    # -- the three calls confluent-kafka lacks (kafka-python) ---------------------------------------
    def describe_log_dirs(self, broker_ids: Iterable[int]) -> dict[int, dict[str, Any]]:
        """Per broker, its replicas' sizes and its log directories (kafka_log_dirs.broker_log_dirs)."""
        raw = self._kafka_python().describe_log_dirs(brokers=list(broker_ids))
        # Refused, a broker answers with no log dir at all (kafka-python drops the error code), while it always
        # has one otherwise, offline ones included.
        if any(not entry["log_dirs"] for entry in raw):
            raise self._denied(Need("DESCRIBE", CLUSTER, "to read the replicas' sizes on the brokers"))
        return {int(entry["broker"]): broker_log_dirs(entry["log_dirs"]) for entry in raw}

    def alter_replica_log_dirs(self, targets: Mapping[tuple[str, int, int], str]) -> dict[tuple[str, int, int], str]:
        """Move each (topic, partition, broker)'s replica into that log directory of its broker (AlterReplicaLogDirs;
        the broker keeps a choice for a replica it does not host yet in memory only); the errors by replica."""
        if not targets:
            return {}
        result = self._legacy_call(lambda client: client.alter_replica_log_dirs(dict(targets)),
                                   Need("ALTER", CLUSTER, "to move replicas between a broker's log directories"))
        return {(r.topic, r.partition, r.broker_id): error.__name__ for r, error in result.items()
                if error.__name__ != "NoError"}

    def _legacy_call(self, call: Callable[[Any], Any], need: Need) -> Any:
        """A kafka-python admin call, retried once on a fresh client: kafka-python keeps the controller id it
        found at connect time, so a call fails as long as the client lives once that broker has died. Refused
        for want of `need`, it raises PermissionDenied at once."""
        from kafka.errors import AuthorizationError, KafkaError

        try:
            return call(self._kafka_python())
        except AuthorizationError as exc:
            raise self._denied(need) from exc
        except KafkaError as exc:
            log.warning("admin call failed (%s); retrying once with a fresh kafka-python client", exc)
            self.close()
            return call(self._kafka_python())

    def list_reassignments(self) -> dict[tuple[str, int], dict[str, list[int]]]:
        raw = self._legacy_call(lambda client: client.list_partition_reassignments(
            timeout_ms=int(self.connection.request_timeout_s * 1000)),
            Need("DESCRIBE", CLUSTER, "to list the reassignments in progress"))
        return {(tp.topic, tp.partition): v for tp, v in raw.items()}

    def alter_reassignments(self, targets: Mapping[tuple[str, int], list[int] | None]) -> dict[tuple[str, int], str]:
        """Start (or with None, cancel) reassignments; returns the partitions the controller refused, with why."""
        from kafka import TopicPartition

        if not targets:
            return {}
        raw = self._legacy_call(lambda client: client.alter_partition_reassignments(
            {TopicPartition(t, p): replicas for (t, p), replicas in targets.items()},
            timeout_ms=int(self.connection.request_timeout_s * 1000)),
            Need("ALTER", CLUSTER, "to start or cancel reassignments"))
        return {(tp.topic, tp.partition): err.__name__ for tp, err in raw.items() if err is not None}

