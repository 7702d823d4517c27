"""The Kafka ACLs the product needs, and the check that an execution has them before it changes anything.

Kafka evaluates the ACLs itself: DescribeCluster and DescribeTopics with `include_authorized_operations` return the
operations the client may perform (implied ones included, e.g. ALTER grants DESCRIBE), so the preflight compares
those with what the moves need and names whatever is missing, with the `kafka-acls` command that grants it. Kafka
reveals a user's permissions on a resource only to a user that may DESCRIBE it; without DESCRIBE, the operations
that do not imply it (ALTER_CONFIGS) cannot be checked and are reported as such.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

from kafka_rebalancer.errors import PermissionDenied

CLUSTER, TOPIC, GROUP = "cluster", "topic", "group"
# Kafka grants DESCRIBE with any of these, so a user without DESCRIBE has none of them either.
_IMPLY_DESCRIBE = frozenset({"DESCRIBE", "ALTER", "READ", "WRITE", "DELETE"})
_SHOWN = 10  # names listed in a message


@dataclass(frozen=True)
class Need:
    """One permission: an operation (Kafka's AclOperation name) on the cluster or on named topics or groups."""

    operation: str
    resource: str  # CLUSTER, TOPIC or GROUP
    why: str  # "to ...", for the message
    names: tuple[str, ...] = ()


class MoveLike(Protocol):
    @property
    def topic(self) -> str: ...  # read-only: the moves are frozen dataclasses


class ThrottleLike(Protocol):
    @property
    def empty(self) -> bool: ...
    @property
    def topic_replicas(self) -> Mapping[str, Any]: ...


class Authorizations(Protocol):
    """ClusterAdmin's view of the ACLs (a fake in unit tests)."""

    connection: Any

    def authorized_operations(self, topics: Iterable[str]) -> tuple[
        frozenset[str] | None, dict[str, frozenset[str] | None]]: ...


def execution_needs(moves: Iterable[MoveLike], pool_topics: Iterable[str], throttle: ThrottleLike,
                    log_dir_moves: bool = False) -> list[Need]:
    """What executing these moves needs: the reassignments in progress (also when there is nothing to move), the
    topics' partitions, starting moves and leader elections, and with a throttle the throttle configs; moves
    between log directories (remove-disks) move replicas and cordon and throttle on the brokers."""
    moves = list(moves)
    needs = [Need("DESCRIBE", CLUSTER, "to list the reassignments in progress")]
    if log_dir_moves:
        needs += [Need("ALTER", CLUSTER, "to move replicas between a broker's log directories"),
                  Need("ALTER_CONFIGS", CLUSTER, "to cordon the emptied log dirs and throttle the copies")]
    if not moves:
        return needs
    needs += [Need("ALTER", CLUSTER, "to start reassignments and elect preferred leaders"),
              Need("DESCRIBE", TOPIC, "to read the partitions' replicas and ISR",
                   tuple(sorted({m.topic for m in moves} | set(pool_topics))))]
    if not throttle.empty:
        needs += [Need("ALTER_CONFIGS", CLUSTER, "to set the replication throttle rate on the brokers"),
                  Need("ALTER_CONFIGS", TOPIC, "to set the throttled replicas of the moving partitions",
                       tuple(sorted(throttle.topic_replicas)))]
    return needs


def lacking(needs: Iterable[Need], cluster_ops: frozenset[str] | None,
            topic_ops: Mapping[str, frozenset[str] | None]) -> tuple[list[Need], list[Need]]:
    """(the needs surely missing, the needs that cannot be checked for want of DESCRIBE). Topics absent from
    topic_ops (they do not exist) are not judged: the executor skips their moves as drifted."""
    missing: list[Need] = []
    unknown: list[Need] = []

    def judge(need: Need, ops: frozenset[str] | None) -> str:
        if ops is None:
            return "missing" if need.operation in _IMPLY_DESCRIBE else "unknown"
        return "ok" if need.operation in ops else "missing"

    for need in needs:
        if need.resource == CLUSTER:
            verdicts = {"": judge(need, cluster_ops)}
        else:
            verdicts = {t: judge(need, topic_ops[t]) for t in need.names if t in topic_ops}
        for verdict, out in (("missing", missing), ("unknown", unknown)):
            names = tuple(n for n, v in verdicts.items() if v == verdict)
            if names:
                out.append(need if need.resource == CLUSTER else replace(need, names=names))
    return missing, unknown


def check_permissions(admin: Authorizations, needs: list[Need], refusing: str) -> None:
    """Raise PermissionDenied naming every missing permission; `refusing` says what is refused ("to execute X")."""
    topics = sorted({t for n in needs if n.resource == TOPIC for t in n.names})
    cluster_ops, topic_ops = admin.authorized_operations(topics)
    missing, unknown = lacking(needs, cluster_ops, topic_ops)
    if missing:
        raise denial(admin.connection, missing, unknown,
                     prefix=f"refusing {refusing}, nothing on the cluster was changed: ")


def denial(connection: Any, missing: list[Need], unknown: Iterable[Need] = (), prefix: str = "") -> PermissionDenied:
    """The error for missing permissions: who lacks what on which resource, why, and the command to grant it."""
    user = connection.client_config.get("sasl.username")
    who = f"Kafka user {user!r}" if user else "this client's Kafka principal"
    principal = f"User:{user}" if user else "User:<principal>"
    items = [f"{n.operation} on {_where(n)} (needed {n.why}); grant it with: {_grant(connection, principal, n)}"
             for n in missing]
    text = f"{prefix}{who} lacks " + (items[0] if len(items) == 1 else
                                      "these permissions:\n" + "\n".join(f"  - {i}" for i in items))
    unknown = list(unknown)
    if unknown:
        text += ("\n  not checked, as Kafka shows permissions only on resources the user may DESCRIBE: "
                 + "; ".join(f"{n.operation} on {_where(n)}" for n in unknown))
    return PermissionDenied(text)


def _where(need: Need) -> str:
    if need.resource == CLUSTER:
        return "the cluster"
    plural = "s" if len(need.names) > 1 else ""
    more = f" and {len(need.names) - _SHOWN} more" if len(need.names) > _SHOWN else ""
    return f"{need.resource}{plural} {', '.join(need.names[:_SHOWN])}{more}"


def _grant(connection: Any, principal: str, need: Need) -> str:
    operation = "".join(word.capitalize() for word in need.operation.split("_"))  # kafka-acls spells AlterConfigs
    if need.resource == CLUSTER:
        resource = "--cluster"
    elif len(need.names) > _SHOWN:
        resource = f"--{need.resource} '*'"
    else:
        resource = " ".join(f"--{need.resource} '{n}'" for n in need.names)
    return (f"kafka-acls --bootstrap-server {connection.bootstrap_servers} --command-config ADMIN.properties "
            f"--add --allow-principal {principal} --operation {operation} {resource}")
