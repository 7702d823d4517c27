"""One look of the watcher at the cluster: the registered brokers (id and rack, from the cluster's metadata: a
light call, never the replicas), the events against the state kept from the looks before (an event a decision
held back is raised again if it still holds, when its retry time has come or its pool has a new event), the state
saved again, and the events recorded in the events log (README: Automation)."""

from __future__ import annotations

import time
from dataclasses import replace

from kafka_rebalancer.automation.events_log import append_events, load_state, save_state, take_retries
from kafka_rebalancer.automation.watch import BANDS_DUE, ClusterEvent, observe
from kafka_rebalancer.config import RebalancerConfig
from kafka_rebalancer.kafka_admin import ClusterAdmin, KafkaConnection


def look(config: RebalancerConfig, connection: KafkaConnection, now: float | None = None) -> list[ClusterEvent]:
    # A look that hangs on a broker going down (the admin client waits for it as its controller) would miss the
    # outage it is there to see: it gives up within a few polls and the next one looks again.
    timeout_s = min(connection.request_timeout_s, max(5.0, config.automation.poll_interval_s))
    with ClusterAdmin(replace(connection, request_timeout_s=timeout_s)) as admin:
        _, brokers = admin.describe_cluster()
    now = time.time() if now is None else now
    state = load_state(config)
    registered = {b.broker_id: b.rack for b in brokers}
    for kind, broker_id in take_retries(config, now):
        state.forget(kind, broker_id)
    events = observe(state, registered, now, config)
    # A pool with a new event takes its events held back too (raised again on this look if they still hold).
    joining = take_retries(config, now, {e.broker_pool for e in events if e.broker_pool is not None})
    for kind, broker_id in joining:
        state.forget(kind, broker_id)
    if joining:
        events += observe(state, registered, now, config)
    save_state(config, state)
    append_events(config, [{**e.as_dict(), "decision": "observed"} for e in events if e.kind != BANDS_DUE])
    return events
