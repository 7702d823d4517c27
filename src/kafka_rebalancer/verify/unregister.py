"""The last step of a drain that asked for it (`--unregister`): once the run is verified, its brokers are unregistered
from the KRaft controller, which otherwise keeps a dead broker registered (fenced) for good, and a fenced
registration blocks a later metadata.version upgrade.

A broker is unregistered only when it is down (fenced, not in the cluster's metadata) and holds no replica: an alive
one would register again at its next heartbeat, and one holding a replica would leave its partitions short of a
replica for good. The call is Kafka's own (kafka_cluster_tool). The step writes its own stage, `unregister/`, once,
and a retry that finds a broker no longer registered counts it as done: retries are safe.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from kafka_rebalancer.config import RebalancerConfig
from kafka_rebalancer.errors import RebalancerError
from kafka_rebalancer.kafka_admin import ClusterAdmin, KafkaConnection
from kafka_rebalancer.kafka_cluster_tool import ClusterTool
from kafka_rebalancer.operations.request import read_request
from kafka_rebalancer.run_folder import VERIFY, RunFolder, read_json, write_json

log = logging.getLogger(__name__)
UNREGISTER = "unregister"  # the step's stage in the run folder


class UnregisterRefused(RebalancerError):
    """A broker cannot be unregistered (it runs, or still holds a replica), or the run is not verified."""


def unregister_refusals(brokers: Iterable[int], live: Iterable[int], fenced: Mapping[int, bool],
                        replicas_held: Mapping[int, int]) -> list[str]:
    """Why each of `brokers` may not be unregistered (empty: all may). `live`: the brokers in the cluster's
    metadata; `fenced`: every registered broker, True where the controller fenced it; `replicas_held`: per broker."""
    running = set(live) | {b for b, is_fenced in fenced.items() if not is_fenced}
    out = []
    for b in sorted(brokers):
        if b in running:
            out.append(f"broker {b} is running (stop it first: a running broker registers again at once)")
        elif replicas_held.get(b, 0):
            out.append(f"broker {b} still holds {replicas_held[b]} replica(s) (drain it first)")
    return out


def replicas_per_broker(admin: ClusterAdmin) -> Counter[int]:
    """How many replicas each broker holds now, those a reassignment is adding or removing included."""
    return Counter(b for p in admin.describe_partitions() for b in p.replicas)


def _check_verified(run: RunFolder) -> None:
    summary = read_json(run.require(VERIFY) / "summary.json")
    if not summary.get("promises_kept") or not summary.get("topic_spread", {}).get("kept", True):
        raise UnregisterRefused(f"run {run.path.name} is not verified ({run.stage_path(VERIFY)}): its brokers are "
                                "not unregistered")


def unregister_drained(config: RebalancerConfig, connection: KafkaConnection, run: RunFolder) -> dict[str, Any] | None:
    """Unregister the verified drain's brokers if its request asked for it (None: it did not); UnregisterRefused
    says why not. Returns (and writes) what became of each broker."""
    request = read_request(run)
    if request is None or not request.unregister:
        return None
    if run.has(UNREGISTER):  # a retry after the stage was written
        return dict(read_json(run.require(UNREGISTER) / "summary.json"))
    _check_verified(run)
    brokers = sorted(request.scope.drained)
    with ClusterAdmin(connection) as admin:
        if admin.metadata_version() is None:
            raise UnregisterRefused("the cluster reports no metadata.version: brokers are unregistered from a KRaft "
                                    "controller only")
        live = admin.live_broker_ids()
        held = replicas_per_broker(admin)
    tool = ClusterTool(connection, config.cluster.kafka_libs)
    fenced = {r.broker_id: r.fenced for r in tool.registrations()}
    refusals = unregister_refusals(brokers, live, fenced, held)
    if refusals:
        raise UnregisterRefused(f"not unregistering the drained brokers of run {run.path.name}: "
                                + "; ".join(refusals))
    outcome = {}
    for b in brokers:
        if b in fenced:
            tool.unregister(b)
            outcome[str(b)] = "unregistered"
        else:
            outcome[str(b)] = "was not registered"
        log.info("broker %d: %s", b, outcome[str(b)])
    summary = {"brokers": outcome, "pool_override": request.override.id if request.override else None}
    with run.stage(UNREGISTER) as out:
        write_json(out / "summary.json", summary)
    return summary


def fenced_report(admin: ClusterAdmin, tool: ClusterTool) -> str:
    """The registered brokers the controller fenced that hold no replica: each can be unregistered (a drain's
    --unregister); for `pools` and `status`."""
    fenced = sorted(r.broker_id for r in tool.registrations() if r.fenced)
    held = replicas_per_broker(admin) if fenced else Counter()
    empty = [b for b in fenced if not held.get(b)]
    if not empty:
        return "fenced brokers holding nothing: none"
    return (f"fenced brokers holding nothing: {', '.join(map(str, empty))} (registered but down; a drain with "
            "--unregister forgets them)")
