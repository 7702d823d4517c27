"""change-replication-factor against the cluster, checked on the run's snapshot before anything is planned: its
patterns name topics, the target is not below any topic's min.insync.replicas (a partition with fewer replicas
than that refuses every acks=all write, for good), and the cluster has the brokers to hold it. Each topic's
min.insync.replicas in effect is read when the snapshot is taken (`manifest.json`: `min_insync_replicas`).

A target equal to min.insync.replicas is allowed with a warning: one broker down then stops acks=all writes to
the partitions it holds.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

import pandas as pd

from kafka_rebalancer.errors import RunFolderError
from kafka_rebalancer.model.schemas import BROKERS, PARTITIONS
from kafka_rebalancer.model.topics import matches_any
from kafka_rebalancer.operations.request import ManualRequest, RequestError, read_request
from kafka_rebalancer.run_folder import SNAPSHOT, RunFolder, read_json, read_table

log = logging.getLogger(__name__)
MIN_INSYNC = "min_insync_replicas"  # the snapshot manifest's key: topic -> min.insync.replicas in effect


def requested_topics(patterns: Iterable[str], topics: Iterable[str]) -> list[str]:
    """The topics (of `topics`) the request's names or patterns match, sorted."""
    wanted = tuple(patterns)
    return sorted({t for t in topics if matches_any(t, wanted)})


def min_insync_of(manifest: Mapping[str, object]) -> dict[str, int]:
    """The snapshot's min.insync.replicas per requested topic (RunFolderError: a snapshot taken without them)."""
    found = manifest.get(MIN_INSYNC)
    if not isinstance(found, dict):
        raise RunFolderError("the run's snapshot has no min.insync.replicas of the topics (taken by an older "
                             "version, or not for a replication factor change): start a new run")
    return {str(t): int(n) for t, n in found.items()}


def target_warnings(target: int, min_insync: Mapping[str, int]) -> list[str]:
    """The topics whose min.insync.replicas the target equals: a warning each."""
    return [f"{t}: the target replication factor {target} equals its min.insync.replicas: one broker down stops "
            "acks=all writes to the partitions it holds" for t, n in sorted(min_insync.items()) if n == target]


def check_target(request: ManualRequest, partitions: pd.DataFrame, brokers: pd.DataFrame,
                 min_insync: Mapping[str, int]) -> list[str]:
    """RequestError when the request cannot be planned on this cluster (naming what to change first); else the
    warnings. `partitions`, `brokers`: a snapshot's tables."""
    action, target = request.action, int(request.replication_factor or 0)
    topics = requested_topics(request.topics, partitions["topic"].unique())
    if not topics:
        raise RequestError(f"action {action}: parameter 'topics': {', '.join(request.topics)} match no topic of the "
                           "cluster")
    below = {t: n for t, n in sorted(min_insync.items()) if t in topics and target < n}
    if below:
        named = ", ".join(f"{t} (min.insync.replicas={n})" for t, n in below.items())
        raise RequestError(
            f"action {action}: parameter 'replication_factor': {target} is below the min.insync.replicas of {named}: "
            "its partitions would refuse every acks=all write. Lower the topic's min.insync.replicas first (kafka-"
            "configs --alter --entity-type topics --entity-name <topic> --add-config min.insync.replicas="
            f"{target}), or choose a replication factor of at least {max(below.values())}")
    usable = brokers[brokers["alive"].astype(bool) & ~brokers["excluded"].astype(bool)]
    if target > len(usable):
        raise RequestError(f"action {action}: parameter 'replication_factor': {target} replicas need {target} "
                           f"brokers; the cluster has {len(usable)} running that take replicas")
    return target_warnings(target, {t: n for t, n in min_insync.items() if t in topics})


def check_replication_factor(run: RunFolder) -> None:
    """A replication factor change's checks on the run's snapshot (nothing for any other run); warnings logged."""
    request = read_request(run)
    if request is None or request.scope.replication_factor is None:
        return
    folder = run.require(SNAPSHOT)
    for warning in check_target(request, read_table(folder, PARTITIONS), read_table(folder, BROKERS),
                                min_insync_of(read_json(folder / "manifest.json"))):
        log.warning("change-replication-factor: %s", warning)
