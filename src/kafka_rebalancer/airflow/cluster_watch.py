"""The cluster's watcher as an Airflow event trigger (README: Automation): it runs in the triggerer, holding no
worker slot, and every `automation.poll_interval_s` takes one look at the cluster's metadata
(`automation.look`, blocking admin calls in a thread) and yields the events it saw. The connection comes from the
config's Airflow connection id, resolved at each look: no credentials in the trigger's arguments, which Airflow
stores in its database. The state between looks is in a file beside the runs, so a triggerer restart keeps when a
broker went missing."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseEventTrigger, TriggerEvent

log = logging.getLogger(__name__)


class ClusterWatchTrigger(BaseEventTrigger):
    def __init__(self, config_path: str) -> None:
        super().__init__()
        self.config_path = config_path

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return f"{type(self).__module__}.{type(self).__qualname__}", {"config_path": self.config_path}

    async def run(self) -> AsyncIterator[TriggerEvent]:
        interval_s = 60.0  # until a look has read the config's
        while True:
            try:
                events, interval_s = await self._look()
            except Exception as exc:  # noqa: BLE001  # an unreachable cluster or a bad config: look again later
                # At the poll interval still: a look fails most often while a broker goes down, when looks matter.
                log.warning("the cluster watch's look failed: %s: %s", type(exc).__name__, exc)
                events = []
            if events:
                yield TriggerEvent({"events": events})
            await asyncio.sleep(interval_s)

    async def _look(self) -> tuple[list[dict[str, Any]], float]:
        from kafka_rebalancer.airflow.hooks import KafkaClusterHook
        from kafka_rebalancer.automation.look import look
        from kafka_rebalancer.operations.request import run_config

        # Blocking work (the config's file, the admin calls) in threads: the triggerer's loop serves other triggers.
        config = await asyncio.to_thread(run_config, self.config_path)
        hook = KafkaClusterHook(config.cluster.airflow_connection_id, config.cluster.request_timeout_s)
        connection = await hook.aget_conn()
        events = await asyncio.to_thread(look, config, connection)
        return [e.as_dict() for e in events], config.automation.poll_interval_s
