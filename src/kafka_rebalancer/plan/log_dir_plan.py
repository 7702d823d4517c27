"""Emptying log directories in place (remove-disks; README: JBOD): every replica in a directory being removed moves
to another directory of its broker, never to another broker. The largest replicas go first, each to the directory
of its broker with the most room left (capacity less use, the moves before it counted); a directory that is removed,
cordoned or offline takes none. A replica no directory has room for stays, and the plan says so before approval.

The moves are also written in Kafka's reassignment format with `log_dirs` (the replicas unchanged), which
`kafka-reassign-partitions.sh --execute` accepts as it is.

A replica arriving from another broker gets a directory too (`arrival_dirs`), named in plan.json's `log_dirs`:
left to itself Kafka puts a new replica in the directory with the fewest partitions, whatever their bytes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from kafka_rebalancer.errors import RunFolderError
from kafka_rebalancer.model.reassignment import ANY_LOG_DIR, dumps
from kafka_rebalancer.model.schemas import LOG_DIR_MOVES
from kafka_rebalancer.operations.request import RequestError


@dataclass(frozen=True)
class LogDirPlan:
    moves: pd.DataFrame  # LOG_DIR_MOVES
    stranded: list[str]  # replicas left in a removed directory, with why


def removal_plan(log_dirs: pd.DataFrame | None, replica_log_dirs: pd.DataFrame | None,
                 removed: Iterable[tuple[int, str]], topic_pool: Mapping[str, str | None]) -> LogDirPlan:
    """`log_dirs`, `replica_log_dirs`: the snapshot's tables; `removed`: (broker, path) to empty."""
    removed = set(removed)
    if log_dirs is None or replica_log_dirs is None:
        raise RunFolderError("the snapshot has no log directories (taken by an older version): take a new one")
    known = {(int(b), str(d)) for b, d in zip(log_dirs["broker_id"], log_dirs["log_dir"], strict=True)}
    for broker, path in sorted(removed - known):
        dirs = sorted(d for b, d in known if b == broker)
        raise RequestError(f"action remove-disks: parameter 'log_dirs': {broker}:{path} is not a log dir of "
                                 f"broker {broker} (its log dirs: {', '.join(dirs) or 'none, not in the cluster'})")
    for broker in sorted({b for b, _ in removed}):
        if {d for b, d in known if b == broker} <= {d for b, d in removed if b == broker}:
            raise RequestError(f"action remove-disks: parameter 'log_dirs': names every log dir of broker {broker}, "
                               f"whose replicas would have nowhere to go; drain-brokers empties a whole broker")
    room = {(int(r.broker_id), str(r.log_dir)): _room(r) for r in log_dirs.itertuples()
            if (int(r.broker_id), str(r.log_dir)) not in removed and not r.cordoned and not r.offline}
    leaving = replica_log_dirs[[(int(b), str(d)) in removed for b, d in
                                zip(replica_log_dirs["broker_id"], replica_log_dirs["log_dir"], strict=True)]]
    rows, stranded = [], []
    for r in leaving.sort_values(["size_bytes", "topic", "partition"], ascending=[False, True, True]).itertuples():
        broker, size = int(r.broker_id), int(r.size_bytes)
        options = sorted(((left, path) for (b, path), left in room.items() if b == broker), reverse=True)
        if not options or options[0][0] < size:
            stranded.append(f"{r.topic}-{r.partition} on broker {broker} ({size:,} bytes in {r.log_dir}): "
                            + (f"the most room in another log dir is {options[0][0]:,} bytes ({options[0][1]})"
                               if options else "the broker has no other log dir that takes replicas"))
            continue
        target = options[0][1]
        room[(broker, target)] -= size
        rows.append({"broker_pool": topic_pool.get(str(r.topic)), "topic": r.topic, "partition": int(r.partition),
                     "broker_id": broker, "source_dir": r.log_dir, "target_dir": target, "size_bytes": size})
    moves = pd.DataFrame(rows, columns=LOG_DIR_MOVES.names).sort_values(["topic", "partition", "broker_id"],
                                                                         kind="mergesort")
    return LogDirPlan(moves.reset_index(drop=True), stranded)


def _room(row: object) -> int:
    """Bytes a directory can still take: its capacity less its use, else what its volume has free."""
    capacity, used, usable = (getattr(row, name) for name in ("capacity_bytes", "used_bytes", "volume_usable_bytes"))
    if pd.notna(capacity):
        return int(capacity) - int(used)
    return int(usable) if pd.notna(usable) else 0


def log_dir_document(moves: pd.DataFrame, replicas: Mapping[tuple[str, int], list[int]]) -> str:
    """Kafka's reassignment JSON for the moves: each partition with its replicas as they are and, per replica, the
    directory it moves to ("any" where it stays)."""
    targets: dict[tuple[str, int], dict[int, str]] = {}
    for r in moves.itertuples():
        targets.setdefault((str(r.topic), int(r.partition)), {})[int(r.broker_id)] = str(r.target_dir)
    return dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": partition, "replicas": list(replicas[(topic, partition)]),
         "log_dirs": [dirs.get(b, ANY_LOG_DIR) for b in replicas[(topic, partition)]]}
        for (topic, partition), dirs in sorted(targets.items())]})


Replica = tuple[str, int, int]  # topic, partition, broker


def arrival_dirs(log_dirs: pd.DataFrame | None, replica_log_dirs: pd.DataFrame | None,
                 arriving: Iterable[tuple[str, int, int, int]], leaving: Iterable[Replica],
                 removed: Iterable[tuple[int, str]] = ()) -> dict[Replica, str]:
    """The directory each replica `arriving` ((topic, partition, broker, bytes)) on a broker with several
    directories that take replicas (not removed, cordoned or offline) goes to: the largest first, each where its
    broker's use after it is lowest against the directory's capacity (where every capacity is known; else where
    the most room is left), with the replicas `leaving` the broker counted out."""
    if log_dirs is None or replica_log_dirs is None:
        return {}
    removed, gone = set(removed), set(leaving)
    usable: dict[int, dict[str, Any]] = {}  # broker -> directory -> its log_dirs row
    for r in log_dirs.itertuples():
        if (int(r.broker_id), str(r.log_dir)) not in removed and not r.cordoned and not r.offline:
            usable.setdefault(int(r.broker_id), {})[str(r.log_dir)] = r
    staying = [(int(b), str(d), int(s)) for t, p, b, d, s in zip(
        replica_log_dirs["topic"], replica_log_dirs["partition"], replica_log_dirs["broker_id"],
        replica_log_dirs["log_dir"], replica_log_dirs["size_bytes"], strict=True) if (t, int(p), int(b)) not in gone]
    used: dict[tuple[int, str], int] = {}
    for broker, path, size in staying:
        used[(broker, path)] = used.get((broker, path), 0) + size
    # Room as the snapshot gives it, less what lands in the plan and plus what leaves (for unknown capacities).
    room = {(b, d): _room(row) + int(row.used_bytes) - used.get((b, d), 0) if pd.isna(row.capacity_bytes)
            else int(row.capacity_bytes) - used.get((b, d), 0) for b, dirs in usable.items() for d, row in dirs.items()}
    targets: dict[Replica, str] = {}
    for topic, partition, broker, size in sorted(arriving, key=lambda a: (-a[3], a[0], a[1], a[2])):
        dirs = usable.get(broker, {})
        if len(dirs) < 2:
            continue
        known = all(pd.notna(row.capacity_bytes) for row in dirs.values())
        target = min(dirs, key=lambda d: ((used.get((broker, d), 0) + size) / int(dirs[d].capacity_bytes)
                                          if known else -room[(broker, d)], d))
        targets[(topic, partition, broker)] = target
        used[(broker, target)] = used.get((broker, target), 0) + size
        room[(broker, target)] -= size
    return targets


def balance_plan(log_dirs: pd.DataFrame | None, replica_log_dirs: pd.DataFrame | None, brokers: Iterable[int],
                 threshold: float, margin: float, leaving: Iterable[Replica],
                 topic_pool: Mapping[str, str | None], arriving: Mapping[tuple[int, str], int] | None = None
                 ) -> LogDirPlan:
    """Each broker's log directories into a band of their own: the broker's disk use over its directories'
    capacity is the mean `m`, the band `[m(1-f), m(1+f)]` with the disk resource's `f = threshold - 1` (a band per
    broker, not per pool of equal disks: a broker's directories share its replicas, whatever the other brokers'
    disks are). A directory outside it gives its replicas to (or takes them from) the broker's directory furthest
    the other way, the largest replica that does not overshoot the target band `m(1±f·margin)` first; replicas
    `leaving` their broker in this plan stay out of it, the bytes `arriving` ((broker, dir) -> bytes, where
    `arrival_dirs` puts them) count in. Directories cordoned, offline or of unknown capacity are
    left alone, and so is their broker."""
    if log_dirs is None or replica_log_dirs is None:
        return LogDirPlan(pd.DataFrame(columns=LOG_DIR_MOVES.names), [])
    gone = set(leaving)
    rows: list[dict] = []
    for broker in sorted(set(brokers)):
        dirs = log_dirs[log_dirs["broker_id"] == broker]
        if len(dirs) < 2 or dirs["cordoned"].any() or dirs["offline"].any() or dirs["capacity_bytes"].isna().any():
            continue
        on_broker = replica_log_dirs[replica_log_dirs["broker_id"] == broker]
        staying = on_broker[[(str(t), int(p), broker) not in gone
                             for t, p in zip(on_broker["topic"], on_broker["partition"], strict=True)]]
        # The directories as the plan leaves them: without the replicas leaving the broker, with those arriving.
        used = {str(d): int(staying.loc[staying["log_dir"] == d, "size_bytes"].sum())
                + (arriving or {}).get((broker, str(d)), 0) for d in dirs["log_dir"]}
        movable = {d: sorted(((int(s), str(t), int(p)) for t, p, s, f in zip(
            group["topic"], group["partition"], group["size_bytes"], group["future_log_dir"], strict=True)
            if pd.isna(f)), reverse=True) for d, group in staying.groupby("log_dir")}
        rows += _balance_broker(broker, dict(zip(dirs["log_dir"], dirs["capacity_bytes"].astype(int), strict=True)),
                                used, movable, threshold - 1, (threshold - 1) * margin, topic_pool)
    moves = pd.DataFrame(rows, columns=LOG_DIR_MOVES.names).sort_values(["topic", "partition", "broker_id"],
                                                                         kind="mergesort")
    return LogDirPlan(moves.reset_index(drop=True), [])


def _balance_broker(broker: int, capacity: dict[str, int], used: dict[str, int],
                    movable: dict[str, list[tuple[int, str, int]]], spread: float, target: float,
                    topic_pool: Mapping[str, str | None]) -> list[dict]:
    mean = sum(used.values()) / sum(capacity.values())
    rows: list[dict] = []
    if not mean:
        return rows
    for _ in range(sum(len(v) for v in movable.values())):  # each step moves one replica: at most every one
        usage = {d: used[d] / capacity[d] for d in capacity}
        high, low = max(usage, key=lambda d: (usage[d], d)), min(usage, key=lambda d: (usage[d], d))
        if usage[high] <= mean * (1 + spread) and usage[low] >= mean * (1 - spread):
            break
        # Bytes the high dir may give and the low dir may take before either passes the target band's mean side.
        give = used[high] - mean * (1 - target) * capacity[high]
        take = mean * (1 + target) * capacity[low] - used[low]
        fits = [r for r in movable.get(high, []) if r[0] <= min(give, take)]
        if not fits:
            break
        size, topic, partition = fits[0]
        movable[high].remove(fits[0])
        used[high], used[low] = used[high] - size, used[low] + size
        rows.append({"broker_pool": topic_pool.get(topic), "topic": topic, "partition": partition,
                     "broker_id": broker, "source_dir": high, "target_dir": low, "size_bytes": size})
    return rows


def directory_bands(log_dirs: pd.DataFrame | None, threshold: float) -> pd.DataFrame:
    """Each log directory of a broker with several against its broker's band (as `balance_plan` draws it): usage,
    lower, upper, inside. Brokers with one directory, or a directory of unknown capacity, are left out."""
    columns = ["broker_id", "log_dir", "usage", "lower", "upper", "inside"]
    if log_dirs is None or log_dirs.empty:
        return pd.DataFrame(columns=columns)
    rows = []
    for broker, dirs in log_dirs[~log_dirs["offline"].astype(bool)].groupby("broker_id"):
        if len(dirs) < 2 or dirs["capacity_bytes"].isna().any():
            continue
        mean = dirs["used_bytes"].sum() / dirs["capacity_bytes"].astype(float).sum()
        for path, used, capacity in zip(dirs["log_dir"], dirs["used_bytes"], dirs["capacity_bytes"], strict=True):
            usage = used / float(capacity)
            lower, upper = mean * (2 - threshold), mean * threshold
            rows.append({"broker_id": int(broker), "log_dir": path, "usage": usage, "lower": lower, "upper": upper,
                         "inside": lower <= usage <= upper})
    return pd.DataFrame(rows, columns=columns)
