"""The Airflow side of notifications: the tasks' failure callback (a run failed, a verify that found promises not
kept, an execution timed out or cancelled), the execution's stall callback, the events DAG's decision told, and what
they share with the approval step's notifications (operators.py: waiting, reminder, answered; light enough for DAG
parsing). All read the run's config and send with notify.outbox.deliver, which records each send in the run folder
(the automation's in its folder) and never raises; they also catch everything else, because the HITL operator
calls its notifiers unguarded and a callback's error would hide the failure it reports.

The links need Airflow's base URL: `[api] base_url` in Airflow's config (AIRFLOW__API__BASE_URL). Without it (a
`dag.test()` run such as the demo's has none) the messages say so in place of the link and give the report's file.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kafka_rebalancer.config import RebalancerConfig
    from kafka_rebalancer.notify.messages import Notice

log = logging.getLogger(__name__)


def airflow_base_url() -> str | None:
    from airflow.configuration import conf

    return conf.get("api", "base_url", fallback=None) or None


def run_record(run_dir: Path) -> Path | None:
    """The run's notifications record; None before the run has a folder (a snapshot that failed)."""
    from kafka_rebalancer.notify.outbox import RECORD_FILE

    return run_dir / RECORD_FILE if run_dir.is_dir() else None


def failure_notice(cluster: str, run_id: str, task_id: str, exc: BaseException | None, error: str, report: str,
                   pool: str | None) -> Notice | None:
    """The message of a failed task: a verify that found promises not kept and an execution timed out or cancelled
    are told as such (their own kinds, routed on their own), an automatic run that found its pool held not at all
    (its events were told held back), anything else as the run failed."""
    from kafka_rebalancer.errors import ExecutionCancelled, ExecutionTimedOut, PoolsHeld, PromiseNotKept
    from kafka_rebalancer.notify.messages import execution_ended_notice, run_failed_notice, verify_failed_notice

    cause = exc.__cause__ if exc is not None and exc.__cause__ is not None else exc  # the task may wrap it
    if isinstance(cause, PoolsHeld):
        return None
    if isinstance(cause, PromiseNotKept):
        return verify_failed_notice(cluster, run_id, cause.not_kept, str(cause), report, pool=pool)
    if isinstance(cause, ExecutionCancelled | ExecutionTimedOut):
        return execution_ended_notice(cluster, run_id, cause.pool or pool or "-", isinstance(cause, ExecutionCancelled),
                                      str(cause), report)
    return run_failed_notice(cluster, run_id, task_id, error, report, pool=pool)


def notify_task_failed(context: Any) -> None:
    """A task's on_failure_callback (after its retries): which task, the error's first line (failure_notice). The
    report task's own failure only repeats that of the task before it ("the run failed at ..."), so it sends nothing
    of its own."""
    try:
        from kafka_rebalancer.airflow.tasks import run_config_of
        from kafka_rebalancer.notify.messages import report_link
        from kafka_rebalancer.notify.outbox import deliver

        task_id = context["ti"].task_id
        exc = context.get("exception")
        error = str(exc or context.get("reason") or "")
        if task_id == "report" and error.startswith("the run failed at"):
            return
        config = run_config_of(context)
        if not config.notifications.routes:
            return
        run_dir = config.run_dir(context["run_id"])
        report = report_link(airflow_base_url(), context["run_id"], str(run_dir / "report" / "index.html"))
        notice = failure_notice(config.cluster.name, context["run_id"], task_id,
                                exc if isinstance(exc, BaseException) else None, error, report,
                                context["params"].get("broker_pool"))
        if notice is not None:
            deliver(config.notifications, notice, run_record(run_dir))
    except Exception:  # the callback must not hide the failure it reports
        log.exception("the run-failed notification was not sent")


def stall_notifier(config: RebalancerConfig, run_id: str, run_dir: Path, pool: str) -> Callable[[list[str]], None]:
    """The execution's on_stalled: tells the channels once per run and pool that moves copy nothing (it runs in the
    executor's loop: it never raises and holds it at most 10 s per channel)."""
    from kafka_rebalancer.notify.messages import execution_stalled_notice, report_link
    from kafka_rebalancer.notify.outbox import deliver

    def tell(stalled: list[str]) -> None:
        try:
            report = report_link(airflow_base_url(), run_id, str(run_dir / "report" / "index.html"))
            notice = execution_stalled_notice(config.cluster.name, run_id, pool, stalled,
                                              config.execution.stall_after_s, report)
            deliver(config.notifications, notice, run_record(run_dir))
        except Exception:  # a notification never stops an execution
            log.exception("the execution-stalled notification was not sent")

    return tell


def notify_automation_events(config: RebalancerConfig, records: list[dict[str, Any]]) -> None:
    """The events DAG's decision told: each event started, held back, suppressed or reported, once per event
    (notify.automation_events); never raises."""
    try:
        from kafka_rebalancer.automation.events_log import automation_dir
        from kafka_rebalancer.notify.automation_events import notify_events
        from kafka_rebalancer.notify.messages import report_link

        automation = config.automation
        # A held-back event is raised again within the cooldown, a pool's out of band at each band check.
        rearm_s = 2 * max(automation.cooldown_s, automation.poll_interval_s, automation.out_of_band.check_interval_s)
        base_url = airflow_base_url()
        notify_events(config.notifications, config.cluster.name, records, automation_dir(config), rearm_s,
                      lambda run_id: report_link(base_url, run_id, str(config.run_dir(run_id) / "report"
                                                                      / "index.html")))
    except Exception:  # the decision is recorded and its runs start whatever the channels do
        log.exception("the automation events' notifications were not sent")
