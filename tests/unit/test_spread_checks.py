"""The topic spread's checks around the planner (issue 52): the re-check of plan.json (cells, figures, the plan
stage's summary), the validation's expectation, the text and HTML tables, and verify's verdict after execution."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from kafka_rebalancer.approve.approval import write_decision
from kafka_rebalancer.config import RebalancerConfig
from kafka_rebalancer.errors import PromiseNotKept, ValidationFailed
from kafka_rebalancer.execute.executor import execute_pool
from kafka_rebalancer.model import schemas
from kafka_rebalancer.model.reassignment import Reassignment, read_reassignment
from kafka_rebalancer.model.topic_spread import TopicSpreadSettings
from kafka_rebalancer.plan.balance.spread_violations import (
    executed_spread,
    forced_receivers,
    planned_placement,
    skewed_cells,
    spread_cells,
    spread_figures,
)
from kafka_rebalancer.plan.balance.tables import spread_table
from kafka_rebalancer.plan.recheck import recheck_plan, replicas_after
from kafka_rebalancer.report.run_report import collect, render
from kafka_rebalancer.run_folder import PLAN, VALIDATION, VERIFY, read_json, read_table, write_table
from kafka_rebalancer.snapshot.build import SnapshotTables
from kafka_rebalancer.validate.checks import CheckTables, spread_rows
from kafka_rebalancer.validate.suite import _config_expectations, run_suite, validate_plan
from kafka_rebalancer.verify import verification
from tests.unit.test_recheck import CONFIG, current_bands, snapshot
from tests.unit.test_run_report import (
    SMALL,
    FakeCluster,
    fake_time,
    make_cluster,
    section,
    write_passed_validation,
    write_plan,
)

ON = {"topic_spread": {"enabled": True}}
OFF = {"topic_spread": {"enabled": False}}
# Topic t: 4 partitions, RF 2, on brokers 1-4 of pool a: 8 replicas, share 2, target 3; 4 leaders, share 1, target 2.
T = [("t", 0, [1, 2], 100), ("t", 1, [2, 3], 100), ("t", 2, [3, 4], 100), ("t", 3, [4, 1], 100),
     ("u0", 0, [5, 6], 10)]
# Broker 1 takes t-1 and t-2, leading both: 4 replicas (cap 3), 3 leaders (cap 2).
PILED = [Reassignment("t", 1, [1, 3]), Reassignment("t", 2, [1, 4])]
# Broker 2 leads t-0 too: 2 leaders, its cap.
FINE = [Reassignment("t", 0, [2, 1])]


def _placement(*rows: tuple[str, int, list[int], int]) -> pd.DataFrame:
    return pd.DataFrame([(t, p, "a", r, led) for t, p, r, led in rows],
                        columns=["topic", "partition", "broker_pool", "replicas", "leader"])


# -- the cells and the figures ----------------------------------------------------------------------------------
def test_cells_carry_target_and_cap_and_the_figures_name_the_worst() -> None:
    before = _placement(("t", 0, [1, 2], 1), ("t", 1, [2, 3], 2), ("t", 2, [3, 4], 3), ("t", 3, [4, 1], 4))
    after = planned_placement(before, PILED)
    assert after["leader"].tolist() == [1, 1, 1, 4]  # planned partitions led by their first replica
    cells = spread_cells(before, after, {"a": [1, 2, 3, 4]}, TopicSpreadSettings(enabled=True))
    one = cells[cells["broker_id"] == 1].set_index("kind")
    assert one.loc["replicas", ["held_before", "held", "target", "cap"]].tolist() == [2, 4, 3, 3]
    assert one.loc["leaders", ["held_before", "held", "target", "cap"]].tolist() == [1, 3, 2, 2]
    figures = spread_figures(cells, ["a"])["a"]
    assert figures["replicas"] == {
        "over_target_before": 0, "over_target_after": 1, "over_cap_after": 1,
        "worst_before": {"topic": "t", "broker_id": 1, "held": 2, "target": 3, "cap": 3},
        "worst_after": {"topic": "t", "broker_id": 1, "held": 4, "target": 3, "cap": 3}}
    assert figures["leaders"]["over_cap_after"] == 1 and figures["leaders"]["worst_after"]["held"] == 3
    text = spread_table(spread_figures(cells, ["a"]))
    assert "a     replicas  0 -> 1" in text and "t on broker 1: 4 (target 3)" in text
    assert spread_cells(before, after, {"a": [1, 2, 3, 4]}, TopicSpreadSettings(enabled=False)).empty  # off


def test_the_plan_stage_table_holds_the_cells_over_target_before_or_after(tmp_path: Path) -> None:
    before = _placement(("t", 0, [1, 2], 1), ("t", 1, [2, 3], 2), ("t", 2, [3, 4], 3), ("t", 3, [4, 1], 4))
    cells = spread_cells(before, planned_placement(before, PILED), {"a": [1, 2, 3, 4]},
                         TopicSpreadSettings(enabled=True))
    skewed = skewed_cells(cells)
    assert set(zip(skewed["broker_id"], skewed["kind"], strict=True)) == {(1, "replicas"), (1, "leaders")}
    write_table(tmp_path, schemas.TOPIC_SPREAD, skewed)
    assert read_table(tmp_path, schemas.TOPIC_SPREAD)["held"].tolist() == skewed["held"].tolist()


def test_an_excluded_topic_has_no_cells() -> None:
    before = _placement(("logs.x", 0, [1, 2], 1), ("t", 0, [1, 2], 1))
    cells = spread_cells(before, before, {"a": [1, 2]}, TopicSpreadSettings(enabled=True, exclude_topics=["logs.*"]))
    assert set(cells["topic"]) == {"t"}


# -- the re-check and the validation's expectation ---------------------------------------------------------------
@pytest.mark.parametrize(("plan", "passes"), [(PILED, False), (FINE, True)])
def test_a_plan_piling_a_topic_on_one_broker_fails_validation(config_factory: Callable[..., Any],
                                                              plan: list[Reassignment], passes: bool) -> None:
    config = config_factory({**CONFIG, **ON})
    tables = snapshot(config, T, dead=set())
    recheck = recheck_plan(config, tables, plan, current_bands(config, tables))
    rows = spread_rows(recheck.spread, set())
    assert len(rows) and bool(rows["within_cap"].all()) is passes  # the cells the plan changes are checked either way
    empty = pd.DataFrame()
    success, failures, _ = run_suite(CheckTables(empty, empty, empty, topic_spread=rows), config)
    assert success is passes
    if not passes:
        (failure,) = failures
        assert failure["table"] == "topic_spread" and "ceil(share) + 1" in failure["description"]
        assert {(r["broker_id"], r["kind"], r["held"], r["cap"]) for r in failure["rows"]} == {
            (1, "replicas", 4, 3), (1, "leaders", 3, 2)}


def test_with_the_spread_off_there_is_no_expectation_and_no_cells(config_factory: Callable[..., Any]) -> None:
    """Off (`enabled: false`), the suite has no spread expectation at all (not one passing on an empty table): the
    validation report counts the same expectations as before the spread existed."""
    config = config_factory({**CONFIG, **OFF})
    assert not any(e[0] == "topic_spread" for e in _config_expectations(config))
    tables = snapshot(config, T, dead=set())
    recheck = recheck_plan(config, tables, PILED, current_bands(config, tables))
    assert recheck.spread.empty and spread_rows(recheck.spread, set()).empty
    broken = pd.DataFrame([{"topic": "t", "broker_id": 1, "kind": "replicas", "held_before": 2, "held": 4, "cap": 3,
                            "within_cap": False}])
    empty = pd.DataFrame()
    assert run_suite(CheckTables(empty, empty, empty, topic_spread=broken), config)[0]


# -- a run: validation, the report, verify ----------------------------------------------------------------------
def _spread_off(config: RebalancerConfig) -> RebalancerConfig:
    return config.model_copy(update={"topic_spread": TopicSpreadSettings(enabled=False)})


def _pile_moves(tables: SnapshotTables) -> pd.DataFrame:
    """Every partition of pool-0's first topic gets its last replica moved to one broker of the pool."""
    parts = tables.partitions[tables.partitions["topic_pool"] == "pool-0"]
    topic = sorted(parts["topic"])[0]
    target = int(tables.brokers.loc[tables.brokers["broker_pool"] == "pool-0", "broker_id"].min())
    parts = parts[(parts["topic"] == topic) & ~parts["replicas"].map(lambda r: target in list(r))]
    return pd.DataFrame({
        "broker_pool": "pool-0", "seq": range(len(parts)), "action": "replica", "topic": topic,
        "partition": parts["partition"].to_numpy(), "source_broker": [int(r[-1]) for r in parts["replicas"]],
        "target_broker": target, "size_bytes": parts["size_bytes"].to_numpy(), "resource": "disk",
        "forced": False})[schemas.MOVES.names]


def test_validation_stops_a_piling_plan_and_the_report_shows_the_spread(tmp_path: Path) -> None:
    config, tables, run = make_cluster(tmp_path, SMALL, "scheduled__2026-11-23T02_00_00_00_00")
    write_plan(run, config, tables, _pile_moves(tables))
    summary = read_json(run.stage_path(PLAN) / "summary.json")
    assert summary["totals"]["topic_spread_over_cap"] >= 1
    assert summary["pools"]["pool-0"]["topic_spread"]["replicas"]["over_cap_after"] == 1
    with pytest.raises(ValidationFailed, match="topic_spread"):
        validate_plan(config, run)
    report = read_json(run.stage_path(VALIDATION) / "report.json")
    # (Piling 20 replicas on one broker breaks its bands and racks too; the spread's row names the pile.)
    (failure,) = [f for f in report["failures"] if f["table"] == "topic_spread"]
    assert [(r["kind"], r["held"], r["cap"]) for r in failure["rows"]] == [("replicas", 20, 9)]
    assert (run.stage_path(VALIDATION) / "topic_spread_checks.csv").exists()
    page = render(collect(run))
    spread = section(page, "spread")
    assert "The plan" in spread and "over cap after" in spread and "<td>pool-0</td><td>replicas</td>" in spread


def test_with_the_spread_off_the_summary_counts_zero_and_the_report_has_no_section(tmp_path: Path) -> None:
    config, tables, run = make_cluster(tmp_path, SMALL, "scheduled__2026-11-23T02_00_00_00_00")
    write_plan(run, _spread_off(config), tables, _pile_moves(tables))
    summary = read_json(run.stage_path(PLAN) / "summary.json")
    assert summary["totals"]["topic_spread_over_cap"] == 0
    assert not any("topic_spread" in facts for facts in summary["pools"].values())
    assert 'id="section-spread"' not in render(collect(run))


def _executed(tables: SnapshotTables, plan: list[Reassignment], leader_moved_to: int | None = None
              ) -> SnapshotTables:
    """The cluster after the plan: planned partitions on their replicas, led by the first; `leader_moved_to`: Kafka
    then moved the leadership of every partition it holds to that broker on its own."""
    planned = {(r.topic, r.partition): r.replicas for r in plan}
    parts = tables.partitions.copy()
    parts["replicas"] = [planned.get((t, int(p)), list(r)) for t, p, r in zip(
        parts["topic"], parts["partition"], parts["replicas"], strict=True)]
    parts["leader"] = [r[0] if (t, int(p)) in planned else led for t, p, r, led in zip(
        parts["topic"], parts["partition"], parts["replicas"], parts["leader"], strict=True)]
    if leader_moved_to is not None:
        parts["leader"] = [leader_moved_to if leader_moved_to in r else led for r, led in zip(
            parts["replicas"], parts["leader"], strict=True)]
    return SnapshotTables(tables.brokers, replicas_after(tables, plan), parts)


@pytest.mark.parametrize("verified", [True, False])
def test_verify_fails_when_the_plan_left_a_broker_over_a_topics_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   verified: bool) -> None:
    """A plan that slipped past validation (validation skipped here) piles a topic on a broker: verify records it
    and the run is not verified. A plan moving nothing, with Kafka moving leaders on its own, stays verified."""
    config, tables, run = make_cluster(tmp_path, SMALL, "scheduled__2026-11-23T02_00_00_00_00")
    moves = _pile_moves(tables).iloc[0:0] if verified else _pile_moves(tables)
    digest = write_plan(run, config, tables, moves)
    write_passed_validation(run, digest)
    write_decision(run, digest, "approved", "ann", "approved by ann")
    for pool in sorted(config.pools):
        execute_pool(config, FakeCluster(tables.partitions), run, pool, **fake_time())
    plan = read_reassignment(run.stage_path(PLAN) / "plan.json")
    busy = int(tables.brokers["broker_id"].min())
    after = _executed(tables, plan, leader_moved_to=busy if verified else None)
    monkeypatch.setattr(verification, "capture", lambda *_: (after, {"cluster": config.cluster.name}))
    if verified:
        summary = verification.verify_run(config, None, run)  # type: ignore[arg-type]
        assert summary["topic_spread"]["kept"] and summary["topic_spread"]["over_cap_by_plan"] == 0
        # Kafka's own elections piled leaders on one broker: not the plan's doing, not counted (the partitions it
        # did not plan keep the leaders of the run's snapshot).
        assert summary["topic_spread_violations"] == 0
    else:
        with pytest.raises(PromiseNotKept, match="topic spread cap"):
            verification.verify_run(config, None, run)  # type: ignore[arg-type]
        summary = read_json(run.stage_path(VERIFY) / "summary.json")
        assert not summary["topic_spread"]["kept"] and summary["topic_spread"]["over_cap_by_plan"] >= 1
    assert "topic spread: per topic and broker" in (run.stage_path(VERIFY) / "report.txt").read_text()
    data = collect(run)
    assert data.header.status == ("verified" if verified else "topic spread not kept")
    assert ("After execution" in section(render(data), "spread"))


def test_a_plan_made_under_the_old_default_is_verified_without_the_spread(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The default turned on without changing the fingerprint: a plan made with the spread off (its summary has no
    spread figures) and approved then still executes with the config left as it was, and verify does not judge it
    by caps it was not planned to (its pile is no spread failure)."""
    config, tables, run = make_cluster(tmp_path, SMALL, "scheduled__2026-11-23T02_00_00_00_00")
    # The old code planned this config file with the spread off and fingerprinted it without the section, as now.
    as_before = config.fingerprint()
    with monkeypatch.context() as old_code:
        old_code.setattr(RebalancerConfig, "fingerprint", lambda _self: as_before)
        digest = write_plan(run, _spread_off(config), tables, _pile_moves(tables))
    pools = read_json(run.stage_path(PLAN) / "summary.json")["pools"]
    assert not any("topic_spread" in facts for facts in pools.values())
    write_passed_validation(run, digest)
    write_decision(run, digest, "approved", "ann", "approved by ann")
    assert config.topic_spread.enabled  # the config as it is now: the default
    for pool in sorted(config.pools):
        execute_pool(config, FakeCluster(tables.partitions), run, pool, **fake_time())
    after = _executed(tables, read_reassignment(run.stage_path(PLAN) / "plan.json"))
    monkeypatch.setattr(verification, "capture", lambda *_: (after, {"cluster": config.cluster.name}))
    summary = verification.verify_run(config, None, run)  # type: ignore[arg-type]
    assert "topic_spread" not in summary and summary["topic_spread_violations"] == 0


def test_executed_spread_judges_leaders_on_the_planned_first_replica(config_factory: Callable[..., Any]) -> None:
    """After execution broker 1 holds t's leaders it was given by the plan: by the plan; broker 2 took leaders by
    Kafka's own election (not in the plan): not counted against the plan (its preferred leaders are unchanged)."""
    config = config_factory({**CONFIG, **ON})
    tables = snapshot(config, T, dead=set())
    after = _executed(tables, PILED)
    cells = executed_spread(config, tables, after, PILED)
    over = cells[cells["held"] > cells["cap"]]
    assert set(zip(over["broker_id"], over["kind"], over["by_plan"], strict=True)) == {
        (1, "replicas", True), (1, "leaders", True)}
    elected = _executed(tables, [], leader_moved_to=2)
    cells = executed_spread(config, tables, elected, [])
    assert not (cells["held"] > cells["cap"]).any()  # unplanned partitions keep their leaders as planned


def test_a_replica_that_must_leave_a_dead_broker_may_land_above_a_cap(config_factory: Callable[..., Any]) -> None:
    """Broker 4 is dead: its replica of t-4 must move, and the planner puts it above a cap where no broker under it
    keeps the placement rules. Margin 0: 10 replicas over brokers 1-3, target 4; broker 1 holds 4 and takes a fifth.
    The same move of a replica that need not leave breaks the cap."""
    config = config_factory({**CONFIG, "topic_spread": {"enabled": True, "margin": 0}})
    parts = [("t", 0, [1, 2], 100), ("t", 1, [1, 3], 100), ("t", 2, [1, 2], 100), ("t", 3, [1, 3], 100),
             ("t", 4, [4, 2], 100), ("u0", 0, [5, 6], 10)]
    tables = snapshot(config, parts, dead={4})
    for plan, forced in (([Reassignment("t", 4, [2, 1])], True), ([Reassignment("t", 4, [4, 1])], False)):
        if not forced:
            tables = snapshot(config, [*parts[:4], ("t", 4, [4, 2], 100), parts[5]], dead=set())
        recheck = recheck_plan(config, tables, plan, current_bands(config, tables))
        receivers = forced_receivers(config, tables, plan)
        rows = spread_rows(recheck.spread, receivers)
        over = rows[rows["held"] > rows["cap"]]
        assert over[["broker_id", "kind"]].values.tolist() == [[1, "replicas"]]
        assert bool(over["within_cap"].all()) is forced and bool(over["forced_receiver"].all()) is forced
        cells = executed_spread(config, tables, _executed(tables, plan), plan)
        assert bool(cells.loc[cells["held"] > cells["cap"], "forced"].all()) is forced


def test_leaderships_a_demotion_takes_off_its_broker_may_land_above_a_cap(config_factory: Callable[..., Any]) -> None:
    """Every partition of t is on brokers 1 and 2, led by 1: demoting broker 1 leaves broker 2 the only one to lead
    them, above its leader cap (as the real cluster's demotion test found). Those leaderships are forced; the same
    reordering without the demotion breaks the cap."""
    config = config_factory(CONFIG)
    parts = [*(("t", p, [1, 2], 100) for p in range(8)), ("u0", 0, [5, 6], 10)]
    tables = snapshot(config, parts, dead=set())
    plan = [Reassignment("t", p, [2, 1]) for p in range(8)]
    recheck = recheck_plan(config, tables, plan, current_bands(config, tables))
    for demoted, forced in (({1}, True), (set(), False)):
        rows = spread_rows(recheck.spread, forced_receivers(config, tables, plan, demoted=demoted))
        over = rows[rows["held"] > rows["cap"]]
        assert over[["broker_id", "kind"]].values.tolist() == [[2, "leaders"]]
        assert bool(over["within_cap"].all()) is forced
        cells = executed_spread(config, tables, _executed(tables, plan), plan, demoted=demoted)
        assert bool(cells.loc[cells["held"] > cells["cap"], "forced"].all()) is forced
