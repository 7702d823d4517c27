"""The topic spread's checks on a placement (`plan.balance.spread_violations`) give exactly what their first,
pandas-explode-and-loop implementation gave (kept below, as `_ref_*`, as the reference): on a random placement of
a few pools with dead, excluded, drained and demoted brokers, excluded topics, partitions without a leader, RF 1-4,
a topic in two pools, and a plan moving some partitions, reordering others and naming one the snapshot lacks."""

from __future__ import annotations

import random
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd
import pytest

from kafka_rebalancer.config import RebalancerConfig
from kafka_rebalancer.model.reassignment import Reassignment
from kafka_rebalancer.model.topic_spread import TopicSpreadSettings
from kafka_rebalancer.plan.balance import spread_violations as fast
from kafka_rebalancer.plan.balance.spread_violations import CELL_COLUMNS, KINDS, VIOLATION_COLUMNS, brokers_taking
from kafka_rebalancer.snapshot.build import SnapshotTables

POOLS = {"a": list(range(1, 9)), "b": list(range(9, 15)), "c": list(range(15, 19))}
DEAD, EXCLUDED, OUTSIDE = {3, 10}, [5], 19  # broker 19 is in no pool
DRAINED, DEMOTED = [7], [2]


def _config(config_factory: Callable[..., Any], margin: int) -> RebalancerConfig:
    return config_factory({
        "cluster": {"name": "c1"}, "pools": {p: {"brokers": b} for p, b in POOLS.items()},
        "topic_pools": [{"topics": "a*", "pool": "a"}, {"topics": "b*", "pool": "b"}, {"topics": "c*", "pool": "c"},
                        {"topics": "logs.*", "pool": "a"}],
        "exclude": {"brokers": EXCLUDED}, "capacity": {"default": {"disk_bytes": 1000}},
        "topic_spread": {"margin": margin, "exclude_topics": ["logs.*"]}})


def _tables(seed: int, arrays: bool) -> tuple[SnapshotTables, SnapshotTables, list[Reassignment]]:
    """Before, after execution (some partitions not at plan, a leader Kafka moved, one partition gone) and the plan."""
    rng = random.Random(seed)
    rows = []
    topics = [f"{p}{i:02d}" for p in POOLS for i in range(8)] + ["logs.x", "zz-nopool"]
    for topic in topics:
        pool = POOLS.get(topic[0], POOLS["a"])
        for partition in range(rng.randint(1, 25)):
            rf = rng.randint(1, 4)
            replicas = rng.sample(pool + ([OUTSIDE] if rng.random() < 0.1 else []), rf)
            leader = -1 if rng.random() < 0.05 else rng.choice(replicas)
            rows.append((topic, partition, replicas, leader))
    plan = []
    for topic, partition, replicas, _ in rows:
        if rng.random() < 0.3:
            pool = POOLS.get(topic[0], POOLS["a"])
            new = list(replicas)
            if rng.random() < 0.6:  # a move; else a reorder
                free = [b for b in pool if b not in new]
                if free:
                    new[rng.randrange(len(new))] = rng.choice(free)
            rng.shuffle(new)
            plan.append(Reassignment(topic, partition, new))
    plan.append(Reassignment("a00", 999, [1, 2]))  # a partition the snapshot lacks
    planned = {(r.topic, r.partition): r.replicas for r in plan}
    after_rows = []
    for topic, partition, replicas, leader in rows:
        new = planned.get((topic, partition), replicas) if rng.random() < 0.9 else replicas
        moved = rng.choice(new) if rng.random() < 0.1 else (new[0] if (topic, partition) in planned else leader)
        if rng.random() > 0.02:
            after_rows.append((topic, partition, list(new), moved))
    return _snapshot(rows, arrays), _snapshot(after_rows, arrays), plan


def _snapshot(rows: list[tuple[str, int, list[int], int]], arrays: bool) -> SnapshotTables:
    replicas = pd.Series([np.array(r, dtype=np.int32) if arrays else list(r) for _, _, r, _ in rows], dtype=object)
    pool = [None if t.startswith("zz") else "a" if t.startswith("logs") else t[0] for t, _, _, _ in rows]
    partitions = pd.DataFrame({"topic": [t for t, _, _, _ in rows], "partition": [p for _, p, _, _ in rows],
                               "replicas": replicas, "leader": [led for _, _, _, led in rows], "topic_pool": pool})
    partitions = partitions.astype({"partition": np.int32, "leader": np.int32})
    ids = sorted({b for bs in POOLS.values() for b in bs} | {OUTSIDE})
    brokers = pd.DataFrame({"broker_id": ids, "alive": [b not in DEAD for b in ids]})
    return SnapshotTables(brokers, pd.DataFrame(), pd.concat([partitions, partitions.head(3)], ignore_index=True))


def _lists(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.assign(replicas=frame["replicas"].map(lambda r: [int(b) for b in r]))


@pytest.mark.parametrize("arrays", [True, False])
@pytest.mark.parametrize(("seed", "margin"), [(1, 1), (2, 0), (3, 2)])
def test_the_checks_give_what_the_reference_gave(config_factory: Callable[..., Any], seed: int, margin: int,
                                                 arrays: bool) -> None:
    config = _config(config_factory, margin)
    before, after, plan = _tables(seed, arrays)
    settings = config.topic_spread
    old = fast.placement_of(before.partitions)
    pd.testing.assert_frame_equal(old, _ref_placement_of(before.partitions))
    new = fast.planned_placement(old, plan)
    pd.testing.assert_frame_equal(_lists(new), _lists(_ref_planned_placement(old, plan)))
    # a topic in two pools, and a placement without leaders
    two = old.assign(broker_pool=np.where(old["topic"].eq("a01") & old["partition"].eq(0), "b", old["broker_pool"]))
    taking = brokers_taking(config, before.brokers)
    for b, a in ((old, new), (two, new), (old.drop(columns="leader"), new.drop(columns="leader")), (old, old)):
        pd.testing.assert_frame_equal(fast.replica_rows(a), _ref_replica_rows(a))
        cells = fast.spread_cells(b, a, taking, settings)
        pd.testing.assert_frame_equal(cells, _ref_spread_cells(b, a, taking, settings))
        pd.testing.assert_frame_equal(fast.spread_violations(b, a, taking, settings),
                                      _ref_spread_violations(b, a, taking, settings))
        pd.testing.assert_frame_equal(fast.skewed_cells(cells), _ref_skewed_cells(cells))
        assert fast.spread_figures(cells, ["a", "b", "c", "d"]) == _ref_spread_figures(cells, ["a", "b", "c", "d"])
    cells = fast.planned_spread(config, before, plan)
    pd.testing.assert_frame_equal(cells, _ref_planned_spread(config, before, plan))
    for drained, demoted in (((), ()), (DRAINED, DEMOTED)):
        forced = fast.forced_receivers(config, before, plan, drained, demoted)
        assert forced == _ref_forced_receivers(config, before, plan, drained, demoted)
        assert fast.received_forced(cells, forced).tolist() == [  # (validate.checks.spread_rows' forced_receiver)
            (t, int(b)) in forced for t, b in zip(cells["topic"], cells["broker_id"], strict=True)]
        pd.testing.assert_frame_equal(fast.executed_spread(config, before, after, plan, drained, demoted),
                                      _ref_executed_spread(config, before, after, plan, drained, demoted))


@pytest.mark.parametrize("exclude", [[], ["*"]])
def test_empty_placements_give_what_the_reference_gave(exclude: list[str]) -> None:
    settings = TopicSpreadSettings(exclude_topics=exclude)
    empty = pd.DataFrame({"topic": pd.Series(dtype=object), "partition": pd.Series(dtype=np.int64),
                          "broker_pool": pd.Series(dtype=object), "replicas": pd.Series(dtype=object),
                          "leader": pd.Series(dtype=np.int64)})
    one = pd.DataFrame({"topic": ["t"], "partition": [0], "broker_pool": ["a"], "replicas": [[1, 2]], "leader": [1]})
    for b, a in ((one, one), (one, empty), (empty, one)):
        pd.testing.assert_frame_equal(fast.replica_rows(a), _ref_replica_rows(a))
        cells = fast.spread_cells(b, a, {"a": [1, 2]}, settings)
        pd.testing.assert_frame_equal(cells, _ref_spread_cells(b, a, {"a": [1, 2]}, settings))
        assert fast.spread_figures(cells, ["a"]) == _ref_spread_figures(cells, ["a"])
    pd.testing.assert_frame_equal(fast.replica_rows(empty), _ref_replica_rows(empty))
    # (the reference raised a KeyError on two empty placements)
    pd.testing.assert_frame_equal(fast.spread_cells(empty, empty, {"a": [1, 2]}, settings),
                                  _ref_empty(CELL_COLUMNS), check_index_type=False)


# -- the reference: the first implementation, as it was --------------------------------------------------------
def _ref_replica_rows(placement: pd.DataFrame) -> pd.DataFrame:
    """One row per replica of the placement: topic, broker_pool, broker_id, is_leader."""
    frame = placement[["topic", "broker_pool", "replicas"]].copy()
    leader = placement["leader"] if "leader" in placement else frame["replicas"].map(
        lambda ids: ids[0] if len(ids) else -1)
    frame["leader"] = leader.to_numpy()
    frame = frame.explode("replicas").dropna(subset=["replicas"]).rename(columns={"replicas": "broker_id"})
    frame["broker_id"] = frame["broker_id"].astype(np.int64)
    frame["is_leader"] = frame["broker_id"] == frame["leader"]
    return frame.drop(columns="leader").reset_index(drop=True)


def _ref_spread_cells(before: pd.DataFrame, after: pd.DataFrame, brokers_taking: Mapping[str, Collection[int]],
                 settings: TopicSpreadSettings) -> pd.DataFrame:
    """Per (topic, broker, kind) held before or after the plan, of the topics the spread covers: kind `replicas` or
    `leaders`; held_before, held, the topic's target and the cell's cap (CELL_COLUMNS). `brokers_taking`: per pool,
    the brokers that take replicas (alive, not excluded), whose number divides a topic's total into its share.
    Empty when the spread is off."""
    if not settings.enabled:
        return _ref_empty(CELL_COLUMNS)
    covered = {t: not settings.excluded(t) for t in set(before["topic"]) | set(after["topic"])}
    old = _ref_replica_rows(before[before["topic"].map(covered)])
    new = _ref_replica_rows(after[after["topic"].map(covered)])
    out = []
    for kind, weight in zip(KINDS, (None, "is_leader"), strict=True):
        held_before = _ref_held(old, weight).rename("held_before")
        held = _ref_held(new, weight).rename("held")
        cells = pd.concat([held_before, held], axis=1).fillna(0).astype(np.int64).reset_index()
        totals = held_before.groupby(level=["topic", "broker_pool"]).sum().rename("total").reset_index()
        cells = cells.merge(totals, on=["topic", "broker_pool"], how="left").fillna({"total": 0})
        taking = cells["broker_pool"].map(lambda pool: max(len(brokers_taking.get(pool, ())), 1))
        cells["target"] = (cells["total"].astype(np.int64) + taking - 1) // taking + settings.margin
        cells["cap"] = np.maximum(cells["held_before"], cells["target"])
        cells["kind"] = kind
        out.append(cells[CELL_COLUMNS])
    cells = pd.concat(out, ignore_index=True).sort_values(["topic", "broker_id", "kind"], ignore_index=True)
    return cells.astype({c: np.int64 for c in ("broker_id", "held_before", "held", "target", "cap")})


def _ref_spread_violations(before: pd.DataFrame, after: pd.DataFrame, brokers_taking: Mapping[str, Collection[int]],
                      settings: TopicSpreadSettings) -> pd.DataFrame:
    """The (topic, broker, kind) held above their cap after the plan (`spread_cells`): VIOLATION_COLUMNS. Empty when
    the spread is off."""
    cells = _ref_spread_cells(before, after, brokers_taking, settings)
    return cells.loc[cells["held"] > cells["cap"], VIOLATION_COLUMNS].reset_index(drop=True)


def _ref_skewed_cells(cells: pd.DataFrame) -> pd.DataFrame:
    """The cells of `spread_cells` worth an operator's reading: held above the topic's target before or after the
    plan (the plan stage's `topic_spread` table)."""
    return cells[cells[["held_before", "held"]].max(axis=1) > cells["target"]].reset_index(drop=True)


def _ref_held(rows: pd.DataFrame, weight: str | None) -> pd.Series:
    """Per (topic, broker_pool, broker_id): the rows (or those where `weight` is true)."""
    rows = rows if weight is None else rows[rows[weight]]
    return rows.groupby(["topic", "broker_pool", "broker_id"]).size()


def _ref_empty(columns: list[str]) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=object if c in ("topic", "broker_pool", "kind") else np.int64)
                         for c in columns})


def _ref_placement_of(partitions: pd.DataFrame) -> pd.DataFrame:
    """A snapshot's partitions of a pool as a placement: topic, partition, broker_pool, replicas, leader."""
    parts = partitions[partitions["topic_pool"].notna()].drop_duplicates(["topic", "partition"])
    return parts.rename(columns={"topic_pool": "broker_pool"})[["topic", "partition", "broker_pool", "replicas",
                                                                 "leader"]].reset_index(drop=True)


def _ref_planned_placement(before: pd.DataFrame, plan: Iterable[Reassignment]) -> pd.DataFrame:
    """The placement `before` with plan.json applied: a planned partition on its planned replicas, led by the first
    (the executor's preferred leader election); the others as they are."""
    planned = {(r.topic, r.partition): list(r.replicas) for r in plan}
    if not planned:
        return before
    keys = list(zip(before["topic"], before["partition"].astype(int), strict=True))
    replicas = [planned.get(k, list(old)) for k, old in zip(keys, before["replicas"], strict=True)]
    leader = [r[0] if k in planned and r else int(old) for k, r, old in zip(keys, replicas, before["leader"],
                                                                           strict=True)]
    return before.assign(replicas=replicas, leader=leader)


def _ref_planned_spread(config: RebalancerConfig, snapshot: SnapshotTables, plan: list[Reassignment]) -> pd.DataFrame:
    """`spread_cells` of plan.json against the run's snapshot (the validation's re-check): before, the snapshot's
    replicas and leaders; after, the planned placement (`planned_placement`). Empty when the spread is off."""
    if not config.topic_spread.enabled:
        return _ref_empty(CELL_COLUMNS)
    before = _ref_placement_of(snapshot.partitions)
    return _ref_spread_cells(before, _ref_planned_placement(before, plan), brokers_taking(config, snapshot.brokers),
                        config.topic_spread)


def _ref_executed_spread(config: RebalancerConfig, before: SnapshotTables, after: SnapshotTables,
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
        return _ref_empty(CELL_COLUMNS).assign(by_plan=pd.Series(dtype=bool), forced=pd.Series(dtype=bool))
    old = _ref_placement_of(before.partitions)
    now_parts = _ref_placement_of(after.partitions)
    now = {(t, int(p)): ([int(b) for b in r], int(led)) for t, p, r, led in zip(
        now_parts["topic"], now_parts["partition"], now_parts["replicas"], now_parts["leader"], strict=True)}
    planned = {(r.topic, r.partition) for r in plan}
    replicas, leader = [], []
    for t, p, was, led in zip(old["topic"], old["partition"], old["replicas"], old["leader"], strict=True):
        ids, now_leader = now.get((t, int(p)), ([int(b) for b in was], int(led)))
        replicas.append(ids)
        leader.append((ids[0] if ids else -1) if (t, int(p)) in planned else int(led) if led in ids else now_leader)
    cells = _ref_spread_cells(old, old.assign(replicas=replicas, leader=leader), brokers_taking(config, before.brokers),
                         config.topic_spread)
    gained, forced = _ref_gained(old, plan), _ref_forced_receivers(config, before, plan, drained, demoted)
    keys = list(zip(cells["topic"], cells["broker_id"].astype(int), strict=True))
    return cells.assign(
        by_plan=pd.Series([(t, b, k) in gained for (t, b), k in zip(keys, cells["kind"], strict=True)],
                          index=cells.index, dtype=bool),
        forced=pd.Series([key in forced for key in keys], index=cells.index, dtype=bool))


def _ref_forced_receivers(config: RebalancerConfig, snapshot: SnapshotTables, plan: Iterable[Reassignment],
                     drained: Collection[int] = (), demoted: Collection[int] = ()) -> set[tuple[str, int]]:
    """(topic, broker) the plan gives a replica of the topic in a partition it takes off a broker the replica must
    leave (dead, drained, or outside the topic's pool), or the leadership of a partition it takes off a demoted
    broker: the planner places such a replica (or leadership) above a cap when no broker under it keeps the
    placement rules (a topic whose partitions all sit on the demoted broker and one other has nowhere else to lead),
    so a cell it lands in is not held to its cap."""
    known = snapshot.brokers.drop_duplicates("broker_id")
    gone = set(known.loc[~known["alive"].astype(bool), "broker_id"].astype(int)) | {int(b) for b in drained}
    members = {pool: set(settings.brokers) for pool, settings in config.pools.items()}
    parts = _ref_placement_of(snapshot.partitions)
    old = {(t, int(p)): (pool, [int(b) for b in r], int(led)) for t, p, pool, r, led in zip(
        parts["topic"], parts["partition"], parts["broker_pool"], parts["replicas"], parts["leader"], strict=True)}
    out: set[tuple[str, int]] = set()
    for r in plan:
        pool, was, led = old.get((r.topic, r.partition), (None, [], -1))
        if any(b in gone or b not in members.get(str(pool), set()) for b in set(was) - set(r.replicas)):
            out |= {(r.topic, int(b)) for b in set(r.replicas) - set(was)}
        if r.replicas and ({led, *was[:1]} & set(demoted)) and r.replicas[0] not in demoted:
            out.add((r.topic, int(r.replicas[0])))
    return out


def _ref_gained(before: pd.DataFrame, plan: Iterable[Reassignment]) -> set[tuple[str, int, str]]:
    """(topic, broker, kind) the plan adds to: a replica of the topic on a broker that had none of that partition,
    a partition of the topic whose preferred leader becomes a broker that did not lead it."""
    old = {(t, int(p)): ([int(b) for b in r], int(led)) for t, p, r, led in zip(
        before["topic"], before["partition"], before["replicas"], before["leader"], strict=True)}
    out: set[tuple[str, int, str]] = set()
    for r in plan:
        replicas, leader = old.get((r.topic, r.partition), ([], -1))
        out |= {(r.topic, int(b), "replicas") for b in r.replicas if b not in replicas}
        if r.replicas and r.replicas[0] != leader:
            out.add((r.topic, int(r.replicas[0]), "leaders"))
    return out


def _ref_spread_figures(cells: pd.DataFrame, pools: Iterable[str]) -> dict[str, dict[str, dict[str, Any]]]:
    """Per pool and kind, from `spread_cells`: how many (topic, broker) hold more than the topic's target
    (ceil(share) + margin) before and after, how many end above their cap, and the worst cell before and after (the
    most held against its target: topic, broker_id, held, target, cap)."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for pool in pools:
        of_pool = cells[cells["broker_pool"] == pool]
        out[pool] = {}
        for kind in KINDS:
            rows = of_pool[of_pool["kind"] == kind]
            out[pool][kind] = {
                "over_target_before": int((rows["held_before"] > rows["target"]).sum()),
                "over_target_after": int((rows["held"] > rows["target"]).sum()),
                "over_cap_after": int((rows["held"] > rows["cap"]).sum()),
                "worst_before": _ref_worst(rows, "held_before"), "worst_after": _ref_worst(rows, "held")}
    return out


def _ref_worst(rows: pd.DataFrame, held: str) -> dict[str, Any] | None:
    """The cell holding the most against its target (ties: the most held, then by topic and broker)."""
    if rows.empty:
        return None
    ranked = rows.assign(_ratio=rows[held] / rows["target"]).sort_values(
        ["_ratio", held, "topic", "broker_id"], ascending=[False, False, True, True], kind="stable")
    top = ranked.iloc[0]
    return {"topic": str(top["topic"]), "broker_id": int(top["broker_id"]), "held": int(top[held]),
            "target": int(top["target"]), "cap": int(top["cap"])}
