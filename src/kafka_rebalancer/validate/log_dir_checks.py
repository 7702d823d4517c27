"""The facts the validation checks on a plan's moves between a broker's log directories (JBOD; README: JBOD),
from the snapshot alone: each replica is in its source directory now and stays on its broker in plan.json; its
target is another log directory of that broker that takes replicas (not removed, cordoned or offline); and no
directory ends over its capacity. A directory plan.json names for a replica is one of a replica arriving on its
broker, and a directory of that broker that takes replicas."""

from __future__ import annotations

import pandas as pd

from kafka_rebalancer.model.reassignment import Reassignment
from kafka_rebalancer.snapshot.build import SnapshotTables


def log_dir_check_rows(snapshot: SnapshotTables, moves: pd.DataFrame, plan: list[Reassignment],
                       removed: frozenset[tuple[int, str]]) -> pd.DataFrame:
    """One row per move between log directories, with a boolean column per check."""
    columns = ["topic", "partition", "broker_id", "source_dir", "target_dir", "source_matches_snapshot",
               "stays_on_broker", "target_takes_replicas", "target_fits"]
    if moves.empty:
        return pd.DataFrame(columns=columns)
    dirs = snapshot.log_dirs if snapshot.log_dirs is not None else pd.DataFrame(columns=["broker_id", "log_dir"])
    where = {} if snapshot.replica_log_dirs is None else {
        (t, int(p), int(b)): d for t, p, b, d in zip(snapshot.replica_log_dirs["topic"],
                                                     snapshot.replica_log_dirs["partition"],
                                                     snapshot.replica_log_dirs["broker_id"],
                                                     snapshot.replica_log_dirs["log_dir"], strict=True)}
    takes = {(int(r.broker_id), str(r.log_dir)) for r in dirs.itertuples()
             if not r.cordoned and not r.offline and (int(r.broker_id), str(r.log_dir)) not in removed}
    after = {(int(r.broker_id), str(r.log_dir)): (int(r.used_bytes), r.capacity_bytes) for r in dirs.itertuples()}
    for r in moves.itertuples():
        for key, sign in (((int(r.broker_id), str(r.source_dir)), -1), ((int(r.broker_id), str(r.target_dir)), 1)):
            if key in after:
                after[key] = (after[key][0] + sign * int(r.size_bytes), after[key][1])
    replicas_after = {(e.topic, e.partition): set(e.replicas) for e in plan}
    rows = []
    for r in moves.itertuples():
        broker, target = int(r.broker_id), (int(r.broker_id), str(r.target_dir))
        used, capacity = after.get(target, (0, None))
        rows.append({"topic": r.topic, "partition": int(r.partition), "broker_id": broker,
                     "source_dir": r.source_dir, "target_dir": r.target_dir,
                     "source_matches_snapshot": where.get((r.topic, int(r.partition), broker)) == r.source_dir,
                     "stays_on_broker": broker in replicas_after.get((r.topic, int(r.partition)), {broker}),
                     "target_takes_replicas": target in takes and r.target_dir != r.source_dir,
                     "target_fits": capacity is None or pd.isna(capacity) or used <= int(capacity)})
    return pd.DataFrame(rows, columns=columns)


def arrival_check_rows(snapshot: SnapshotTables, plan: list[Reassignment], rollback: list[Reassignment],
                       removed: frozenset[tuple[int, str]]) -> pd.DataFrame:
    """One row per replica whose log directory plan.json names, with a boolean column per check."""
    columns = ["topic", "partition", "broker_id", "target_dir", "arrives", "target_takes_replicas"]
    named = [(e, broker, path) for e in plan for broker, path in e.target_dirs().items()]
    if not named:
        return pd.DataFrame(columns=columns)
    before = {(e.topic, e.partition): set(e.replicas) for e in rollback}
    dirs = snapshot.log_dirs if snapshot.log_dirs is not None else pd.DataFrame(
        columns=["broker_id", "log_dir", "cordoned", "offline"])
    takes = {(int(r.broker_id), str(r.log_dir)) for r in dirs.itertuples()
             if not r.cordoned and not r.offline and (int(r.broker_id), str(r.log_dir)) not in removed}
    return pd.DataFrame([{"topic": e.topic, "partition": e.partition, "broker_id": broker, "target_dir": path,
                          "arrives": broker not in before.get((e.topic, e.partition), {broker}),
                          "target_takes_replicas": (broker, path) in takes} for e, broker, path in named],
                        columns=columns)


def replica_dirs_after(replica_log_dirs: pd.DataFrame | None, moves: pd.DataFrame) -> pd.DataFrame | None:
    """The snapshot's replica directories with the moves applied: what the plan leaves."""
    if replica_log_dirs is None or moves.empty:
        return replica_log_dirs
    target = {(t, int(p), int(b)): d for t, p, b, d in zip(moves["topic"], moves["partition"], moves["broker_id"],
                                                            moves["target_dir"], strict=True)}
    after = replica_log_dirs.copy()
    after["log_dir"] = [target.get((t, int(p), int(b)), d) for t, p, b, d in zip(
        after["topic"], after["partition"], after["broker_id"], after["log_dir"], strict=True)]
    return after
