"""Replicas arriving from another broker, into the log directory the plan names for them (plan.json's `log_dirs`;
README: JBOD). Kafka's reassignment API has no directory field: just before a move starts, the executor names each
new replica's directory with AlterReplicaLogDirs on its receiving broker, which does not host the replica yet, so it
keeps the choice in memory, answers that it does not host the replica (expected), and creates the replica there
when the reassignment reaches it. A broker restarted in between forgets the choice: once the moves are done, a
replica found in another directory is moved into the named one like any move between a broker's directories
(execute.log_dir_moves: throttled, resumed, cancelled back).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kafka_rebalancer.execute.log_dir_moves import LogDirCluster, LogDirMove, Replica, move_state

# What a broker answers for a replica it does not host yet; it has recorded the directory all the same.
NOT_HOSTED_YET = frozenset({"NotLeaderForPartitionError", "ReplicaNotAvailableError", "UnknownTopicOrPartitionError"})


def name_arrival_dirs(cluster: LogDirCluster, targets: Mapping[Replica, str], record: Callable[..., Any]) -> None:
    """Ask each receiving broker to create its new replica in the named directory. A refusal other than "not hosted
    yet" (the directory offline, say) is recorded and left to `misplaced_arrivals` after the moves."""
    if not targets:
        return
    errors = cluster.alter_replica_log_dirs(targets)
    refused = {f"{t}-{p} on broker {b}": e for (t, p, b), e in sorted(errors.items()) if e not in NOT_HOSTED_YET}
    record("log_dirs_named", replicas=len(targets), refused=refused)


def misplaced_arrivals(cluster: LogDirCluster, targets: Mapping[Replica, str],
                       sizes: Mapping[Replica, int]) -> list[LogDirMove]:
    """The arrived replicas not settled in their named directory, as moves into it (one copying into it already
    too: the move waits for it)."""
    if not targets:
        return []
    where = cluster.describe_log_dirs(sorted({b for _, _, b in targets}))
    moves = []
    for (topic, partition, broker), target in sorted(targets.items()):
        now_in = where.get(broker, {}).get("replica_dirs", {}).get((topic, partition))
        move = LogDirMove(topic, partition, broker, str(now_in), target, sizes.get((topic, partition, broker), 0))
        if now_in is not None and move_state(where, move) != "done":
            moves.append(move)
    return moves
