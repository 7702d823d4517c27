"""The Airflow side of notifications: the tasks' failure callback, and what it shares with the approval step's
notifier (operators.ApprovalWaitingNotifier, which the HITL operator calls once the approval is waiting under
Required Actions; it stays in operators.py, light enough for DAG parsing). Both read the run's config and
send with notify.outbox.deliver, which records each send in the run folder and never raises; they also catch
everything else, because the HITL operator calls its notifiers unguarded and a callback's error would hide the
failure it reports.

The links need Airflow's base URL: `[api] base_url` in Airflow's config (AIRFLOW__API__BASE_URL). Without it (a
`dag.test()` run such as the demo's has none) the messages say so in place of the link and give the report's file.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def airflow_base_url() -> str | None:
    from airflow.configuration import conf

    return conf.get("api", "base_url", fallback=None) or None


def run_record(run_dir: Path) -> Path | None:
    """The run's notifications record; None before the run has a folder (a snapshot that failed)."""
    from kafka_rebalancer.notify.outbox import RECORD_FILE

    return run_dir / RECORD_FILE if run_dir.is_dir() else None


def notify_task_failed(context: Any) -> None:
    """A task's on_failure_callback (after its retries): which task, the error's first line. The report task's own
    failure only repeats that of the task before it ("the run failed at ..."), so it sends nothing of its own."""
    try:
        from kafka_rebalancer.airflow.tasks import run_config_of
        from kafka_rebalancer.notify.messages import report_link, run_failed_notice
        from kafka_rebalancer.notify.outbox import deliver

        task_id = context["ti"].task_id
        error = str(context.get("exception") or context.get("reason") or "")
        if task_id == "report" and error.startswith("the run failed at"):
            return
        config = run_config_of(context)
        if not config.notifications.routes:
            return
        run_dir = config.run_dir(context["run_id"])
        report = report_link(airflow_base_url(), context["run_id"], str(run_dir / "report" / "index.html"))
        notice = run_failed_notice(config.cluster.name, context["run_id"], task_id, error, report,
                                   pool=context["params"].get("broker_pool"))
        deliver(config.notifications, notice, run_record(run_dir))
    except Exception:  # the callback must not hide the failure it reports
        log.exception("the run-failed notification was not sent")

