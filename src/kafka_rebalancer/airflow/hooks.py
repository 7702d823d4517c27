"""The Kafka connection from an Airflow connection of the apache-kafka provider's type ("kafka"): its extra is a
librdkafka config, e.g. {"bootstrap.servers": "broker1:9092,broker2:9092", "security.protocol": "SASL_SSL", ...}.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow.sdk import BaseHook

if TYPE_CHECKING:
    from airflow.sdk import Connection

    from kafka_rebalancer.kafka_admin import KafkaConnection


class KafkaClusterHook(BaseHook):
    """Connection settings for one Kafka cluster, from an Airflow connection of type kafka."""

    conn_name_attr = "kafka_config_id"
    default_conn_name = "kafka_default"
    conn_type = "kafka"
    hook_name = "Kafka cluster (kafka-rebalancer)"

    def __init__(self, kafka_config_id: str = default_conn_name, request_timeout_s: float = 30.0) -> None:
        super().__init__()
        self.kafka_config_id = kafka_config_id
        self.request_timeout_s = request_timeout_s

    def get_conn(self) -> KafkaConnection:
        return self.kafka_connection(self.get_connection(self.kafka_config_id))

    async def aget_conn(self) -> KafkaConnection:
        """The same from async code (a trigger in the triggerer): the connection read without blocking its loop."""
        return self.kafka_connection(await self.aget_connection(self.kafka_config_id))

    def kafka_connection(self, conn: Connection) -> KafkaConnection:
        from kafka_rebalancer.errors import KafkaUnreachableError
        from kafka_rebalancer.kafka_admin import KafkaConnection

        settings = dict(conn.extra_dejson)
        if "bootstrap.servers" not in settings and conn.host:
            settings["bootstrap.servers"] = f"{conn.host}:{conn.port}" if conn.port else conn.host
        if "bootstrap.servers" not in settings:
            raise KafkaUnreachableError(f"Airflow connection {self.kafka_config_id!r} has no bootstrap.servers "
                                        "in its extra (nor a host)")
        return KafkaConnection.from_settings(settings, self.request_timeout_s)
