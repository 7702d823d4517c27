"""Cordoning the brokers a drain empties (KIP-1066, Kafka 4.3; README: Execution).

While a broker drains, and after, Kafka's controller would still place new topics' partitions on it. A cordon
(the broker's dynamic config `cordoned.log.dirs=*`) stops that: the controller skips a broker whose every log dir
is cordoned when it places new topics and partitions. Reassignments onto it are still accepted, so the planner
keeps its own list (the snapshot's `cordoned_brokers`).

A drain's execution cordons its brokers before its first move, once per pool (a retry or the next pool finds them
cordoned already), and waits, bounded, until each broker reports every log dir cordoned (DescribeLogDirs): the
broker then tells the controller in a heartbeat it sends at once. The config goes to the broker itself, so a
broker that is down cannot be cordoned: that is recorded and the drain goes on, as it does when the cluster's
metadata.version is older than 4.3-IV0. `cancel` uncordons what its run cordoned; `overrides revert` of a drain
uncordons its brokers.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from typing import Protocol

from kafka_rebalancer.config import RebalancerConfig
from kafka_rebalancer.errors import RebalancerError
from kafka_rebalancer.execute.log import ExecutionLog
from kafka_rebalancer.kafka_admin import CORDON_CONFIG, BrokerCordon
from kafka_rebalancer.operations.overrides import OverrideStore, PoolOverride
from kafka_rebalancer.operations.request import read_request, scope_of
from kafka_rebalancer.run_folder import EXECUTE, RunFolder

log = logging.getLogger(__name__)

CORDON_METADATA_LEVEL = 30  # metadata.version 4.3-IV0: the first whose controller honours a cordon
# metadata.version feature levels and Kafka's names for them (MetadataVersion), to name a cluster's in a message.
_METADATA_VERSIONS = dict(enumerate((
    "3.3-IV3", "3.4-IV0", "3.5-IV0", "3.5-IV1", "3.5-IV2", "3.6-IV0", "3.6-IV1", "3.6-IV2", "3.7-IV0", "3.7-IV1",
    "3.7-IV2", "3.7-IV3", "3.7-IV4", "3.8-IV0", "3.9-IV0", "4.0-IV0", "4.0-IV1", "4.0-IV2", "4.0-IV3", "4.1-IV0",
    "4.1-IV1", "4.2-IV0", "4.2-IV1", "4.3-IV0", "4.4-IV0"), start=7))
CONFIRM_TIMEOUT_S = 30.0  # how long a drain waits for its brokers to report their cordon before it goes on
# The broker sends the controller a heartbeat as soon as its cordon changes; this covers that round trip, so a
# topic created right after the cordon is confirmed is placed without the broker.
HEARTBEAT_SETTLE_S = 1.0


class CordonAdmin(Protocol):
    """The admin calls cordoning needs (ClusterAdmin in production, a fake in unit tests)."""

    def live_broker_ids(self) -> frozenset[int]: ...
    def metadata_version(self) -> int | None: ...
    def cordon(self, broker_ids: Iterable[int]) -> dict[int, str]: ...
    def uncordon(self, broker_ids: Iterable[int]) -> dict[int, str]: ...
    def cordoned_brokers(self, broker_ids: Iterable[int] | None = None) -> dict[int, BrokerCordon]: ...
    def alter_broker_config(self, name: str, values: Mapping[int, str | None], why: str) -> dict[int, str]: ...


def metadata_version_name(level: int | None) -> str:
    """Kafka's name of a metadata.version feature level ("4.3-IV0")."""
    if level is None:
        return "unknown (not reported)"
    return _METADATA_VERSIONS.get(level, f"feature level {level}")


def drained_brokers(run: RunFolder) -> list[int]:
    """The brokers the run's drain empties: a drain's, or an execute-reviewed run's that adopted one (its scope)."""
    return sorted(scope_of(read_request(run)).drained)


def cordon_drained(config: RebalancerConfig, admin: CordonAdmin, run: RunFolder, xlog: ExecutionLog, *,
                   timeout_s: float = CONFIRM_TIMEOUT_S, sleep: Callable[[float], None] = time.sleep,
                   clock: Callable[[], float] = time.monotonic) -> list[int]:
    """Cordon the brokers of the run's drain (nothing for another run) before its first move; returns those that
    report their cordon. A broker that is down, a refusal, an old metadata.version or no confirmation in time is
    recorded and logged, and the drain goes on without that cordon."""
    brokers = drained_brokers(run)
    if not brokers:
        return []
    level = admin.metadata_version()
    if level is None or level < CORDON_METADATA_LEVEL:
        found, needed = metadata_version_name(level), metadata_version_name(CORDON_METADATA_LEVEL)
        log.warning("not cordoning drained broker(s) %s: the cluster's metadata.version is %s, cordoning needs %s "
                    "or later (kafka-features upgrade --feature metadata.version=%d); new topics may still land on "
                    "them", brokers, found, needed, CORDON_METADATA_LEVEL)
        xlog.append("cordon_unsupported", brokers=brokers, metadata_version=found, needed=needed)
        return []
    live = admin.live_broker_ids()
    down = [b for b in brokers if b not in live]
    if down:
        log.warning("cannot cordon broker(s) %s: not running (a cordon is the broker's own config); draining them "
                    "all the same", down)
        xlog.append("cordon_skipped", brokers=down, reason="not running")
    running = [b for b in brokers if b in live]
    current = admin.cordoned_brokers(running) if running else {}
    already = [b for b in running if b in current and current[b].confirmed]
    todo = [b for b in running if b not in already]
    if not todo:
        if already:
            xlog.append("cordoned", brokers=already, already=already, unconfirmed=[])
        return already
    xlog.append("cordon_requested", brokers=todo)  # before the change: a cancel after a crash here undoes it too
    failed = admin.cordon(todo)
    if failed:
        log.warning("could not cordon broker(s) %s: %s; draining them all the same", sorted(failed), failed)
        xlog.append("cordon_failed", errors={str(b): why for b, why in sorted(failed.items())})
    confirmed = _wait_confirmed(admin, [b for b in todo if b not in failed], timeout_s,
                                config.execution.poll_interval_s, sleep, clock)
    unconfirmed = [b for b in todo if b not in failed and b not in confirmed]
    if confirmed:
        sleep(HEARTBEAT_SETTLE_S)
    xlog.append("cordoned", brokers=sorted(already + confirmed), already=already, unconfirmed=unconfirmed)
    log.info("cordoned broker(s) %s: Kafka places no new partitions on them%s", sorted(already + confirmed),
             f"; not confirmed within {timeout_s:.0f}s: {unconfirmed}" if unconfirmed else "")
    return sorted(already + confirmed)


def cordon_removed_log_dirs(admin: CordonAdmin, run: RunFolder, xlog: ExecutionLog) -> dict[int, str]:
    """remove-disks: cordon the log dirs it empties (cordoned.log.dirs: their paths, added to those cordoned
    already), so no new partition lands in them while or after they are emptied; the brokers it failed on."""
    request = read_request(run)
    removed = request.scope.removed_log_dirs if request is not None else frozenset()
    if not removed:
        return {}
    level = admin.metadata_version()
    if level is None or level < CORDON_METADATA_LEVEL:
        xlog.append("cordon_unsupported", brokers=sorted({b for b, _ in removed}),
                    metadata_version=metadata_version_name(level), needed=metadata_version_name(CORDON_METADATA_LEVEL))
        return {}
    current = admin.cordoned_brokers(sorted({b for b, _ in removed}))
    values = {}
    for broker in sorted({b for b, _ in removed}):
        existing = current[broker].config if broker in current else None
        if existing != "*":  # every dir of the broker cordoned already
            values[broker] = ",".join(sorted({p for p in (existing or "").split(",") if p} |
                                             {p for b, p in removed if b == broker}))
    failed = admin.alter_broker_config(CORDON_CONFIG, values, "to cordon the log dirs remove-disks empties")
    xlog.append("log_dirs_cordoned", cordoned={str(b): v for b, v in values.items()},
                failed={str(b): why for b, why in failed.items()})
    if failed:
        log.warning("could not cordon the log dirs of broker(s) %s: %s; emptying them all the same", sorted(failed),
                    failed)
    return failed


def _wait_confirmed(admin: CordonAdmin, brokers: list[int], timeout_s: float, poll_s: float,
                    sleep: Callable[[float], None], clock: Callable[[], float]) -> list[int]:
    """Poll until every broker reports every log dir cordoned, or timeout_s passed; returns those that did."""
    if not brokers:
        return []
    started = clock()
    deadline = started + timeout_s
    while True:
        current = admin.cordoned_brokers(brokers)
        confirmed = [b for b in brokers if b in current and current[b].confirmed]
        if len(confirmed) == len(brokers) or clock() >= deadline:
            if len(confirmed) < len(brokers):
                log.warning("broker(s) %s did not report their cordon within %.0fs; draining them all the same",
                            [b for b in brokers if b not in confirmed], timeout_s)
            return confirmed
        log.info("waiting for broker(s) %s to report their cordon (%.0fs of at most %.0fs)",
                 [b for b in brokers if b not in confirmed], clock() - started, timeout_s)
        sleep(min(poll_s, max(deadline - clock(), 0.0)))


def cordoned_by_run(run: RunFolder) -> set[int]:
    """The brokers any pool's execution of this run asked to cordon (its execution logs)."""
    out: set[int] = set()
    for path in sorted(run.stage_path(EXECUTE).glob("*/execution_log.jsonl")):
        for entry in ExecutionLog(path, "", "").read():
            if entry.get("action") == "cordon_requested":
                out.update(int(b) for b in entry.get("brokers", []))
    return out


def uncordon_drained(admin: CordonAdmin, run: RunFolder, xlog: ExecutionLog) -> list[int]:
    """For `cancel`: uncordon the drained brokers this run cordoned (a cordon someone else set stays); returns
    those uncordoned. A broker that is down keeps its cordon: recorded, with the command that removes it later."""
    ours = sorted(set(drained_brokers(run)) & cordoned_by_run(run))
    if not ours:
        return []
    live = admin.live_broker_ids()
    down = [b for b in ours if b not in live]
    if down:
        log.warning("cannot uncordon broker(s) %s: not running; once they run: %s", down, uncordon_hint(down))
        xlog.append("uncordon_skipped", brokers=down, reason="not running")
    cordoned = sorted(admin.cordoned_brokers([b for b in ours if b in live]))
    if not cordoned:
        return []
    failed = admin.uncordon(cordoned)
    done = [b for b in cordoned if b not in failed]
    xlog.append("uncordoned", brokers=done, failed={str(b): why for b, why in sorted(failed.items())})
    log.info("uncordoned broker(s) %s%s", done, f"; failed: {failed}" if failed else "")
    return done


def uncordon_reverted(admin: CordonAdmin, override: PoolOverride, active: list[PoolOverride]) -> str:
    """For `overrides revert` of a drain: uncordon its brokers that no other active drain holds; one line saying
    what was done."""
    still = {b for o in active if o.drains and o.id != override.id for b in o.brokers}
    brokers = sorted(set(override.brokers) - still)
    live = admin.live_broker_ids()
    cordoned = sorted(admin.cordoned_brokers([b for b in brokers if b in live])) if brokers else []
    failed = admin.uncordon(cordoned) if cordoned else {}
    parts = []
    if done := [b for b in cordoned if b not in failed]:
        parts.append(f"uncordoned broker(s) {_ids(done)}: new partitions may land on them again")
    if failed:
        parts.append(f"could not uncordon broker(s) {_ids(failed)} ({'; '.join(failed.values())}): "
                     + uncordon_hint(sorted(failed)))
    if down := [b for b in brokers if b not in live]:
        parts.append(f"broker(s) {_ids(down)} not running, any cordon stays; once they run: {uncordon_hint(down)}")
    if kept := sorted(set(override.brokers) & still):
        parts.append(f"broker(s) {_ids(kept)} stay cordoned: another active drain holds them")
    return "; ".join(parts) or f"broker(s) {_ids(brokers)} were not cordoned"


def revert_override(store: OverrideStore, override_id: int, user: str,
                    admin_of: Callable[[], AbstractContextManager[CordonAdmin]]) -> tuple[PoolOverride, str | None]:
    """Revert a pool override, then, for a drain, uncordon its brokers (`uncordon_reverted`, with the admin
    `admin_of` opens). Returns the override and the uncordon line (None: not a drain). The revert stands when the
    cluster cannot be asked: the line says so and how to finish by hand."""
    reverted = store.revert(override_id, user)
    if not reverted.drains:
        return reverted, None
    try:
        with admin_of() as admin:
            return reverted, uncordon_reverted(admin, reverted, store.active())
    except Exception as exc:  # noqa: BLE001 - unreachable, refused, a permission missing: the revert stands
        why = str(exc) if isinstance(exc, RebalancerError) else f"{type(exc).__name__}: {exc}"
        return reverted, (f"broker(s) {_ids(reverted.brokers)} may still be cordoned: the cluster could not be "
                          f"asked ({why}); later: {uncordon_hint(reverted.brokers)}")


def cordon_report(admin: CordonAdmin) -> str:
    """One line for `pools` and `status`: the cordoned brokers, whether each broker confirms it, or why none can
    be."""
    cordons = admin.cordoned_brokers()
    if not cordons:
        level = admin.metadata_version()
        if level is None or level < CORDON_METADATA_LEVEL:
            return (f"cordoned brokers: none (metadata.version {metadata_version_name(level)} cannot cordon; "
                    f"{metadata_version_name(CORDON_METADATA_LEVEL)} or later can)")
        return "cordoned brokers: none"
    return "cordoned brokers: " + ", ".join(_describe(c) for _, c in sorted(cordons.items()))


def _describe(cordon: BrokerCordon) -> str:
    state = ("confirmed" if cordon.confirmed else
             f"not confirmed: the broker reports {cordon.cordoned_dirs} of {cordon.log_dirs} log dir(s) cordoned")
    return f"broker {cordon.broker_id} ({CORDON_CONFIG}={cordon.config or '(not set)'}, {state})"


def _ids(brokers: Iterable[int]) -> str:
    return ", ".join(map(str, sorted(brokers)))


def uncordon_hint(brokers: Iterable[int]) -> str:
    """The command that removes these brokers' cordon by hand."""
    return " and ".join(f"kafka-configs --bootstrap-server ... --alter --entity-type brokers --entity-name {b} "
                        f"--delete-config {CORDON_CONFIG}" for b in sorted(brokers))
