"""Executing one pool's part of a validated plan with the Kafka Admin API (README: Execution).

Before anything touches the cluster the executor takes the pool's lock, so a second execution refuses. It
refuses too while a reassignment it did not start is in progress. Leadership-only changes go first, in batches
of their own; data moves follow in the configured order, at most N in flight per broker and M in the cluster,
under a replication throttle that is removed whatever happens. Right before a partition starts, its replicas
must still equal the plan's old replicas and its ISR must be complete; otherwise it is skipped and recorded,
never overwritten. The one exception is a replica lost with its broker: a partition whose only replicas out of
sync are on dead or drained brokers that its move removes may move, if min.insync.replicas still holds (a drain
of a dead broker restores what it held). No new batch starts while the pool has other under-replicated
partitions, replicas out of sync on those replaced brokers aside. A move is complete
when the partition has left ListPartitionReassignments, its replicas equal the target and every target replica
is in the ISR; then a preferred leader election runs for the moved partitions. Every action is appended to the
execution log; a rerun continues from it and from the reassignments in progress, and `cancel` stops it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from kafka_rebalancer.config import RebalancerConfig
from kafka_rebalancer.errors import ExecutionCancelled, ExecutionError, ExecutionTimedOut
from kafka_rebalancer.execute.arrival_dirs import misplaced_arrivals, name_arrival_dirs
from kafka_rebalancer.execute.cluster import Cluster, describe, names
from kafka_rebalancer.execute.cordon import drained_brokers
from kafka_rebalancer.execute.load_control import LoadControl, prometheus_loads
from kafka_rebalancer.execute.log import ExecutionLog
from kafka_rebalancer.execute.log_dir_moves import LogDirExecution, LogDirLimits
from kafka_rebalancer.execute.moves import (
    Limits,
    PartitionMove,
    PoolPlan,
    SyncFacts,
    bottleneck_first,
    load_pool_plan,
    order_moves,
    out_of_sync_reason,
    pick_batch,
    reassignment_target,
    replaced_brokers,
)
from kafka_rebalancer.execute.progress import Progress
from kafka_rebalancer.execute.stall import StallWatch, copied_bytes
from kafka_rebalancer.execute.throttle import Throttle, throttle_for
from kafka_rebalancer.execute.throttle_tuner import ThrottleTuner
from kafka_rebalancer.holds.execution_lock import pool_lock
from kafka_rebalancer.kafka_admin import PartitionInfo
from kafka_rebalancer.model.reassignment import Key
from kafka_rebalancer.run_folder import EXECUTE, RunFolder, read_json, write_json

log = logging.getLogger(__name__)

CANCEL_MARKER = "cancel_requested.json"
COPIED_EVERY_S = 5.0
THROTTLE_APPLIED_WAIT_S = 10.0


class _PoolExecution:
    """One attempt at one pool's moves; the state lives in the execution log and the cluster."""

    def __init__(self, config: RebalancerConfig, cluster: Cluster, pool: str, plan: PoolPlan, xlog: ExecutionLog,
                 throttle: Throttle, drained: frozenset[int], marker: Path, sleep: Callable[[float], None],
                 clock: Callable[[], float], on_stalled: Callable[[list[str]], None] | None = None) -> None:
        self.cluster, self.pool, self.plan, self.xlog, self.throttle = cluster, pool, plan, xlog, throttle
        self.on_stalled = on_stalled  # told the moves stalled whenever one more stalls (the notification)
        self.drained = drained
        self.limits = Limits.of(config, throttle.rate_bytes_per_s)
        self.marker, self.sleep, self.clock = marker, sleep, clock
        self.by_key = {m.key: m for m in plan.moves}
        self.order = config.execution.order
        self.started_at = clock()
        self.urp_since: float | None = None
        self.replaced_noted: frozenset[int] = frozenset()  # replaced brokers whose lost replicas the gate ignores
        self.unexpected: dict[Key, tuple[int, ...] | None] = {}  # in-flight partitions in a state seen once
        self.completed_now: list[Key] = []
        self.stalls = StallWatch(config.execution.stall_after_s, xlog.append, clock)
        # The copies' bytes, read for the estimate (every COPIED_EVERY_S) and to name a stall within a quarter of
        # stall_after_s of it; never more often than each poll.
        self.stall_every_s = max(self.limits.poll_interval_s, min(COPIED_EVERY_S, config.execution.stall_after_s / 4))
        self.stall_read_at = clock()
        control = config.execution.throttle_control
        self.tuner = (ThrottleTuner(throttle.rate_bytes_per_s, lambda rates: cluster.alter_throttles(rates, {}),
                                    xlog.append, clock)
                      if (config.execution.tune_throttle or control) and throttle.rate_bytes_per_s
                      and not throttle.empty else None)
        self.tuning = self.tuner if config.execution.tune_throttle else None  # else the tuner only retargets
        self.load_control = (LoadControl(control, self.tuner.rate, prometheus_loads(config), self.tuner.retarget,
                                         xlog.append, clock)
                             if control is not None and self.tuner is not None else None)
        self.tuned = 0  # completed_now up to here is known to the tuner

    def run(self) -> dict[str, Any]:
        ongoing = self.cluster.list_reassignments()
        ours = {k for k, s in ongoing.items() if k in self.by_key and reassignment_target(s) == set(self.by_key[k].new)}
        siblings = {k for k, s in ongoing.items()
                    if k not in self.by_key and reassignment_target(s) == set(self.plan.targets.get(k, ()))}
        foreign = sorted(set(ongoing) - ours - siblings)
        if foreign:
            raise ExecutionError(f"refusing to start: {len(foreign)} reassignment(s) in progress that this run did "
                                 f"not start, e.g. {names(foreign[:10])}; wait for them or cancel them")
        state = self.xlog.state()
        self.xlog.append("execute_started", moves=len(self.plan.moves), resumed=bool(state.last),
                         adopted=names(ours), order=self.order)
        pending = [m for m in order_moves(self.plan.moves, self.order, self.plan.disk_utilisation)
                   if state.action(m.key) not in ("completed", "skipped") and m.key not in ours]
        in_flight = {k: self.clock() for k in ours}  # adopted moves get a fresh timeout
        self.progress = Progress(self.pool, self.plan.moves, self.throttle.rate_bytes_per_s, self.xlog.append,
                                 [m.key for m in self.plan.moves if state.action(m.key) == "completed"],
                                 clock=self.clock)
        self.progress.begin()
        if not self.throttle.empty and (pending or in_flight):
            self.cluster.alter_throttles(*self.throttle.set_configs())
            self.xlog.append("throttle_set", rate_bytes_per_s=self.throttle.rate_bytes_per_s,
                             brokers=sorted(self.throttle.brokers), topics=sorted(self.throttle.topic_replicas))
            self._await_throttle()
        try:
            self._loop(pending, in_flight)
            self._move_log_dirs()
        except BaseException as exc:
            if not isinstance(exc, ExecutionError):  # those record their own end (timeout, cancel, ...)
                self.xlog.append("execute_failed", error=f"{type(exc).__name__}: {exc}")
            clear_throttle(self.cluster, self.throttle, self.xlog, raise_errors=False)
            raise
        clear_throttle(self.cluster, self.throttle, self.xlog, raise_errors=True)
        return self._finish()

    def _await_throttle(self) -> None:
        """Kafka acknowledges a config change before the brokers apply it (up to 0.1 s on the local cluster), and a
        move started meanwhile copies unthrottled: wait, bounded, until every broker and topic reports it."""
        expected = {f"broker {b}" for b in self.throttle.brokers} | {f"topic {t}" for t in self.throttle.topic_replicas}
        deadline = self.clock() + THROTTLE_APPLIED_WAIT_S
        while True:
            try:
                missing = expected - set(self.cluster.throttle_configs(self.throttle.brokers,
                                                                       self.throttle.topic_replicas))
            except Exception as exc:  # noqa: BLE001  # the moves go on throttled soon after either way
                self._read_failed(exc)
                return
            if not missing or self.clock() >= deadline:
                if missing:
                    self.xlog.append("throttle_unconfirmed", missing=sorted(missing))
                    log.warning("%s: the throttle is not reported by %s after %.0fs; starting all the same", self.pool,
                                sorted(missing), THROTTLE_APPLIED_WAIT_S)
                return
            self.sleep(min(0.1, self.limits.poll_interval_s))

    def _loop(self, pending: list[PartitionMove], in_flight: dict[Key, float]) -> None:
        while pending or in_flight:
            self._check_cancel()
            self._check_run_timeout(pending, in_flight)
            if in_flight:
                try:
                    self._poll(pending, in_flight)
                except Exception as exc:  # noqa: BLE001  # a status read failed (a broker died?): poll again
                    self._read_failed(exc)
                self._watch_stalls(in_flight, pending, fresh=self.progress.due)
                self.progress.record_due()
                if self.load_control is not None:
                    self.load_control.check(b for k in in_flight for b in self.by_key[k].old + self.by_key[k].new)
                self._check_stuck(in_flight)
            started = False
            if pending and self._pool_healthy():
                running = [self.by_key[k] for k in in_flight]
                if self.order == "bottleneck_first":
                    pending[:] = bottleneck_first(pending, running)
                batch = pick_batch(pending, running, self.limits)
                if batch:
                    self._start(batch, pending, in_flight)
                    started = True
            self.progress.maybe_log()
            if (pending or in_flight) and (in_flight or not started):
                self.sleep(self.limits.poll_interval_s)

    def _check_cancel(self) -> None:
        if self.marker.exists():
            self.xlog.append("cancel_observed", detail=read_json(self.marker))
            raise ExecutionCancelled(f"{self.pool}: execution cancelled by an operator "
                                     f"({read_json(self.marker).get('requested_at')}); no new moves started", self.pool)

    def _check_run_timeout(self, pending: list[PartitionMove], in_flight: dict[Key, float]) -> None:
        elapsed = self.clock() - self.started_at
        if elapsed > self.limits.run_timeout_s:
            self.xlog.append("run_timeout", in_flight=names(in_flight), pending=len(pending),
                             timeout_s=self.limits.run_timeout_s, stalled=names(self.stalls.stalled))
            raise ExecutionTimedOut(f"{self.pool}: run timeout of {self.limits.run_timeout_s:.0f}s reached with "
                                 f"{len(in_flight)} move(s) in flight {names(in_flight)}{self._stalled_text()} and "
                                 f"{len(pending)} not started; a rerun continues, `kafka-rebalancer cancel` reverts "
                                 "the in-flight ones", self.pool)

    def _poll(self, pending: list[PartitionMove], in_flight: dict[Key, float]) -> None:
        ongoing = self.cluster.list_reassignments()
        current = describe(self.cluster, in_flight)
        for key in list(in_flight):
            move, info = self.by_key[key], current.get(key)
            if key in ongoing:
                self.unexpected.pop(key, None)
                continue
            replicas = tuple(info.replicas) if info is not None else None
            if replicas == move.new and info is not None and set(move.new) <= set(info.isr):
                self.xlog.append("completed", key, replicas=list(move.new), isr=info.isr)
                self.completed_now.append(key)
                self.progress.done(move)
                del in_flight[key]
            elif replicas == move.new or (replicas is not None and set(move.new) < set(replicas)
                                          and set(replicas) <= set(move.old) | set(move.new)):
                continue  # target replicas not all in the ISR yet, or the metadata not caught up with the controller
            elif self._seen_twice(key, replicas):
                # Broker metadata can lag the controller's reassignment list by a moment: act on a state only
                # when the next poll shows it again.
                del in_flight[key]
                if replicas == move.old:  # ended without reaching the target (cancelled by someone): start over
                    self.xlog.append("restart", key, detail="reassignment ended with the old replicas")
                    pending.insert(0, move)
                else:
                    self.xlog.append("skipped", key, reason="drifted while moving",
                                     current=list(replicas) if replicas is not None else None)

    def _seen_twice(self, key: Key, replicas: tuple[int, ...] | None) -> bool:
        if self.unexpected.get(key, ()) == replicas:
            del self.unexpected[key]
            return True
        self.unexpected[key] = replicas
        return False

    def _read_failed(self, exc: Exception) -> None:
        self.xlog.append("read_failed", error=str(exc))
        log.warning("%s: reading the cluster's state failed, trying again at the next poll: %s", self.pool, exc)

    def _watch_stalls(self, in_flight: dict[Key, float], pending: list[PartitionMove], fresh: bool = False) -> None:
        """Read the bytes the moves in flight copied (every stall_every_s, or now when `fresh`): for the estimate,
        the stall watch and the throttle tuner (`pending`: the moves not started yet, the tuner's work to come)."""
        if not in_flight or (not fresh and self.clock() - self.stall_read_at < self.stall_every_s):
            return
        self.stall_read_at = self.clock()
        receivers = {k: set(self.by_key[k].new) - set(self.by_key[k].old) for k in in_flight}
        try:
            live = self.cluster.live_broker_ids()
            sizes = self.cluster.describe_log_dirs(sorted(set().union(*receivers.values()) & live))
        except Exception as exc:  # noqa: BLE001  # as in _loop: the next read tries again
            self._read_failed(exc)
            return
        copied = copied_bytes(receivers, sizes)
        self.progress.copying(copied)
        stalled_before = set(self.stalls.stalled)
        self.stalls.check(copied, {k: brokers <= live for k, brokers in receivers.items()}, receivers)
        if self.on_stalled is not None and self.stalls.stalled - stalled_before:
            self.on_stalled(names(self.stalls.stalled))
        if self.tuning is not None and not fresh:  # a rate over the few seconds since the last read is noise
            finished, self.tuned = self.completed_now[self.tuned:], len(self.completed_now)
            try:
                self.tuning.observe([self.by_key[k] for k in in_flight], copied, [self.by_key[k] for k in finished],
                                    pending)
            except Exception as exc:  # noqa: BLE001  # the rates stay as they were; the next read tries again
                self._read_failed(exc)

    def _stalled_text(self) -> str:
        return f"; stalled (no bytes copied for {self.stalls.stall_after_s:.0f}s): {names(self.stalls.stalled)}" \
            if self.stalls.stalled else ""

    def _check_stuck(self, in_flight: dict[Key, float]) -> None:
        stuck = [k for k, since in in_flight.items() if self.clock() - since > self.limits.move_timeout_s]
        if stuck:
            self.xlog.append("timeout", stuck=names(stuck), timeout_s=self.limits.move_timeout_s,
                             stalled=names(self.stalls.stalled))
            raise ExecutionTimedOut(f"{self.pool}: {len(stuck)} move(s) not complete after "
                                 f"{self.limits.move_timeout_s:.0f}s: {names(stuck)}{self._stalled_text()}; a rerun "
                                 "continues from the execution log, `kafka-rebalancer cancel` reverts them", self.pool)

    def _pool_healthy(self) -> bool:
        """False while partitions of the pool outside the plan are under-replicated (fails after a while): moving
        replicas then would lower durability further. Partitions of the plan are judged one by one as they start.
        Replicas out of sync on brokers the run replaces (dead ones the plan moves replicas off, drained ones) do
        not count: waiting would not bring them back, the plan does."""
        try:
            infos = self.cluster.describe_partitions(self.plan.pool_topics)
            out_of_sync = {(i.topic, i.partition): set(i.replicas) - set(i.isr) for i in infos
                           if len(i.isr) < len(i.replicas) and (i.topic, i.partition) not in self.by_key}
            replaced = self._replaced_brokers() if out_of_sync else frozenset()
        except Exception as exc:  # noqa: BLE001  # as in _loop: the next poll reads again
            self._read_failed(exc)
            return False
        urps = [k for k, brokers in out_of_sync.items() if brokers - replaced]
        self._note_replaced([k for k, brokers in out_of_sync.items() if not brokers - replaced], replaced)
        if not urps:
            if self.urp_since is not None:
                self.xlog.append("isr_recovered")
            self.urp_since = None
            return True
        if self.urp_since is None:
            self.urp_since = self.clock()
            self.xlog.append("waiting_for_isr", under_replicated=names(urps)[:50], count=len(urps))
            log.warning("%s: waiting, %d under-replicated partition(s) in the pool: %s", self.pool, len(urps),
                        names(urps)[:10])
        if self.clock() - self.urp_since > self.limits.urp_wait_timeout_s:
            self.xlog.append("isr_wait_timeout", under_replicated=names(urps)[:50], count=len(urps))
            raise ExecutionError(f"{self.pool}: {len(urps)} partition(s) under-replicated for more than "
                                 f"{self.limits.urp_wait_timeout_s:.0f}s, no new moves started: {names(urps)[:20]}")
        return False

    def _replaced_brokers(self) -> frozenset[int]:
        return replaced_brokers(self.plan.moves, self.cluster.live_broker_ids(), self.drained)

    def _note_replaced(self, ignored: list[Key], replaced: frozenset[int]) -> None:
        """Record (once per set of brokers) that the gate does not wait for the replicas lost with them."""
        if ignored and replaced != self.replaced_noted:
            self.replaced_noted = replaced
            self.xlog.append("under_replicated_by_replaced_brokers", brokers=sorted(replaced), count=len(ignored),
                             partitions=names(ignored)[:50])

    def _start(self, batch: list[PartitionMove], pending: list[PartitionMove], in_flight: dict[Key, float]) -> None:
        current, reasons = _start_check(self.cluster, batch, self.drained)
        targets: dict[Key, list[int]] = {}
        for move in batch:
            pending.remove(move)
            info, reason = current.get(move.key), reasons[move.key]
            if reason == "already at target":
                self.xlog.append("completed", move.key, replicas=list(move.new), detail=reason)
                self.progress.done(move)
            elif reason:
                self.xlog.append("skipped", move.key, reason=reason, current=info.replicas if info else None)
            else:
                targets[move.key] = list(move.new)
        self._check_cancel()  # a cancel that arrived while this batch was checked
        name_arrival_dirs(self.cluster, {r: d for k in targets for r, d in self.by_key[k].arrival_dirs().items()},
                          self.xlog.append)
        refused = self.cluster.alter_reassignments(targets)
        for key, target in targets.items():
            if key in refused:
                self.xlog.append("skipped", key, reason=f"controller refused: {refused[key]}")
            else:
                move = self.by_key[key]
                self.xlog.append("started", key, old=list(move.old), new=target, bytes=move.bytes_to_copy,
                                 leadership_only=move.leadership_only)
                in_flight[key] = self.clock()

    def _move_log_dirs(self) -> None:
        """The plan's moves between their brokers' log directories (execute.log_dir_moves), and those of replicas
        that arrived outside the directory the plan names (execute.arrival_dirs)."""
        state = self.xlog.state()
        arrivals = {r: d for m in self.plan.moves if state.action(m.key) == "completed"
                    for r, d in m.arrival_dirs().items()}
        planned = {m.replica for m in self.plan.log_dir_moves}
        sizes = {r: self.by_key[(r[0], r[1])].size_bytes for r in arrivals}
        misplaced = [m for m in misplaced_arrivals(self.cluster, arrivals, sizes) if m.replica not in planned]
        if misplaced:
            self.xlog.append("log_dirs_misplaced", replicas=[m.fields() for m in misplaced])
        moves = self.plan.log_dir_moves + misplaced
        if not moves:
            return
        limits = LogDirLimits(self.throttle.rate_bytes_per_s, self.limits.max_moves_per_broker,
                              self.limits.poll_interval_s, self.limits.move_timeout_s)
        LogDirExecution(self.cluster, moves, self.xlog.append, limits, self.sleep,
                        self.clock).run(self.xlog.log_dirs_done())

    def _finish(self) -> dict[str, Any]:
        moved = [k for k, e in self.xlog.state().last.items() if e["action"] == "completed" and k in self.by_key]
        elections = self.cluster.elect_preferred_leaders(moved)
        failed_elections = {f"{t}-{p}": err for (t, p), err in elections.items() if err}
        self.xlog.append("leader_election", partitions=len(moved), failed=failed_elections)
        self.progress.maybe_log(force=True)
        final = self.xlog.state()
        moves = self.plan.moves
        result: dict[str, Any] = {
            "pool": self.pool, "plan_hash": self.plan.digest, "moves": len(moves),
            "completed": sum(1 for m in moves if final.action(m.key) == "completed"),
            "completed_this_attempt": len(self.completed_now),
            "skipped": [{"topic": k[0], "partition": k[1], "reason": e.get("reason")}
                        for k, e in sorted(final.last.items()) if e["action"] == "skipped" and k in self.by_key],
            "leader_elections_failed": failed_elections,
            "throttle_bytes_per_s": None if self.throttle.empty else self.throttle.rate_bytes_per_s,
        }
        if self.plan.log_dir_moves:
            done = self.xlog.log_dirs_done()
            result["log_dir_moves"] = {"moves": len(self.plan.log_dir_moves),
                                       "completed": sum(m.replica in done for m in self.plan.log_dir_moves)}
        self.xlog.append("execute_finished", completed=result["completed"], skipped=len(result["skipped"]))
        return result


def clear_throttle(cluster: Cluster, throttle: Throttle, xlog: ExecutionLog, *, raise_errors: bool) -> bool:
    """Remove the throttle configs; without raise_errors (another error is on its way, or a cancel) a failure
    is logged and False returned."""
    if throttle.empty:
        return True
    try:
        cluster.alter_throttles(*throttle.clear_configs())
    except Exception as exc:
        xlog.append("throttle_clear_failed", error=str(exc))
        log.error("could not clear the replication throttles (%s); remove them by hand: brokers %s, topics %s",
                  exc, sorted(throttle.brokers), sorted(throttle.topic_replicas))
        if raise_errors:
            raise
        return False
    xlog.append("throttle_cleared", brokers=sorted(throttle.brokers), topics=sorted(throttle.topic_replicas))
    return True


def execute_pool(config: RebalancerConfig, cluster: Cluster, run: RunFolder, pool: str, *,
                 throttle_bytes_per_s: int | None = None, resume_cancelled: bool = False,
                 sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic,
                 on_stalled: Callable[[list[str]], None] | None = None) -> dict[str, Any]:
    """Execute (or continue executing) the pool's moves under the pool's lock; returns the result also written
    to result.json. throttle_bytes_per_s overrides the configured throttle; resume_cancelled lets a cancelled
    pool run again; on_stalled as in run_execute."""
    with _pool_lock(config, run, pool):
        return _execute_locked(config, cluster, run, pool, throttle_bytes_per_s, resume_cancelled, sleep, clock,
                               on_stalled)


def _pool_lock(config: RebalancerConfig, run: RunFolder, pool: str) -> Any:
    return pool_lock(config.run_root / ".locks", config.cluster.name, pool, run.path.name)


def _execute_locked(config: RebalancerConfig, cluster: Cluster, run: RunFolder, pool: str,
                    throttle_bytes_per_s: int | None, resume_cancelled: bool, sleep: Callable[[float], None],
                    clock: Callable[[], float], on_stalled: Callable[[list[str]], None] | None = None
                    ) -> dict[str, Any]:
    plan = load_pool_plan(config, run, pool)
    out_dir = run.stage_path(f"{EXECUTE}/{pool}")
    xlog = ExecutionLog(out_dir / "execution_log.jsonl", pool, plan.digest)
    marker = out_dir / CANCEL_MARKER
    if marker.exists():
        if not resume_cancelled:
            raise ExecutionCancelled(f"{pool}: this run's execution was cancelled "
                                     f"({read_json(marker).get('requested_at')}); to execute it anyway, "
                                     "pass --resume-cancelled (CLI) or resume_cancelled (DAG param)", pool)
        marker.unlink()
        xlog.append("cancel_cleared", detail="execution resumed after a cancel")
    rate = throttle_bytes_per_s or config.execution.throttle_bytes_per_s
    throttle = _on_live_brokers(throttle_for(plan.moves, rate), cluster) if rate else Throttle(None)
    drained = frozenset(drained_brokers(run))
    result = _PoolExecution(config, cluster, pool, plan, xlog, throttle, drained, marker, sleep, clock,
                            on_stalled).run()
    write_json(out_dir / "result.json", result)
    log.info("%s: %d of %d moves complete, %d skipped; execution log and result in %s", pool, result["completed"],
             len(plan.moves), len(result["skipped"]), out_dir)
    return result


def _on_live_brokers(throttle: Throttle, cluster: Cluster) -> Throttle:
    """The throttle without the rate on dead brokers (a drain of a dead broker): a broker's config change goes to
    that broker, so it would fail, and a dead broker copies nothing."""
    return replace(throttle, brokers=throttle.brokers & cluster.live_broker_ids()) if not throttle.empty else throttle


def _start_check(cluster: Cluster, moves: list[PartitionMove],
                 drained: frozenset[int]) -> tuple[dict[Key, PartitionInfo], dict[Key, str | None]]:
    """The moves' partitions now, and why each must not start (None: it may). The live brokers and the topics'
    min.insync.replicas are read only when a partition is short of in-sync replicas."""
    current = describe(cluster, [m.key for m in moves])
    reasons = {m.key: _drift_reason(m, current.get(m.key)) for m in moves}
    short = [m for m in moves if reasons[m.key] is None and len(current[m.key].isr) < len(current[m.key].replicas)]
    if short:
        facts = SyncFacts(cluster.live_broker_ids(), drained, cluster.min_insync_replicas({m.topic for m in short}))
        reasons.update({m.key: out_of_sync_reason(m, current[m.key].isr, facts) for m in short})
    return current, reasons


def _drift_reason(move: PartitionMove, info: PartitionInfo | None) -> str | None:
    """Why a move must not start now, its ISR aside (None: it may)."""
    if info is None:
        return "drifted: the partition no longer exists"
    if tuple(info.replicas) == move.new:
        return "already at target"
    if tuple(info.replicas) != move.old:
        return f"drifted: replicas are {info.replicas}, the plan expected {list(move.old)}"
    if info.leader < 0:
        return "no leader now"
    return None


def dry_run_pool(config: RebalancerConfig, cluster: Cluster, run: RunFolder, pool: str) -> dict[str, Any]:
    """What execute would do now, without changing anything: each move with its drift status."""
    plan = load_pool_plan(config, run, pool)
    moves = order_moves(plan.moves, config.execution.order, plan.disk_utilisation)
    _, reasons = _start_check(cluster, moves, frozenset(drained_brokers(run)))
    rows = [{"topic": m.topic, "partition": m.partition, "old": list(m.old), "new": list(m.new),
             "bytes": m.bytes_to_copy, "would": reasons[m.key] or "start"} for m in moves]
    result = {"pool": pool, "plan_hash": plan.digest, "dry_run": True, "moves": rows}
    out_dir = run.stage_path(f"{EXECUTE}/{pool}")
    out_dir.mkdir(parents=True, exist_ok=True)
    write_json(out_dir / "dry_run.json", result)
    for row in rows:
        log.info("dry-run %s: %s-%d %s -> %s (%s)", pool, row["topic"], row["partition"], row["old"], row["new"],
                 row["would"])
    return result


def run_execute(config: RebalancerConfig, connection: Any, run: RunFolder, pool: str, *, dry_run: bool,
                throttle_bytes_per_s: int | None = None, resume_cancelled: bool = False,
                require_approval: bool = False, on_stalled: Callable[[list[str]], None] | None = None
                ) -> dict[str, Any]:
    """Execute (or dry-run) one pool against the cluster behind `connection` (a KafkaConnection). With
    `require_approval`, only the plan whose hash the run's approval step recorded executes (checked before any
    cluster call). `on_stalled` is told the moves stalled each time one more stalls (it must not raise)."""
    from kafka_rebalancer.kafka_admin import ClusterAdmin
    from kafka_rebalancer.permissions import check_permissions, execution_needs

    plan = load_pool_plan(config, run, pool)  # the hash guard needs no network: it refuses before any wait
    if require_approval and not dry_run:
        from kafka_rebalancer.approve.approval import assert_approved

        assert_approved(run, plan.digest)
    if dry_run:
        with ClusterAdmin(connection) as admin:
            admin.check_reachable()
            return dry_run_pool(config, admin, run, pool)
    with _pool_lock(config, run, pool), ClusterAdmin(connection) as admin:  # the lock before any cluster call
        admin.check_reachable()
        # A missing ACL refused before the first change, not halfway through with throttles set.
        rate = throttle_bytes_per_s or config.execution.throttle_bytes_per_s
        throttle = throttle_for(plan.moves, rate) if rate else Throttle(None)
        check_permissions(admin, execution_needs(plan.moves, plan.pool_topics, throttle,
                                                  bool(plan.log_dir_moves) or any(m.target_dirs for m in plan.moves)),
                          f"to execute {pool}")
        out_dir = run.stage_path(f"{EXECUTE}/{pool}")
        if resume_cancelled or not (out_dir / CANCEL_MARKER).exists():  # a cancelled pool refuses below: no cordon
            from kafka_rebalancer.execute.cordon import cordon_drained, cordon_removed_log_dirs

            xlog = ExecutionLog(out_dir / "execution_log.jsonl", pool, plan.digest)
            cordon_drained(config, admin, run, xlog)
            if plan.log_dir_moves:
                cordon_removed_log_dirs(admin, run, xlog)
        return _execute_locked(config, admin, run, pool, throttle_bytes_per_s, resume_cancelled, time.sleep,
                               time.monotonic, on_stalled)
