"""The verify step: a fresh snapshot after execution, band status before and after per pool, and whether the
cluster now carries the validated plan. The run is not verified where an action's promise is not kept, or (with the
topic spread on) where the plan left a broker above a topic's cap (`spread_violations.executed_spread`)."""

from __future__ import annotations

import logging
from typing import Any

import pandas as pd

from kafka_rebalancer.config import RebalancerConfig
from kafka_rebalancer.errors import PromiseNotKept
from kafka_rebalancer.kafka_admin import KafkaConnection
from kafka_rebalancer.model.band_status import band_status, broker_load_frame, out_of_band
from kafka_rebalancer.model.reassignment import Reassignment, read_reassignment
from kafka_rebalancer.model.schemas import BANDS, BROKER_LOAD, LOG_DIR_MOVES
from kafka_rebalancer.operations.request import read_request, scope_of
from kafka_rebalancer.plan.balance.pool_bands import placement_bands
from kafka_rebalancer.plan.balance.spread_violations import VIOLATION_COLUMNS, executed_spread, spread_figures
from kafka_rebalancer.plan.balance.tables import band_table, spread_table
from kafka_rebalancer.plan.log_dir_plan import directory_bands
from kafka_rebalancer.plan.promises import excuses_of_run, log_dir_promises, promise_lines, promise_rows, unkept
from kafka_rebalancer.run_folder import PLAN, VERIFY, RunFolder, read_json, read_table, write_json
from kafka_rebalancer.snapshot import capture, read_snapshot, write_snapshot
from kafka_rebalancer.snapshot.build import SnapshotTables

log = logging.getLogger(__name__)
AFTER_SNAPSHOT = "after_snapshot"


def verify_run(config: RebalancerConfig, connection: KafkaConnection, run: RunFolder) -> dict[str, Any]:
    run.check_stages()  # the verdict is on the run's own artifacts: none changed since written (before Kafka)
    plan_dir = run.require(PLAN)
    config = spread_as_planned(config, read_json(plan_dir / "summary.json"))
    tables, manifest = capture(config, connection)
    write_snapshot(run, tables, manifest, AFTER_SNAPSHOT)
    after_tables, _ = read_snapshot(run, AFTER_SNAPSHOT)

    plan_bands = read_table(plan_dir, BANDS)
    # Each placement against its own band, as the plan's re-check judges the one before (plan.recheck).
    before_load = read_table(plan_dir, BROKER_LOAD)
    before = band_status(before_load, placement_bands(before_load, config, plan_bands))
    after_load = broker_load_frame(after_tables.brokers, after_tables.replicas, config.resource_list())
    after = band_status(after_load, placement_bands(after_load, config, plan_bands))

    parts = after_tables.partitions
    current = {(t, int(p)): [int(b) for b in r]
               for t, p, r in zip(parts["topic"], parts["partition"], parts["replicas"], strict=True)}
    plan = read_reassignment(plan_dir / "plan.json")
    not_applied = [{"topic": r.topic, "partition": r.partition, "planned": r.replicas,
                    "current": current.get((r.topic, r.partition))}
                   for r in plan if current.get((r.topic, r.partition)) != r.replicas]
    pools: dict[str, Any] = {}
    for pool in sorted(before["broker_pool"].unique()):
        pools[pool] = {
            res: {"out_of_band_before": sorted(int(b) for b in out_of_band(
                      before[(before["broker_pool"] == pool) & (before["resource"] == res)])["broker_id"]),
                  "out_of_band_after": sorted(int(b) for b in out_of_band(
                      after[(after["broker_pool"] == pool) & (after["resource"] == res)])["broker_id"])}
            for res in sorted(before["resource"].unique())}
    promises = _promises_after(config, run, after_tables, after)
    # The topic spread after execution (issue 52), judged on the cells the plan added to (`executed_spread`).
    scope = scope_of(read_request(run))
    spread = executed_spread(config, read_snapshot(run)[0], after_tables, plan, scope.drained, scope.demoted)
    over_cap = spread.loc[spread["held"] > spread["cap"], [*VIOLATION_COLUMNS, "by_plan", "forced"]]
    broken = over_cap[over_cap["by_plan"] & ~over_cap["forced"]]
    figures = spread_figures(spread, sorted(before["broker_pool"].unique()))
    text = band_table(before, after) + (f"\n{spread_table(figures)}" if config.topic_spread.enabled else "")
    summary = {"plan_hash": read_json(plan_dir / "summary.json")["plan_hash"],
               "partitions_planned": len(plan), "partitions_not_at_plan": not_applied, "pools": pools,
               "out_of_band_before": len(out_of_band(before)), "out_of_band_after": len(out_of_band(after)),
               "promises_kept": unkept(promises).empty,
               "log_dirs": _log_dirs_after(config, read_snapshot(run)[0], after_tables, plan),
               "topic_spread_violations": len(over_cap),
               **({"topic_spread": {"kept": broken.empty, "over_cap_by_plan": len(broken), "pools": figures}}
                  if config.topic_spread.enabled else {}),
               "promises": promises.astype(object).where(promises.notna(), None).to_dict("records")}
    with run.stage(VERIFY) as out:
        write_json(out / "summary.json", summary)
        (out / "report.txt").write_text(text)
        promises.to_csv(out / "promises.csv", index=False)
        over_cap.to_csv(out / "topic_spread.csv", index=False)
    log.info("before -> after, per pool:\n%s", text)
    if not_applied:
        log.warning("%d planned partition(s) are not at their planned replicas: %s", len(not_applied),
                    not_applied[:10])
    log.info("verified plan %s: %d of %d planned partitions at their planned replicas; brokers out of band %d -> "
             "%d; fresh snapshot and summary in %s", summary["plan_hash"][:12], len(plan) - len(not_applied),
             len(plan), summary["out_of_band_before"], summary["out_of_band_after"], run.stage_path(VERIFY))
    _judge(promises, broken, run)
    return summary


def spread_as_planned(config: RebalancerConfig, plan_summary: dict[str, Any]) -> RebalancerConfig:
    """The config with the topic spread as the plan was made: off for a plan made without it. The default turned
    on (issue 52) without changing the fingerprint, so a plan approved under the old default (off) still executes;
    it is not judged by caps it was not planned to. A plan made with the spread on has its figures per pool."""
    planned_on = any("topic_spread" in facts for facts in plan_summary.get("pools", {}).values())
    if not config.topic_spread.enabled or planned_on:
        return config
    return config.model_copy(update={"topic_spread": config.topic_spread.model_copy(update={"enabled": False})})


def _judge(promises: pd.DataFrame, spread_broken: pd.DataFrame, run: RunFolder) -> None:
    """Raise PromiseNotKept where the action's promises are not kept on the cluster, or the plan left a broker above
    a topic's spread cap (`spread_broken`: those cells, the plan's doing); both are named in the log."""
    lines = promise_lines(promises)
    for line in lines:
        log.error("promise not kept: %s", line)
    spread_lines = [f"broker {r.broker_id} holds {r.held} {r.kind} of {r.topic} (cap {r.cap}, {r.held_before} before)"
                    for r in spread_broken.itertuples(index=False)]
    for line in spread_lines:
        log.error("topic spread not kept: %s", line)
    folder = run.stage_path(VERIFY)
    not_kept = lines + [f"topic spread: {line}" for line in spread_lines]  # the notification lists them
    if not unkept(promises).empty:
        raise PromiseNotKept(f"the run is not verified: {len(unkept(promises))} promise(s) of its action not kept "
                             f"on the cluster, e.g. {lines[0]} (all in {folder / 'promises.csv'})",
                             not_kept=not_kept)
    if spread_lines:
        raise PromiseNotKept(f"the run is not verified: the plan left {len(spread_lines)} (topic, broker) above their "
                             f"topic spread cap, e.g. {spread_lines[0]} (all in {folder / 'topic_spread.csv'})",
                             not_kept=not_kept)


def _log_dirs_after(config: RebalancerConfig, before: SnapshotTables, after: SnapshotTables,
                    plan: list[Reassignment]) -> dict[str, Any]:
    """JBOD (README: JBOD): the replicas plan.json names a log dir for that are on their broker in another one, and
    the log dirs outside their broker's band before and after, for brokers with several."""
    named = {(e.topic, e.partition, b): d for e in plan for b, d in e.target_dirs().items()}
    dirs = after.replica_log_dirs
    now_in = {} if dirs is None else {(t, int(p), int(b)): d for t, p, b, d in zip(
        dirs["topic"], dirs["partition"], dirs["broker_id"], dirs["log_dir"], strict=True)}
    missed = [f"{t}-{p} on broker {b}: in {now_in[(t, p, b)]}, not {d}" for (t, p, b), d in sorted(named.items())
              if now_in.get((t, p, b), d) != d]
    if missed:
        log.warning("%d replica(s) not in the log dir plan.json names: %s", len(missed), missed[:10])
    found = {"named_dirs": len(named), "not_in_named_dir": missed} if named else {}
    if "disk" not in config.resources:
        return found
    threshold = config.resources["disk"].threshold

    def outside(tables: SnapshotTables) -> list[str]:
        bands = directory_bands(tables.log_dirs, threshold)
        return [f"{r.broker_id}:{r.log_dir} {r.usage:.1%} (band {r.lower:.1%}-{r.upper:.1%})"
                for r in bands.itertuples() if not r.inside]

    return {**found, "out_of_band_before": outside(before), "out_of_band_after": outside(after)}


def _promises_after(config: RebalancerConfig, run: RunFolder, after_tables: SnapshotTables,
                    after_status: pd.DataFrame) -> pd.DataFrame:
    """The action's promises on the cluster as it now is; a promise the plan said it cannot keep stays "cannot"
    (the run is not verified either way)."""
    request = read_request(run)
    brokers = after_tables.brokers
    alive = brokers.loc[brokers["alive"].astype(bool), "broker_id"]
    parts = after_tables.partitions[["topic", "partition", "replicas", "leader", "isr"]]
    rows = promise_rows(request, config, parts, after_status, alive, excuses_of_run(run, read_snapshot(run)[0],
                                                                                    request))
    if request is None or not request.scope.removed_log_dirs:
        return rows
    plan_dir = run.require(PLAN)
    moves = read_table(plan_dir, LOG_DIR_MOVES) if (plan_dir / f"{LOG_DIR_MOVES.name}.parquet").exists() else None
    planned = [] if moves is None else zip(moves["topic"], moves["partition"], moves["broker_id"], strict=True)
    return pd.concat([rows, log_dir_promises(request, after_tables.replica_log_dirs, planned)], ignore_index=True)
