"""The plan as partition changes: the difference between the snapshot's assignment and the planned one, and what
follows from it (the replicas after the plan, and the brokers' loads the planner predicts from it)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from kafka_rebalancer.config import Budgets
from kafka_rebalancer.model.resources import CPU, NETWORK_IN, NETWORK_OUT, Resource, role_loads
from kafka_rebalancer.model.schemas import PARTITION_CHANGES, PLANNER_NOTES, REPLICAS

TRAFFIC = ["replication_factor", "bytes_in_per_s", "bytes_out_per_s", "cpu_leader_cores", "cpu_follower_cores"]


def trim_to_budgets(moves: pd.DataFrame, budgets: Budgets) -> pd.DataFrame:
    """Keep the run's budgets across pools.

    Each pool's actions (a move, a leadership transfer, or a swap's two moves, sharing a `seq`) were accepted one
    after the other, so every prefix of a pool's sequence is itself a valid plan. The budgets (on replica moves
    and bytes; leadership transfers copy nothing) are kept by taking whole actions as prefixes, round-robin over
    the pools (by `seq`), so every pool gets its most useful actions first.
    """
    action_key = ["seq", "broker_pool"]
    per_action = moves.assign(copies=(moves["action"] == "replica").astype("int64")).groupby(
        action_key, sort=True).agg(copies=("copies", "sum"), size=("size_bytes", "sum"))
    kept: list[tuple[int, str]] = []
    stopped: set[str] = set()
    replica_moves = total_bytes = 0
    for (seq, pool), copies, size in zip(per_action.index, per_action["copies"].tolist(),
                                         per_action["size"].tolist(), strict=True):
        if pool in stopped:
            continue
        over_count = replica_moves + copies > budgets.max_replica_moves
        over_bytes = budgets.max_moved_bytes is not None and total_bytes + size > budgets.max_moved_bytes
        if over_count or over_bytes:
            stopped.add(pool)
            continue
        kept.append((seq, pool))
        replica_moves += copies
        total_bytes += size
    keep = pd.MultiIndex.from_frame(moves[action_key]).isin(kept)
    return moves[keep].sort_values(["broker_pool", "seq"], kind="mergesort").reset_index(drop=True)


def budget_notes(left: pd.DataFrame, dropped: int, budgets: Budgets) -> pd.DataFrame:
    """PLANNER_NOTES for the brokers left outside (`recheck.left_outside`) with no reason of the planner's, when
    `trim_to_budgets` dropped actions: the pools' planners each kept within the budgets, the run's total did not."""
    left = left[~left["explained"]]
    limits = f"max_replica_moves={budgets.max_replica_moves}" + (
        f", max_moved_bytes={budgets.max_moved_bytes}" if budgets.max_moved_bytes is not None else "")
    note = (f"{{left}} after the plan: the run's budgets ({limits}) dropped {dropped} of the planner's moves across "
            f"pools")
    return pd.DataFrame({"broker_pool": left["broker_pool"].astype(str), "resource": left["resource"].astype(str),
                         "broker_id": left["broker_id"].astype("int64"),
                         "note": [note.format(left=x) for x in left["left"]]}, columns=PLANNER_NOTES.names)


def partition_changes(partitions: pd.DataFrame, moves: pd.DataFrame) -> pd.DataFrame:
    """Replay the actions (in order) on the partitions' replica lists, as the planner's model does: positions are
    kept; when a partition is first touched, its current leader goes first (the executor elects preferred leaders
    for every partition of the plan); a leadership transfer swaps the old and the new leader. `partitions` needs
    topic, partition, replicas, leader and size_bytes for the moved partitions. Schema PARTITION_CHANGES."""
    current = {(t, int(p)): (list(map(int, r)), int(leader), int(s)) for t, p, r, leader, s in
               zip(partitions["topic"], partitions["partition"], partitions["replicas"], partitions["leader"],
                   partitions["size_bytes"], strict=True)}
    new: dict[tuple[str, int], list[int]] = {}
    pool_of: dict[tuple[str, int], str] = {}
    for row in moves.sort_values(["broker_pool", "seq", "action", "topic", "partition"], kind="mergesort") \
            .itertuples(index=False):
        key = (row.topic, int(row.partition))
        old, leader, _ = current[key]
        if key not in new:
            replicas = list(old)
            if leader in replicas and replicas[0] != leader:
                i = replicas.index(leader)
                replicas[0], replicas[i] = replicas[i], replicas[0]
            new[key] = replicas
        replicas = new[key]
        source, target = int(row.source_broker), int(row.target_broker)
        if row.action == "leadership":
            if replicas[0] != source or target not in replicas:
                raise ValueError(f"leadership transfer of {key} from {source} to {target} does not apply to "
                                 f"replicas {replicas}")
            i = replicas.index(target)
            replicas[0], replicas[i] = target, source
        else:
            if source not in replicas or target in replicas:
                raise ValueError(f"move of {key} from {source} to {target} does not apply to replicas {replicas}")
            replicas[replicas.index(source)] = target
        pool_of[key] = row.broker_pool
    # A partition whose replicas end as they are still changes when its leader does (the preferred-leader
    # election after execution makes the first replica lead).
    rows = [(pool_of[key], key[0], key[1], current[key][0], replicas, current[key][2])
            for key, replicas in sorted(new.items())
            if replicas != current[key][0] or replicas[0] != current[key][1]]
    return pd.DataFrame(rows, columns=PARTITION_CHANGES.names)


def replicas_of_changes(changes: pd.DataFrame, partitions: pd.DataFrame) -> pd.DataFrame:
    """The replicas-table rows of the changed partitions after the plan: new brokers, the first replica leading,
    each replica's traffic load in its role. `partitions` holds the changed partitions' traffic."""
    if changes.empty:
        return pd.DataFrame(columns=REPLICAS.names)
    info = changes[["topic", "partition", "new_replicas", "size_bytes"]].merge(
        partitions[["topic", "partition", *TRAFFIC]], on=["topic", "partition"])
    info["replication_factor"] = info["new_replicas"].map(len)  # the leader serves this many followers after
    rows = info.explode("new_replicas", ignore_index=True)
    rows["position"] = rows.groupby(["topic", "partition"]).cumcount().astype("int32")
    rows["broker_id"] = rows["new_replicas"].astype("int32")
    rows["is_leader"] = rows["position"] == 0
    rows["in_isr"] = True
    lead, follow = role_loads_of(rows, [NETWORK_IN, NETWORK_OUT, CPU])
    current = np.where(rows["is_leader"].to_numpy()[:, None], lead, follow)
    rows["nw_in_bytes_per_s"], rows["nw_out_bytes_per_s"], rows["cpu_cores"] = current.T
    return rows[REPLICAS.names]


def role_loads_of(rows: pd.DataFrame, resources: list[Resource]) -> tuple[np.ndarray, np.ndarray]:
    """Per row (a replica, or a partition: size and traffic columns) and resource: its load as leader and as
    follower."""
    return role_loads(rows["size_bytes"].to_numpy(float), rows["bytes_in_per_s"].to_numpy(float),
                      rows["bytes_out_per_s"].to_numpy(float), rows["replication_factor"].to_numpy(float),
                      rows["cpu_leader_cores"].to_numpy(float), rows["cpu_follower_cores"].to_numpy(float),
                      resources)


def load_after(load: pd.DataFrame, changes: pd.DataFrame, partitions: pd.DataFrame,
               resources: list[Resource]) -> pd.DataFrame:
    """The brokers' loads after the plan: the loads before, minus the changed partitions' replicas as they are,
    plus them as planned (`partitions`: the changed partitions with their traffic and current leader)."""
    if changes.empty:
        return load.copy()
    info = changes[["topic", "partition", "old_replicas", "new_replicas"]].merge(
        partitions[["topic", "partition", "leader", "size_bytes", *TRAFFIC]], on=["topic", "partition"])
    old = info.explode("old_replicas", ignore_index=True)
    old["broker_id"] = old["old_replicas"].astype(int)
    old["is_leader"] = old["broker_id"] == old["leader"]
    new = info.assign(replication_factor=info["new_replicas"].map(len)).explode("new_replicas", ignore_index=True)
    new["broker_id"] = new["new_replicas"].astype(int)
    new["is_leader"] = new.groupby(["topic", "partition"]).cumcount() == 0

    def per_broker(rows: pd.DataFrame, sign: float) -> pd.DataFrame:
        lead, follow = role_loads_of(rows, resources)
        amount = np.where(rows["is_leader"].to_numpy()[:, None], lead, follow) * sign
        frame = pd.DataFrame(amount, columns=[r.name for r in resources])
        frame["broker_id"] = rows["broker_id"].to_numpy()
        return frame.groupby("broker_id").sum().stack().rename("delta").reset_index()

    deltas = pd.concat([per_broker(old, -1.0), per_broker(new, 1.0)]).rename(columns={"level_1": "resource"})
    return with_load_changes(load, deltas.groupby(["broker_id", "resource"], as_index=False)["delta"].sum())


def with_load_changes(load: pd.DataFrame, changes: pd.DataFrame) -> pd.DataFrame:
    """`load` (BROKER_LOAD) plus the `changes` per broker and resource (columns broker_id, resource, delta)."""
    out = load.merge(changes[["broker_id", "resource", "delta"]], on=["broker_id", "resource"], how="left")
    out["load"] = out["load"] + out["delta"].fillna(0.0)
    out["usage"] = np.where(out["capacity"] > 0, out["load"] / out["capacity"], 0.0)
    return out.drop(columns="delta")[list(load.columns)]
