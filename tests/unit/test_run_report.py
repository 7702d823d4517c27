"""The visual report of one run (report/index.html) for runs that stopped at each stage, and for a large plan."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from kafka_rebalancer.approve.approval import write_decision
from kafka_rebalancer.config import RebalancerConfig, load_config
from kafka_rebalancer.errors import ExecutionError, ValidationFailed
from kafka_rebalancer.execute.cancel import cancel_pool
from kafka_rebalancer.execute.executor import dry_run_pool, execute_pool
from kafka_rebalancer.kafka_admin import PartitionInfo
from kafka_rebalancer.model import schemas
from kafka_rebalancer.model.band_status import broker_load_frame
from kafka_rebalancer.model.reassignment import dumps, parse_reassignment, plan_hash, reassignment_document
from kafka_rebalancer.operations.request import PlanningScope, make_request, write_request
from kafka_rebalancer.plan.balance.pool_bands import bands_frame
from kafka_rebalancer.plan.changes import load_after, partition_changes
from kafka_rebalancer.plan.recheck import band_rows, claim_rows, recheck_plan
from kafka_rebalancer.plan.summary import build_summary, planner_claim
from kafka_rebalancer.report.run_report import MOVES_SHOWN, collect, render, write_report
from kafka_rebalancer.run_folder import (
    PLAN,
    VALIDATION,
    VERIFY,
    RunFolder,
    read_json,
    write_json,
    write_record,
    write_table,
)
from kafka_rebalancer.snapshot import write_snapshot
from kafka_rebalancer.snapshot.build import SnapshotTables
from kafka_rebalancer.snapshot.synthetic import SyntheticSpec, generate
from kafka_rebalancer.validate.suite import validate_plan
from tests.helpers import write_config

SMALL = SyntheticSpec(n_brokers=10, n_racks=2, n_pools=2, n_partitions=200, replication_factor=2,
                      partitions_per_topic=20, under_replicated_fraction=0.0, seed=7)
LATER_SECTIONS = ("usage", "moves", "bounds", "notes", "skipped", "validation", "execution", "verification")
Key = tuple[str, int]


# -- building run folders as the stages leave them -------------------------------------------------------------

def make_cluster(root: Path, spec: SyntheticSpec, run_id: str, snapshot: bool = True
                 ) -> tuple[RebalancerConfig, SnapshotTables, RunFolder]:
    tables, body = generate(spec)
    config = load_config(write_config(root / "config.yaml", {**body, "run_root": str(root / "runs")}))
    run = RunFolder(config.run_root / config.cluster.name / run_id)
    if snapshot:
        write_snapshot(run, tables, {"cluster": config.cluster.name})
    else:
        run.path.mkdir(parents=True)
    return config, tables, run


def replica_moves(tables: SnapshotTables, count: int, seed: int = 1) -> pd.DataFrame:
    """`count` replica moves (schema MOVES), each of its own partition: the last replica to another broker of the
    partition's pool; plus one leadership transfer to the second replica of another partition."""
    rng = np.random.default_rng(seed)
    parts = tables.partitions.iloc[rng.permutation(len(tables.partitions))[:count + 1]].reset_index(drop=True)
    replicas = np.array(parts["replicas"].tolist())
    brokers = tables.brokers
    targets = np.zeros(count, dtype=int)
    for pool, members in brokers.groupby("broker_pool")["broker_id"]:
        rows = np.flatnonzero(parts["topic_pool"].to_numpy()[:count] == pool)
        ids = members.to_numpy()
        while len(rows):  # draw again where the drawn broker already holds the partition
            targets[rows] = ids[rng.integers(len(ids), size=len(rows))]
            rows = rows[(replicas[rows] == targets[rows, None]).any(axis=1)]
    moves = pd.DataFrame({
        "broker_pool": parts["topic_pool"][:count], "seq": np.arange(count, dtype=np.int32), "action": "replica",
        "topic": parts["topic"][:count], "partition": parts["partition"][:count],
        "source_broker": replicas[:count, -1], "target_broker": targets, "size_bytes": parts["size_bytes"][:count],
        "resource": "disk", "forced": False})
    last = parts.iloc[count]
    leadership = pd.DataFrame([{"broker_pool": last["topic_pool"], "seq": count, "action": "leadership",
                                "topic": last["topic"], "partition": last["partition"],
                                "source_broker": last["replicas"][0], "target_broker": last["replicas"][1],
                                "size_bytes": 0, "resource": "leader_count", "forced": False}])
    return pd.concat([moves, leadership], ignore_index=True)[schemas.MOVES.names]


def empty(schema: schemas.TableSchema) -> pd.DataFrame:
    return pd.DataFrame({name: pd.Series(dtype=object) for name in schema.names})


def write_plan(run: RunFolder, config: RebalancerConfig, tables: SnapshotTables, moves: pd.DataFrame,
               skipped: pd.DataFrame | None = None, hot: pd.DataFrame | None = None,
               notes: pd.DataFrame | None = None, infeasible: pd.DataFrame | None = None,
               bands: pd.DataFrame | None = None) -> str:
    """The plan stage for these moves, with the plan job's own functions (without Spark); returns the plan hash.
    `bands`: the plan's (default: the current placement's, right where no replica must leave its broker)."""
    resources = config.resource_list()
    load = broker_load_frame(tables.brokers, tables.replicas, resources)
    bands = bands_frame(load, config) if bands is None else bands
    changes = partition_changes(tables.partitions, moves)
    touched = tables.partitions.merge(changes[["topic", "partition"]], on=["topic", "partition"])
    after = load_after(load, changes, touched, resources)
    text = dumps(reassignment_document(changes))
    snapshot_hash = read_json(run.stage_path("snapshot") / "manifest.json")["content_hash"] \
        if run.has("snapshot") else "no-snapshot"
    digest = plan_hash(text, snapshot_hash, config.fingerprint())
    skipped = empty(schemas.SKIPPED) if skipped is None else skipped
    hot = empty(schemas.HOT_PARTITIONS) if hot is None else hot
    notes = empty(schemas.PLANNER_NOTES) if notes is None else notes
    infeasible = empty(schemas.INFEASIBLE) if infeasible is None else infeasible
    moved_bytes = changes.groupby("broker_pool")["size_bytes"].sum()
    recheck = recheck_plan(config, tables, parse_reassignment(text, "plan.json"), bands)
    claim = planner_claim(after, bands, {str(p): 0.8 * float(b) for p, b in moved_bytes.items()},
                          claim_rows(after, recheck, bands), band_rows(recheck, bands), "the plan's moves replayed")
    summary = build_summary(
        config=config, manifest={"content_hash": snapshot_hash}, plan_hash=digest, bands=bands, recheck=recheck,
        claim=claim, skipped=skipped, notes=notes, hot=hot,
        infeasible=infeasible, statuses={"move": len(changes)}, moves_dropped_by_budget=0,
        scope=PlanningScope())
    with run.stage(PLAN) as out:
        for schema, frame in ((schemas.BROKER_LOAD, load), (schemas.BROKER_LOAD_AFTER, after),
                              (schemas.BANDS, bands), (schemas.MOVES, moves), (schemas.PARTITION_CHANGES, changes),
                              (schemas.SKIPPED, skipped), (schemas.HOT_PARTITIONS, hot),
                              (schemas.PLANNER_NOTES, notes), (schemas.INFEASIBLE, infeasible)):
            write_table(out, schema, frame)
        (out / "plan.json").write_text(text)
        (out / "rollback.json").write_text(dumps(reassignment_document(changes, "old_replicas")))
        write_json(out / "summary.json", summary)
    return digest


def write_passed_validation(run: RunFolder, digest: str) -> None:
    """validation/report.json as a passed validation leaves it (the suite itself runs in the failed case)."""
    with run.stage(VALIDATION) as out:
        write_json(out / "report.json", {"success": True, "plan_hash": digest, "partitions_checked": 1,
                                         "broker_resource_pairs_checked": 1, "expectations": 20, "failures": []})


class FakeCluster:
    """The admin calls the executor makes, on the snapshot's assignment held in memory: a reassignment completes
    at the next listing, or never when `stuck`."""

    def __init__(self, partitions: pd.DataFrame, stuck: bool = False) -> None:
        self.replicas = {(t, int(p)): [int(b) for b in r]
                         for t, p, r in zip(partitions["topic"], partitions["partition"], partitions["replicas"],
                                            strict=True)}
        self.leader = {k: r[0] for k, r in self.replicas.items()}
        self.ongoing: dict[Key, list[int]] = {}
        self.stuck = stuck

    def live_broker_ids(self) -> frozenset[int]:
        return frozenset(b for r in self.replicas.values() for b in r)  # every broker holding a replica runs

    def describe_partitions(self, topics: Iterable[str] | None = None) -> list[PartitionInfo]:
        wanted = None if topics is None else set(topics)
        return [PartitionInfo(t, p, list(r), list(r), self.leader[(t, p)]) for (t, p), r in self.replicas.items()
                if wanted is None or t in wanted]

    def list_reassignments(self) -> dict[Key, dict[str, list[int]]]:
        if not self.stuck:
            for key in list(self.ongoing):
                self.replicas[key] = self.ongoing.pop(key)
        return {k: {"replicas": v, "adding_replicas": [], "removing_replicas": []} for k, v in self.ongoing.items()}

    def alter_reassignments(self, targets: Mapping[Key, list[int] | None]) -> dict[Key, str]:
        for key, target in targets.items():
            if target is None:
                self.ongoing.pop(key, None)
            else:
                self.ongoing[key] = list(target)
        return {}

    def elect_preferred_leaders(self, partitions: Iterable[Key]) -> dict[Key, str | None]:
        for key in partitions:
            self.leader[key] = self.replicas[key][0]
        return {}

    def alter_throttles(self, broker_rate: Mapping[int, int | None],
                        topic_replicas: Mapping[str, tuple[str, str] | None]) -> None:
        pass

    def throttle_configs(self, broker_ids: Iterable[int], topics: Iterable[str]) -> dict[str, dict[str, str]]:
        return {**{f"broker {b}": {} for b in broker_ids}, **{f"topic {t}": {} for t in topics}}


def fake_time() -> dict[str, Callable[..., Any]]:
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds
    return {"sleep": sleep, "clock": lambda: now[0]}


# -- reading the page ------------------------------------------------------------------------------------------

def section(page: str, name: str) -> str:
    match = re.search(rf'<section id="section-{name}">(.*?)</section>', page, re.S)
    assert match, f"no section {name}"
    return match.group(1)


def assert_self_contained(page: str) -> None:
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert not re.search(r"<script[^>]*\bsrc=", page)  # every script inline: nothing fetched
    assert not re.search(r"<link[^>]*\bhref=", page)
    assert page.count("plotly.js v") == 1  # the library once, however many charts
    assert page.count('id="moves"') <= 1


def report_of(run: RunFolder) -> str:
    path = write_report(run)
    assert path == run.path / "report" / "index.html"
    assert sorted(p.name for p in path.parent.iterdir()) == ["files.json", "index.html"]  # the page, its record
    assert not [p for p in run.path.iterdir() if p.name.startswith(".report")]  # no staging folder left
    page = path.read_text()
    assert_self_contained(page)
    return page


# -- one run per stage it stopped at ----------------------------------------------------------------------------

def test_a_snapshot_only_run_says_every_later_stage_did_not_run(tmp_path: Path) -> None:
    _, tables, run = make_cluster(tmp_path, SMALL, "scheduled__2026-11-23T02_00_00_00_00")
    page = report_of(run)
    assert "scheduled" in page and "nightly" in page and "snapshot only" in page
    assert f"<th>brokers rows</th><td>{len(tables.brokers)}</td>" in section(page, "snapshot")
    for name in LATER_SECTIONS:
        assert 'class="not-run">not run' in section(page, name), name
    assert 'id="moves"' not in page


def test_a_plan_that_moves_nothing_says_so(tmp_path: Path) -> None:
    config, tables, run = make_cluster(tmp_path, SMALL, "scheduled__2026-11-23T02_00_00_00_00")
    write_passed_validation(run, write_plan(run, config, tables, replica_moves(tables, 0).iloc[0:0]))
    page = report_of(run)
    assert 'data-moves="0"' in section(page, "moves") and "The plan moves nothing." in section(page, "moves")
    assert 'id="moves"' not in page
    assert section(page, "usage").count('class="chart"') == len(config.pools) * len(config.resources)
    assert "The planner left no notes" in section(page, "notes")


def test_a_plan_that_failed_validation_shows_the_failed_expectation_and_its_rows(tmp_path: Path) -> None:
    config, tables, run = make_cluster(tmp_path, SMALL, "scheduled__2026-11-23T02_00_00_00_00")
    moves = replica_moves(tables, 30)
    # One replica onto a broker of the other pool: "every replica on a broker of the topic's pool" must fail.
    first = moves.iloc[0]
    foreign = tables.brokers.loc[tables.brokers["broker_pool"] != first["broker_pool"], "broker_id"].iloc[0]
    moves.loc[0, "target_broker"] = foreign
    write_plan(run, config, tables, moves)
    with pytest.raises(ValidationFailed):
        validate_plan(config, run)
    data = collect(run)
    report = read_json(run.stage_path(VALIDATION) / "report.json")
    assert data.validation is not None and not data.validation.success
    assert [f.description for f in data.validation.failures] == [f["description"] for f in report["failures"]]
    assert len(data.validation.results) == report["expectations"]

    page = report_of(run)
    validation = section(page, "validation")
    assert "FAILED" in validation and "every replica on a broker of the topic&#x27;s pool" in validation
    assert f"<td>{first['topic']}</td><td>{first['partition']}</td>" in validation  # the row that broke it
    assert 'class="not-run">not run' in section(page, "execution")
    assert "validation failed" in page  # the run's status in the header
    plan = read_json(run.stage_path(PLAN) / "plan.json")
    assert data.plan is not None and data.plan.moves_total == len(plan["partitions"])
    assert page.count("<tr>", page.index('id="moves"')) >= len(plan["partitions"])


def test_a_dry_run_reports_the_verdicts_and_no_execution(tmp_path: Path) -> None:
    config, tables, run = make_cluster(tmp_path, SMALL, "cli__2026-11-23T10_00_00_00_00")
    digest = write_plan(run, config, tables, replica_moves(tables, 12))
    write_passed_validation(run, digest)
    write_decision(run, digest, "dry-run", None, "dry run requested")
    cluster = FakeCluster(tables.partitions)
    for broker_pool in sorted(config.pools):
        dry_run_pool(config, cluster, run, broker_pool)

    data = collect(run)
    assert data.header.mode == "dry-run" and data.header.trigger.startswith("cli")
    assert data.executions is not None
    for pool in data.executions:
        dry_run = read_json(run.stage_path(f"execute/{pool.broker_pool}") / "dry_run.json")
        assert pool.state == "dry run" and sum(pool.dry_run.values()) == len(dry_run["moves"])
    page = report_of(run)
    assert "Dry run (dry_run.json)" in section(page, "execution")
    assert 'class="not-run">not run' in section(page, "verification")


def test_show_and_the_approval_body_print_the_summarys_rechecked_figures(tmp_path: Path) -> None:
    import io

    from rich.console import Console

    from kafka_rebalancer.approve.approval import PlanFacts, approval_body
    from kafka_rebalancer.cli.tables import show_run

    config, tables, run = make_cluster(tmp_path, SMALL, "scheduled__2026-11-23T02_00_00_00_00")
    write_plan(run, config, tables, replica_moves(tables, 6))
    summary = read_json(run.stage_path(PLAN) / "summary.json")
    out = io.StringIO()
    show_run(Console(file=out, width=400), run)
    text = out.getvalue()
    for pool, facts in summary["pools"].items():
        assert (f"pool {pool}: {facts['replica_moves']} replica moves, "
                f"{facts['preferred_leader_changes']} preferred-leader changes "
                f"({facts['leadership_only_changes']} leadership-only)" in text)
        assert "(forced 0 B, moved/LB -; balance " in text
    body = approval_body(config, run, PlanFacts.read(config, run), [])
    for pool, facts in summary["pools"].items():
        assert f"| {pool} | {facts['replica_moves']} | {facts['preferred_leader_changes']} | " \
               f"{facts['leadership_only_changes']} |" in body
    # The topic spread (on by default): show prints its table, the approval body a line per pool.
    spread = {pool: facts["topic_spread"] for pool, facts in summary["pools"].items()}
    assert spread and "topic spread: per topic and broker" in text
    for pool, kinds in spread.items():
        replicas = kinds["replicas"]
        assert (f"- {pool}: replicas: {replicas['over_target_before']} -> {replicas['over_target_after']} over "
                f"target, {replicas['over_cap_after']} over cap; leaders: ") in body



def test_the_planners_notes_and_infeasibility_proofs_are_listed_in_the_report_and_by_show(tmp_path: Path) -> None:
    import io

    from rich.console import Console

    from kafka_rebalancer.cli.tables import NOTES_SHOWN, show_run

    config, tables, run = make_cluster(tmp_path, SMALL, "scheduled__2026-11-23T02_00_00_00_00")
    pool = str(tables.brokers["broker_pool"].dropna().min())
    brokers = sorted(int(b) for b in tables.brokers.loc[tables.brokers["broker_pool"] == pool, "broker_id"])
    texts = [f"usage 0.{k} outside band [0.4, 0.6] after the plan: move budget reached" for k in range(12)]
    notes = pd.DataFrame({"broker_pool": pool, "resource": "disk", "broker_id": brokers[0], "note": texts})
    notes.loc[0, ["resource", "note"]] = ["hard", "t-1: its replica on a dead broker could not be placed"]
    infeasible = pd.DataFrame([{"broker_pool": pool, "resource": "disk", "brokers": brokers[:2], "count": 1,
                                "proof": "the pool: one partition is larger than the band is wide"}])
    write_plan(run, config, tables, replica_moves(tables, 6), notes=notes, infeasible=infeasible)

    page = report_of(run)
    notes_section = section(page, "notes")
    assert f"<h3>Pool {pool}</h3>" in notes_section
    assert all(html.escape(note) in notes_section for note in notes["note"])
    assert "the pool: one partition is larger than the band is wide" in notes_section
    assert f"{brokers[0]}, {brokers[1]}" in notes_section

    out = io.StringIO()
    show_run(Console(file=out, width=400), run)
    text = out.getvalue()
    assert f"  note (hard broker {brokers[0]}): t-1: its replica on a dead broker could not be placed" in text
    assert sum(f"  note (disk broker {brokers[0]}): " in line for line in text.splitlines()) == NOTES_SHOWN - 1
    assert f"  ... {len(notes) - NOTES_SHOWN} more notes of pool {pool} in plan/summary.json" in text
    assert (f"  disk: at least 1 of brokers {brokers[:2]} stay outside the band whatever moves: the pool: one "
            "partition is larger than the band is wide") in text


@pytest.mark.parametrize(("figure", "moves", "caption"), [
    # Six random moves leave brokers out of band that were out before short of the target band.
    ("fixed_outside_target_band", 6, "{n} of those out of band before end outside the target band (brokers {listed})."),
    # Twenty take brokers that were inside the band beyond their target band.
    ("taken_outside_target_band", 20, "{n} broker(s) inside the band before are taken out of the target band, or "
                                      "further from it (brokers {listed}; the planner notes give the reason)."),
])
def test_the_usage_section_names_the_brokers_outside_the_target_band(tmp_path: Path, figure: str, moves: int,
                                                                     caption: str) -> None:
    config, tables, run = make_cluster(tmp_path, SMALL, "scheduled__2026-11-23T02_00_00_00_00")
    write_plan(run, config, tables, replica_moves(tables, moves))
    summary = read_json(run.stage_path(PLAN) / "summary.json")
    page = report_of(run)
    named = [(name, info[figure]) for pool in summary["pools"].values()
             for name, info in pool["resources"].items() if info[figure]]
    assert named
    assert summary["totals"][figure] == sum(len(ids) for _, ids in named)
    for name, ids in named:
        listed = ", ".join(str(b) for b in ids[:10]) + (f" and {len(ids) - 10} more" if len(ids) > 10 else "")
        assert caption.format(n=len(ids), listed=listed) in page, name


def test_an_executed_run_shows_the_timeline_result_and_verification(tmp_path: Path) -> None:
    config, tables, run = make_cluster(tmp_path, SMALL, "manual__2026-11-23T09_21_40_00_00")
    write_request(run, make_request(config, action="rebalance-pool", broker_pool="pool-1", requested_by="ann",
                                    reason="disk skew"))
    skipped = pd.DataFrame([{"topic": "pool-0.topic-0009", "partition": 3, "broker_pool": "pool-0",
                             "reason": "under-replicated: ISR [1] of replicas [1, 2]"}])
    hot = pd.DataFrame([{"broker_pool": "pool-1", "topic": "pool-1.topic-0000", "partition": 0, "resource": "disk",
                         "load": 5e9, "band_width": 1e9}])
    digest = write_plan(run, config, tables, replica_moves(tables, 25), skipped=skipped, hot=hot)
    write_passed_validation(run, digest)
    write_decision(run, digest, "approved", "ann", "approved by ann")
    cluster = FakeCluster(tables.partitions)
    results = {p: execute_pool(config, cluster, run, p, **fake_time()) for p in sorted(config.pools)}
    summary = read_json(run.stage_path(PLAN) / "summary.json")
    with run.stage(VERIFY) as out:
        write_json(out / "summary.json", {
            "plan_hash": digest, "partitions_planned": summary["totals"]["partitions_changed"],
            "partitions_not_at_plan": [], "out_of_band_before": summary["totals"]["out_of_band_before"],
            "out_of_band_after": summary["totals"]["out_of_band_after"],
            "pools": {p: {r: {k: v[k] for k in ("out_of_band_before", "out_of_band_after")}
                          for r, v in facts["resources"].items()} for p, facts in summary["pools"].items()}})
        (out / "report.txt").write_text("pool pool-0\nbroker  disk\n1       40% -> 41%\n")

    data = collect(run)
    h = data.header
    assert (h.trigger, h.action, h.mode, h.status) == ("airflow (manual__)", "rebalance-pool", "execute", "verified")
    assert h.approval == "approved by ann" and h.plan_hash == digest and h.requested_by == "ann"
    assert data.plan is not None and data.executions is not None and data.verification is not None
    plan = read_json(run.stage_path(PLAN) / "plan.json")
    assert data.plan.moves_total == len(plan["partitions"]) == summary["totals"]["partitions_changed"]
    assert data.plan.replica_moves == summary["totals"]["replica_moves"]
    assert data.plan.bytes_total == summary["totals"]["moved_bytes"]
    assert data.plan.preferred_leader_changes == summary["totals"]["preferred_leader_changes"] >= 1
    assert data.plan.leadership_only_changes == summary["totals"]["leadership_only_changes"]
    for pool in data.plan.pools:
        facts = summary["pools"][pool.broker_pool]
        assert (pool.lower_bound_bytes, pool.moved_over_lb) == (facts["lower_bound_bytes"], facts["moved_over_lb"])
        # Moves within the pool, none forced: every byte is the balance part's.
        assert (pool.forced_bytes, pool.balance_bytes) == (0, facts["moved_bytes"])
        assert sum(f.bytes for f in pool.flows) == facts["moved_bytes"]
        for resource in pool.resources:
            assert resource.brokers_total == len(facts["brokers"])
            assert sorted(b.broker_id for b in resource.brokers if b.out_before) == \
                sorted(facts["resources"][resource.resource]["out_of_band_before"])
    for pool in data.executions:
        result = results[pool.broker_pool]
        assert pool.state == f"finished: {result['completed']} of {result['moves']} moves done, 0 skipped"
        assert pool.moves_done == result["completed"] and pool.progress[-1].moves_done == result["completed"]
        assert {"start", "throttle", "finish", "estimate"} <= {m.group for m in pool.markers}

    page = report_of(run)
    assert render(data) == page  # the same run, the same page: chart ids are fixed, nothing random
    assert "approved by ann" in page and digest in page and "rebalance-pool" in page
    moves_part = section(page, "moves")
    assert f'data-moves="{len(plan["partitions"])}"' in moves_part
    assert moves_part.count("<tr>") == len(plan["partitions"]) + 1  # and the header row
    assert 'id="moves-filter"' in moves_part and 'class="sortable"' in moves_part
    assert "truncated" not in moves_part
    assert moves_part.count('class="chart"') == len(config.pools)  # a Sankey per pool
    assert section(page, "usage").count('class="chart"') == len(config.pools) * len(config.resources)
    bounds = section(page, "bounds")
    assert "forced moved / LB" in bounds and "balance moved / LB" in bounds and "forced: why" in bounds
    assert bounds.count("forced moved / LB") == 2  # per pool, and per resource
    # Per pool, the edges the balance LB is against (the summary's lower_bound_edges).
    edges = {p.broker_pool: p.lower_bound_edges for p in data.plan.pools}  # type: ignore[union-attr]
    assert edges and set(edges.values()) <= {"promised", "band"}
    assert all(f"<td>{e}</td>" in bounds for e in edges.values())
    skipped_part = section(page, "skipped")
    assert "under-replicated" in skipped_part and "kafka-topics --alter --partitions" in skipped_part
    assert section(page, "execution").count('class="chart"') == len(config.pools)
    verification = section(page, "verification")
    assert f"All {len(plan['partitions'])} planned partitions are at their planned replicas" in verification
    assert "verify/report.txt" in verification


def test_a_cancelled_execution_shows_the_failure_and_the_cancel(tmp_path: Path) -> None:
    config, tables, run = make_cluster(tmp_path, SMALL, "scheduled__2026-11-23T02_00_00_00_00")
    digest = write_plan(run, config, tables, replica_moves(tables, 20))
    write_passed_validation(run, digest)
    write_decision(run, digest, "auto-approved", None, "within the limits")
    cluster = FakeCluster(tables.partitions, stuck=True)
    broker_pool = sorted(config.pools)[0]
    with pytest.raises(ExecutionError, match="not complete after"):
        execute_pool(config, cluster, run, broker_pool, **fake_time())
    cancel = cancel_pool(config, cluster, run, broker_pool, **fake_time())
    assert cancel["cancelled"]

    data = collect(run)
    assert data.executions is not None and [p.broker_pool for p in data.executions] == [broker_pool]
    pool = data.executions[0]
    assert pool.state == "cancelled" and pool.cancel == cancel and pool.result is None and pool.moves_done == 0
    groups = {m.group for m in pool.markers}
    assert {"cancel", "problem", "throttle"} <= groups
    page = report_of(run)
    execution = section(page, "execution")
    assert "cancelled" in execution and "cancel.json" in execution
    assert data.header.status == "cancelled"


def test_an_unreadable_artifact_is_named_and_the_rest_still_reported(tmp_path: Path) -> None:
    config, tables, run = make_cluster(tmp_path, SMALL, "scheduled__2026-11-23T02_00_00_00_00")
    digest = write_plan(run, config, tables, replica_moves(tables, 5))
    write_passed_validation(run, digest)
    (run.stage_path(PLAN) / "summary.json").write_text('{"plan_hash": ')  # cut short

    page = report_of(run)
    for name in ("usage", "moves", "bounds", "skipped"):
        assert "could not read this part of the run" in section(page, name), name
    assert "Validation passed" in section(page, "validation")


# -- a large run -----------------------------------------------------------------------------------------------

def write_large_run(tmp_path: Path) -> tuple[RunFolder, pd.DataFrame]:
    """A run of 100,000 changed partitions over 1,000 brokers, approved, one pool executed; returns the run and
    the executed pool's replica moves."""
    spec = SyntheticSpec(n_brokers=1000, n_racks=4, n_pools=4, n_partitions=100_000, partitions_per_topic=500,
                         under_replicated_fraction=0.0, seed=3)
    config, tables, run = make_cluster(tmp_path, spec, "scheduled__2026-11-23T02_00_00_00_00", snapshot=False)
    moves = replica_moves(tables, 99_999)  # and a leadership transfer: 100,000 partitions change
    digest = write_plan(run, config, tables, moves)
    write_passed_validation(run, digest)
    write_decision(run, digest, "approved", "ann", "approved by ann")
    # An execution log of every move (written directly: the executor's per-line fsync is for real runs).
    broker_pool = str(moves["broker_pool"].iloc[0])
    pool_moves = moves[(moves["broker_pool"] == broker_pool) & (moves["action"] == "replica")]
    log = run.stage_path(f"execute/{broker_pool}")
    log.mkdir(parents=True)
    with (log / "execution_log.jsonl").open("w") as f:
        base = {"pool": broker_pool, "plan_hash": digest}
        start = datetime(2026, 11, 23, 2, 10, tzinfo=UTC)
        f.write(json.dumps({**base, "ts": start.isoformat(timespec="milliseconds"), "action": "execute_started",
                            "moves": len(pool_moves)}) + "\n")
        f.write(json.dumps({**base, "ts": start.isoformat(timespec="milliseconds"), "action": "throttle_set",
                            "rate_bytes_per_s": 52428800}) + "\n")
        for i, (topic, partition, size) in enumerate(zip(pool_moves["topic"], pool_moves["partition"],
                                                          pool_moves["size_bytes"], strict=True)):
            ts = (start + timedelta(milliseconds=100 * (i + 1))).isoformat(timespec="milliseconds")
            f.write(json.dumps({**base, "ts": ts, "action": "started", "topic": topic, "partition": int(partition),
                                "bytes": int(size)}) + "\n")
            f.write(json.dumps({**base, "ts": ts, "action": "completed", "topic": topic,
                                "partition": int(partition)}) + "\n")
    return run, pool_moves


def test_a_plan_of_100000_moves_over_1000_brokers_stays_small_and_says_what_it_leaves_out(tmp_path: Path) -> None:
    run, pool_moves = write_large_run(tmp_path)
    data = collect(run)
    assert data.plan is not None and data.plan.moves_total == 100_000
    assert len(data.plan.moves) == MOVES_SHOWN
    assert data.plan.moves[0].bytes_to_copy == max(m.bytes_to_copy for m in data.plan.moves)
    page = report_of(run)
    size = len(page.encode())
    assert size < 15 * 2**20, f"{size} bytes"
    moves_part = section(page, "moves")
    assert "showing the 2,000 largest of 100,000 moves; all of them in plan/plan.json" in moves_part
    assert moves_part.count("<tr>") == MOVES_SHOWN + 1
    usage = section(page, "usage")
    assert "Showing 50 of 250 brokers" in usage
    assert "broker-to-broker flows" in moves_part
    assert data.executions is not None and data.executions[0].moves_done == len(pool_moves)
    assert len(data.executions[0].progress) <= 1_000


def test_usage_draws_the_current_placements_band_where_it_differs_and_a_widened_bands_note(tmp_path: Path) -> None:
    config, tables, run = make_cluster(tmp_path, SMALL, "scheduled__2026-11-23T02_00_00_00_00")
    write_plan(run, config, tables, replica_moves(tables, 10))
    summary_path = run.stage_path(PLAN) / "summary.json"
    summary = read_json(summary_path)
    pool, moved = sorted(summary["pools"])[0], summary["pools"][sorted(summary["pools"])[0]]["resources"]
    # As forced moves leave it: the band of the current placement lower than the plan's, for disk; and a widened
    # replica-count band (balanced, with its note).
    moved["disk"]["band_before"] = {**moved["disk"]["band"], "lower": 0.0123, "upper": 0.0456}
    moved["replica_count"]["band"]["note"] = "band widened to [1, 2]: test"
    write_json(summary_path, summary)
    write_record(summary_path.parent)  # as if the plan step had written it so
    usage = section(report_of(run), "usage")
    assert "band before lower 1.2%" in usage and "band before upper 4.6%" in usage
    assert usage.count("band before lower") == 1  # only where the two bands differ
    assert "replica_count: " in usage and "(band widened to [1, 2]: test)" in usage
    assert pool in usage
