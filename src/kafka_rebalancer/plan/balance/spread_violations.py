"""The topic spread's target checked on a placement (issue 52), apart from the planner: for the validation's
re-check of plan.json against the snapshot, and for verify after execution.

A placement is one row per partition: topic, the topic's pool (`broker_pool`), replicas (broker ids, the first
the preferred leader) and, where known, the `leader` (else the first replica leads, as after the executor's
preferred leader election). The caps come from the placement before the plan (`model.topic_spread.spread_caps`;
a topic the plan gives more replicas, its replication factor raised, takes its replicas' share from the placement
after), the share from the pool's brokers that take replicas; `spread_cells` gives a row per (topic, broker, kind) held
before or after, `spread_violations` those held above their cap, `spread_figures` a pool's worst and counts.

Every plan's re-check and validation compute these on the whole cluster (millions of replicas), so they work on
numpy arrays: topics, pools and brokers as codes, each placement's replica lists flattened once, counts per cell
by one sort of the cells' keys (only the cells held before or after exist), the plan's partitions looked up by
(topic, partition) instead of a dict over every partition.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from kafka_rebalancer.config import RebalancerConfig
from kafka_rebalancer.model.reassignment import Reassignment
from kafka_rebalancer.model.topic_spread import TopicSpreadSettings
from kafka_rebalancer.snapshot.build import SnapshotTables

VIOLATION_COLUMNS = ["topic", "broker_pool", "broker_id", "kind", "held_before", "held", "cap"]
# target: ceil(share) + margin; cap: max(held_before, target).
CELL_COLUMNS = ["topic", "broker_pool", "broker_id", "kind", "held_before", "held", "target", "cap"]
KINDS = ("replicas", "leaders")
# The kinds in the cells' order (a broker's leaders cell before its replicas cell); a kind's code is its place.
_KINDS_SORTED = sorted(KINDS)


def replica_rows(placement: pd.DataFrame) -> pd.DataFrame:
    """One row per replica of the placement: topic, broker_pool, broker_id, is_leader."""
    lengths, broker_ids = _flattened(placement["replicas"])
    rows = np.repeat(np.arange(len(placement)), lengths)
    leads = broker_ids == np.asarray(_leaders(placement, lengths, broker_ids))[rows]
    frame = placement[["topic", "broker_pool"]].iloc[rows].reset_index(drop=True)
    return frame.assign(broker_id=broker_ids, is_leader=leads)


def spread_cells(before: pd.DataFrame, after: pd.DataFrame, brokers_taking: Mapping[str, Collection[int]],
                 settings: TopicSpreadSettings) -> pd.DataFrame:
    """Per (topic, broker, kind) held before or after the plan, of the topics the spread covers: kind `replicas` or
    `leaders`; held_before, held, the topic's target and the cell's cap (CELL_COLUMNS). `brokers_taking`: per pool,
    the brokers that take replicas (alive, not excluded), whose number divides a topic's total into its share.
    Empty when the spread is off. Sorted by topic, broker, kind (then pool)."""
    if not settings.enabled:
        return _empty(CELL_COLUMNS)
    topic_codes, topics = pd.factorize(pd.concat([before["topic"], after["topic"]], ignore_index=True), sort=True)
    pool_codes, pools = pd.factorize(pd.concat([before["broker_pool"], after["broker_pool"]], ignore_index=True),
                                     sort=True)
    covered = np.array([not settings.excluded(t) for t in topics], dtype=bool)
    old = _replicas_of(before, topic_codes[:len(before)], pool_codes[:len(before)], covered)
    new = _replicas_of(after, topic_codes[len(before):], pool_codes[len(before):], covered)
    if not len(old.topic) + len(new.topic):
        return _empty(CELL_COLUMNS)
    broker_codes, broker_ids = pd.factorize(np.concatenate([old.broker_id, new.broker_id]), sort=True)
    n_pools, n_brokers = len(pools), len(broker_ids)
    # one key per (topic, broker, pool): sorted keys are the cells in the order of the output
    keys = np.concatenate([old.topic, new.topic]).astype(np.int64) * n_brokers + broker_codes
    keys = keys * n_pools + np.concatenate([old.pool, new.pool])
    cells, inverse = _sorted_unique(keys)
    n_before = len(old.topic)
    pair_before = old.topic.astype(np.int64) * n_pools + old.pool  # (topic, pool) of each replica before
    pair_after = new.topic.astype(np.int64) * n_pools + new.pool
    held_before_per_topic = np.bincount(old.topic, minlength=len(topics))
    grown = (np.bincount(new.topic, minlength=len(topics)) > held_before_per_topic) & (held_before_per_topic > 0)
    cell_pool = cells % n_pools
    cell_pair = cells // n_pools // n_brokers * n_pools + cell_pool
    taking = np.array([max(len(brokers_taking.get(pool, ())), 1) for pool in pools], dtype=np.int64)[cell_pool]
    parts = []
    for kind_code, kind in enumerate(_KINDS_SORTED):
        chosen_before = old.leads if kind == "leaders" else slice(None)
        chosen_after = new.leads if kind == "leaders" else slice(None)
        held_before = np.bincount(inverse[:n_before][chosen_before], minlength=len(cells))
        held = np.bincount(inverse[n_before:][chosen_after], minlength=len(cells))
        total = np.bincount(pair_before[chosen_before], minlength=len(topics) * n_pools)
        if kind == "replicas":  # a topic with more replicas after the plan (its replication factor raised): those
            total = np.where(grown[np.arange(len(total)) // n_pools],
                             np.maximum(total, np.bincount(pair_after, minlength=len(total))), total)
        total = total[cell_pair]
        target = (total + taking - 1) // taking + settings.margin
        at = np.flatnonzero((held_before > 0) | (held > 0))
        parts.append((at, np.full(len(at), kind_code), held_before[at], held[at], target[at],
                      np.maximum(held_before[at], target[at])))
    at, kinds, held_before, held, target, cap = (np.concatenate(columns) for columns in zip(*parts, strict=True))
    # A topic in two pools on one broker (a placement made by hand): the pool held before first, as pandas'
    # union of the counts before and after left them
    order = np.argsort(((cells[at] // n_pools * len(KINDS) + kinds) * 2 + (held_before == 0)) * n_pools
                       + cell_pool[at])
    at, kinds = at[order], kinds[order]
    return pd.DataFrame({
        "topic": topics.take(cells[at] // n_pools // n_brokers), "broker_pool": pools.take(cell_pool[at]),
        "broker_id": broker_ids[cells[at] // n_pools % n_brokers].astype(np.int64),
        "kind": np.array(_KINDS_SORTED, dtype=object)[kinds], "held_before": held_before[order].astype(np.int64),
        "held": held[order].astype(np.int64), "target": target[order].astype(np.int64),
        "cap": cap[order].astype(np.int64)})


def spread_violations(before: pd.DataFrame, after: pd.DataFrame, brokers_taking: Mapping[str, Collection[int]],
                      settings: TopicSpreadSettings) -> pd.DataFrame:
    """The (topic, broker, kind) held above their cap after the plan (`spread_cells`): VIOLATION_COLUMNS. Empty when
    the spread is off."""
    cells = spread_cells(before, after, brokers_taking, settings)
    return cells.loc[cells["held"] > cells["cap"], VIOLATION_COLUMNS].reset_index(drop=True)


def skewed_cells(cells: pd.DataFrame) -> pd.DataFrame:
    """The cells of `spread_cells` worth an operator's reading: held above the topic's target before or after the
    plan (the plan stage's `topic_spread` table)."""
    most = np.maximum(cells["held_before"].to_numpy(), cells["held"].to_numpy())
    return cells[most > cells["target"].to_numpy()].reset_index(drop=True)


class _Replicas(NamedTuple):
    topic: np.ndarray  # topic code
    pool: np.ndarray  # pool code
    broker_id: np.ndarray
    leads: np.ndarray


def _replicas_of(placement: pd.DataFrame, topic_codes: np.ndarray, pool_codes: np.ndarray, covered: np.ndarray
                 ) -> _Replicas:
    """The replicas of the placement's rows (`topic_codes`, `pool_codes`: per row, -1 where missing) whose topic
    the spread covers (`covered`, per topic code)."""
    lengths, broker_ids = _flattened(placement["replicas"])
    rows = np.repeat(np.arange(len(placement)), lengths)
    leads = broker_ids == np.asarray(_leaders(placement, lengths, broker_ids))[rows]
    topic, pool = topic_codes[rows], pool_codes[rows]
    kept = (topic >= 0) & (pool >= 0)
    kept[kept] = covered[topic[kept]]
    return _Replicas(topic[kept], pool[kept], broker_ids[kept], leads[kept])


def _flattened(replicas: pd.Series | list[Any]) -> tuple[np.ndarray, np.ndarray]:
    """Each row's number of replicas, and all rows' broker ids one after another (int64): replica lists flattened
    once. Rows mostly numpy arrays (as parquet gives them; a planned placement's planned rows are lists) are
    concatenated, rows mostly lists iterated: each way is the faster one for its kind (a sample of rows tells)."""
    values = replicas.to_numpy(dtype=object) if isinstance(replicas, pd.Series) else replicas
    lengths = np.fromiter(map(len, values), dtype=np.int64, count=len(values))
    if not lengths.any():
        return lengths, np.empty(0, dtype=np.int64)
    sample = values[::max(len(values) // 100, 1)]
    if 2 * sum(isinstance(ids, np.ndarray) for ids in sample) > len(sample):
        return lengths, np.concatenate(list(values)).astype(np.int64)
    return lengths, np.fromiter(itertools.chain.from_iterable(values), dtype=np.int64, count=int(lengths.sum()))


def _firsts(lengths: np.ndarray, broker_ids: np.ndarray) -> np.ndarray:
    """Each row's first broker (`_flattened`'s), -1 for a row without replicas."""
    first = np.full(len(lengths), -1, dtype=np.int64)
    has = lengths > 0
    first[has] = broker_ids[(np.cumsum(lengths) - lengths)[has]]
    return first


def _leaders(placement: pd.DataFrame, lengths: np.ndarray, broker_ids: np.ndarray) -> np.ndarray | pd.Series:
    """Each row's leader: the placement's `leader`, else its first replica (-1 for none)."""
    return placement["leader"].to_numpy() if "leader" in placement else _firsts(lengths, broker_ids)


def _sorted_unique(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct keys in order and each key's place among them (a hash, then a sort of the distinct keys only)."""
    codes, uniques = pd.factorize(keys)
    order = np.argsort(uniques)
    place = np.empty(len(order), dtype=np.int64)
    place[order] = np.arange(len(order))
    return uniques[order], place[codes]


def _positions(topics: Any, partitions: Any, of_topics: Any, of_partitions: Any) -> np.ndarray:
    """For each (topic, partition) of `topics`, `partitions`: the position of the last pair of `of_topics`,
    `of_partitions` equal to it, -1 where none is."""
    of = pd.MultiIndex.from_arrays([np.asarray(of_topics, dtype=object), np.asarray(of_partitions, dtype=np.int64)])
    if not len(of):
        return np.full(len(topics), -1, dtype=np.int64)
    last = ~of.duplicated(keep="last")
    found = of[last].get_indexer(pd.MultiIndex.from_arrays([np.asarray(topics, dtype=object),
                                                             np.asarray(partitions, dtype=np.int64)]))
    return np.where(found >= 0, np.flatnonzero(last)[found], -1)


def _pairs_in(rows: np.ndarray, values: np.ndarray, of_rows: np.ndarray, of_values: np.ndarray) -> np.ndarray:
    """Whether each (row, value) pair of integers is among the (of_rows, of_values) pairs."""
    if not len(rows) or not len(of_rows):
        return np.zeros(len(rows), dtype=bool)
    low = min(int(values.min()), int(of_values.min()))
    span = max(int(values.max()), int(of_values.max())) - low + 1
    return np.isin(rows.astype(np.int64) * span + (values - low), of_rows.astype(np.int64) * span + (of_values - low))


def _among(topics: Any, values: np.ndarray, of_topics: Any, of_values: np.ndarray) -> np.ndarray:
    """Whether each (topic, integer) pair is among the (of_topics, of_values) pairs."""
    codes, uniques = pd.factorize(np.asarray(topics, dtype=object))
    return _pairs_in(codes, values, pd.Index(uniques).get_indexer(np.asarray(of_topics, dtype=object)),
                     np.asarray(of_values, dtype=np.int64))


def _empty(columns: list[str]) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=object if c in ("topic", "broker_pool", "kind") else np.int64)
                         for c in columns})


def brokers_taking(config: RebalancerConfig, brokers: pd.DataFrame) -> dict[str, list[int]]:
    """Per pool of the config, its brokers that take replicas in this snapshot's brokers: alive, not excluded."""
    known = brokers.drop_duplicates("broker_id").set_index("broker_id")
    alive = set(known.index[known["alive"].astype(bool)].tolist()) - set(config.exclude.brokers)
    return {pool: [b for b in settings.brokers if b in alive] for pool, settings in config.pools.items()}


def placement_of(partitions: pd.DataFrame) -> pd.DataFrame:
    """A snapshot's partitions of a pool as a placement: topic, partition, broker_pool, replicas, leader."""
    parts = partitions[partitions["topic_pool"].notna()].drop_duplicates(["topic", "partition"])
    return parts.rename(columns={"topic_pool": "broker_pool"})[["topic", "partition", "broker_pool", "replicas",
                                                                 "leader"]].reset_index(drop=True)


def planned_placement(before: pd.DataFrame, plan: Iterable[Reassignment]) -> pd.DataFrame:
    """The placement `before` with plan.json applied: a planned partition on its planned replicas (a list), led by
    the first (the executor's preferred leader election); the others as they are."""
    plan = list(plan)
    if not plan:
        return before
    at = _positions(before["topic"], before["partition"], [r.topic for r in plan], [r.partition for r in plan])
    hit = np.flatnonzero(at >= 0)
    replicas = before["replicas"].to_numpy(dtype=object).copy()
    replicas[hit] = np.fromiter((list(r.replicas) for r in plan), dtype=object, count=len(plan))[at[hit]]
    lengths, broker_ids = _flattened([r.replicas for r in plan])
    first = _firsts(lengths, broker_ids)[at[hit]]
    leader = before["leader"].to_numpy().astype(np.int64)
    leader[hit] = np.where(first >= 0, first, leader[hit])
    return before.assign(replicas=replicas, leader=leader)


def planned_spread(config: RebalancerConfig, snapshot: SnapshotTables, plan: list[Reassignment]) -> pd.DataFrame:
    """`spread_cells` of plan.json against the run's snapshot (the validation's re-check): before, the snapshot's
    replicas and leaders; after, the planned placement (`planned_placement`). Empty when the spread is off."""
    if not config.topic_spread.enabled:
        return _empty(CELL_COLUMNS)
    before = placement_of(snapshot.partitions)
    return spread_cells(before, planned_placement(before, plan), brokers_taking(config, snapshot.brokers),
                        config.topic_spread)


def executed_spread(config: RebalancerConfig, before: SnapshotTables, after: SnapshotTables,
                    plan: list[Reassignment], drained: Collection[int] = (),
                    demoted: Collection[int] = ()) -> pd.DataFrame:
    """`spread_cells` from the run's snapshot to one after execution (verify), with `by_plan`: whether the plan gave
    that broker a replica of the topic (kind replicas) or made it the preferred leader of one of the topic's
    partitions it did not lead (kind leaders), so a cell above its cap is the plan's doing; and `forced`: the plan
    gave it a replica (or leadership) that had to move there (`forced_receivers`; `drained`, `demoted`: the
    run's). Leaders after are the planned partitions' first replicas (what the executor's election asks for) and
    the others' leaders as in the run's snapshot while they keep their replica there: a leader Kafka moved on its
    own is not the plan's doing."""
    if not config.topic_spread.enabled:
        return _empty(CELL_COLUMNS).assign(by_plan=pd.Series(dtype=bool), forced=pd.Series(dtype=bool))
    old, now = placement_of(before.partitions), placement_of(after.partitions)
    at = _positions(old["topic"], old["partition"], now["topic"], now["partition"])
    found = np.flatnonzero(at >= 0)
    replicas = old["replicas"].to_numpy(dtype=object).copy()
    replicas[found] = now["replicas"].to_numpy(dtype=object)[at[found]]
    was_leader = old["leader"].to_numpy().astype(np.int64)
    now_leader = was_leader.copy()
    now_leader[found] = now["leader"].to_numpy()[at[found]]
    lengths, broker_ids = _flattened(replicas)
    rows = np.repeat(np.arange(len(old)), lengths)
    keeps_leader = np.bincount(rows[broker_ids == was_leader[rows]], minlength=len(old)) > 0
    planned = _positions(old["topic"], old["partition"], [r.topic for r in plan], [r.partition for r in plan]) >= 0
    leader = np.where(planned, _firsts(lengths, broker_ids), np.where(keeps_leader, was_leader, now_leader))
    cells = spread_cells(old, old.assign(replicas=replicas, leader=leader), brokers_taking(config, before.brokers),
                         config.topic_spread)
    gained_topics, gained_brokers, gained_kinds = _gained(old, plan)
    forced = forced_receivers(config, before, plan, drained, demoted)
    brokers = cells["broker_id"].to_numpy()
    kinds = pd.Index(_KINDS_SORTED).get_indexer(cells["kind"])
    by_plan = _among(cells["topic"], brokers * len(KINDS) + kinds, gained_topics,
                     gained_brokers * len(KINDS) + gained_kinds)
    return cells.assign(by_plan=pd.Series(by_plan, index=cells.index, dtype=bool),
                        forced=pd.Series(received_forced(cells, forced), index=cells.index, dtype=bool))


def received_forced(cells: pd.DataFrame, forced: Collection[tuple[str, int]]) -> np.ndarray:
    """Whether each cell's (topic, broker_id) is one of `forced` (`forced_receivers`')."""
    return _among(cells["topic"], cells["broker_id"].to_numpy(dtype=np.int64), [t for t, _ in forced],
                  np.array([b for _, b in forced], dtype=np.int64))


def forced_receivers(config: RebalancerConfig, snapshot: SnapshotTables, plan: Iterable[Reassignment],
                     drained: Collection[int] = (), demoted: Collection[int] = ()) -> set[tuple[str, int]]:
    """(topic, broker) the plan gives a replica of the topic in a partition it takes off a broker the replica must
    leave (dead, drained, or outside the topic's pool), or the leadership of a partition it takes off a demoted
    broker: the planner places such a replica (or leadership) above a cap when no broker under it keeps the
    placement rules (a topic whose partitions all sit on the demoted broker and one other has nowhere else to lead),
    so a cell it lands in is not held to its cap."""
    known = snapshot.brokers.drop_duplicates("broker_id")
    gone = np.array(sorted(set(known.loc[~known["alive"].astype(bool), "broker_id"].astype(int))
                           | {int(b) for b in drained}), dtype=np.int64)
    demoted_ids = np.array(sorted(int(b) for b in demoted), dtype=np.int64)
    parts = placement_of(snapshot.partitions)
    moves = _Moves.of(parts, plan)
    pool_names = pd.Index(list(config.pools))
    pool = np.full(len(moves.at), -1, dtype=np.int64)
    found = np.flatnonzero(moves.at >= 0)
    pool[found] = pool_names.get_indexer(parts["broker_pool"].to_numpy(dtype=object)[moves.at[found]])
    member_pools = np.array([k for k, s in enumerate(config.pools.values()) for _ in s.brokers], dtype=np.int64)
    member_ids = np.array([b for s in config.pools.values() for b in s.brokers], dtype=np.int64)
    in_pool = _pairs_in(pool[moves.old_rows], moves.old_ids, member_pools, member_ids)
    leaving = ~_pairs_in(moves.old_rows, moves.old_ids, moves.new_rows, moves.new_ids)
    must_leave = leaving & (np.isin(moves.old_ids, gone) | ~in_pool)
    forced_row = np.bincount(moves.old_rows[must_leave], minlength=len(moves.at)) > 0
    arriving = ~_pairs_in(moves.new_rows, moves.new_ids, moves.old_rows, moves.old_ids) & forced_row[moves.new_rows]
    led_off = np.isin(moves.old_leader, demoted_ids) | np.isin(moves.old_first, demoted_ids)
    leads = led_off & (moves.new_first >= 0) & ~np.isin(moves.new_first, demoted_ids)
    return (set(zip(moves.topics[moves.new_rows[arriving]].tolist(), moves.new_ids[arriving].tolist(), strict=True))
            | set(zip(moves.topics[leads].tolist(), moves.new_first[leads].tolist(), strict=True)))


@dataclass(frozen=True)
class _Moves:
    """The plan's partitions, one row each in the plan's order, against a placement: its replicas flattened (the
    planned ones: new_rows, new_ids; the placement's: old_rows, old_ids; row: the plan's), each row's first planned
    and first placed replica (-1 for none) and placed leader (-1 where the placement lacks the partition: `at`)."""

    topics: np.ndarray
    at: np.ndarray
    new_rows: np.ndarray
    new_ids: np.ndarray
    new_first: np.ndarray
    old_rows: np.ndarray
    old_ids: np.ndarray
    old_first: np.ndarray
    old_leader: np.ndarray

    @classmethod
    def of(cls, placement: pd.DataFrame, plan: Iterable[Reassignment]) -> _Moves:
        plan = list(plan)
        topics = np.fromiter((r.topic for r in plan), dtype=object, count=len(plan))
        at = _positions(topics, [r.partition for r in plan], placement["topic"], placement["partition"])
        new_lengths, new_ids = _flattened([r.replicas for r in plan])
        found = np.flatnonzero(at >= 0)
        placed_lengths, old_ids = _flattened(placement["replicas"].iloc[at[found]])
        old_lengths = np.zeros(len(plan), dtype=np.int64)
        old_lengths[found] = placed_lengths
        old_leader = np.full(len(plan), -1, dtype=np.int64)
        old_leader[found] = placement["leader"].to_numpy()[at[found]]
        rows = np.arange(len(plan))
        return cls(topics, at, np.repeat(rows, new_lengths), new_ids, _firsts(new_lengths, new_ids),
                   np.repeat(rows, old_lengths), old_ids, _firsts(old_lengths, old_ids), old_leader)


def _gained(before: pd.DataFrame, plan: Iterable[Reassignment]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(topic, broker, kind code in `_KINDS_SORTED`) the plan adds to, as three arrays: a replica of the topic on a
    broker that had none of that partition, a partition of the topic whose preferred leader becomes a broker that
    did not lead it."""
    moves = _Moves.of(before, plan)
    arriving = ~_pairs_in(moves.new_rows, moves.new_ids, moves.old_rows, moves.old_ids)
    leads = (moves.new_first >= 0) & (moves.new_first != moves.old_leader)
    kinds = np.repeat([_KINDS_SORTED.index("replicas"), _KINDS_SORTED.index("leaders")],
                      [int(arriving.sum()), int(leads.sum())])
    return (np.concatenate([moves.topics[moves.new_rows[arriving]], moves.topics[leads]]),
            np.concatenate([moves.new_ids[arriving], moves.new_first[leads]]), kinds)


def spread_figures(cells: pd.DataFrame, pools: Iterable[str]) -> dict[str, dict[str, dict[str, Any]]]:
    """Per pool and kind, from `spread_cells`: how many (topic, broker) hold more than the topic's target
    (ceil(share) + margin) before and after, how many end above their cap, and the worst cell before and after (the
    most held against its target: topic, broker_id, held, target, cap)."""
    groups = cells.groupby(["broker_pool", "kind"], sort=False).indices if len(cells) else {}
    held_before, held, target, cap = (cells[c].to_numpy() for c in ("held_before", "held", "target", "cap"))
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for pool in pools:
        out[pool] = {}
        for kind in KINDS:
            at = groups.get((pool, kind), np.empty(0, dtype=np.int64))
            out[pool][kind] = {
                "over_target_before": int((held_before[at] > target[at]).sum()),
                "over_target_after": int((held[at] > target[at]).sum()),
                "over_cap_after": int((held[at] > cap[at]).sum()),
                "worst_before": _worst(cells, at, "held_before"), "worst_after": _worst(cells, at, "held")}
    return out


def _worst(cells: pd.DataFrame, at: np.ndarray, held: str) -> dict[str, Any] | None:
    """Of the cells at `at`, the one holding the most against its target (ties: the most held, then by topic and
    broker, then the first); a ratio that is not a number (0 of a target 0) ranks last."""
    if not len(at):
        return None
    counts, targets = cells[held].to_numpy()[at], cells["target"].to_numpy()[at]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = counts / targets
    known = ~np.isnan(ratio)
    if known.any():
        at, counts = at[known], counts[known]
        best = ratio[known] == ratio[known].max()
        at, counts = at[best], counts[best]
    at = at[counts == counts.max()]
    topics = cells["topic"].to_numpy(dtype=object)[at]
    at = at[topics == min(topics)]
    brokers = cells["broker_id"].to_numpy()[at]
    top = cells.iloc[int(at[brokers == brokers.min()][0])]
    return {"topic": str(top["topic"]), "broker_id": int(top["broker_id"]), "held": int(top[held]),
            "target": int(top["target"]), "cap": int(top["cap"])}
