"""Row checks on the snapshot tables, pure functions over pandas frames.

They run wherever tables enter the product without an integrity record: a snapshot built from what the cluster or a
metrics file reported, and a snapshot read back from a run folder written before records began (a recorded one is
checked against its record instead, `run_folder.check_files`). A bad row stops the run before planning or
execution, with a message naming the table, the row and what was expected, instead of a negative size or an
unknown broker reaching the plan. Each check finds whether any row is bad with whole-column operations (1.5 million
replicas in about a second); only then does it walk the rows to name the first bad one.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from kafka_rebalancer.errors import SnapshotError
from kafka_rebalancer.model.resources import RESOURCES
from kafka_rebalancer.model.schemas import BROKERS, PARTITIONS, REPLICAS, TableSchema


@dataclass(frozen=True)
class _Number:
    minimum: int
    integer: bool = False
    nullable: bool = False

    def expected(self, below: int | None = None) -> str:
        """What the column holds; `below`: the bound of its integer type, named when a value passed it."""
        kind = "an integer" if self.integer else "a number"
        held = f"{kind} from {self.minimum} to {below - 1}" if below is not None else f"{kind} >= {self.minimum}"
        return held + (" (or empty)" if self.nullable else "")


# The integer columns' types bound their values: a larger one cannot be stored or converted (one above 2^63
# stopped the checks with an OverflowError instead of naming the row).
_BELOW = {"int32": 2**31, "int64": 2**63}


_ID, _AMOUNT, _COUNT = _Number(0, integer=True), _Number(0), _Number(0, integer=True)
# The numeric columns and what they may hold: ids, sizes, rates and capacities are never negative.
_NUMBERS: dict[str, dict[str, _Number]] = {
    "brokers": {"broker_id": _ID, "disk_capacity_bytes": _COUNT, "disk_used_bytes": _COUNT,
                "log_dir_total_bytes": _Number(0, integer=True, nullable=True),
                "log_dir_usable_bytes": _Number(0, integer=True, nullable=True),
                "nw_in_capacity_bytes_per_s": _AMOUNT, "nw_out_capacity_bytes_per_s": _AMOUNT,
                "cpu_capacity_cores": _AMOUNT},
    "replicas": {"partition": _ID, "broker_id": _ID, "position": _ID, "size_bytes": _COUNT,
                 "nw_in_bytes_per_s": _AMOUNT, "nw_out_bytes_per_s": _AMOUNT, "cpu_cores": _AMOUNT},
    "partitions": {"partition": _ID, "replication_factor": _Number(1, integer=True),
                   "leader": _Number(-1, integer=True),  # -1: no leader
                   "size_bytes": _COUNT, "bytes_in_per_s": _AMOUNT, "bytes_out_per_s": _AMOUNT,
                   "cpu_leader_cores": _AMOUNT, "cpu_follower_cores": _AMOUNT},
}
_KEYS = {"brokers": ["broker_id"], "replicas": ["topic", "partition", "broker_id"],
         "partitions": ["topic", "partition"]}


def check_snapshot_tables(brokers: pd.DataFrame, replicas: pd.DataFrame, partitions: pd.DataFrame,
                          sources: Mapping[str, str], balanced: Iterable[str] = ()) -> None:
    """Raise SnapshotError at the first bad row. `sources` names where each table came from (a file, or the
    cluster); `balanced` are the resources the snapshot was taken for: their capacities must be positive on every
    pool broker (other resources may have no capacity)."""
    # Replicas first: a bad replica size is the cause of a bad disk total in brokers, so report it.
    replicas = _checked(replicas, REPLICAS, sources["replicas"])
    partitions = _checked(partitions, PARTITIONS, sources["partitions"])
    brokers = _checked(brokers, BROKERS, sources["brokers"])
    _check_capacities(brokers, sources["brokers"], balanced)
    known = set(brokers["broker_id"].astype(int))
    listed = _flat_ids(partitions["replicas"])  # flattened once, for both checks of the replica lists
    _check_replica_lists(partitions, sources, known, listed)
    unknown = np.flatnonzero(~replicas["broker_id"].astype(int).isin(known).to_numpy())
    if len(unknown):
        raise _row_error(sources["replicas"], replicas, "replicas", unknown[0],
                         f"broker_id is not in {sources['brokers']}", "a known broker")
    _check_replica_lists_match(replicas, partitions, sources, listed)


def _check_capacities(brokers: pd.DataFrame, source: str, balanced: Iterable[str]) -> None:
    # A dead broker's capacity is not read (nothing moves to it), so only live pool brokers need one.
    alive = np.array([v is not False and v is not np.False_ for v in brokers["alive"]], dtype=bool)
    in_pool = brokers["broker_pool"].notna().to_numpy() & alive
    for name in balanced:
        column = RESOURCES[name].capacity_column
        if column is None:  # counts need no capacity
            continue
        bad = np.flatnonzero(in_pool & ~(brokers[column].to_numpy(float) > 0))
        if len(bad):
            raise _row_error(source, brokers, "brokers", bad[0], f"{column} is {_show(brokers[column].iloc[bad[0]])}",
                             f"a capacity > 0 ({name} is balanced on the broker's pool)")


def _check_replica_lists(partitions: pd.DataFrame, sources: Mapping[str, str], known_brokers: set[int],
                         listed: tuple[np.ndarray, np.ndarray] | None) -> None:
    if _replica_lists_look_right(partitions, known_brokers, listed):
        return
    source = sources["partitions"]
    for row, (replicas, isr) in enumerate(zip(partitions["replicas"], partitions["isr"], strict=True)):
        ids = _broker_ids(replicas)
        if not ids or len(set(ids)) != len(ids):
            raise _row_error(source, partitions, "partitions", row, f"replicas is {_show(replicas)}",
                             "a non-empty list of distinct broker ids")
        unknown = sorted(set(ids) - known_brokers)
        if unknown:
            raise _row_error(source, partitions, "partitions", row, f"replicas name unknown broker(s) {unknown}",
                             f"brokers listed in {sources['brokers']}")
        if _broker_ids(isr) is None:
            raise _row_error(source, partitions, "partitions", row, f"isr is {_show(isr)}", "a list of broker ids")


def _flat_ids(values: pd.Series) -> tuple[np.ndarray, np.ndarray] | None:
    """A column of broker id lists as (the ids one after the other, each list's length), or None unless every
    value is a list of integers (then the caller's row walk names the first that is not)."""
    lists = values.tolist()
    if all(isinstance(v, list | tuple) for v in lists):  # as built from what the cluster reported
        if not all(type(b) is int for ids in lists for b in ids):  # type(), not isinstance: a bool is not a broker id
            return None
        lists = [np.asarray(ids, dtype=np.int64) for ids in lists]
    if not all(isinstance(v, np.ndarray) and v.ndim == 1 for v in lists):
        return None
    lengths = np.fromiter((len(v) for v in lists), dtype=np.int64, count=len(lists))
    flat = np.concatenate(lists) if lists else np.zeros(0, dtype=np.int64)
    if len(flat) and flat.dtype.kind not in "iu":
        return None
    return flat.astype(np.int64, copy=False), lengths


def _replica_lists_look_right(partitions: pd.DataFrame, known_brokers: set[int],
                              listed: tuple[np.ndarray, np.ndarray] | None) -> bool:
    """Every replica list non-empty, of distinct known brokers, every ISR a list of integers: whole columns at once."""
    replicas, isr = listed, _flat_ids(partitions["isr"])
    if replicas is None or isr is None:
        return False
    flat, lengths = replicas
    if (lengths == 0).any() or not np.isin(flat, np.fromiter(known_brokers, dtype=np.int64)).all():
        return False
    row = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
    order = np.lexsort((flat, row))  # a repeated broker in one list: equal neighbours once sorted
    return not ((np.diff(row[order]) == 0) & (np.diff(flat[order]) == 0)).any()


def _checked(frame: pd.DataFrame, schema: TableSchema, source: str) -> pd.DataFrame:
    """Columns present, topics named, numbers in range, one row per key."""
    missing = [n for n in schema.names if n not in frame.columns]
    if missing:
        raise SnapshotError(f"{source}: columns {missing} missing, expected the columns of the '{schema.name}' "
                            f"table: {', '.join(schema.names)}")
    frame = frame.reset_index(drop=True)
    if "topic" in frame.columns and not _all_named(frame["topic"]):
        named = frame["topic"].map(lambda t: isinstance(t, str) and t != "").to_numpy(bool)
        if not named.all():
            row = int(np.flatnonzero(~named)[0])
            raise _row_error(source, frame, schema.name, row, f"topic is {_show(frame['topic'].iloc[row])}",
                             "a topic name", with_key=False)
    numbers = {}
    # Key columns come first in _NUMBERS, so a later column's error can name the row by its key.
    types = {c.name: c.type for c in schema.columns}
    for column, rule in _NUMBERS[schema.name].items():
        values = _as_numbers(frame[column])
        below = _BELOW.get(types[column])
        too_large = values >= below if below is not None else np.zeros(len(values), dtype=bool)
        valid = np.isfinite(values) & (values >= rule.minimum) & ~too_large
        if rule.integer:
            valid &= np.floor(values) == values
        if rule.nullable:
            valid |= frame[column].isna().to_numpy()
        if not valid.all():
            row = int(np.flatnonzero(~valid)[0])
            raise _row_error(source, frame, schema.name, row, f"{column} is {_show(frame[column].iloc[row])}",
                             rule.expected(below if too_large[row] else None),
                             with_key=column not in _KEYS[schema.name])
        numbers[column] = values
    keys = pd.DataFrame({k: frame[k] if k == "topic" else numbers[k] for k in _KEYS[schema.name]})
    duplicated = np.flatnonzero(keys.duplicated().to_numpy())
    if len(duplicated):
        raise _row_error(source, frame, schema.name, duplicated[0], "a second row for the same "
                         + ", ".join(_KEYS[schema.name]), f"one row per {', '.join(_KEYS[schema.name])}")
    return frame


def _all_named(topics: pd.Series) -> bool:
    """Every value a non-empty string (the C type inference, not a call per row)."""
    return pd.api.types.infer_dtype(topics, skipna=False) == "string" and not (topics == "").any()


def _same_assignment(replicas: pd.DataFrame, partitions: pd.DataFrame,
                     flat: tuple[np.ndarray, np.ndarray] | None) -> bool:
    """Whether the replicas rows are exactly the (topic, partition, broker) of the partitions' replica lists, as
    one integer per replica compared in sorted order. Both tables have one row per key by now."""
    if flat is None:
        return False
    ids, lengths = flat
    codes, _ = pd.factorize(pd.concat([partitions["topic"], replicas["topic"]], ignore_index=True))
    topic_of_list, topic_of_row = codes[: len(partitions)], codes[len(partitions):]
    partition_list = partitions["partition"].to_numpy(np.int64)
    partition_row = replicas["partition"].to_numpy(np.int64)
    broker_row = replicas["broker_id"].to_numpy(np.int64)
    n_partitions = int(max(partition_list.max(initial=0), partition_row.max(initial=0))) + 1
    n_brokers = int(max(ids.max(initial=0), broker_row.max(initial=0))) + 1
    if (int(codes.max(initial=0)) + 1) * n_partitions * n_brokers >= 2**63:  # keys would overflow: walk the rows
        return False

    def keys(topic: np.ndarray, partition: np.ndarray, broker: np.ndarray) -> np.ndarray:
        return np.sort((topic.astype(np.int64) * n_partitions + partition) * n_brokers + broker)
    listed = keys(np.repeat(topic_of_list, lengths), np.repeat(partition_list, lengths), ids)
    return len(listed) == len(broker_row) and bool((listed == keys(topic_of_row, partition_row, broker_row)).all())


def _check_replica_lists_match(replicas: pd.DataFrame, partitions: pd.DataFrame, sources: Mapping[str, str],
                               listed: tuple[np.ndarray, np.ndarray] | None) -> None:
    """Both tables describe the same assignment: one replicas row per broker in each partition's replica list."""
    if _same_assignment(replicas, partitions, listed):
        return
    # Every replica list is one of broker ids by now (_check_replica_lists), so `or ()` never drops one.
    listed_keys = {(t, int(p), b) for t, p, ids in zip(partitions["topic"], partitions["partition"],
                                                       partitions["replicas"], strict=True)
                   for b in _broker_ids(ids) or ()}
    rows = list(zip(replicas["topic"], replicas["partition"].astype(int), replicas["broker_id"].astype(int),
                    strict=True))
    for row, key in enumerate(rows):
        if key not in listed_keys:
            raise _row_error(sources["replicas"], replicas, "replicas", row,
                             f"not in the replica list of its partition in {sources['partitions']}",
                             "one row per broker of partitions.replicas")
    missing = listed_keys - set(rows)
    if missing:
        topic, partition, broker = min(missing)
        raise SnapshotError(f"{sources['partitions']}: topic {topic!r}, partition {partition}: broker {broker} is "
                            f"in replicas but has no row in {sources['replicas']}, expected one row per replica")


def _as_numbers(values: pd.Series) -> np.ndarray:
    """Each value as a float; NaN for anything that is not a real number (text, booleans, lists, empty)."""
    if pd.api.types.is_integer_dtype(values) or pd.api.types.is_float_dtype(values):
        return values.to_numpy(dtype=float, na_value=np.nan)

    def number(value: Any) -> float:
        if isinstance(value, bool | np.bool_) or not isinstance(value, int | float | np.integer | np.floating):
            return math.nan
        try:
            return float(value)
        except OverflowError:  # an integer beyond any float: no size or id is that large
            return math.inf
    return np.array([number(v) for v in values], dtype=float)


def _broker_ids(value: Any) -> list[int] | None:
    """A replica or ISR list as broker ids; None unless it is a list of integers."""
    if isinstance(value, np.ndarray) and value.ndim == 1:
        ids = value.tolist()
    elif isinstance(value, list | tuple):
        ids = list(value)
    else:
        return None
    if not all(isinstance(b, int | np.integer) and not isinstance(b, bool | np.bool_) for b in ids):
        return None
    return [int(b) for b in ids]


def _row_error(source: str, frame: pd.DataFrame, table: str, row: int, problem: str, expected: str,
               with_key: bool = True) -> SnapshotError:
    """The message `<source>: row N (key): <problem>, expected <what>`; rows counted from 1, as in a file."""
    where = f"row {int(row) + 1}"
    if with_key:
        where += " (" + ", ".join(f"{k} {_show(frame[k].iloc[row])}" for k in _KEYS[table]) + ")"
    return SnapshotError(f"{source}: {where}: {problem}, expected {expected}")


def _show(value: Any) -> str:
    """A value as the operator wrote it: numpy scalars and arrays as plain Python."""
    if isinstance(value, np.generic | np.ndarray):
        value = value.tolist()
    return repr(value)
