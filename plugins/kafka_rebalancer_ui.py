"""Registers kafka-rebalancer's pages with the Airflow UI (kafka_rebalancer.airflow.ui): the runs page under
/kafka-rebalancer, in the UI's navigation, and a "Run report" link on the pipeline's tasks."""

from __future__ import annotations

from typing import Any, ClassVar

from airflow.plugins_manager import AirflowPlugin
from airflow.sdk import BaseOperatorLink

from kafka_rebalancer.airflow.ui import RunReportLink, runs_app
from kafka_rebalancer.notify.messages import REPORTS_URL_PREFIX as URL_PREFIX


class KafkaRebalancerUIPlugin(AirflowPlugin):
    name = "kafka_rebalancer_ui"
    fastapi_apps: ClassVar[list[dict[str, Any]]] = [
        {"app": runs_app, "url_prefix": URL_PREFIX, "name": "Kafka rebalancer runs"}]
    external_views: ClassVar[list[dict[str, Any]]] = [
        {"name": "Kafka rebalancer", "href": f"{URL_PREFIX}/", "destination": "nav", "url_route": "kafka-rebalancer",
         "category": "browse"}]
    global_operator_extra_links: ClassVar[list[BaseOperatorLink]] = [RunReportLink()]
