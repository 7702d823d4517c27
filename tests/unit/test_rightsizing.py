"""Rightsizing (issue 55): the fewest brokers to add, found by the planner on the projected snapshot, and the
brokers an over-provisioned pool could give up, on small synthetic pools."""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd
import pytest
import yaml
from rich.console import Console

from kafka_rebalancer.cli.capacity import print_rightsizing
from kafka_rebalancer.config import RebalancerConfig, load_config
from kafka_rebalancer.forecast.projection import projected_snapshot, replicas_after
from kafka_rebalancer.plan.changes import partition_changes
from kafka_rebalancer.plan.rightsize import lower_bound, plan_trial, rightsize
from kafka_rebalancer.snapshot.build import SnapshotTables
from kafka_rebalancer.snapshot.synthetic import SyntheticSpec, generate

THRESHOLD, HORIZON = 0.8, 90


def cluster(tmp_path: Path, growth_per_day: float | None, **spec: object) -> tuple[RebalancerConfig, SnapshotTables,
                                                                                   pd.DataFrame]:
    """One pool of six brokers on three racks; every topic growing by `growth_per_day` of its size (None: no
    trend)."""
    tables, raw = generate(SyntheticSpec(n_brokers=6, n_racks=3, n_pools=1, n_partitions=300,
                                         partitions_per_topic=10, seed=3, **spec))  # type: ignore[arg-type]
    raw["resources"] = {"disk": {"capacity_threshold": THRESHOLD}}
    raw["forecast"] = {"horizon_days": HORIZON}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({**raw, "run_root": str(tmp_path / "runs")}))
    sizes = tables.partitions.groupby("topic")["size_bytes"].sum()
    growth = pd.DataFrame({"topic": sizes.index, "growth_bytes_per_day": (
        sizes.to_numpy(float) * growth_per_day if growth_per_day is not None else float("nan")),
        "reason": None if growth_per_day is not None else "no points"})
    return load_config(tmp_path / "config.yaml"), tables, growth


def planned_usage(projected: SnapshotTables, moves: pd.DataFrame, capacity: pd.Series) -> pd.Series:
    """Each broker's disk use on the plan's placement at +horizon, from its moves replayed on the projected
    replicas (not from the planner's own model)."""
    touched = projected.partitions.merge(moves[["topic", "partition"]].drop_duplicates(), on=["topic", "partition"])
    after = replicas_after(projected.replicas, partition_changes(touched, moves))
    used = after.groupby("broker_id")["size_bytes"].sum()
    return (used.reindex(capacity.index).fillna(0) / capacity).sort_index()


def test_rightsizing_a_filling_pool_gets_the_fewest_brokers_that_keep_it_under_the_threshold(tmp_path: Path) -> None:
    config, tables, growth = cluster(tmp_path, 0.01, target_usage=0.5)
    (pool,) = rightsize(config, tables, growth, THRESHOLD, HORIZON)
    projected = projected_snapshot(tables, growth, HORIZON)
    used = projected.replicas["size_bytes"].sum()
    capacity = tables.brokers["disk_capacity_bytes"]
    # The totals alone ask for 2 more brokers of the median capacity; the racks (3 racks, 3 replicas: a replica
    # stays on its rack) ask for one on each.
    assert pool.lower_bound == lower_bound(used, capacity.sum(), THRESHOLD, int(capacity.median())) == 2
    assert pool.brokers_to_add == 3
    held = pool.trials[-1]
    assert held.holds and len(held.added) == 3 and held.moved_bytes > 0
    # The promise, from the plan's moves: every broker, the added ones too, under the threshold at +horizon.
    added = pd.Series(capacity.median(), index=held.added)
    caps = pd.concat([tables.brokers.set_index("broker_id")["disk_capacity_bytes"], added]).astype(float)
    usage = planned_usage(projected, held.moves, caps)
    assert usage.max() <= THRESHOLD + 1e-9 and (usage.loc[held.added] > 0).all()
    assert held.moved_bytes == int(held.moves.loc[held.moves["action"] == "replica", "size_bytes"].sum())
    # One fewer does not hold, and the planner's own placement says so.
    fewer = pool.trials[0]
    assert len(fewer.added) == 2 and not fewer.holds and "over 80%" in (fewer.why_not or "")
    caps = pd.concat([tables.brokers.set_index("broker_id")["disk_capacity_bytes"],
                      pd.Series(capacity.median(), index=fewer.added)]).astype(float)
    assert planned_usage(projected, fewer.moves, caps).max() > THRESHOLD


def test_rightsizing_added_broker_capacity_comes_from_the_config(tmp_path: Path) -> None:
    config, tables, growth = cluster(tmp_path, 0.01, target_usage=0.5)
    bigger = int(tables.brokers["disk_capacity_bytes"].median()) * 3
    config = config.model_copy(update={"forecast": config.forecast.model_copy(
        update={"added_broker_capacity_bytes": bigger})})
    (pool,) = rightsize(config, tables, growth, THRESHOLD, HORIZON)
    assert pool.added_capacity_bytes == bigger and pool.lower_bound == 1


def test_rightsizing_an_over_provisioned_pool_names_brokers_it_could_give_up(tmp_path: Path) -> None:
    config, tables, growth = cluster(tmp_path, 0.001, target_usage=0.12, hot_brokers_per_pool=0,
                                     under_replicated_fraction=0.0)
    (pool,) = rightsize(config, tables, growth, THRESHOLD, HORIZON)
    assert pool.brokers_to_add == 0
    # One per rack, each its rack's broker holding the least bytes.
    held = tables.replicas.groupby("broker_id")["size_bytes"].sum()
    racks = tables.brokers.set_index("broker_id")["rack"]
    assert sorted(racks[pool.give_up]) == ["rack-0", "rack-1", "rack-2"]
    for b in pool.give_up:
        assert held[b] == held[racks[racks == racks[b]].index].min()
    trial = pool.give_up_trial
    assert trial is not None and trial.holds and trial.moved_bytes > 0
    projected = projected_snapshot(tables, growth, HORIZON)
    usage = planned_usage(projected, trial.moves, tables.brokers.set_index("broker_id")["disk_capacity_bytes"])
    assert (usage.loc[pool.give_up] == 0).all() and usage.max() <= THRESHOLD
    # Giving up a single broker leaves its rack short: the planner's placement is out of band.
    one = plan_trial(config, projected, "pool-0", 0, 0, pool.give_up[:1], THRESHOLD)
    assert not one.holds and "band" in (one.why_not or "")


def test_rightsizing_gives_up_no_broker_that_keeps_replicas_no_action_may_move(tmp_path: Path) -> None:
    # 1 % of the partitions under-replicated: skipped by the planner, so a broker holding one cannot be emptied.
    config, tables, growth = cluster(tmp_path, 0.001, target_usage=0.12, hot_brokers_per_pool=0)
    parts = tables.partitions
    under = parts[parts["isr"].map(len) < parts["replicas"].map(len)]
    stuck = int(under["replicas"].iloc[0][0])
    (pool,) = rightsize(config, tables, growth, THRESHOLD, HORIZON)
    assert stuck not in pool.give_up
    trial = plan_trial(config, projected_snapshot(tables, growth, HORIZON), "pool-0", 0, 0, [stuck], THRESHOLD)
    assert not trial.holds and trial.why_not == f"broker {stuck} keeps replicas the plan may not move"


def test_rightsizing_without_history_gives_no_number(tmp_path: Path) -> None:
    config, tables, growth = cluster(tmp_path, None, target_usage=0.5)
    (pool,) = rightsize(config, tables, growth, THRESHOLD, HORIZON)
    assert pool.brokers_to_add is None and pool.lower_bound is None and not pool.trials and not pool.give_up
    assert "no topic has a growth trend" in (pool.note or "")


@pytest.mark.parametrize(("used", "expected"), [(0.0, 0), (80.0, 0), (80.1, 1), (160.0, 1), (160.1, 2)])
def test_rightsizing_lower_bound_from_the_totals(used: float, expected: int) -> None:
    assert lower_bound(used, 100.0, 0.8, 100) == expected


def test_rightsizing_printed_by_the_capacity_command(tmp_path: Path) -> None:
    config, tables, growth = cluster(tmp_path, 0.01, target_usage=0.5)
    out = io.StringIO()
    print_rightsizing(Console(file=out, width=300), rightsize(config, tables, growth, THRESHOLD, HORIZON), HORIZON)
    text = out.getvalue()
    assert "pool pool-0: add 3 brokers of" in text and "2 added: broker" in text and "3 added: holds" in text
    config, tables, growth = cluster(tmp_path, None, target_usage=0.5)
    out = io.StringIO()
    print_rightsizing(Console(file=out, width=300), rightsize(config, tables, growth, THRESHOLD, HORIZON), HORIZON)
    assert "pool pool-0: no topic has a growth trend" in out.getvalue() and "add" not in out.getvalue()


def test_rightsizing_counts_the_replicas_a_dead_broker_holds(tmp_path: Path) -> None:
    # The dead broker's replicas must move onto the others: its capacity is not the pool's, its bytes are.
    config, tables, growth = cluster(tmp_path, 0.01, target_usage=0.5, dead_broker=True)
    (pool,) = rightsize(config, tables, growth, THRESHOLD, HORIZON)
    alive = tables.brokers[tables.brokers["alive"]]
    used = projected_snapshot(tables, growth, HORIZON).replicas["size_bytes"].sum()
    assert pool.lower_bound == lower_bound(used, alive["disk_capacity_bytes"].sum(), THRESHOLD,
                                           int(alive["disk_capacity_bytes"].median()))
    # Here the planner holds the pool neither at the bound nor one past it (a broker still over the threshold, then
    # over its band): no count, each run with its reason (capacity prints "more than").
    assert [len(t.added) for t in pool.trials] == [pool.lower_bound, pool.lower_bound + 1]
    assert pool.brokers_to_add is None and all(not t.holds and t.why_not for t in pool.trials)
