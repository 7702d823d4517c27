"""The great-expectations suite over the plan and its predicted after-state, and its runner.

A failed expectation stops execution: the validation stage records which expectation failed on which rows,
and execution refuses any plan whose hash is not the one validated here.
"""

from __future__ import annotations

import logging
from typing import Any, cast

import pandas as pd

from kafka_rebalancer.config import RebalancerConfig
from kafka_rebalancer.errors import RunFolderError, ValidationFailed
from kafka_rebalancer.model.reassignment import parse_reassignment, plan_folder_hash
from kafka_rebalancer.model.schemas import BANDS, BROKER_LOAD_AFTER, HARD, INFEASIBLE, LOG_DIR_MOVES, PLANNER_NOTES
from kafka_rebalancer.operations.request import PlanningScope, read_request, scope_of
from kafka_rebalancer.plan.balance.spread_violations import forced_receivers
from kafka_rebalancer.plan.promises import (
    VALID_VERDICTS,
    excuses_of_run,
    log_dir_promises,
    placement_after,
    promise_lines,
    promise_rows,
)
from kafka_rebalancer.plan.recheck import band_rows, claim_rows, left_outside, recheck_plan
from kafka_rebalancer.run_folder import PLAN, VALIDATION, RunFolder, read_json, read_table, write_json
from kafka_rebalancer.snapshot.store import cordoned_brokers, read_snapshot
from kafka_rebalancer.validate.checks import CheckTables, build_checks, excuse_forced_receivers, spread_rows
from kafka_rebalancer.validate.log_dir_checks import arrival_check_rows, log_dir_check_rows, replica_dirs_after

log = logging.getLogger(__name__)

# (table, expectation class name, kwargs, what it protects): the suite, defined in code.
_TRUE = {"value_set": [True]}
SUITE: list[tuple[str, str, dict[str, Any], str]] = [
    ("partitions", "ExpectColumnValuesToBeInSet", {"column": "in_snapshot", **_TRUE},
     "every planned partition exists (partition count unchanged)"),
    ("partitions", "ExpectColumnPairValuesToBeEqual", {"column_A": "rf_expected", "column_B": "rf_after"},
     "replication factor unchanged (change-replication-factor: its topics at the target, every other unchanged)"),
    ("partitions", "ExpectColumnValuesToBeInSet", {"column": "no_duplicate_broker", **_TRUE},
     "no broker twice in a partition"),
    ("partitions", "ExpectColumnValuesToBeInSet", {"column": "targets_in_pool", **_TRUE},
     "every replica on a broker of the topic's pool (one already outside it may stay only in an under-replicated "
     "partition, which the plan may not move but to replace a dead broker's replica, or where the planner says why "
     "it could not bring it home)"),
    ("partitions", "ExpectColumnValuesToBeInSet", {"column": "targets_alive", **_TRUE},
     "no replica moved to a dead, unknown or cordoned broker"),
    ("partitions", "ExpectColumnValuesToBeInSet", {"column": "racks_kept", **_TRUE},
     "rack diversity not reduced, but to the racks the pool's brokers taking replicas still offer (a dead or drained "
     "broker alone on its rack)"),
    ("partitions", "ExpectColumnValuesToBeInSet", {"column": "isr_safe", **_TRUE},
     "no under-replicated partition moved (ISR safety; only a dead broker's replica may be replaced)"),
    ("partitions", "ExpectColumnValuesToBeInSet", {"column": "has_leader", **_TRUE},
     "no leaderless partition moved"),
    ("partitions", "ExpectColumnValuesToBeInSet", {"column": "old_matches_snapshot", **_TRUE},
     "rollback (old assignment) equals the snapshot"),
    ("partitions", "ExpectColumnValuesToBeInSet", {"column": "topic_not_excluded", **_TRUE},
     "excluded topics untouched, but for their replicas leaving a drained broker and a demotion's new leaders"),
    ("partitions", "ExpectColumnValuesToBeInSet", {"column": "no_excluded_broker", **_TRUE},
     "excluded brokers untouched"),
    ("brokers", "ExpectColumnValuesToBeInSet", {"column": "inside_or_closer", **_TRUE},
     "every broker inside its band, or closer to it than before or than once the replicas the plan takes off it by "
     "force have left, for every balanced resource (or receiving replicas that must leave a dead, drained or other "
     "pool's broker, with the planner's reason for leaving it outside)"),
    ("claims", "ExpectColumnValuesToBeInSet", {"column": "agrees", **_TRUE},
     "the planner's predicted load and band verdict per broker (broker_load_after) match the re-check of plan.json"),
    ("bands", "ExpectColumnValuesToBeInSet", {"column": "agrees", **_TRUE},
     "the plan's band of every pool and resource (bands.parquet) matches the band the re-check derives from the "
     "snapshot and the replicas that must leave their brokers"),
    ("left_outside", "ExpectColumnValuesToBeInSet", {"column": "explained", **_TRUE},
     "every broker the plan leaves outside its band, fixes but leaves outside its target band, takes out of its "
     "target band (further from it than before), or leaves holding replicas that must leave it (dead, drained, "
     "outside their topic's pool), is listed with the planner's reason (a note or an infeasibility proof)"),
    ("promises", "ExpectColumnValuesToBeInSet", {"column": "verdict", "value_set": list(VALID_VERDICTS)},
     "what the action promises (a drained broker holds no replica, an added broker ends inside its band, isolated "
     "topics only on their pool, a demoted broker leads nothing it can hand over) is kept, or the plan says why it "
     "cannot be"),
    ("log_dir_moves", "ExpectColumnValuesToBeInSet", {"column": "source_matches_snapshot", **_TRUE},
     "every move between log dirs starts from the directory the snapshot has the replica in"),
    ("log_dir_moves", "ExpectColumnValuesToBeInSet", {"column": "stays_on_broker", **_TRUE},
     "no replica both moves between log dirs and leaves its broker"),
    ("log_dir_moves", "ExpectColumnValuesToBeInSet", {"column": "target_takes_replicas", **_TRUE},
     "every move between log dirs goes to another log dir of its broker that is not removed, cordoned or offline"),
    ("log_dir_moves", "ExpectColumnValuesToBeInSet", {"column": "target_fits", **_TRUE},
     "no log dir ends over its capacity"),
    ("arrival_dirs", "ExpectColumnValuesToBeInSet", {"column": "arrives", **_TRUE},
     "plan.json names a log dir only for a replica arriving from another broker"),
    ("arrival_dirs", "ExpectColumnValuesToBeInSet", {"column": "target_takes_replicas", **_TRUE},
     "every log dir plan.json names is one of the receiving broker's that is not removed, cordoned or offline"),
    # The data itself, in case a bad snapshot slipped past the row checks: these would otherwise pass the plan on.
    ("partitions", "ExpectCompoundColumnsToBeUnique", {"column_list": ["topic", "partition"]},
     "one plan row per partition"),
    ("partitions", "ExpectColumnValuesToBeBetween", {"column": "snapshot_rows", "max_value": 1},
     "one snapshot row per planned partition"),
    ("partitions", "ExpectColumnValuesToBeBetween", {"column": "size_bytes", "min_value": 0},
     "partition sizes not negative"),
    ("partitions", "ExpectColumnValuesToBeBetween", {"column": "moved_bytes", "min_value": 0},
     "moved bytes not negative"),
    ("brokers", "ExpectCompoundColumnsToBeUnique", {"column_list": ["broker_id", "resource"]},
     "one row per broker and resource (no duplicate broker rows)"),
    ("brokers", "ExpectColumnValuesToBeBetween", {"column": "usage_before", "min_value": 0},
     "no negative broker load before the plan (negative sizes or rates)"),
    ("brokers", "ExpectColumnValuesToBeBetween", {"column": "usage_after", "min_value": 0},
     "no negative broker load after the plan (negative sizes or rates)"),
]
# A failed row names its keys; a failed claim or band also shows both values.
_INDEX = {"partitions": ["topic", "partition"], "brokers": ["broker_id", "resource"], "totals": ["plan"],
          "claims": ["broker_id", "resource", "load_claimed", "load_rechecked", "inside_claimed", "inside_rechecked"],
          "left_outside": ["broker_id", "resource", "left"],
          "promises": ["action", "broker_id", "topic", "partition", "detail"],
          "log_dir_moves": ["topic", "partition", "broker_id", "source_dir", "target_dir"],
          "arrival_dirs": ["topic", "partition", "broker_id", "target_dir"],
          "topic_spread": ["topic", "broker_id", "kind", "held_before", "held", "cap"],
          "bands": ["broker_pool", "resource", "balanced_planned", "balanced_rechecked", "mean_planned",
                    "mean_rechecked", "lower_planned", "lower_rechecked", "upper_planned", "upper_rechecked"]}


def _config_expectations(config: RebalancerConfig) -> list[tuple[str, str, dict[str, Any], str]]:
    """The expectations the config sets: its budgets, and the topic spread's caps when it is on (off, there is no
    expectation: the suite and its report stay as they were)."""
    spread = config.topic_spread
    caps = [("topic_spread", "ExpectColumnValuesToBeInSet", {"column": "within_cap", **_TRUE},
             f"no broker holds more of a topic than max(what it held before, ceil(share) + {spread.margin}) replicas, "
             "nor leaders (the first replica of a planned partition leads), but where it receives a replica that must "
             "leave a dead, drained or other pool's broker (topic_spread)")] if spread.enabled else []
    return _budget_expectations(config) + caps


def _budget_expectations(config: RebalancerConfig) -> list[tuple[str, str, dict[str, Any], str]]:
    b = config.budgets
    out = [("totals", "ExpectColumnValuesToBeBetween",
            {"column": "replica_moves", "min_value": 0, "max_value": b.max_replica_moves},
            f"at most {b.max_replica_moves} replica moves (budgets.max_replica_moves)")]
    if b.max_moved_bytes is not None:
        out.append(("totals", "ExpectColumnValuesToBeBetween",
                    {"column": "moved_bytes", "min_value": 0, "max_value": b.max_moved_bytes},
                    f"at most {b.max_moved_bytes} bytes moved (budgets.max_moved_bytes)"))
    if b.max_moves_per_broker is not None:
        out.append(("totals", "ExpectColumnValuesToBeBetween",
                    {"column": "max_moves_per_broker", "min_value": 0, "max_value": b.max_moves_per_broker},
                    f"at most {b.max_moves_per_broker} moves per broker (budgets.max_moves_per_broker)"))
    return out


def run_suite(checks: CheckTables, config: RebalancerConfig) -> tuple[bool, list[dict[str, Any]], list[dict]]:
    """Validate the check tables; returns (success, failures with their rows, raw GX results)."""
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig
    from great_expectations.expectations.expectation_configuration import ExpectationConfiguration

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    source = context.data_sources.add_pandas("kafka_rebalancer_plan")
    frames = {"partitions": checks.partitions, "brokers": checks.brokers, "totals": checks.totals,
              "claims": checks.claims, "left_outside": checks.left_outside, "bands": checks.bands,
              "promises": checks.promises, "log_dir_moves": checks.log_dir_moves,
              "arrival_dirs": checks.arrival_dirs, "topic_spread": checks.topic_spread}
    failures: list[dict[str, Any]] = []
    raw: list[dict] = []
    for table, frame in frames.items():
        entries = [e for e in [*SUITE, *_config_expectations(config)] if e[0] == table]
        suite = context.suites.add(gx.ExpectationSuite(name=f"plan_{table}"))
        for _, kind, kwargs, description in entries:
            suite.add_expectation(getattr(gx.expectations, kind)(**kwargs, meta={"description": description}))
        if frame.empty:  # nothing planned: every expectation holds vacuously
            continue
        batch = (source.add_dataframe_asset(table).add_batch_definition_whole_dataframe("all")
                 .get_batch(batch_parameters={"dataframe": frame.reset_index(drop=True)}))
        result = batch.validate(suite, result_format={"result_format": "COMPLETE",
                                                      "unexpected_index_column_names": _INDEX[table]})
        raw.append(result.to_json_dict())
        for r in result.results:
            if not r.success:
                # cast: GX types a result's config optional; validating a suite sets it on every result
                expectation = cast(ExpectationConfiguration, r.expectation_config)
                rows = [{k: _plain(v) for k, v in row.items()}
                        for row in r.result.get("unexpected_index_list") or []]
                failures.append({"table": table, "expectation": expectation.type,
                                 "kwargs": {k: v for k, v in expectation.kwargs.items() if k != "batch_id"},
                                 "description": expectation.meta.get("description"),
                                 "unexpected_count": r.result.get("unexpected_count"), "rows": rows})
    return not failures, failures, raw


def _plain(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


def validate_plan(config: RebalancerConfig, run: RunFolder) -> dict[str, Any]:
    """Run the suite on the run's plan; saves the results, raises ValidationFailed if any expectation fails."""
    plan_dir = run.require(PLAN)
    summary = read_json(plan_dir / "summary.json")
    plan_text = (plan_dir / "plan.json").read_text()
    digest = plan_folder_hash(plan_dir, summary["snapshot_hash"], config.fingerprint())
    if digest != summary["plan_hash"]:
        raise RunFolderError(f"{plan_dir / 'plan.json'} does not match the plan summary's hash "
                             f"(edited after planning, or the config changed since): re-run the plan step")
    snapshot, manifest = read_snapshot(run)
    plan = parse_reassignment(plan_text, str(plan_dir / "plan.json"))
    rollback = parse_reassignment((plan_dir / "rollback.json").read_text(), str(plan_dir / "rollback.json"))
    bands = read_table(plan_dir, BANDS)
    request = read_request(run)
    draining = frozenset(scope_of(request).drained)
    recheck = recheck_plan(config, snapshot, plan, bands, draining)
    left = left_outside(recheck, read_table(plan_dir, PLANNER_NOTES), read_table(plan_dir, INFEASIBLE),
                        scope_of(request))
    kept_explained = frozenset(int(b) for b in left.loc[(left["resource"] == HARD) & left["explained"], "broker_id"])
    checks = build_checks(config, snapshot, plan, rollback, bands, draining,
                          demoting=bool(scope_of(request).demoted),
                          cordoned=cordoned_brokers(manifest), kept_explained=kept_explained,
                          resized=resized_topics(scope_of(request)))
    checks.claims = claim_rows(read_table(plan_dir, BROKER_LOAD_AFTER), recheck, bands)
    checks.bands = band_rows(recheck, bands)
    checks.left_outside = left
    excuses = excuses_of_run(run, snapshot, request)
    alive = snapshot.brokers.loc[snapshot.brokers["alive"].astype(bool), "broker_id"]
    forced = forced_receivers(config, snapshot, plan, draining, scope_of(request).demoted)
    checks.brokers = excuse_forced_receivers(checks.brokers, left, {b for _, b in forced})
    checks.promises = promise_rows(request, config, placement_after(snapshot.partitions, plan), recheck.after, alive,
                                   excuses)
    checks.arrival_dirs = arrival_check_rows(snapshot, plan, rollback, scope_of(request).removed_log_dirs)
    checks.topic_spread = spread_rows(recheck.spread, forced if config.topic_spread.enabled else set())
    moves_file = plan_dir / f"{LOG_DIR_MOVES.name}.parquet"
    if moves_file.exists():
        moves, removed = read_table(plan_dir, LOG_DIR_MOVES), scope_of(request).removed_log_dirs
        checks.log_dir_moves = log_dir_check_rows(snapshot, moves, plan, removed)
        if removed:
            checks.promises = pd.concat([checks.promises, log_dir_promises(
                request, replica_dirs_after(snapshot.replica_log_dirs, moves),
                zip(moves["topic"], moves["partition"], moves["broker_id"], strict=True))], ignore_index=True)
    success, failures, raw = run_suite(checks, config)
    report = {"success": success, "plan_hash": digest, "partitions_checked": len(checks.partitions),
              "broker_resource_pairs_checked": len(checks.brokers),
              # Those on an empty table (no promises of the nightly run, no claims of a leadership-only plan) hold
              # vacuously and are counted apart.
              "expectations": sum(len(r.get("results", [])) for r in raw),
              "expectations_vacuous": len(SUITE) + len(_config_expectations(config))
              - sum(len(r.get("results", [])) for r in raw), "failures": failures}
    with run.stage(VALIDATION) as out:
        write_json(out / "report.json", report)
        write_json(out / "gx_results.json", raw)
        checks.partitions.to_csv(out / "partition_checks.csv", index=False)
        checks.brokers.to_csv(out / "broker_checks.csv", index=False)
        checks.claims.to_csv(out / "claim_checks.csv", index=False)
        checks.left_outside.to_csv(out / "left_outside_checks.csv", index=False)
        checks.bands.to_csv(out / "band_checks.csv", index=False)
        checks.promises.to_csv(out / "promises.csv", index=False)
        checks.log_dir_moves.to_csv(out / "log_dir_move_checks.csv", index=False)
        checks.arrival_dirs.to_csv(out / "arrival_dir_checks.csv", index=False)
        if config.topic_spread.enabled:
            checks.topic_spread.to_csv(out / "topic_spread_checks.csv", index=False)
    if not success:
        lines = [f"- {f['description']} ({f['expectation']} on {f['table']}): {f['unexpected_count']} row(s), "
                 f"e.g. {f['rows'][:5]}" for f in failures]
        for line in lines:
            log.error("validation failed: %s", line)
        raise ValidationFailed(f"plan {digest[:12]} failed {len(failures)} expectation(s); it will not be "
                               "executed:\n" + "\n".join(lines))
    for line in promise_lines(checks.promises):
        log.warning("promise not kept by this plan (%s); the run will not end verified", line)
    log.info("plan %s passed %d expectations on %d partitions and %d broker-resource pairs; results in %s",
             digest[:12], report["expectations"], len(checks.partitions), len(checks.brokers),
             run.stage_path(VALIDATION))
    return report


def resized_topics(scope: PlanningScope) -> tuple[tuple[str, ...], int] | None:
    """A replication factor change's topic patterns and target (None: the run keeps every partition's RF)."""
    return None if scope.replication_factor is None else (scope.topics, scope.replication_factor)


def assert_validated(run: RunFolder, digest: str) -> None:
    """Execution guard: the plan being executed is the plan that passed validation."""
    report = read_json(run.require(VALIDATION) / "report.json")
    if not report.get("success"):
        raise ValidationFailed("the plan failed validation; see validation/report.json")
    if report.get("plan_hash") != digest:
        raise ValidationFailed(f"plan hash {digest[:12]} is not the validated one "
                               f"({str(report.get('plan_hash'))[:12]}); re-run validate")

