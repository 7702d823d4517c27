"""The facts the validation suite checks, computed from plan.json, rollback.json and the snapshot alone: an
independent re-derivation of the after-state, not the planner's own bookkeeping."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from kafka_rebalancer.config import RebalancerConfig
from kafka_rebalancer.model.band_status import band_status, broker_load_frame
from kafka_rebalancer.model.reassignment import Reassignment
from kafka_rebalancer.model.topics import matches_any
from kafka_rebalancer.plan.balance.spread_violations import received_forced
from kafka_rebalancer.plan.recheck import replicas_after
from kafka_rebalancer.snapshot.build import SnapshotTables


@dataclass
class CheckTables:
    partitions: pd.DataFrame  # one row per partition in the plan
    brokers: pd.DataFrame  # one row per (pool broker, balanced resource)
    totals: pd.DataFrame  # one row: the plan's size against the budgets
    # one row per (broker, resource): the planner's claim beside the re-check (recheck.claim_rows); none: unchecked
    claims: pd.DataFrame = field(default_factory=pd.DataFrame)
    # one row per (broker, resource) left outside its band or target band, explained or not (recheck.left_outside)
    left_outside: pd.DataFrame = field(default_factory=pd.DataFrame)
    # one row per (pool, resource): the plan's band beside the band the re-check derives (recheck.band_rows)
    bands: pd.DataFrame = field(default_factory=pd.DataFrame)
    # one row per promise of the run's action, with its verdict on the plan's placement (plan.promises)
    promises: pd.DataFrame = field(default_factory=pd.DataFrame)
    # one row per move between a broker's log directories (validate.log_dir_checks)
    log_dir_moves: pd.DataFrame = field(default_factory=pd.DataFrame)
    # one row per replica whose log directory plan.json names (validate.log_dir_checks)
    arrival_dirs: pd.DataFrame = field(default_factory=pd.DataFrame)
    # one row per (topic, broker, kind) the plan changes or leaves above its topic spread's cap (`spread_rows`)
    topic_spread: pd.DataFrame = field(default_factory=pd.DataFrame)


def _distance(status: pd.DataFrame) -> pd.Series:
    return np.maximum(status["lower"] - status["usage"], 0) + np.maximum(status["usage"] - status["upper"], 0)


def build_checks(config: RebalancerConfig, snapshot: SnapshotTables, plan: list[Reassignment],
                 rollback: list[Reassignment], bands: pd.DataFrame, leaving: frozenset[int] = frozenset(),
                 demoting: bool = False, cordoned: frozenset[int] = frozenset(),
                 kept_explained: frozenset[int] = frozenset(),
                 resized: tuple[tuple[str, ...], int] | None = None) -> CheckTables:
    """`snapshot`: the run's, as it plans it (`read_snapshot`); `leaving`: the brokers the run drains; `demoting`:
    the run takes leadership off brokers (it may change an excluded topic's replica order); `cordoned`: the
    brokers the snapshot found cordoned (none may receive a replica); `kept_explained`: the brokers the planner
    says why it leaves holding replicas that must leave them (`recheck.left_outside`'s explained HARD rows);
    `resized`: a replication factor change's topic patterns and target (every other partition keeps its RF)."""
    # Duplicate rows are counted, not trusted: the suite flags them, and lookups take the first row.
    brokers = snapshot.brokers.drop_duplicates("broker_id").set_index("broker_id")
    rows_per_key = snapshot.partitions.groupby(["topic", "partition"]).size()
    parts = snapshot.partitions.drop_duplicates(["topic", "partition"]).set_index(["topic", "partition"])
    old_by_key = {(r.topic, r.partition): r.replicas for r in rollback}
    pool_brokers = {pool: set(s.brokers) for pool, s in config.pools.items()}
    # The racks a pool can still place replicas on: its live brokers' that take replicas (not drained, not cordoned).
    # Keyed by pool: a partition of no pool (None) finds none.
    eligible_racks: dict[str | None, set[str]] = {
        pool: {brokers.at[b, "rack"] for b in ids if b in brokers.index and brokers.at[b, "alive"]
               and b not in leaving and b not in cordoned} for pool, ids in pool_brokers.items()}

    def racks(ids: list[int]) -> int:
        return len({brokers.at[b, "rack"] if b in brokers.index and brokers.at[b, "rack"] else f"#{b}" for b in ids})

    rows = []
    forced_out: list[tuple[str, int, int]] = []  # (topic, partition, broker): replicas the plan takes off a broker
    for r in plan:
        key = (r.topic, r.partition)
        known = key in parts.index
        snap = list(parts.at[key, "replicas"]) if known else []
        pool = parts.at[key, "topic_pool"] if known else None
        old = old_by_key.get(key, [])
        new, added = r.replicas, [b for b in r.replicas if b not in snap]
        isr = set(parts.at[key, "isr"]) if known else set()
        dead = {b for b in snap if b not in brokers.index or not bool(brokers.at[b, "alive"])}
        # No pool balances it: only its replicas on drained brokers may leave (snapshot.evacuation).
        held = config.topic_excluded(r.topic) or config.topic_pool(r.topic) is None
        removed = set(snap) - set(new)
        members = pool_brokers.get(pool, set()) if pool is not None else set()
        forced_out += [(r.topic, r.partition, b) for b in removed if b in dead or b in leaving or b not in members]
        required = min(len(snap), len(new), len(eligible_racks.get(pool, ())), racks(snap)) if known else 0
        target = resized[1] if resized is not None and matches_any(r.topic, resized[0]) else None
        rows.append({
            "topic": r.topic, "partition": r.partition, "broker_pool": pool, "in_snapshot": known,
            "snapshot_rows": int(rows_per_key.get(key, 0)),
            "size_bytes": int(parts.at[key, "size_bytes"]) if known else 0,
            "rf_before": len(snap), "rf_after": len(new), "rf_expected": len(snap) if target is None else target,
            "old_matches_snapshot": old == snap,
            "no_duplicate_broker": len(set(new)) == len(new),
            # A replica outside the pool may stay where the partition is under-replicated (ISR safety lets the plan
            # replace only a dead broker's replica there, and that one must still be replaced), or where the planner
            # says why it could not bring it home (no broker of the pool keeps the placement rules with room).
            "targets_in_pool": pool is not None and all(b in members for b in added) and (
                held or all(b in members or b in kept_explained for b in new) or bool(set(snap) - isr)),
            "targets_alive": all(b in brokers.index and bool(brokers.at[b, "alive"]) and b not in cordoned
                                 for b in added),
            "racks_before": racks(snap), "racks_after": racks(new), "racks_required": required,
            # Fewer racks only where the pool no longer offers them (a dead or drained broker alone on its rack).
            "racks_kept": racks(new) >= required,
            # Every replica the plan keeps is in sync; only dead brokers' replicas may be out of it (and replaced).
            "isr_safe": known and set(new) & set(snap) <= isr and set(snap) - isr <= dead,
            "has_leader": known and int(parts.at[key, "leader"]) >= 0,
            # An excluded topic's replicas leave drained brokers (and only those); a demotion may reorder them.
            "topic_not_excluded": not config.topic_excluded(r.topic) or (
                bool(removed) and removed <= leaving) or (demoting and set(new) == set(snap)) or target is not None,
            "no_excluded_broker": not any(b in config.exclude.brokers for b in set(snap) | set(new)),
            "moved_bytes": int(parts.at[key, "size_bytes"]) * len(added) if known else 0,
            "replica_moves": len(added),
        })
    partitions = pd.DataFrame(rows, columns=[
        "topic", "partition", "broker_pool", "in_snapshot", "snapshot_rows", "size_bytes", "rf_before", "rf_after",
        "rf_expected", "old_matches_snapshot", "no_duplicate_broker", "targets_in_pool", "targets_alive",
        "racks_before", "racks_after", "racks_required", "racks_kept", "isr_safe", "has_leader", "topic_not_excluded",
        "no_excluded_broker", "moved_bytes", "replica_moves"])

    return CheckTables(partitions, _broker_rows(config, snapshot, plan, bands, forced_out),
                       _totals(partitions, plan, old_by_key))


def _totals(partitions: pd.DataFrame, plan: list[Reassignment], old_by_key: dict[tuple[str, int], list[int]]
            ) -> pd.DataFrame:
    """One row: the plan's replica moves, bytes and most moves touching one broker, against the budgets."""
    per_broker = pd.Series([b for r in plan for b in set(r.replicas) ^ set(old_by_key.get((r.topic, r.partition), []))],
                           dtype="int64").value_counts()
    return pd.DataFrame([{
        "plan": "plan.json", "replica_moves": int(partitions["replica_moves"].sum()),
        "moved_bytes": int(partitions["moved_bytes"].sum()),
        "max_moves_per_broker": int(per_broker.max()) if len(per_broker) else 0}])


def _broker_rows(config: RebalancerConfig, snapshot: SnapshotTables, plan: list[Reassignment],
                 bands: pd.DataFrame, forced_out: list[tuple[str, int, int]]) -> pd.DataFrame:
    """Per broker and resource: usage and band before and after the plan, and whether it ends inside or closer:
    than before, or than once the replicas the plan takes off it by force (`forced_out`: off a dead or drained
    broker, or one outside their topic's pool) have left, a distance no plan can shorten by keeping them."""
    resources = config.resource_list()
    before = band_status(broker_load_frame(snapshot.brokers, snapshot.replicas, resources), bands)
    gone = pd.DataFrame(forced_out, columns=["topic", "partition", "broker_id"]).astype(
        {"partition": snapshot.replicas["partition"].dtype, "broker_id": snapshot.replicas["broker_id"].dtype})
    marked = snapshot.replicas.merge(gone, on=["topic", "partition", "broker_id"], how="left", indicator=True)
    kept = snapshot.replicas[(marked["_merge"] == "left_only").to_numpy()]
    without_forced = band_status(broker_load_frame(snapshot.brokers, kept, resources), bands)
    after = band_status(broker_load_frame(snapshot.brokers, replicas_after(snapshot, plan), resources), bands)
    b = before[before["counted"]][["broker_pool", "broker_id", "resource", "usage", "lower", "upper", "inside"]]
    b = b.assign(distance_before=_distance(before[before["counted"]]))
    k = without_forced[without_forced["counted"]][["broker_id", "resource"]].assign(
        distance_without_forced=_distance(without_forced[without_forced["counted"]]))
    a = after[after["counted"]][["broker_id", "resource", "usage", "inside"]]
    a = a.assign(distance_after=_distance(after[after["counted"]]))
    broker_rows = b.merge(a, on=["broker_id", "resource"], suffixes=("_before", "_after")).merge(
        k, on=["broker_id", "resource"], how="left")
    closest = np.maximum(broker_rows["distance_before"], broker_rows["distance_without_forced"].fillna(0.0))
    broker_rows["inside_or_closer"] = broker_rows["inside_after"] | (broker_rows["distance_after"] <= closest + 1e-9)
    return broker_rows


def excuse_forced_receivers(broker_rows: pd.DataFrame, left: pd.DataFrame, receivers: Collection[int]
                            ) -> pd.DataFrame:
    """`broker_rows` with `inside_or_closer` also true for a broker that receives replicas which must leave their
    brokers (`receivers`: `spread_violations.forced_receivers`' brokers: off a dead, drained or other pool's
    broker) where the planner explained why it stays outside (`left`, the left_outside rows): such replicas may
    have one place to go (the last broker of a rack with RF = racks), which the band before, with those brokers
    still in it, cannot judge. Column `forced_receiver` says which."""
    explained = {(int(b), str(res)) for b, res, ok in zip(left["broker_id"], left["resource"], left["explained"],
                                                          strict=True) if ok}
    forced = pd.Series([int(b) in receivers and (int(b), str(res)) in explained
                        for b, res in zip(broker_rows["broker_id"], broker_rows["resource"], strict=True)],
                       index=broker_rows.index, dtype=bool)
    return broker_rows.assign(forced_receiver=forced, inside_or_closer=broker_rows["inside_or_closer"] | forced)


def spread_rows(cells: pd.DataFrame, forced: set[tuple[str, int]]) -> pd.DataFrame:
    """Of the re-check's topic spread cells (`Recheck.spread`), those the plan changes or leaves above their cap,
    with `forced_receiver`: the plan gives the broker a replica of the topic that must leave its broker (`forced`:
    `spread_violations.forced_receivers`; the planner places one above a cap where no broker under it keeps the
    placement rules), and `within_cap`: the broker holds no more of the topic than its cap, or is such a receiver."""
    rows = cells[(cells["held"] != cells["held_before"]) | (cells["held"] > cells["cap"])]
    received = pd.Series(received_forced(rows, forced), index=rows.index, dtype=bool)
    return rows.assign(forced_receiver=received, within_cap=(rows["held"] <= rows["cap"]) | received
                       ).reset_index(drop=True)
