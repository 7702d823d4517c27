"""The plan job's tables on the driver, for a cluster small enough (`transforms.plans_on_driver`): the same tables
as the Spark transforms of `transforms` (`planner_replicas`, `load_parts`, `skipped_partitions`,
`homecoming_partitions`, `candidate_moves`), worked out with pandas and numpy from the snapshot the re-check reads
anyway. A Spark test holds each to its Spark twin on generated clusters (tests/spark/test_driver_plan_path.py).

The planner's input here keeps a partition's replica list as the partition's row number in `partitions`
(`part_row`) instead of a list per replica: the candidates' "target not in the partition's replicas" and the
leadership plan's lists are looked up from it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from kafka_rebalancer.model.resources import Resource
from kafka_rebalancer.model.schemas import CANDIDATES, LOAD_PARTS, SKIPPED
from kafka_rebalancer.plan.balance.transforms import EPS, FRACTION_UNITS
from kafka_rebalancer.snapshot.evacuation import NO_POOL

# The columns of the planner's input that the tables below read, besides the load columns of the resources.
_REPLICA_COLUMNS = ("topic", "partition", "broker_id", "position", "is_leader", "in_isr", "size_bytes",
                    "nw_in_bytes_per_s", "nw_out_bytes_per_s", "cpu_cores")
_TRAFFIC = ("replication_factor", "bytes_in_per_s", "bytes_out_per_s", "cpu_leader_cores", "cpu_follower_cores")


# -- partitions: which may move, and how ---------------------------------------------------------------------
def _flat(lists: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(row, value) of every element of a column of int lists."""
    arrays = lists.to_numpy()
    lengths = np.fromiter(map(len, arrays), dtype=np.int64, count=len(arrays))
    values = np.concatenate(arrays.tolist()).astype(np.int64) if lengths.sum() else np.zeros(0, np.int64)
    return np.repeat(np.arange(len(arrays), dtype=np.int64), lengths), values


def _sorted_unique(values: np.ndarray) -> np.ndarray:
    """np.unique by a sort (numpy's hash-based unique took 0.4 s for 300,000 integers)."""
    ordered = np.sort(values)
    return ordered[np.concatenate(([True], ordered[1:] != ordered[:-1]))] if len(ordered) else ordered


def _isin(values: np.ndarray, among: np.ndarray | list[int]) -> np.ndarray:
    """np.isin by a binary search (numpy's unique of `among`, hash-based, took 0.35 s for 300,000 integers)."""
    ordered = np.sort(np.asarray(among, dtype=np.int64))
    if not len(ordered):
        return np.zeros(len(values), bool)
    at = np.minimum(np.searchsorted(ordered, values), len(ordered) - 1)
    return ordered[at] == values


def _distinct_count(rows: np.ndarray, n: int) -> np.ndarray:
    """Per row, how many distinct (row, value) pairs were given: Spark's size of an array_except/intersect."""
    return np.bincount(rows, minlength=n).astype(np.int64)


def _ids_json(values: Iterable[int]) -> str:
    """An int list as Spark's to_json writes it: [1,2,3]."""
    return "[" + ",".join(str(int(v)) for v in values) + "]"


def _partition_facts(partitions: pd.DataFrame, brokers: pd.DataFrame, topics: Sequence[str], leaving: list[int],
                     held: pd.DataFrame | None) -> pd.DataFrame:
    """`transforms.planner_replicas`' partition facts: topic_id, topic_pool (a held partition's run pool), leader,
    the traffic, skip_reason and status, one row per row of `partitions` (its index)."""
    n = len(partitions)
    dead = brokers.loc[~brokers["alive"].astype(bool), "broker_id"].to_numpy(np.int64)
    excluded_brokers = brokers.loc[brokers["excluded"].astype(bool), "broker_id"].to_numpy(np.int64)
    rows, members = _flat(partitions["replicas"])
    isr_rows, isr = _flat(partitions["isr"])
    width = int(max(members.max(initial=0), isr.max(initial=0))) + 1
    # Distinct (partition, broker) pairs of the replica lists, as Spark's array set operations count them.
    pairs = _sorted_unique(rows * width + members)
    rows, members = pairs // width, pairs % width
    live = ~_isin(members, dead)
    in_isr = _isin(pairs, isr_rows * width + isr)
    lengths = partitions["replicas"].map(len).to_numpy(np.int64)
    on_dead = lengths - _distinct_count(rows[live], n)
    on_excluded = _distinct_count(rows[_isin(members, excluded_brokers)], n)
    on_leaving = _distinct_count(rows[_isin(members, leaving)], n) if leaving else np.zeros(n, np.int64)
    live_out_of_isr = _distinct_count(rows[live & ~in_isr], n)
    run_pool = pd.Series(None, index=partitions.index, dtype=object)
    if held is not None and held["run_pool"].notna().any():
        pools = held.dropna(subset=["run_pool"]).set_index(["topic", "partition"])["run_pool"]
        keys = pd.MultiIndex.from_arrays([partitions["topic"], partitions["partition"].astype(np.int64)])
        run_pool = pd.Series(pools.reindex(keys).to_numpy(), index=partitions.index, dtype=object)
    is_held = run_pool.notna().to_numpy()
    topic_pool = run_pool.where(run_pool.notna(), partitions["topic_pool"])
    no_pool = topic_pool.isna().to_numpy()
    topic_excluded = partitions["excluded"].to_numpy(bool)
    leader = partitions["leader"].to_numpy(np.int64)
    under = np.flatnonzero(live_out_of_isr > 0)
    under_text = np.full(n, None, dtype=object)
    under_text[under] = [f"under-replicated: ISR {_ids_json(isr_list)} smaller than replicas {_ids_json(replicas)}"
                         for isr_list, replicas in zip(partitions["isr"].to_numpy()[under],
                                                       partitions["replicas"].to_numpy()[under], strict=True)]
    reason = np.select(  # type: ignore[call-overload]  # default None: numpy's stubs want a number or string
        [(on_leaving > 0) & ~is_held & (topic_excluded | no_pool), topic_excluded & ~is_held, no_pool, leader < 0,
         on_excluded > 0, live_out_of_isr > 0],
        [np.full(n, NO_POOL, dtype=object), np.full(n, "excluded topic (config exclude.topics)", dtype=object),
         np.full(n, "topic matches no pool rule and there is no default_pool", dtype=object),
         np.full(n, "no leader: the partition is offline", dtype=object),
         np.full(n, "a replica is on an excluded broker", dtype=object), under_text], default=None)
    skip = pd.notna(reason)
    status = np.where(skip, "skip", np.where((on_dead > 0) | is_held, "drain", "move")).astype(object)
    return pd.DataFrame({
        "topic_id": pd.Index(topics, dtype=object).get_indexer(partitions["topic"]).astype(np.int32),
        "topic_pool": topic_pool.to_numpy(object), "leader": partitions["leader"].to_numpy(np.int32),
        **{c: partitions[c].to_numpy() for c in _TRAFFIC},
        "skip_reason": reason, "status": status}, index=partitions.index)


def planner_replicas(replicas: pd.DataFrame, partitions: pd.DataFrame, brokers: pd.DataFrame,
                     topics: Sequence[str], leaving: Iterable[int] = (),
                     held: pd.DataFrame | None = None) -> pd.DataFrame:
    """`transforms.planner_replicas` on the driver: every replica with its partition's facts, its broker's pool
    and what may happen to it (movable, must_move, plan_pool; see there), and `part_row`, its partition's row
    number in `partitions` (instead of the partition's replica list, `members`). The snapshot's tables as read
    (`partitions` the stored one: a held partition's run pool comes from `held`, as on Spark)."""
    leaving_ids = [int(b) for b in leaving]
    facts = _partition_facts(partitions.reset_index(drop=True), brokers, topics, leaving_ids, held)
    keys = pd.MultiIndex.from_arrays([partitions["topic"], partitions["partition"].astype(np.int64)])
    part_row = keys.get_indexer(pd.MultiIndex.from_arrays([replicas["topic"],
                                                           replicas["partition"].astype(np.int64)]))
    found = part_row >= 0  # an inner join: every replica of the snapshot has its partition (the checks hold it)
    r = replicas.loc[found, list(_REPLICA_COLUMNS)].reset_index(drop=True)
    part_row = part_row[found]
    out = pd.concat([r, facts.iloc[part_row].reset_index(drop=True)], axis=1)
    out["part_row"] = part_row
    by_id = brokers.drop_duplicates("broker_id").set_index("broker_id")
    out["broker_pool"] = out["broker_id"].map(by_id["broker_pool"]).astype(object)
    out["broker_alive"] = out["broker_id"].map(by_id["alive"]).fillna(False).astype(bool)
    status, alive = out["status"].to_numpy(object), out["broker_alive"].to_numpy(bool)
    active, drain = status == "move", status == "drain"
    on_leaving = out["broker_id"].isin(leaving_ids).to_numpy() if leaving_ids else np.zeros(len(out), bool)
    dead_replica = drain & (~alive | on_leaving)
    broker_pool, topic_pool = out["broker_pool"], out["topic_pool"]
    outside_pool = (broker_pool.isna() | (broker_pool != topic_pool)).to_numpy(bool)
    out["movable"] = active | dead_replica
    out["must_move"] = (active & outside_pool & alive) | dead_replica
    out["plan_pool"] = np.where(status != "skip", topic_pool.to_numpy(object), broker_pool.to_numpy(object))
    return out[pd.notna(out["plan_pool"])].reset_index(drop=True)


def homecoming_partitions(planner_input: pd.DataFrame) -> pd.DataFrame:
    """`transforms.homecoming_partitions` on the driver: topic, partition (and part_row), once each."""
    home = planner_input[(planner_input["status"] == "move") & planner_input["must_move"]]
    return home[["topic", "partition", "part_row"]].drop_duplicates("part_row")


def skipped_partitions(planner_input: pd.DataFrame) -> pd.DataFrame:
    """`transforms.skipped_partitions` on the driver, in (topic, partition) order. SKIPPED."""
    first = planner_input[(planner_input["status"] == "skip") & (planner_input["position"] == 0)]
    frame = pd.DataFrame({"topic": first["topic"], "partition": first["partition"].astype(np.int32),
                          "broker_pool": first["topic_pool"], "reason": first["skip_reason"]})
    return frame.sort_values(["topic", "partition"], kind="mergesort").reset_index(drop=True)[SKIPPED.names]


def status_counts(planner_input: pd.DataFrame) -> dict[str, int]:
    """Partitions per status, as the plan job counts them on Spark (`job`): move, home, drain, skip."""
    first = planner_input[planner_input["position"] == 0]
    counts = {str(s): int(n) for s, n in first["status"].value_counts(sort=False).items()}
    home = len(homecoming_partitions(planner_input))
    if home:
        counts["home"] = home
        counts["move"] -= home
    return {status: n for status, n in counts.items() if n}


# -- load ----------------------------------------------------------------------------------------------------
def load_parts(planner_input: pd.DataFrame, resources: list[Resource]) -> pd.DataFrame:
    """`transforms.load_parts` on the driver: the same exact parts (floor and the rest in 2^-32 units, rounded
    half to even as Spark's rint), summed per (broker, plan pool, must move) and resource. LOAD_PARTS."""
    keys = ["broker_id", "plan_pool", "must_move"]
    wide = planner_input[keys].copy()
    for r in resources:
        value = planner_input[r.replica_load_column].to_numpy(float) if r.replica_load_column else \
            np.ones(len(planner_input))
        whole = np.floor(value)
        wide[f"{r.name}_whole"] = whole.astype(np.int64)
        wide[f"{r.name}_fraction"] = np.rint((value - whole) * FRACTION_UNITS).astype(np.int64)
    sums = wide.groupby(keys, sort=True).sum().reset_index()
    frames = [pd.DataFrame({"broker_id": sums["broker_id"].astype(np.int32), "plan_pool": sums["plan_pool"],
                            "must_move": sums["must_move"].astype(bool), "resource": r.name,
                            "whole": sums[f"{r.name}_whole"], "fraction": sums[f"{r.name}_fraction"]})
              for r in resources]
    return pd.concat(frames, ignore_index=True)[LOAD_PARTS.names] if frames else pd.DataFrame(columns=LOAD_PARTS.names)


# -- pre-check candidates ---------------------------------------------------------------------------------------
def candidate_moves(pairs: pd.DataFrame, planner_input: pd.DataFrame, partitions: pd.DataFrame,
                    resources: list[Resource], per_broker: int = 50) -> pd.DataFrame:
    """`transforms.candidate_moves` on the driver (see there), its rows in the same order: per (pool, resource,
    broker to fix), the best fit first. `partitions`: the table `planner_input`'s `part_row` numbers. CANDIDATES."""
    movable = planner_input[planner_input["movable"].to_numpy(bool) & ~planner_input["must_move"].to_numpy(bool)]
    if movable.empty or pairs.empty:
        return pd.DataFrame({c: pd.Series(dtype=t) for c, t in _CANDIDATE_DTYPES.items()})[CANDIDATES.names]
    loads = np.column_stack([movable[r.replica_load_column].to_numpy(float) if r.replica_load_column
                             else np.ones(len(movable)) for r in resources] or [np.full(len(movable), np.nan)])
    code = pd.Index([r.name for r in resources], dtype=object).get_indexer(pairs["resource"])
    pair_of, row = _pair_rows(pairs, movable["broker_id"].to_numpy(np.int64), loads, code)
    load = loads[row, code[pair_of]]
    side = {c: pairs[c].to_numpy(float) for c in pairs.columns if c[:2] in ("s_", "t_") and not c.endswith("_id")}

    def lands(prefix: str, sign: float, at: np.ndarray, amount: np.ndarray) -> np.ndarray:
        after = (side[f"{prefix}_load"][at] + sign * amount) / side[f"{prefix}_capacity"][at]
        return (after >= side[f"{prefix}_lower"][at] - EPS) & (after <= side[f"{prefix}_effective_upper"][at] + EPS)

    with np.errstate(invalid="ignore", divide="ignore"):
        kept = np.flatnonzero(load > 0)
        kept = kept[lands("s", -1.0, pair_of[kept], load[kept])]
        kept = kept[lands("t", 1.0, pair_of[kept], load[kept])]
    targets = pairs["t_broker_id"].to_numpy(np.int64)[pair_of[kept]]
    kept = kept[~_holds(partitions, movable["part_row"].to_numpy(np.int64)[row[kept]], targets)]
    p, load, row = pairs.iloc[pair_of[kept]].reset_index(drop=True), load[kept], row[kept]
    over = (p["direction"] == "over").to_numpy()
    fixed_side = np.where(over, p["s_load"].to_numpy(float) - load, p["t_load"].to_numpy(float) + load)
    fixed_cap = np.where(over, p["s_capacity"].to_numpy(float), p["t_capacity"].to_numpy(float))
    middle = (p["s_lower"].to_numpy(float) + p["s_effective_upper"].to_numpy(float)) / 2
    with np.errstate(invalid="ignore", divide="ignore"):
        distance = np.abs(fixed_side / fixed_cap - middle)
    out = pd.DataFrame({
        "broker_pool": p["broker_pool"], "resource": p["resource"], "broker_to_fix": p["broker_to_fix"],
        "direction": p["direction"], "topic": movable["topic"].to_numpy(object)[row],
        "partition": movable["partition"].to_numpy(np.int32)[row], "source_broker": p["s_broker_id"],
        "target_broker": p["t_broker_id"], "replica_load": load,
        "size_bytes": movable["size_bytes"].to_numpy(np.int64)[row], "distance": distance})
    ranked = out.sort_values(["broker_pool", "resource", "broker_to_fix", "distance", "size_bytes", "topic",
                              "partition", "target_broker"], kind="mergesort")
    ranked = ranked[ranked.groupby(["broker_pool", "resource", "broker_to_fix"], sort=False).cumcount() < per_broker]
    return ranked.astype(_CANDIDATE_DTYPES)[CANDIDATES.names].reset_index(drop=True)


_CANDIDATE_DTYPES = {"broker_pool": object, "resource": object, "broker_to_fix": np.int32, "direction": object,
                     "topic": object, "partition": np.int32, "source_broker": np.int32, "target_broker": np.int32,
                     "replica_load": float, "size_bytes": np.int64}


def _pair_rows(pairs: pd.DataFrame, brokers: np.ndarray, loads: np.ndarray,
               code: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(pair, replica) rows to test: per pair of a known resource (`code`: its column of `loads`), the replicas on
    its source broker whose load of that resource lies in the interval that could land both brokers inside the
    band, widened well beyond any rounding (the exact test follows); pair by pair, each pair's in load order."""
    found_pairs, found_rows = [], []
    with np.errstate(invalid="ignore"):
        lower = np.maximum.reduce([
            pairs["s_load"].to_numpy(float) - (pairs["s_effective_upper"].to_numpy(float) + EPS)
            * pairs["s_capacity"].to_numpy(float),
            (pairs["t_lower"].to_numpy(float) - EPS) * pairs["t_capacity"].to_numpy(float)
            - pairs["t_load"].to_numpy(float), np.zeros(len(pairs))])
        upper = np.minimum(
            pairs["s_load"].to_numpy(float) - (pairs["s_lower"].to_numpy(float) - EPS)
            * pairs["s_capacity"].to_numpy(float),
            (pairs["t_effective_upper"].to_numpy(float) + EPS) * pairs["t_capacity"].to_numpy(float)
            - pairs["t_load"].to_numpy(float))
        scale = np.abs(pairs[["s_load", "t_load", "s_capacity", "t_capacity"]].to_numpy(float)).sum(axis=1)
        margin = 1e-6 * scale + 1e-6
        unsure = ~(np.isfinite(lower) & np.isfinite(upper) & (pairs[["s_capacity", "t_capacity"]].to_numpy(float)
                                                             > 0).all(axis=1))
    lower, upper = np.where(unsure, -np.inf, lower - margin), np.where(unsure, np.inf, upper + margin)
    sources = pairs["s_broker_id"].to_numpy(np.int64)
    on_sources = np.flatnonzero(_isin(brokers, sources))
    for k in np.unique(code[code >= 0]):
        order = on_sources[np.lexsort((loads[on_sources, k], brokers[on_sources]))]  # by broker, then by load
        by_broker, by_load = brokers[order], loads[order, k]
        mine = np.flatnonzero(code == k)
        starts = np.searchsorted(by_broker, sources[mine], "left")
        ends = np.searchsorted(by_broker, sources[mine], "right")
        for pair, start, end in zip(mine.tolist(), starts.tolist(), ends.tolist(), strict=True):
            block = by_load[start:end]
            first = start + int(np.searchsorted(block, lower[pair], "left"))
            last = start + int(np.searchsorted(block, upper[pair], "right"))
            if last > first:
                found_pairs.append(np.full(last - first, pair, dtype=np.int64))
                found_rows.append(order[first:last])
    if not found_pairs:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    pair_of, row = np.concatenate(found_pairs), np.concatenate(found_rows)
    by_pair = np.argsort(pair_of, kind="stable")
    return pair_of[by_pair], row[by_pair]


def _holds(partitions: pd.DataFrame, part_rows: np.ndarray, brokers: np.ndarray) -> np.ndarray:
    """Whether each partition (by row number) has a replica on the broker beside it."""
    if not len(part_rows):
        return np.zeros(0, bool)
    touched = _sorted_unique(part_rows)
    rows, members = _flat(partitions["replicas"].iloc[touched].reset_index(drop=True))
    rows = touched[rows]
    width = int(max(members.max(initial=0), brokers.max(initial=0))) + 1
    return _isin(part_rows * width + brokers, rows * width + members)


# -- leadership-only plans ------------------------------------------------------------------------------------
def leadership_partitions(planner_input: pd.DataFrame, partitions: pd.DataFrame) -> pd.DataFrame:
    """The partitions a leadership-only plan may touch (`leadership.leadership_moves`' input): not skipped, not
    going home; with their replicas, leader, pool and in-sync replicas on live brokers (in replica order)."""
    first = planner_input[(planner_input["position"] == 0) & (planner_input["status"] != "skip")]
    first = first[~first["part_row"].isin(homecoming_partitions(planner_input)["part_row"])]
    synced = planner_input[planner_input["in_isr"].to_numpy(bool) & planner_input["broker_alive"].to_numpy(bool)]
    synced = synced.sort_values(["part_row", "position"], kind="mergesort")
    synced_rows, synced_brokers = synced["part_row"].to_numpy(np.int64), synced["broker_id"].to_numpy(np.int64)
    rows = first["part_row"].to_numpy(np.int64)
    starts, ends = np.searchsorted(synced_rows, rows, "left"), np.searchsorted(synced_rows, rows, "right")
    return pd.DataFrame({
        "topic": first["topic"].to_numpy(object), "partition": first["partition"].to_numpy(np.int32),
        "replicas": partitions["replicas"].to_numpy()[rows], "leader": first["leader"].to_numpy(np.int32),
        "broker_pool": first["topic_pool"].to_numpy(object),
        "isr": [synced_brokers[start:end].tolist() for start, end in zip(starts.tolist(), ends.tolist(),
                                                                           strict=True)]})
