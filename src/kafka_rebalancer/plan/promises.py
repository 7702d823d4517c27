"""What each manual action promises, checked on a placement: the one plan.json predicts (the validation, before
approval) or the cluster's after execution (verify).

- drain-brokers: every drained broker holds no replica of any topic (excluded and internal ones included: the
  broker is going away) and so leads nothing.
- add-brokers: every added broker ends inside its pool's band on every balanced resource.
- isolate-topics: the isolated topics sit only on their pool's brokers, and those brokers hold no other pool's
  topics. Excluded topics (Kafka's internal ones by default) are exempt on both sides: they serve every pool's
  clients, and an isolation decides where a workload runs, not where the cluster's own bookkeeping lives.
- remove-disks: every removed log dir holds no replica (the cluster's after execution; the plan's moves are
  checked against the snapshot when they are made: a replica no other dir of its broker has room for is "cannot").
- demote-brokers: a demoted broker leads no partition that has another in-sync replica on a live broker that is not
  demoted; a partition without one is named (exempt), its leadership has nowhere to go.
- change-replication-factor: every partition of its topics has the target number of replicas, all in sync, on as
  many racks as the target and its pool's brokers that take replicas allow.
The nightly run, rebalance-pool and elect-leaders promise bands, which the validation's band expectations hold.

Verdicts: kept; broken (the validation or verify fails, naming broker and partition); cannot (the plan says why
before approval: the partition may not move by the ISR rules, no pool can take it, the planner found no broker
that can, or the run's budgets cut the move; the approval body leads with it and the run does not end verified);
exempt (named, not owed).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from kafka_rebalancer.config import RebalancerConfig
from kafka_rebalancer.model.reassignment import Reassignment
from kafka_rebalancer.model.run_actions import Action
from kafka_rebalancer.model.schemas import HARD, INFEASIBLE, PLANNER_NOTES, PROMISES, SKIPPED
from kafka_rebalancer.model.topics import matches_any
from kafka_rebalancer.operations.request import ManualRequest
from kafka_rebalancer.run_folder import PLAN, RunFolder, read_json, read_table
from kafka_rebalancer.snapshot.build import SnapshotTables
from kafka_rebalancer.snapshot.evacuation import NO_POOL, stranded

KEPT, BROKEN, CANNOT, EXEMPT = "kept", "broken", "cannot", "exempt"
# Verdicts the validation lets through (a broken promise fails it); verify calls a run verified only on KEPT and
# EXEMPT.
VALID_VERDICTS = (KEPT, CANNOT, EXEMPT)
# A partition skipped for this reason is no excuse for a drain: an exclusion is about balancing.
_NOT_AN_EXCUSE = "excluded topic"


@dataclass(frozen=True)
class Excuses:
    """Why the plan may leave a promise unkept, from the plan's own artifacts."""

    partitions: Mapping[tuple[str, int], str] = field(default_factory=dict)  # a partition no action may move
    brokers: Mapping[tuple[int, str], str] = field(default_factory=dict)  # (broker, resource or HARD): a note
    budget: str | None = None  # the run's budgets cut moves

    @classmethod
    def of_plan(cls, skipped: pd.DataFrame, notes: pd.DataFrame, infeasible: pd.DataFrame,
                moves_dropped_by_budget: int, stranded: Iterable[tuple[str, int]] = ()) -> Excuses:
        """`stranded`: the partitions no pool can plan (`snapshot.evacuation.stranded`): the skipped table lists
        a partition by its first replica's pool, and a drained broker of no pool leaves it out."""
        partitions = {(str(t), int(p)): str(r) for t, p, r in zip(skipped["topic"], skipped["partition"],
                                                                  skipped["reason"], strict=True)
                      if not str(r).startswith(_NOT_AN_EXCUSE)}
        partitions.update({key: NO_POOL for key in stranded})
        brokers = {(int(b), str(res)): str(n) for b, res, n in zip(notes["broker_id"], notes["resource"],
                                                                   notes["note"], strict=True) if pd.notna(b)}
        for res, ids, proof in zip(infeasible["resource"], infeasible["brokers"], infeasible["proof"], strict=True):
            for b in ids:
                brokers.setdefault((int(b), str(res)), str(proof))
        budget = (f"the run's budgets dropped {moves_dropped_by_budget} planned action(s) (config budgets)"
                  if moves_dropped_by_budget else None)
        return cls(partitions, brokers, budget)

    def why(self, topic: str, partition: int, broker_id: int, resource: str = HARD) -> str | None:
        return (self.partitions.get((topic, partition)) or self.brokers.get((broker_id, resource)) or self.budget)


def excuses_of_run(run: RunFolder, snapshot: SnapshotTables, request: ManualRequest | None) -> Excuses:
    """The excuses the run's plan gives (its skipped partitions, notes, infeasibility proofs, budget cuts, and the
    partitions no pool can plan); `snapshot`: the run's, as planned (`read_snapshot`)."""
    plan_dir = run.require(PLAN)
    summary = read_json(plan_dir / "summary.json")
    return Excuses.of_plan(read_table(plan_dir, SKIPPED), read_table(plan_dir, PLANNER_NOTES),
                           read_table(plan_dir, INFEASIBLE),
                           summary.get("budgets", {}).get("moves_dropped_by_budget", 0),
                           stranded(snapshot.partitions, snapshot.brokers, request))


def placement_after(partitions: pd.DataFrame, plan: Iterable[Reassignment]) -> pd.DataFrame:
    """The snapshot's partitions as plan.json leaves them: its replicas, its first replica leading (the executor
    elects the preferred leader of every partition it moved), new replicas in sync once copied."""
    changed = {(r.topic, r.partition): list(r.replicas) for r in plan}
    rows = []
    for topic, partition, replicas, isr, leader in zip(partitions["topic"], partitions["partition"],
                                                       partitions["replicas"], partitions["isr"],
                                                       partitions["leader"], strict=True):
        new = changed.get((topic, int(partition)))
        if new is None:
            rows.append((topic, int(partition), [int(b) for b in replicas], int(leader), [int(b) for b in isr]))
        else:
            old = {int(b) for b in replicas}
            in_sync = [b for b in new if b in {int(x) for x in isr} or b not in old]
            rows.append((topic, int(partition), new, new[0] if new[0] in in_sync else int(leader), in_sync))
    return pd.DataFrame(rows, columns=["topic", "partition", "replicas", "leader", "isr"])


@dataclass(frozen=True)
class Promised:
    """The action whose promise a run keeps, with what it names."""

    action: Action
    brokers: tuple[int, ...] = ()
    broker_pool: str | None = None
    topics: tuple[str, ...] = ()
    replication_factor: int | None = None  # change-replication-factor's target


def promised_action(request: ManualRequest | None) -> Promised | None:
    """The promise the run keeps on its brokers and topics, as its scope says: its own action's, or the reviewed
    run's that an execute-reviewed run adopted (with its pool override, which names what a pool change promised)."""
    if request is None or (promise := request.scope.promise) is None or promise not in _CHECKS:
        return None
    if request.scope.demoted:
        return Promised(promise, tuple(sorted(request.scope.demoted)))
    if request.scope.replication_factor is not None:
        return Promised(promise, topics=request.scope.topics, replication_factor=request.scope.replication_factor)
    named = request.override or request
    return Promised(promise, tuple(named.brokers), named.broker_pool, tuple(named.topics))


def promise_rows(request: ManualRequest | None, config: RebalancerConfig, placement: pd.DataFrame,
                 status: pd.DataFrame, alive: Iterable[int], excuses: Excuses) -> pd.DataFrame:
    """Each promise of the run's action on `placement` (topic, partition, replicas, leader, isr: `placement_after`
    or a snapshot's partitions), `status` its band status (band_status: broker_id, resource, counted, inside,
    usage, lower, upper). Schema PROMISES."""
    rows: list[dict] = []
    promised = promised_action(request)
    if promised is not None:
        rows = _CHECKS[promised.action](promised, config, placement, status, frozenset(int(b) for b in alive),
                                        excuses)
    frame = pd.DataFrame(rows, columns=PROMISES.names)
    return frame.astype({"broker_id": "Int32", "partition": "Int32"})


def _row(request: Promised, promise: str, broker_id: int | None, verdict: str, detail: str,
         topic: str | None = None, partition: int | None = None) -> dict:
    return {"action": request.action.value, "promise": promise, "broker_id": broker_id, "topic": topic,
            "partition": partition, "verdict": verdict, "detail": detail}


def _unkept(request: Promised, promise: str, broker_id: int, topic: str, partition: int, what: str,
            excuse: str | None) -> dict:
    verdict = CANNOT if excuse else BROKEN
    return _row(request, promise, broker_id, verdict, f"{what}: {excuse}" if excuse else what, topic, partition)


def _mask(values: Iterable[bool]) -> np.ndarray:
    return np.fromiter(values, dtype=bool)


def _drain(request: Promised, config: RebalancerConfig, placement: pd.DataFrame, status: pd.DataFrame,
           alive: frozenset[int], excuses: Excuses) -> list[dict]:
    promise = "a drained broker holds no replica and leads nothing"
    drained = set(request.brokers)
    rows = []
    holding = placement[_mask(bool(drained.intersection(int(b) for b in r)) for r in placement["replicas"])]
    for b in sorted(drained):
        mine = holding[_mask(b in {int(x) for x in r} for r in holding["replicas"])]
        for t, p, leader in zip(mine["topic"], mine["partition"], mine["leader"], strict=True):
            what = f"{t}-{p} still has a replica on broker {b}" + (" (its leader)" if int(leader) == b else "")
            rows.append(_unkept(request, promise, b, t, int(p), what, excuses.why(t, int(p), b)))
        if mine.empty:
            rows.append(_row(request, promise, b, KEPT, f"broker {b} holds no replica"))
    return rows


def _add(request: Promised, config: RebalancerConfig, placement: pd.DataFrame, status: pd.DataFrame,
         alive: frozenset[int], excuses: Excuses) -> list[dict]:
    promise = "an added broker ends inside its pool's band on every balanced resource"
    rows = []
    counted = status[status["counted"].astype(bool)]
    for b in sorted(request.brokers):
        mine = counted[counted["broker_id"] == b]
        outside = mine[~mine["inside"].astype(bool)]
        for res, usage, lower, upper in zip(outside["resource"], outside["usage"], outside["lower"],
                                            outside["upper"], strict=True):
            what = f"broker {b} {res} at {usage:.3f} of capacity, band {lower:.3f}..{upper:.3f}"
            excuse = excuses.brokers.get((b, str(res))) or excuses.budget
            rows.append(_row(request, promise, b, CANNOT if excuse else BROKEN,
                             f"{what}: {excuse}" if excuse else what))
        if outside.empty:
            rows.append(_row(request, promise, b, KEPT, f"broker {b} inside the band on "
                             f"{', '.join(sorted(mine['resource'])) or 'no balanced resource'}"))
    return rows


def _isolate(request: Promised, config: RebalancerConfig, placement: pd.DataFrame, status: pd.DataFrame,
             alive: frozenset[int], excuses: Excuses) -> list[dict]:
    pool = str(request.broker_pool)
    members = set(config.pools[pool].brokers) if pool in config.pools else set()
    there = "an isolated topic sits only on its pool's brokers"
    alone = "the isolated pool's brokers hold no other pool's topics"
    rows = []
    for t, p, replicas in zip(placement["topic"], placement["partition"], placement["replicas"], strict=True):
        if config.topic_excluded(t):
            continue  # exempt: see the module's docstring
        ids = [int(b) for b in replicas]
        if matches_any(t, request.topics):
            for b in (b for b in ids if b not in members):
                rows.append(_unkept(request, there, b, t, int(p), f"{t}-{p} has a replica on broker {b}, outside "
                                    f"pool {pool!r}", excuses.why(t, int(p), b)))
        elif config.topic_pool(t) != pool:
            for b in (b for b in ids if b in members):
                rows.append(_unkept(request, alone, b, t, int(p), f"{t}-{p} (pool {config.topic_pool(t)!r}) has a "
                                    f"replica on broker {b} of pool {pool!r}", excuses.why(t, int(p), b)))
    if not any(r["promise"] == there for r in rows):
        rows.append(_row(request, there, None, KEPT, f"topics {', '.join(request.topics)} only on pool {pool!r}"))
    if not any(r["promise"] == alone for r in rows):
        rows.append(_row(request, alone, None, KEPT, f"pool {pool!r} holds no other pool's topics"))
    return rows


def _demote(request: Promised, config: RebalancerConfig, placement: pd.DataFrame, status: pd.DataFrame,
            alive: frozenset[int], excuses: Excuses) -> list[dict]:
    promise = "a demoted broker leads no partition with another in-sync replica"
    demoted = set(request.brokers)
    rows = []
    led = placement[placement["leader"].isin(demoted)]
    for t, p, replicas, isr, leader in zip(led["topic"], led["partition"], led["replicas"], led["isr"],
                                           led["leader"], strict=True):
        in_sync = {int(b) for b in isr}
        others = [int(b) for b in replicas if int(b) in in_sync and int(b) in alive and int(b) not in demoted]
        if others:
            rows.append(_unkept(request, promise, int(leader), t, int(p), f"broker {leader} leads {t}-{p}, in-sync "
                                f"replica(s) {others} could", excuses.why(t, int(p), int(leader))))
        else:
            rows.append(_row(request, promise, int(leader), EXEMPT, f"broker {leader} leads {t}-{p}: no other live "
                             "in-sync replica to take it", t, int(p)))
    for b in sorted(demoted - {int(x) for x in led["leader"]}):
        rows.append(_row(request, promise, b, KEPT, f"broker {b} leads nothing"))
    return rows


def _replication_factor(request: Promised, config: RebalancerConfig, placement: pd.DataFrame,
                        status: pd.DataFrame, alive: frozenset[int], excuses: Excuses) -> list[dict]:
    target = int(request.replication_factor or 0)
    promise = f"every partition of the topics at replication factor {target}, in sync, its racks spread"
    brokers = status.drop_duplicates("broker_id").set_index("broker_id")
    rack = {int(b): r if isinstance(r, str) and r else f"#{b}" for b, r in brokers["rack"].items()}
    taking = brokers[brokers["eligible"].astype(bool)]
    racks_of_pool = {str(p): {rack[int(b)] for b in group.index} for p, group in taking.groupby("broker_pool")}
    rows = []
    resized = placement[_mask(matches_any(t, request.topics) for t in placement["topic"])]
    for t, p, replicas, isr, leader in zip(resized["topic"], resized["partition"], resized["replicas"],
                                           resized["isr"], resized["leader"], strict=True):
        ids = [int(b) for b in replicas]
        pool = config.topic_pool(t) or brokers["broker_pool"].get(int(leader))
        racks = {rack.get(b, f"#{b}") for b in ids}
        required = min(target, len(racks_of_pool.get(str(pool), set(rack.values()))))
        faults = ([f"{len(ids)} replicas {ids}"] if len(ids) != target else []) + (
            [f"replica(s) {sorted(set(ids) - {int(b) for b in isr})} out of sync"] if set(ids) - set(isr) else []) + (
            [f"on {len(racks)} rack(s), {required} possible"] if len(racks) < required else [])
        if faults:
            rows.append(_unkept(request, promise, int(leader), t, int(p), f"{t}-{p}: " + "; ".join(faults),
                                excuses.partitions.get((t, int(p)))))
    if not rows:
        rows.append(_row(request, promise, None, KEPT, f"{len(resized)} partition(s) of "
                         f"{', '.join(request.topics)} at replication factor {target}, in sync, racks spread"))
    return rows


# How each promise is checked; remove-disks' by `log_dir_promises`, on the log dirs.
_CHECKS = {Action.DRAIN_BROKERS: _drain, Action.ADD_BROKERS: _add, Action.ISOLATE_TOPICS: _isolate,
           Action.DEMOTE_BROKERS: _demote, Action.CHANGE_REPLICATION_FACTOR: _replication_factor}


def log_dir_promises(request: ManualRequest | None, replica_log_dirs: pd.DataFrame | None,
                     planned: Iterable[tuple[str, int, int]]) -> pd.DataFrame:
    """remove-disks: each removed log dir empty on `replica_log_dirs` (a snapshot's); a replica still there is
    "cannot" when the plan did not move it (it said why), else broken. Schema PROMISES."""
    removed = sorted(request.scope.removed_log_dirs) if request is not None else []
    promised, moved, rows = Promised(Action.REMOVE_DISKS), set(planned), []
    promise = "the removed log dir holds no replica"
    for broker, path in removed:
        left = replica_log_dirs[(replica_log_dirs["broker_id"] == broker) & (replica_log_dirs["log_dir"] == path)] \
            if replica_log_dirs is not None else pd.DataFrame(columns=["topic", "partition"])
        for topic, partition in zip(left["topic"], left["partition"], strict=True):
            excuse = None if (topic, int(partition), broker) in moved else "the plan found no other log dir of " \
                "the broker with room for it (plan summary: log_dir_moves.stranded)"
            rows.append(_unkept(promised, promise, broker, topic, int(partition), f"still in {path}", excuse))
        if left.empty:
            rows.append(_row(promised, promise, broker, KEPT, f"{path} is empty"))
    return pd.DataFrame(rows, columns=PROMISES.names).astype({"broker_id": "Int32", "partition": "Int32"})


def unkept(promises: pd.DataFrame) -> pd.DataFrame:
    """The rows whose promise is not kept (broken, or cannot)."""
    return promises[promises["verdict"].isin([BROKEN, CANNOT])]


def promise_lines(promises: pd.DataFrame, limit: int = 10) -> list[str]:
    """One line per unkept promise row, the first `limit`, then how many more."""
    rows = unkept(promises)
    lines = [f"{r.verdict}: {r.detail}" for r in rows.head(limit).itertuples(index=False)]
    if len(rows) > limit:
        lines.append(f"... and {len(rows) - limit} more (promises.csv)")
    return lines


def validation_promise_lines(validation_folder: Path | None) -> list[str]:
    """`promise_lines` of a validation stage's promises.csv (none: no stage, no file, or a run validated before
    promises were checked)."""
    path = validation_folder / "promises.csv" if validation_folder is not None else None
    if path is None or not path.exists() or path.stat().st_size == 0:
        return []
    try:
        promises = pd.read_csv(path)
    except pd.errors.EmptyDataError:
        return []
    return promise_lines(promises) if "verdict" in promises else []
