"""What each manual action promises, on real plans: a drain empties its broker of every topic (excluded ones and
topics of no pool included), a demotion takes leadership of excluded topics too, and a replica that truly cannot
leave is named before approval instead of passing as kept."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from kafka_rebalancer.approve.approval import PlanFacts, approval_body
from kafka_rebalancer.model.reassignment import read_reassignment
from kafka_rebalancer.operations.request import make_request, run_config, write_request
from kafka_rebalancer.plan.job import run_plan
from kafka_rebalancer.plan.promises import CANNOT, KEPT, placement_after
from kafka_rebalancer.run_folder import PLAN, VALIDATION, RunFolder
from kafka_rebalancer.snapshot import read_snapshot, write_snapshot
from kafka_rebalancer.snapshot.build import SnapshotTables
from kafka_rebalancer.snapshot.synthetic import SyntheticSpec, generate
from kafka_rebalancer.validate.suite import validate_plan
from tests.helpers import write_config

pytestmark = pytest.mark.spark

# Six racks: every broker of a pool on its own, so a drained replica may land on any broker of its pool (with
# three, a rack-aware drain must put all of them on the one broker left on the drained broker's rack).
SPEC = SyntheticSpec(n_brokers=12, n_racks=6, n_pools=2, n_partitions=400, replication_factor=3, target_usage=0.25,
                     hot_brokers_per_pool=0, under_replicated_fraction=0.0, seed=5)
INTERNAL, ORPHAN = "__consumer_offsets", "orphan-events"  # excluded by the default `__*`; matching no pool rule


def _renamed(tables: SnapshotTables, old: str, new: str, pool: str | None, excluded: bool) -> SnapshotTables:
    parts, reps = tables.partitions.copy(), tables.replicas.copy()
    mine = parts["topic"] == old
    parts.loc[mine, "topic"] = new
    parts.loc[mine, "topic_pool"] = pool
    parts.loc[mine, "excluded"] = excluded
    reps.loc[reps["topic"] == old, "topic"] = new
    return SnapshotTables(tables.brokers, reps, parts, tables.warnings)


def _cluster(tmp_path: Path, alive: bool = True, in_pool: bool = True) -> tuple[Path, SnapshotTables, int]:
    """The synthetic cluster with an internal topic and a topic of no pool, both on the broker to drain (the
    generator's dead broker, or the first of the last pool)."""
    tables, body = generate(dataclasses.replace(SPEC, dead_broker=not alive))
    brokers = tables.brokers
    pool = sorted(body["pools"])[-1]
    dead = brokers.loc[~brokers["alive"].astype(bool), "broker_id"]
    broker = int(dead.iloc[0]) if not alive else min(body["pools"][pool]["brokers"])
    pool = str(brokers.loc[brokers["broker_id"] == broker, "broker_pool"].iloc[0])
    parts = tables.partitions
    on_broker = parts[(parts["topic_pool"] == pool) & [broker in list(r) for r in parts["replicas"]]]
    internal_source, orphan_source = sorted(on_broker["topic"].unique())[:2]
    # Neither name matches a pool rule (the synthetic config has no default pool), as on a real cluster.
    tables = _renamed(tables, internal_source, INTERNAL, None, True)
    tables = _renamed(tables, orphan_source, ORPHAN, None, False)
    if not in_pool:
        body["pools"][pool]["brokers"] = [b for b in body["pools"][pool]["brokers"] if b != broker]
        tables.brokers.loc[tables.brokers["broker_id"] == broker, "broker_pool"] = None
    path = write_config(tmp_path / "config.yaml", {**body, "run_root": str(tmp_path / "runs"),
                                                   "budgets": {"max_replica_moves": 100_000}})
    return path, tables, broker


def _planned_run(spark: Any, config_path: Path, tables: SnapshotTables, name: str,
                 **params: Any) -> tuple[Any, RunFolder]:
    request = make_request(run_config(config_path), **params)
    run = RunFolder(run_config(config_path).run_dir(name))
    write_request(run, request)
    config = run_config(config_path, run)
    # Taken with the run's config, as the run takes it: a drained broker is in no pool any more.
    pool_of = config.broker_pool_of()
    brokers = tables.brokers.assign(broker_pool=[pool_of.get(int(b)) for b in tables.brokers["broker_id"]])
    write_snapshot(run, SnapshotTables(brokers, tables.replicas, tables.partitions), {"cluster": config.cluster.name})
    run_plan(spark, config, run)
    return config, run


def _after(run: RunFolder) -> pd.DataFrame:
    snapshot, _ = read_snapshot(run)
    return placement_after(snapshot.partitions, read_reassignment(run.stage_path(PLAN) / "plan.json"))


def _promises(run: RunFolder) -> pd.DataFrame:
    return pd.read_csv(run.stage_path(VALIDATION) / "promises.csv")


@pytest.mark.parametrize("alive", [True, False], ids=["live broker", "dead broker"])
def test_a_drain_empties_its_broker_of_every_topic(spark: Any, tmp_path: Path, alive: bool) -> None:
    config_path, tables, broker = _cluster(tmp_path, alive=alive)
    config, run = _planned_run(spark, config_path, tables, "drain", action="drain-brokers", brokers=[broker],
                               reason="disk failing")
    report = validate_plan(config, run)
    assert report["success"]
    after = _after(run)
    holding = after[[broker in list(r) for r in after["replicas"]]]
    assert holding.empty, holding[["topic", "partition", "replicas"]].head()
    moved = {e.topic for e in read_reassignment(run.stage_path(PLAN) / "plan.json")}
    assert {INTERNAL, ORPHAN} <= moved
    promises = _promises(run)
    assert list(promises["verdict"]) == [KEPT] and int(promises["broker_id"].iloc[0]) == broker
    # The exclusion still holds for the rest of the partition: only the drained broker's replica changed.
    snapshot, _ = read_snapshot(run)
    before = snapshot.partitions.set_index(["topic", "partition"])["replicas"]
    for e in read_reassignment(run.stage_path(PLAN) / "plan.json"):
        if e.topic == INTERNAL:
            assert set(before[(e.topic, e.partition)]) - set(e.replicas) == {broker}


def test_a_replica_no_pool_can_take_is_named_before_approval(spark: Any, tmp_path: Path) -> None:
    # The broker is in no pool: the topics of no pool have nowhere to go.
    config_path, tables, broker = _cluster(tmp_path, in_pool=False)
    config, run = _planned_run(spark, config_path, tables, "drain", action="drain-brokers", brokers=[broker],
                               reason="decommission")
    assert validate_plan(config, run)["success"]
    promises = _promises(run)
    cannot = promises[promises["verdict"] == CANNOT]
    orphaned = tables.partitions[(tables.partitions["topic"] == ORPHAN)
                                 & [broker in list(r) for r in tables.partitions["replicas"]]]
    assert set(cannot["topic"]) == {ORPHAN, INTERNAL} and len(cannot) > len(orphaned) > 0
    assert cannot["detail"].str.contains("no pool can take").all()
    # The approval body leads with it: the person deciding reads it before anything else.
    body = approval_body(config, run, PlanFacts.read(config, run), []).splitlines()
    assert body[2] == "**This plan cannot keep what the action promises; the run will not end verified:**"
    assert f"still has a replica on broker {broker}" in body[3] and "no pool can take" in body[3]


def test_a_demotion_takes_leadership_of_excluded_topics_too(spark: Any, tmp_path: Path) -> None:
    config_path, tables, _ = _cluster(tmp_path)
    parts = tables.partitions
    broker = int(parts.loc[parts["topic"] == INTERNAL, "leader"].iloc[0])
    config, run = _planned_run(spark, config_path, tables, "demote", action="demote-brokers", brokers=[broker])
    assert validate_plan(config, run)["success"]
    after = _after(run)
    assert not (after["leader"] == broker).any()
    assert set(_promises(run)["verdict"]) == {KEPT}


def test_no_replica_moves_onto_a_cordoned_broker(spark: Any, tmp_path: Path) -> None:
    # A new empty broker the nightly plan would fill; cordoned (the snapshot's manifest says so), it gets nothing.
    tables, body = generate(dataclasses.replace(SPEC, empty_brokers_per_pool=1))
    used = set(tables.replicas["broker_id"])
    empty = sorted(set(tables.brokers["broker_id"]) - used)
    config_path = write_config(tmp_path / "config.yaml", {**body, "run_root": str(tmp_path / "runs")})
    config = run_config(config_path)
    targets = {}
    for name, cordoned in (("open", []), ("cordoned", empty)):
        run = RunFolder(config.run_dir(name))
        write_snapshot(run, tables, {"cluster": config.cluster.name, "cordoned_brokers": cordoned})
        run_plan(spark, config, run)
        targets[name] = {b for e in read_reassignment(run.stage_path(PLAN) / "plan.json") for b in e.replicas}
    assert set(empty) <= targets["open"]
    assert not set(empty) & targets["cordoned"]


def test_a_drain_whose_replicas_have_one_place_to_go_validates_naming_the_broker_it_fills(spark: Any,
                                                                                           tmp_path: Path) -> None:
    # Two racks of two brokers, RF 2: the drained broker's replicas can only go to the other broker of its rack,
    # which ends outside every band; the band before (the drained broker still in it) cannot judge that.
    spec = dataclasses.replace(SPEC, n_brokers=4, n_racks=2, n_pools=1, n_partitions=120, replication_factor=2)
    tables, body = generate(spec)
    broker = min(body["pools"]["pool-0"]["brokers"])
    rack = tables.brokers.set_index("broker_id")["rack"]
    partner = next(int(b) for b in rack.index if b != broker and rack[b] == rack[broker])
    path = write_config(tmp_path / "config.yaml", {**body, "run_root": str(tmp_path / "runs"),
                                                   "budgets": {"max_replica_moves": 100_000}})
    config, run = _planned_run(spark, path, tables, "drain", action="drain-brokers", brokers=[broker],
                               reason="disk failing")
    assert validate_plan(config, run)["success"]
    after = _after(run)
    assert not any(broker in list(r) for r in after["replicas"])
    checks = pd.read_csv(run.stage_path(VALIDATION) / "broker_checks.csv")
    forced = checks[checks["forced_receiver"]]
    disk = forced[(forced["broker_id"] == partner) & (forced["resource"] == "disk")]
    assert len(disk) == 1 and not disk["inside_after"].iloc[0], forced
    assert list(_promises(run)["verdict"]) == [KEPT]


def test_a_drain_of_the_only_broker_of_its_rack_validates_with_one_rack_fewer(spark: Any, tmp_path: Path) -> None:
    # RF 3 over three racks, one of them a single broker: drained, its partitions can keep two racks only.
    spec = dataclasses.replace(SPEC, n_brokers=4, n_racks=3, n_pools=1, n_partitions=60, replication_factor=3)
    tables, body = generate(spec)
    rack = tables.brokers.set_index("broker_id")["rack"]
    broker = next(int(b) for b in rack.index if (rack == rack[b]).sum() == 1)
    path = write_config(tmp_path / "config.yaml", {**body, "run_root": str(tmp_path / "runs"),
                                                   "budgets": {"max_replica_moves": 100_000}})
    config, run = _planned_run(spark, path, tables, "drain", action="drain-brokers", brokers=[broker],
                               reason="rack b's last machine retires")
    assert validate_plan(config, run)["success"]
    assert not any(broker in list(r) for r in _after(run)["replicas"])
    checks = pd.read_csv(run.stage_path(VALIDATION) / "partition_checks.csv")
    fewer = checks[checks["racks_after"] < checks["racks_before"]]
    assert len(fewer) and (fewer["racks_after"] == 2).all() and fewer["racks_kept"].all(), fewer
    assert list(_promises(run)["verdict"]) == [KEPT]
