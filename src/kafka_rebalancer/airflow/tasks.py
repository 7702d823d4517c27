"""The bodies of the DAGs' Python tasks (thin: each calls the library step with the run's config, folder and
connection)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from kafka_rebalancer.airflow.hooks import KafkaClusterHook
from kafka_rebalancer.log_setup import quiet_libraries

if TYPE_CHECKING:  # the tasks import the package's modules when they run: the DAGs parse light
    from collections.abc import Callable
    from datetime import timedelta

    from airflow.sdk import Context

    from kafka_rebalancer.automation.watch import ClusterEvent
    from kafka_rebalancer.config import RebalancerConfig
    from kafka_rebalancer.kafka_admin import KafkaConnection
    from kafka_rebalancer.run_folder import RunFolder

log = logging.getLogger(__name__)
quiet_libraries()  # before the tasks import great-expectations, whose import alone logs dozens of lines


def run_config_of(context: Context, run_dir: str | None = None) -> RebalancerConfig:
    """The run's config: the file, the stored pool overrides and, for a manual run, its own pending one."""
    from kafka_rebalancer.operations.request import run_config
    from kafka_rebalancer.run_folder import RunFolder

    return run_config(context["params"]["config_path"], RunFolder(run_dir) if run_dir else None)


def _user(context: Context) -> str:
    """Who triggered the run: the Airflow user, else the OS user of the worker."""
    from kafka_rebalancer.operations.overrides import current_user

    return getattr(context["dag_run"], "triggering_user_name", None) or current_user()


def _connection(config: RebalancerConfig) -> KafkaConnection:
    return KafkaClusterHook(config.cluster.airflow_connection_id, config.cluster.request_timeout_s).get_conn()


def dry_run_for(context: Context) -> bool:
    """mode=auto: scheduled runs execute, runs a person triggers only plan (safe default)."""
    mode = context["params"]["mode"]
    if mode == "auto":
        return str(getattr(context["dag_run"].run_type, "value", context["dag_run"].run_type)) != "scheduled"
    return mode == "dry-run"


def snapshot_task(context: Context) -> str:
    """A manual run's request is checked and written first (a wrong parameter fails here, naming it, before the
    cluster is touched); then the cluster is captured with the run's pools."""
    from kafka_rebalancer.snapshot.start import start_run

    params = context["params"]
    automatic = _claim_pools(context)
    request_params = None
    if "action" in params:  # the manual DAG
        request_params = {"action": params["action"], "broker_pool": params.get("broker_pool"),
                          "brokers": params.get("brokers"), "topics": params.get("topics"),
                          "reviewed_run_id": params.get("run_id"), "log_dirs": params.get("log_dirs"),
                          "unregister": params.get("unregister"),
                          "replication_factor": params.get("replication_factor"),
                          "reason": params.get("reason"),
                          "requested_by": "automation" if automatic else _user(context)}
    return str(start_run(params["config_path"], context["run_id"], request_params, _connection).path)


def _run_is_live(context: Context) -> Callable[[str, str], bool]:
    ti = context["ti"]
    return lambda dag_id, run_id: ti.get_dr_count(dag_id=dag_id, run_ids=[run_id], states=["queued", "running"]) > 0


def _claim_pools(context: Context) -> bool:
    """The run holds its pools until its report (holds.claims); an automatic run starts nothing on a pool
    another run holds: its events are held back (recorded, told as such, raised again after the cooldown) and the
    task fails on PoolsHeld, which the failure callback does not tell as a run failed. Whether the run is
    automatic."""
    import time

    from airflow.sdk.exceptions import AirflowFailException

    from kafka_rebalancer.airflow.deployment import cluster_of
    from kafka_rebalancer.airflow.notifications import notify_automation_events
    from kafka_rebalancer.automation.decide import held_back
    from kafka_rebalancer.automation.events_log import append_events, defer_events, started_records
    from kafka_rebalancer.errors import PoolsHeld
    from kafka_rebalancer.holds.claims import claim_pools
    from kafka_rebalancer.operations.request import run_config

    params, run_id = context["params"], context["run_id"]
    config = run_config(params["config_path"])
    pools = set(config.pools) | ({params["broker_pool"]} if params.get("broker_pool") else set())
    started = started_records(config, run_id)
    holding = claim_pools(config, context["dag_run"].dag_id, run_id, pools, _run_is_live(context),
                          exclusive=bool(started))
    if holding:
        why = "; ".join(f"pool(s) {', '.join(sorted(set(c.broker_pools) & pools))} held by {c.describe()}"
                        for c in holding)
        records = held_back(started, why, time.time(), config.automation.cooldown_s, run_id)
        append_events(config, records)
        defer_events(config, records)
        notify_automation_events(config, records, cluster_of(context["dag_run"].dag_id))
        raise AirflowFailException(f"automatic run: {why}; it starts nothing, its events are looked at again after "
                                   "the cooldown") from PoolsHeld(why)
    return bool(started)


def validate_task(context: Context, run_dir: str) -> list[str]:
    """Validate the plan; returns the pools the execute task is mapped over. First the plan step's capacity
    forecast raises its capacity_short events (recorded and told; they start nothing and never fail the task)."""
    from kafka_rebalancer.airflow.notifications import airflow_base_url
    from kafka_rebalancer.automation.capacity_short import report_capacity_short
    from kafka_rebalancer.notify.messages import report_link
    from kafka_rebalancer.run_folder import RunFolder
    from kafka_rebalancer.validate.suite import validate_plan

    config = run_config_of(context, run_dir)
    run = RunFolder(run_dir)
    report_capacity_short(config, run, context["run_id"], report_link(airflow_base_url(), context["run_id"],
                                                                      str(run.path / "report" / "index.html")))
    validate_plan(config, run)
    return sorted(config.pools)


def approval_decision(context: Context, run_dir: str) -> dict[str, Any]:
    """The approval step's first half: dry run (stop here), auto-approved (go on), or wait for a person with the
    plan's summary as the body."""
    from kafka_rebalancer.approve.approval import (
        PlanFacts,
        approval_body,
        unattended_refusals,
        write_decision,
    )
    from kafka_rebalancer.operations.request import read_request
    from kafka_rebalancer.run_folder import RunFolder

    config = run_config_of(context, run_dir)
    run = RunFolder(run_dir)
    facts = PlanFacts.read(config, run, context["params"].get("throttle_bytes_per_s"))
    if dry_run_for(context):
        why = "dry run: planned, validated and summarised; execute it later with action execute-reviewed, " \
              f"run_id {context['run_id']}"
        log.info("%s", why)
        return write_decision(run, facts.plan_hash, "dry-run", _user(context), why)
    request = read_request(run)
    # Moves between a broker's log dirs (remove-disks, the in-broker band) change no partition's replicas.
    moves_inside_brokers = (facts.summary.get("log_dir_moves") or {}).get("moves", 0)
    if facts.summary["totals"]["partitions_changed"] == 0 and not moves_inside_brokers and (
            request is None or request.override is None):
        log.info("the plan changes nothing: approved without asking")
        return write_decision(run, facts.plan_hash, "auto-approved", None, "the plan changes nothing")
    dag_run = context["dag_run"]
    scheduled = str(getattr(dag_run.run_type, "value", dag_run.run_type)) == "scheduled"
    automatic = automatic_mode(config, context)
    refusals = unattended_refusals(config, facts, manual_operation="action" in context["params"]
                                   and automatic != "execute", scheduled=scheduled,
                                   started=dag_run.start_date or context["logical_date"])
    if automatic == "approve":
        refusals.insert(0, "an automatic run in mode approve: a person approves it")
    if not refusals:
        log.info("plan %s within the auto-approval limits: executing unattended", facts.plan_hash[:12])
        if automatic == "execute":
            decision = write_decision(run, facts.plan_hash, "auto-approved", None, "an automatic run in mode "
                                      "execute, within the auto-approval limits")
            _record_override(config, run, "automation")  # the broker added joins its pool for the runs after
            return decision
        return write_decision(run, facts.plan_hash, "auto-approved", None, "within the auto-approval limits "
                              "and the execution window")
    for why in refusals:
        log.info("waiting for a person: %s", why)
    from kafka_rebalancer.airflow.deployment import cluster_of
    from kafka_rebalancer.notify.messages import report_url
    from kafka_rebalancer.report.run_report import write_report

    report = write_report(run)  # the person reviews the plan in it before answering
    log.info("report for the review: %s", report)
    link = report_url(context["run_id"], cluster_of(context["dag_run"].dag_id))
    body = approval_body(config, run, facts, refusals) + \
        f"\n\n[The run's report: usage, band, every move]({link}) ({report})"
    timeout = _response_timeout(context, config)
    totals = facts.summary["totals"]
    plan = {"cluster": config.cluster.name, "run_id": context["run_id"], "action": str(context["params"].get(
        "action") or "rebalance"), "pool": context["params"].get("broker_pool"),
        "reason": request.reason if request else "", "replica_moves": totals["replica_moves"],
        "moved_bytes": totals["moved_bytes"], "duration_s": facts.duration_s, "why_asked": refusals}
    return {"state": "waiting", "body": body,
            "subject": f"Execute plan {facts.plan_hash[:12]} on {config.cluster.name}?", "response_timeout": timeout,
            "waiting": {"plan": plan, "report_file": str(report), "timeout": str(timeout)}}  # for the notifier


def automatic_mode(config: RebalancerConfig, context: Context) -> str | None:
    """The automation mode the events DAG started this run with (None: not an automatic run). Its decision
    recorded the run id it chose, and the action, pool and brokers it asked for, which this run's must be."""
    from kafka_rebalancer.automation.events_log import started_records

    params = context["params"]
    started = started_records(config, context["run_id"])
    if not started or any(e.get("action") != params.get("action") or params.get("broker_pool") not in (
            None, e.get("broker_pool")) or set(e.get("brokers") or []) != set(params.get("brokers") or [])
            for e in started):
        return None
    return str(started[0].get("mode"))


def _response_timeout(context: Context, config: RebalancerConfig) -> timedelta:
    """The run's approval_timeout param, else the config's approval.response_timeout."""
    from datetime import timedelta

    from kafka_rebalancer.config import parse_duration

    given = context["params"].get("approval_timeout")
    return timedelta(seconds=parse_duration(given)) if given else config.approval.response_timedelta()


def record_answer(context: Context, run_dir: str, *, approved: bool, by: str | None,
                  timed_out: bool) -> dict[str, Any]:
    """The approval step's second half: the person's answer, and on approval the run's pool override."""
    from kafka_rebalancer.approve.approval import PlanFacts, write_decision
    from kafka_rebalancer.run_folder import APPROVAL, RunFolder

    config = run_config_of(context, run_dir)
    run = RunFolder(run_dir)
    digest = PlanFacts.read(config, run).plan_hash
    if timed_out:
        why = f"no answer within {_response_timeout(context, config)}: rejected, the cluster was not touched"
    else:
        why = f"{'approved' if approved else 'rejected'} by {by or 'unknown user'}"
    decision = write_decision(run, digest, "approved" if approved else "rejected", by, why)
    log.info("plan %s: %s; decision in %s", digest[:12], why, run.stage_path(APPROVAL))
    if approved:
        _record_override(config, run, by)
    return decision


def _record_override(config: RebalancerConfig, run: RunFolder, approved_by: str | None) -> None:
    from kafka_rebalancer.operations.request import record_override

    override = record_override(config, run, approved_by)
    if override is not None:
        log.info("pool override recorded: %s", override.describe())


def execute_task(context: Context, run_dir: str, broker_pool: str) -> dict[str, Any]:
    from pathlib import Path

    from airflow.sdk.exceptions import AirflowFailException

    from kafka_rebalancer.airflow.deployment import cluster_of
    from kafka_rebalancer.airflow.notifications import stall_notifier
    from kafka_rebalancer.errors import ExecutionCancelled, PermissionDenied
    from kafka_rebalancer.execute.executor import run_execute
    from kafka_rebalancer.run_folder import RunFolder

    config = run_config_of(context, run_dir)
    params = context["params"]
    log.info("pool %s: executing the approved plan (run type %s)", broker_pool, context["dag_run"].run_type)
    try:
        result = run_execute(config, _connection(config), RunFolder(run_dir), broker_pool, dry_run=False,
                             throttle_bytes_per_s=params.get("throttle_bytes_per_s"),
                             resume_cancelled=bool(params.get("resume_cancelled")), require_approval=True,
                             on_stalled=stall_notifier(config, context["run_id"], Path(run_dir), broker_pool,
                                                       cluster_of(context["dag_run"].dag_id)))
    except ExecutionCancelled as exc:
        raise AirflowFailException(str(exc)) from exc  # no retry: a retry would undo the operator's cancel
    except PermissionDenied as exc:
        raise AirflowFailException(str(exc)) from exc  # no retry: a retry does not grant an ACL
    return result


def report_task(context: Context) -> str | None:
    """The run's report from whatever its folder holds, however far the run got; then the task fails if another
    task of the run failed, so the run's state stays what happened (this task is the run's last)."""
    from airflow.sdk.exceptions import AirflowFailException

    from kafka_rebalancer.holds.claims import release_pools
    from kafka_rebalancer.report.run_report import write_report
    from kafka_rebalancer.run_folder import RunFolder

    config = run_config_of(context)
    run = RunFolder(config.run_dir(context["run_id"]))
    path = None
    try:
        if run.path.is_dir():
            path = write_report(run)
            log.info("report of run %s: %s", context["run_id"], path)
        else:
            log.info("run %s made no run folder (it failed before its snapshot): no report", context["run_id"])
    finally:  # the run's last task: its pools are free whatever the report did
        if release_pools(config, context["run_id"]):
            log.info("run %s no longer holds its pools", context["run_id"])
    ti = context["ti"]
    states = ti.get_task_states(dag_id=ti.dag_id, run_ids=[context["run_id"]]).get(context["run_id"], {})
    failed = sorted(task for task, state in states.items()
                    if state in ("failed", "upstream_failed") and task != ti.task_id)
    if failed:
        raise AirflowFailException(f"the run failed at {', '.join(failed)}; what it did is in "
                                   f"{path or 'the task logs'}")
    return str(path) if path else None


def cancel_task(context: Context) -> dict[str, Any]:
    """Cancel the executions of one run (params run_id, broker_pool) and clear their throttles; without a
    run_id, of every run whose reassignments are in flight. Whatever changed in the config since the plan."""
    from kafka_rebalancer.execute.cancel import run_cancel
    from kafka_rebalancer.execute.moves import run_pools
    from kafka_rebalancer.kafka_admin import ClusterAdmin
    from kafka_rebalancer.runs import existing_run, runs_to_cancel

    config = run_config_of(context)
    params = context["params"]
    connection = _connection(config)
    if params.get("run_id"):
        runs = [existing_run(config, params["run_id"])]
    else:
        with ClusterAdmin(connection) as admin:
            admin.check_reachable()
            runs = runs_to_cancel(config, admin.list_reassignments())
    results: dict[str, Any] = {}
    for run in runs:
        pools = run_pools(run) if params["broker_pool"] == "all" else [params["broker_pool"]]
        log.info("cancelling run %s, pools %s", run.path.name, ", ".join(pools))
        results[run.path.name] = {pool: run_cancel(config, connection, run, pool) for pool in pools}
    return results


def overrides_task(context: Context) -> list[dict[str, Any]]:
    """List the pool overrides, or revert one (params action, override_id); returns the store's overrides."""
    from kafka_rebalancer.errors import RebalancerError
    from kafka_rebalancer.execute.cordon import revert_override
    from kafka_rebalancer.kafka_admin import ClusterAdmin
    from kafka_rebalancer.operations.overrides import OverrideStore

    params = context["params"]
    config = run_config_of(context)
    store = OverrideStore.of(config)  # also checks that every stored override still fits the config
    if params["action"] == "revert":
        if params.get("override_id") is None:
            raise RebalancerError("action revert: parameter 'override_id' is required")
        reverted, uncordoned = revert_override(store, int(params["override_id"]), _user(context),
                                               lambda: ClusterAdmin(_connection(config)))
        log.info("reverted %s; the next run plans with the config's pools for it", reverted.describe())
        if uncordoned is not None:
            log.info("%s", uncordoned)
    overrides = store.read()
    for o in overrides:
        log.info("%s [%s] by %s, %s, run %s: %s", o.describe(), o.state, o.requested_by, o.created_at, o.run_id,
                 o.reason)
    if not overrides:
        log.info("no pool overrides in %s", store.path)
    return [o.model_dump(mode="json") for o in overrides]


def verify_task(context: Context, run_dir: str) -> dict[str, Any]:
    from airflow.sdk.exceptions import AirflowFailException

    from kafka_rebalancer.errors import PromiseNotKept
    from kafka_rebalancer.run_folder import RunFolder
    from kafka_rebalancer.verify.verification import verify_run

    config = run_config_of(context, run_dir)
    try:
        summary = verify_run(config, _connection(config), RunFolder(run_dir))
    except PromiseNotKept as exc:
        # No retry: it would judge the same cluster again a minute later, and hold back the message saying so.
        raise AirflowFailException(str(exc)) from exc
    return {k: summary[k] for k in ("plan_hash", "out_of_band_before", "out_of_band_after")}


def unregister_task(context: Context, run_dir: str) -> dict[str, Any] | None:
    """A verified drain's brokers unregistered, if its request asked for it (verify/unregister)."""
    from kafka_rebalancer.run_folder import RunFolder
    from kafka_rebalancer.verify.unregister import unregister_drained

    config = run_config_of(context, run_dir)
    return unregister_drained(config, _connection(config), RunFolder(run_dir))


def _triggering_events(context: Context) -> list[ClusterEvent]:
    """The events of the looks that triggered this run: each look with events is one asset event, its payload the
    trigger's; several may land in one run."""
    from kafka_rebalancer.automation.watch import ClusterEvent

    return [ClusterEvent(**e) for asset_events in context["triggering_asset_events"].values()
            for asset_event in asset_events for e in ((asset_event.extra or {}).get("payload") or {}).get("events", [])]


def check_bands_task(context: Context) -> list[dict[str, Any]]:
    """The events DAG's band check, when a look said the bands are due (automation.band_check): the events found."""
    from kafka_rebalancer.automation.band_check import check_bands
    from kafka_rebalancer.automation.watch import BANDS_DUE
    from kafka_rebalancer.operations.request import run_config

    if not any(e.kind == BANDS_DUE for e in _triggering_events(context)):
        log.info("no band check due in the events of this run")
        return []
    config = run_config(context["params"]["config_path"])
    events = check_bands(config, _connection(config))
    for event in events:
        log.info("%s: %s", event.kind, event.observed)
    log.info("band check: %d event(s)", len(events))
    return [e.as_dict() for e in events]


def decide_task(context: Context, band_events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events DAG's decision: the events of the looks that triggered this run and the band check's, decided
    (automation.decide), recorded in the events log, and each run to start as a run of the manual DAG: its run id
    and conf."""
    import secrets
    import time

    from kafka_rebalancer.airflow.deployment import cluster_of
    from kafka_rebalancer.airflow.notifications import notify_automation_events
    from kafka_rebalancer.automation.decide import STARTED, decide, planned_situations
    from kafka_rebalancer.automation.events_log import append_events, defer_events, event_line, read_events
    from kafka_rebalancer.automation.watch import BANDS_DUE, ClusterEvent
    from kafka_rebalancer.holds.claims import claimed_pools
    from kafka_rebalancer.model.run_actions import run_action
    from kafka_rebalancer.operations.request import run_config

    config_path = context["params"]["config_path"]
    config = run_config(config_path)
    events = [e for e in _triggering_events(context) if e.kind != BANDS_DUE] + [ClusterEvent(**e) for e in band_events]
    last_started: dict[str, float] = {}
    recorded = read_events(config)
    for entry in recorded:
        if entry.get("decision") == STARTED and entry.get("broker_pool"):
            last_started[entry["broker_pool"]] = max(last_started.get(entry["broker_pool"], 0.0),
                                                     float(entry.get("decided_at", 0.0)))
    held = {pool: claim.describe() for pool, claim in claimed_pools(config, _run_is_live(context)).items()}
    now = time.time()
    planned = planned_situations(recorded, lambda run_id: (config.run_dir(run_id) / "plan" / "summary.json").exists())
    runs, records = decide(events, config, last_started, now, held, planned)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
    # The run id is chosen here and recorded with the decision: the manual run knows itself automatic by it.
    run_ids = {r.broker_pool: f"automatic__{r.broker_pool}__{stamp}__{secrets.token_hex(4)}" for r in runs}
    records = [{**r, "decided_at": now, "decided_in": context["run_id"],
                **({"run_id": run_ids[r["broker_pool"]]} if r["decision"] == STARTED else {})} for r in records]
    append_events(config, records)
    defer_events(config, records)
    for record in records:
        log.info("%s: %s", record["decision"], event_line(record))
    notify_automation_events(config, records, cluster_of(context["dag_run"].dag_id))
    # approve and execute both run the manual DAG in execute mode; its approval step tells them apart.
    return [{"trigger_run_id": run_ids[r.broker_pool],
             "conf": {"action": r.action, "brokers": list(r.brokers),
                      # a drain names brokers only; their pool is where they are
                      "broker_pool": r.broker_pool if run_action(r.action).names_pool else None,
                      "reason": r.reason(), "mode": "dry-run" if r.mode == "dry-run" else "execute",
                      "config_path": config_path}} for r in runs]
