"""The plan step: snapshot in, plan out. Runs on Spark (spark-submit from the DAG, or a local session from the
CLI); it never talks to Kafka, so the same snapshot and config always give the same plan.json and hash. A small
cluster's (up to `transforms.driver_max_replicas`) is worked out on the driver alone, with the
same tables and plan (`planner_input.DriverInput`), and its Spark session is released at once."""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession

from kafka_rebalancer import terminal_progress
from kafka_rebalancer.config import RebalancerConfig
from kafka_rebalancer.model.reassignment import (
    LOG_DIR_MOVES_FILE,
    dumps,
    parse_reassignment,
    plan_hash,
    reassignment_document,
)
from kafka_rebalancer.model.resources import resource
from kafka_rebalancer.model.run_actions import Action, run_action
from kafka_rebalancer.model.schemas import (
    BANDS,
    BROKER_LOAD,
    BROKER_LOAD_AFTER,
    BROKERS,
    BROKERS_TO_FIX,
    CANDIDATES,
    HOT_PARTITIONS,
    INFEASIBLE,
    LOG_DIR_MOVES,
    MOVES,
    PARTITION_CHANGES,
    PARTITIONS,
    PLANNER_NOTES,
    REPLICAS,
    SKIPPED,
    TOPIC_SPREAD,
)
from kafka_rebalancer.operations.replication_factor import min_insync_of
from kafka_rebalancer.operations.request import ManualRequest, PlanningScope, read_request, scope_of
from kafka_rebalancer.plan.balance import per_broker
from kafka_rebalancer.plan.balance.bands import Band
from kafka_rebalancer.plan.balance.leadership import leadership_moves
from kafka_rebalancer.plan.balance.planner import Budgets as PlannerBudgets
from kafka_rebalancer.plan.balance.pool_bands import bands_frame, brokers_to_fix, placement_bands, precheck_pairs
from kafka_rebalancer.plan.balance.spread_violations import skewed_cells
from kafka_rebalancer.plan.balance.tables import spread_table
from kafka_rebalancer.plan.balance.transforms import (
    PoolPlanningSettings,
    planner_replicas,
    plans_on_driver,
    split_planner_output,
)
from kafka_rebalancer.plan.changes import (
    budget_notes,
    load_after,
    partition_changes,
    trim_to_budgets,
    with_load_changes,
)
from kafka_rebalancer.plan.forecast_step import start_growth, write_forecast
from kafka_rebalancer.plan.log_dir_plan import (
    LogDirPlan,
    arrival_dirs,
    balance_plan,
    log_dir_document,
    removal_plan,
)
from kafka_rebalancer.plan.planner_input import DriverInput, PlannerInput, spark_input
from kafka_rebalancer.plan.recheck import (
    Recheck,
    band_rows,
    claim_rows,
    current_placement,
    left_outside,
    recheck_plan,
    replica_facts,
)
from kafka_rebalancer.plan.replication_factor import replication_factor_plan
from kafka_rebalancer.plan.summary import build_summary, planner_claim, totals_sentence
from kafka_rebalancer.run_folder import PLAN, SNAPSHOT, RunFolder, read_json, read_table, write_json, write_table
from kafka_rebalancer.snapshot.evacuation import held_pools
from kafka_rebalancer.snapshot.store import check_snapshot, cordoned_brokers, read_snapshot, snapshot_topics

log = logging.getLogger(__name__)


def _read(spark: SparkSession, folder: Any, schema: Any) -> DataFrame:
    return spark.read.schema(schema.spark()).parquet(str(folder / f"{schema.name}.parquet"))


def _rows_of(folder: Any, schema: Any) -> int:
    """The rows of a snapshot table, from its file's footer (a folder of part files, or a footer that cannot be
    read, counts as large: Spark reads it, and says what is wrong with it)."""
    path = folder / f"{schema.name}.parquet"
    try:
        return pq.read_metadata(path).num_rows if path.is_file() else sys.maxsize
    except (OSError, pa.ArrowException):
        return sys.maxsize


def _split_inputs(spark: SparkSession, folder: Any) -> None:
    """Snapshots are small files by Spark's measure (a few MB per million rows): split them so every core
    reads a share (the files are written in row groups of ROW_GROUP_ROWS rows)."""
    largest = max((f.stat().st_size for f in folder.glob("*.parquet")), default=0)
    cores = spark.sparkContext.defaultParallelism
    spark.conf.set("spark.sql.files.maxPartitionBytes", str(max(largest // (2 * cores), 256 * 1024)))


class _Progress:
    """Logs each stage of the job with its duration (a plan of a large cluster takes a while)."""

    def __init__(self) -> None:
        self.started = self.last = time.monotonic()
        self.steps = 0

    def __call__(self, what: str) -> None:
        now = time.monotonic()
        log.info("%s (%.1fs; %.1fs so far)", what, now - self.last, now - self.started)
        self.last = now
        self.steps += 1
        terminal_progress.show("plan", self.steps, None, what)


class SessionStop:
    """Stops the plan's Spark session as soon as the job needs it no more (`run_plan`'s `release`), on a thread of
    its own beside the driver's last work: PySpark's stop waits up to a second for its accumulator server to
    notice. `join` waits for it, or stops the session then if it was never released."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self.stopping: threading.Thread | None = None

    def __call__(self) -> None:
        if self.stopping is None:
            self.stopping = threading.Thread(target=self.spark.stop, name="spark-stop")
            self.stopping.start()

    def join(self) -> None:
        if self.stopping is None:
            self.spark.stop()
        else:
            self.stopping.join()


def run_plan(spark: SparkSession, config: RebalancerConfig, run: RunFolder,
             release: Callable[[], None] | None = None) -> dict[str, Any]:
    """`config` is the run's (`operations.request.run_config`): a manual run's request narrows what is planned.
    `release` (e.g. a `SessionStop`) is called once the job has no more use for Spark."""
    started = time.monotonic()
    request = read_request(run)
    if request is not None and not run_action(request.action).plans and run.has(PLAN):
        log.info("execute-reviewed: the reviewed run's plan is kept as it is (not planned again)")
        return read_json(run.require(PLAN) / "summary.json")
    # The re-check reads the snapshot in pandas and works out its plan-independent half beside the Spark work,
    # which mostly leaves the driver waiting. Its files are checked against their record first (its rows were
    # checked when it was taken); one written before records began has its rows checked before Spark reads it.
    check_snapshot(run)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="plan-job-recheck") as background:
        return _plan(spark, config, run, request, background, started, release or (lambda: None))


@dataclass(frozen=True)
class _Job:
    """What every step of one plan reads: the session, the run and its request, and the work beside the main line."""

    spark: SparkSession
    config: RebalancerConfig
    run: RunFolder
    request: ManualRequest | None
    scope: PlanningScope
    progress: _Progress
    background: ThreadPoolExecutor  # the re-check's plan-independent half, beside the Spark work
    snapshot_read: Future[tuple[Any, dict[str, Any]]]  # the snapshot in pandas, read beside the Spark work
    facts: Future[pd.DataFrame]  # its replicas as the re-check sees them (`replica_facts`), next in line


@dataclass(frozen=True)
class _Inputs:
    manifest: dict[str, Any]
    brokers_pdf: pd.DataFrame
    topics: list[str]


@dataclass(frozen=True)
class _Planned:
    """The planners' actions within the run's budgets, with the tables worked out beside them."""

    load_pdf: pd.DataFrame
    bands_pdf: pd.DataFrame
    fix_pdf: pd.DataFrame
    output: dict[str, Any]  # the planners' output: moves, notes, hot, infeasible, lower_bound_bytes, load_changes
    moves: pd.DataFrame
    dropped: int  # actions dropped by the run's budgets
    skipped_pdf: pd.DataFrame
    statuses: dict[str, int]
    candidates_pdf: pd.DataFrame
    current: Future[Any]  # the re-check's view of the current placement


@dataclass(frozen=True)
class _Changes:
    changes: pd.DataFrame
    after_pdf: pd.DataFrame  # the planner's claim: the loads after the plan
    claim_source: str
    plan_text: str
    rollback_text: str
    digest: str
    log_dirs: LogDirPlan | None  # remove-disks: moves between a broker's log directories
    log_dir_text: str | None
    arrival_dirs: int  # replicas arriving from another broker whose log directory plan.json names


def _plan(spark: SparkSession, config: RebalancerConfig, run: RunFolder, request: ManualRequest | None,
          background: ThreadPoolExecutor, started: float, release: Callable[[], None]) -> dict[str, Any]:
    snapshot_read = background.submit(read_snapshot, run)
    # Worked out while Spark reads, so that little of the re-check's own half is left to share the driver's
    # Python with a planner running there (at 1.5 M replicas they took turns for seconds).
    facts = background.submit(lambda: replica_facts(config, snapshot_read.result()[0],
                                                   frozenset(scope_of(request).drained)))
    job = _Job(spark, config, run, request, scope_of(request), _Progress(), background, snapshot_read, facts)
    inputs, planner_input = _read_inputs(job)
    on_driver = planner_input.reads_on_driver
    # The capacity forecast's growth per topic beside the plan; the session stays until it needs Spark no more.
    growth = start_growth(spark, config, run, inputs.manifest, inputs.topics, on_driver)
    release = growth.released_after(release)
    if on_driver:
        release()  # a small cluster: all of it is the driver's
    planned = _plan_pools(job, inputs, planner_input)
    # The rest reads the snapshot: the planner's input (on the driver, every replica once more: 0.5 GB at 5 million)
    # goes before the re-check's own copies of the replicas come.
    del planner_input
    if not on_driver:
        release()  # the rest is the driver's
    job.progress(f"{len(planned.candidates_pdf)} candidate moves by the pre-check windows; "
                 f"{len(planned.skipped_pdf)} partitions skipped")
    changes = _changes(job, inputs, planned)
    # The summary's figures come from the re-check of plan.json against the snapshot, apart from the planner's
    # bookkeeping (after_pdf, its bound), which is kept as its claim beside them.
    recheck = recheck_plan(config, job.snapshot_read.result()[0], parse_reassignment(changes.plan_text, "plan.json"),
                           planned.bands_pdf, frozenset(job.scope.drained), planned.current.result())
    summary = _write_plan(job, inputs, planned, changes, recheck, started)
    write_forecast(config, run, job.snapshot_read.result()[0], changes.changes, growth)
    _log_account(job, inputs, summary)
    return summary


def _read_inputs(job: _Job) -> tuple[_Inputs, PlannerInput]:
    """The snapshot's manifest, brokers and topics, and the planner's input (every replica with its partition's
    state: on Spark, or on the driver)."""
    snap = job.run.require(SNAPSHOT)
    manifest = read_json(snap / "manifest.json")
    # The brokers on the driver too (a few rows): read as Spark would, without a Spark job.
    brokers_pdf = read_table(snap, BROKERS)
    # The partitions no pool balances that a drain or demotion must still touch, with the pool that plans them.
    held_of = ((lambda partitions: held_pools(partitions, brokers_pdf, job.request))
               if job.scope.drained or job.scope.demoted else None)
    broker_pools = brokers_pdf["broker_pool"].nunique()
    if plans_on_driver(_rows_of(snap, REPLICAS), broker_pools):
        # A small cluster: the snapshot as the re-check reads it, its partitions as stored (a manual run's are
        # read again: the re-check's carry the run's pools, `snapshot.evacuation.as_planned`).
        tables = job.snapshot_read.result()[0]
        partitions = tables.partitions if job.request is None else read_table(snap, PARTITIONS)
        topics = sorted(pd.unique(partitions["topic"]).tolist())
        planner_input: PlannerInput = DriverInput.of(
            tables.replicas, partitions, brokers_pdf, topics, job.scope.drained,
            held_of(partitions) if held_of else None)
        where = "; a small cluster: its tables are worked out and its pools are planned on the driver"
    else:
        _split_inputs(job.spark, snap)
        topics = snapshot_topics(snap)
        planner_input = spark_input(planner_replicas(
            _read(job.spark, snap, REPLICAS), _read(job.spark, snap, PARTITIONS), _read(job.spark, snap, BROKERS),
            brokers_pdf, topics, job.scope.drained,
            held_of(read_table(snap, PARTITIONS)) if held_of else None), broker_pools)
        where = "; its pools are planned on the driver" if planner_input.plans_on_driver else ""
    job.progress(f"{planner_input.replicas} replicas read, each with its partition's state{where}")
    return _Inputs(manifest, brokers_pdf, topics), planner_input


def _plan_pools(job: _Job, inputs: _Inputs, rows: PlannerInput) -> _Planned:
    """Bands, then each pool's planner; the tables only reported (skipped partitions, statuses, the pre-check
    candidates) are computed beside the main line, in their own jobs, while it waits on small jobs (bands) or on
    the planner's Python workers (on the driver, they take turns with it)."""
    config, scope, resources = job.config, job.scope, job.config.resource_list()
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="plan-job-reports") as reports:
        # One aggregation of the replicas; the tables per broker and pool are added up from it on the driver (a
        # few rows per broker, where Spark would spend seconds planning and scheduling small jobs). Of those only
        # the pre-check's pairs go back to Spark, as a local table whose size Spark knows (it broadcasts it).
        if scope.leadership is None and scope.replication_factor is None:
            # The planner's Python workers start first, while the bands are worked out (a failure to start them
            # shows in plan_pools, which starts its own).
            reports.submit(rows.start_planner_workers, inputs.brokers_pdf["broker_pool"].nunique())
        skipped_and_statuses = reports.submit(rows.skipped_and_statuses)
        parts = rows.load_parts(resources)
        load_pdf = per_broker.broker_load(inputs.brokers_pdf, parts, resources)
        incoming_pdf = per_broker.incoming_load(parts, load_pdf)
        bands_pdf = _scoped_bands(bands_frame(load_pdf, config, incoming_pdf), scope,
                                  job.request.action if job.request else Action.NIGHTLY)
        bands_pdf = unbalanced_by_metrics(bands_pdf, inputs.manifest.get("unbalanced_resources") or {})
        fix_pdf = brokers_to_fix(load_pdf, bands_pdf)
        current = job.background.submit(lambda: current_placement(config, job.snapshot_read.result()[0], bands_pdf,
                                                                  frozenset(job.scope.drained), job.facts.result()))
        job.progress(f"bands of {len(bands_pdf)} (pool, resource) pairs; {len(fix_pdf)} broker-resource pairs to "
                     "fix")
        pairs = precheck_pairs(load_pdf, bands_pdf, fix_pdf)
        candidates = reports.submit(rows.candidates, pairs, resources)
        settings = _planning_settings(config, scope, bands_pdf, load_pdf, parts, inputs)
        if scope.leadership is not None:
            planned = _leadership_plan(rows, scope)
        elif scope.replication_factor is not None:
            planned = _replication_factor_plan(job, inputs, load_pdf, bands_pdf)
        else:
            planned = split_planner_output(rows.plan_pools(settings))
        moves = trim_to_budgets(planned["moves"], config.budgets)
        dropped = len(planned["moves"]) - len(moves)
        # Planner steps, not the plan's counts: a replica the planner moves twice is copied once (summary below).
        job.progress(f"the planner took {int((moves['action'] == 'replica').sum())} replica steps and "
                     f"{int((moves['action'] == 'leadership').sum())} leadership steps in {len(settings.brokers)} "
                     f"pools ({dropped} dropped by the run's budgets)")
        skipped_pdf, statuses = skipped_and_statuses.result()
        if "cannot" in planned:  # the resized topics' partitions: only those left as they are, with the reason
            resized = planned["replication_factor"]["topics"]
            skipped_pdf = pd.concat([skipped_pdf[~skipped_pdf["topic"].isin(resized)], planned["cannot"]],
                                    ignore_index=True)
        return _Planned(load_pdf, bands_pdf, fix_pdf, planned, moves, dropped, skipped_pdf, statuses,
                        candidates.result(), current)


def _planning_settings(config: RebalancerConfig, scope: PlanningScope, bands_pdf: pd.DataFrame,
                       load_pdf: pd.DataFrame, parts: pd.DataFrame, inputs: _Inputs) -> PoolPlanningSettings:
    """What each pool's planner is given: the bands, the budgets, its brokers with their roles, the topics."""
    resources = config.resource_list()
    band_map: dict[str, dict[str, Band]] = {}
    for row in bands_pdf.to_dict("records"):
        band_map.setdefault(row["broker_pool"], {})[row["resource"]] = Band.from_row(
            row, next(r.is_count for r in resources if r.name == row["resource"]))
    return PoolPlanningSettings(
        resource_names=tuple(r.name for r in resources), bands=band_map,
        budgets=PlannerBudgets(config.budgets.max_replica_moves, config.budgets.max_moved_bytes,
                               config.budgets.max_moves_per_broker),
        brokers=_with_roles(per_broker.pool_brokers(inputs.brokers_pdf, parts), scope,
                            cordoned_brokers(inputs.manifest)), topics=tuple(inputs.topics),
        out_of_band_now=_out_of_band_now(load_pdf, config, bands_pdf), topic_spread=config.topic_spread)


def _changes(job: _Job, inputs: _Inputs, planned: _Planned) -> _Changes:
    """The plan as partition changes, its two reassignment documents, its hash and the planner's claim."""
    # The partitions the moves touch, from the snapshot the re-check reads anyway (read beside the planner).
    snapshot_tables, _ = job.snapshot_read.result()
    keys = ["topic", "partition"]
    resized = planned.output.get("changes")  # a replication factor change's: its own placement, not moves
    touched = snapshot_tables.partitions.merge(
        (planned.moves if resized is None else resized)[keys].drop_duplicates(), on=keys)
    changes = partition_changes(touched, planned.moves) if resized is None else resized
    # The planner's claim: its models' loads, unless the run's budgets cut their moves (or no model planned:
    # leadership-only actions), when it is the kept moves replayed on the loads before.
    if planned.output["load_changes"] is not None and not planned.dropped:
        after_pdf = with_load_changes(planned.load_pdf, planned.output["load_changes"])
        claim_source = "the planners' models"
    else:
        after_pdf = load_after(planned.load_pdf, changes, touched, job.config.resource_list())
        claim_source = "the plan's moves replayed"
    log_dirs, log_dir_text, arrivals = _log_dir_plan(job, snapshot_tables, inputs.brokers_pdf, changes)
    plan_text = dumps(reassignment_document(changes, log_dirs=arrivals))
    rollback_text = dumps(reassignment_document(changes, "old_replicas"))
    digest = plan_hash(plan_text, inputs.manifest["content_hash"], job.config.fingerprint(), log_dir_text)
    job.progress(f"{len(changes)} partitions change" + (
        f"; {len(log_dirs.moves)} replicas move between log dirs" if log_dirs is not None else "") + (
        f"; {len(arrivals)} arriving replicas get a log dir" if arrivals else ""))
    return _Changes(changes, after_pdf, claim_source, plan_text, rollback_text, digest, log_dirs, log_dir_text,
                    len(arrivals))


def _log_dir_plan(job: _Job, tables: Any, brokers_pdf: pd.DataFrame, changes: pd.DataFrame
                  ) -> tuple[LogDirPlan | None, str | None, dict[tuple[str, int, int], str]]:
    """Moves between a broker's log directories (JBOD), their document, and the directory of each replica arriving
    from another broker: remove-disks empties directories onto their brokers' others; the nightly run and
    rebalance-pool, balancing disk, put each planned broker's directories in a band of their own, the arriving
    replicas counted where they land (none where a broker has one directory: the plan and its hash are then as
    without JBOD)."""
    scope, partitions = job.scope, tables.partitions
    topic_pool = dict(zip(partitions["topic"], partitions["topic_pool"], strict=True))
    if tables.log_dirs is None and not scope.removed_log_dirs:  # an older snapshot, without log dirs
        return None, None, {}
    size = {(t, int(p)): int(b) for t, p, b in zip(changes["topic"], changes["partition"], changes["size_bytes"],
                                                     strict=True)}
    moved = list(zip(changes["topic"], changes["partition"], changes["old_replicas"], changes["new_replicas"],
                     strict=True))
    leaving = [(t, int(p), int(b)) for t, p, old, new in moved for b in set(old) - set(new)]
    arrivals = arrival_dirs(tables.log_dirs, tables.replica_log_dirs,
                            [(t, int(p), int(b), size[(t, int(p))]) for t, p, old, new in moved
                             for b in set(new) - set(old)], leaving, scope.removed_log_dirs)
    if scope.removed_log_dirs:
        planned = removal_plan(tables.log_dirs, tables.replica_log_dirs, scope.removed_log_dirs, topic_pool)
    elif scope.balances_log_dirs and "disk" in job.config.resources:
        disk = job.config.resources["disk"]
        brokers = brokers_pdf.loc[[isinstance(p, str) and scope.balance_planned(p)
                                   for p in brokers_pdf["broker_pool"]], "broker_id"]
        landing: dict[tuple[int, str], int] = {}
        for (topic, partition, broker), path in arrivals.items():
            landing[(broker, path)] = landing.get((broker, path), 0) + size[(topic, partition)]
        planned = balance_plan(tables.log_dirs, tables.replica_log_dirs, brokers.astype(int).tolist(),
                               disk.threshold, disk.margin, leaving, topic_pool, landing)
        if planned.moves.empty:
            return None, None, arrivals
    else:
        return None, None, arrivals
    replicas = {(t, int(p)): [int(b) for b in r] for t, p, r in zip(partitions["topic"], partitions["partition"],
                                                      partitions["replicas"], strict=True)}
    return planned, log_dir_document(planned.moves, replicas), arrivals


def _write_plan(job: _Job, inputs: _Inputs, planned: _Planned, changes: _Changes, recheck: Recheck,
                started: float) -> dict[str, Any]:
    """The plan stage: every table, plan.json and rollback.json, and the summary (its figures the re-check's)."""
    config, bands_pdf = job.config, planned.bands_pdf
    notes = planned.output["notes"]
    if planned.dropped:
        notes = pd.concat([notes, budget_notes(left_outside(recheck, notes, planned.output["infeasible"], job.scope),
                                               planned.dropped, config.budgets)], ignore_index=True)
    with job.run.stage(PLAN) as out:
        for schema, frame in ((BROKER_LOAD, planned.load_pdf), (BANDS, bands_pdf), (BROKERS_TO_FIX, planned.fix_pdf),
                              (CANDIDATES, planned.candidates_pdf), (SKIPPED, planned.skipped_pdf),
                              (MOVES, planned.moves), (PLANNER_NOTES, notes), (HOT_PARTITIONS, planned.output["hot"]),
                              (INFEASIBLE, planned.output["infeasible"]), (PARTITION_CHANGES, changes.changes)):
            write_table(out, schema, frame)
        write_table(out, BROKER_LOAD_AFTER, changes.after_pdf)
        if config.topic_spread.enabled:
            write_table(out, TOPIC_SPREAD, skewed_cells(recheck.spread))
        (out / "plan.json").write_text(changes.plan_text)
        (out / "rollback.json").write_text(changes.rollback_text)
        if changes.log_dirs is not None and changes.log_dir_text is not None:
            write_table(out, LOG_DIR_MOVES, changes.log_dirs.moves)
            (out / LOG_DIR_MOVES_FILE).write_text(changes.log_dir_text)
        claim = planner_claim(changes.after_pdf, bands_pdf, planned.output["lower_bound_bytes"],
                              claim_rows(changes.after_pdf, recheck, bands_pdf), band_rows(recheck, bands_pdf),
                              changes.claim_source)
        summary = build_summary(
            config=config, manifest=inputs.manifest, plan_hash=changes.digest, bands=bands_pdf, recheck=recheck,
            claim=claim, skipped=planned.skipped_pdf, notes=notes, hot=planned.output["hot"],
            infeasible=planned.output["infeasible"], statuses=planned.statuses,
            moves_dropped_by_budget=planned.dropped, scope=job.scope)
        if changes.log_dirs is not None:
            summary["log_dir_moves"] = {
                "why": Action.REMOVE_DISKS if job.scope.removed_log_dirs else "each broker's log dirs into their band",
                "removed": sorted(f"{b}:{path}" for b, path in job.scope.removed_log_dirs),
                "moves": len(changes.log_dirs.moves), "bytes": int(changes.log_dirs.moves["size_bytes"].sum()),
                "stranded": changes.log_dirs.stranded}
        if changes.arrival_dirs:
            summary["arrival_log_dirs"] = changes.arrival_dirs
        if "replication_factor" in planned.output:
            summary["replication_factor"] = planned.output["replication_factor"]
        summary["plan_seconds"] = round(time.monotonic() - started, 3)
        write_json(out / "summary.json", summary)
    return summary


def _log_account(job: _Job, inputs: _Inputs, summary: dict[str, Any]) -> None:
    """The task log's last word on the plan: what was read, what changes, where it is; and any disagreement."""
    manifest, claim = inputs.manifest, summary["planner_claim"]
    spread = {pool: facts["topic_spread"] for pool, facts in summary["pools"].items() if "topic_spread" in facts}
    if spread:  # a record per row: each terminal line is the product's, and the account stays the plan's last word
        for row in spread_table(spread).splitlines():
            log.info("%s", row)
    log.info("plan %s: read %d replicas of %d partitions; %s; artifacts in %s", summary["plan_hash"][:12],
             int(manifest["rows"]["replicas"]), int(manifest["rows"]["partitions"]), totals_sentence(summary["totals"]),
             job.run.stage_path(PLAN))
    if claim["disagreements_with_recheck"]:
        log.warning("the planner's predicted after-state disagrees with the re-check of plan.json on %d "
                    "broker-resource pairs (validation will fail the plan)", claim["disagreements_with_recheck"])
    if claim["band_disagreements_with_recheck"]:
        log.warning("the plan's bands differ from those the re-check derives on %d (pool, resource) pairs "
                    "(validation will fail the plan)", claim["band_disagreements_with_recheck"])
    if summary["totals"]["topic_spread_over_cap"]:
        log.warning("the plan leaves %d (topic, broker) above their topic spread cap (validation fails the plan, "
                    "but where the broker receives a replica that must leave a dead, drained or other pool's broker)",
                    summary["totals"]["topic_spread_over_cap"])


def _out_of_band_now(load_pdf: pd.DataFrame, config: RebalancerConfig,
                     bands_pdf: pd.DataFrame) -> dict[str, dict[str, tuple[int, ...]]]:
    """Per pool and resource, the brokers outside the band of the current placement: the summary's "out of band
    before" (plan.recheck), which the planner fixes as well as those outside the plan's band."""
    out: dict[str, dict[str, tuple[int, ...]]] = {}
    fix = brokers_to_fix(load_pdf, placement_bands(load_pdf, config, bands_pdf))
    for (pool, name), group in fix.groupby(["broker_pool", "resource"], sort=True):
        out.setdefault(str(pool), {})[str(name)] = tuple(int(b) for b in group["broker_id"])
    return out


def _scoped_bands(bands_pdf: pd.DataFrame, scope: PlanningScope, action: str) -> pd.DataFrame:
    """A manual action balances only the pools it concerns: the others' bands are marked not balanced (with the
    reason), so their planners make forced moves only and the checks and the summary say so. A demotion takes
    leadership off its brokers whatever their leader count and the other role-dependent loads: those are not
    balanced either (a demoted broker ends below any band)."""
    if scope.demoted:
        roles = bands_pdf["resource"].map(lambda name: resource(name).role_dependent).astype(bool)
        bands_pdf = bands_pdf.copy()
        bands_pdf.loc[roles & bands_pdf["balanced"], "note"] = (f"not balanced by this run ({action}: leadership "
                                                                "leaves the demoted brokers)")
        bands_pdf.loc[roles, "balanced"] = False
    if scope.balanced_pools is None:
        return bands_pdf
    outside = ~bands_pdf["broker_pool"].isin(scope.balanced_pools) & bands_pdf["balanced"]
    bands_pdf = bands_pdf.copy()
    bands_pdf.loc[outside, "balanced"] = False
    bands_pdf.loc[outside, "note"] = f"not balanced by this run ({action}: " + (
        "only its pools are)" if scope.balanced_pools else "it balances no pool)")
    return bands_pdf


def unbalanced_by_metrics(bands_pdf: pd.DataFrame, unbalanced: dict[str, dict[str, str]]) -> pd.DataFrame:
    """The (pool, resource) pairs whose metrics the snapshot found incomplete (its manifest's
    `unbalanced_resources`) are marked not balanced with the reason, so their planners make no moves for them
    (capacity thresholds still hold) and the summary says why."""
    reasons = [unbalanced.get(pool, {}).get(name) for pool, name in zip(bands_pdf["broker_pool"],
                                                                          bands_pdf["resource"], strict=True)]
    hit = pd.Series([r is not None for r in reasons], index=bands_pdf.index, dtype=bool) & bands_pdf["balanced"]
    if not hit.any():
        return bands_pdf
    bands_pdf = bands_pdf.copy()
    bands_pdf.loc[hit, "balanced"] = False
    bands_pdf.loc[hit, "note"] = [f"not balanced: {r}" for r, h in zip(reasons, hit, strict=True) if h]
    return bands_pdf


def _with_roles(brokers: dict[str, Any], scope: PlanningScope, cordoned: frozenset[int]) -> dict[str, Any]:
    """The pools the scope plans, each broker marked whether it may receive replicas (not a cordoned one: Kafka
    still accepts reassignments onto it) and give them away."""
    out = {}
    for pool, frame in brokers.items():
        if scope.pools is not None and pool not in scope.pools:
            continue
        out[pool] = frame.assign(receives=~frame["broker_id"].isin(scope.no_receive | cordoned),
                                 gives=~frame["broker_id"].isin(scope.no_give))
    return out


def _leadership_plan(planner_input: PlannerInput, scope: PlanningScope) -> dict[str, Any]:
    """Leadership-only actions (elect-leaders, demote-brokers) instead of the planner's, on the partitions it may
    touch (skipped partitions keep their leaders)."""
    partitions = planner_input.leadership_partitions()
    alive = {b for members in partitions["isr"] for b in members}
    moves = leadership_moves(partitions, alive, scope.leadership or "elect", scope.demoted, scope.pools,
                             scope.topics)
    return _without_planner(moves)


def _without_planner(moves: pd.DataFrame) -> dict[str, Any]:
    """The planners' output for a plan made without them: its moves, no notes, no bound, no model's loads."""
    empty = {name: pd.DataFrame(columns=schema.names)
             for name, schema in (("notes", PLANNER_NOTES), ("hot", HOT_PARTITIONS), ("infeasible", INFEASIBLE))}
    return {"moves": moves, **empty, "lower_bound_bytes": {}, "load_changes": None}


def _replication_factor_plan(job: _Job, inputs: _Inputs, load_pdf: pd.DataFrame,
                             bands_pdf: pd.DataFrame) -> dict[str, Any]:
    """change-replication-factor instead of the planners (plan/replication_factor.py): its partition changes, the
    partitions it leaves as they are, and its summary."""
    scope = job.scope
    plan = replication_factor_plan(job.config, job.snapshot_read.result()[0].partitions, inputs.brokers_pdf,
                                   load_pdf, bands_pdf, scope.topics, int(scope.replication_factor or 0),
                                   min_insync_of(inputs.manifest), cordoned_brokers(inputs.manifest))
    return {**_without_planner(pd.DataFrame(columns=MOVES.names)), "changes": plan.changes, "cannot": plan.cannot,
            "replication_factor": plan.summary}
