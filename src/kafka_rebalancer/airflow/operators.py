"""The approval step: the standard provider's ApprovalOperator (it shows up under the UI's required actions),
taught to decide first. A dry run stops there (execute and verify are skipped), a scheduled run within the
auto-approval limits and the execution window goes on unattended, anything else waits for a person, whose answer
(or the timeout, which rejects) is recorded in the run folder with the plan hash it approves."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.providers.standard.operators.hitl import ApprovalOperator
from airflow.sdk.bases.notifier import BaseNotifier

if TYPE_CHECKING:
    from airflow.sdk import Context
    from airflow.sdk.definitions._internal.node import DAGNode
    from airflow.sdk.types import RuntimeTaskInstanceProtocol

RUN_DIR = "{{ ti.xcom_pull(task_ids='snapshot') }}"  # the run folder, as the snapshot task returns it
DEFAULT_RESPONSE_TIMEOUT = timedelta(hours=12)
log = logging.getLogger(__name__)


class ApprovalWaitingNotifier(BaseNotifier):
    """Tells the configured channels that a plan waits for a person: the operator (context["task"]) holds the
    waiting plan its decision described and the run folder."""

    def notify(self, context: Context) -> None:
        try:
            self._send(context)
        except Exception:  # a notification never fails the approval step
            log.exception("the approval-waiting notification was not sent")

    def _send(self, context: Context) -> None:
        from kafka_rebalancer.airflow.notifications import airflow_base_url, run_record
        from kafka_rebalancer.airflow.tasks import run_config_of
        from kafka_rebalancer.notify.messages import NO_BASE_URL, WaitingPlan, approval_waiting_notice, report_link
        from kafka_rebalancer.notify.outbox import deliver

        operator = context["task"]
        if not isinstance(operator, PlanApprovalOperator):  # the notifier of that operator only
            return
        config = run_config_of(context, operator.run_dir)
        if not config.notifications.routes:
            return
        base_url = airflow_base_url()
        approval = operator.generate_link_to_ui_from_context(context=context, base_url=base_url) if base_url \
            else f"Airflow's UI, Required Actions ({NO_BASE_URL})"
        waiting = operator.waiting
        report = report_link(base_url, context["run_id"], waiting["report_file"])
        notice = approval_waiting_notice(WaitingPlan(**waiting["plan"]), approval, report, waiting["timeout"])
        deliver(config.notifications, notice, run_record(Path(operator.run_dir)))


class PlanApprovalOperator(ApprovalOperator):
    """Approval of exactly the validated plan (see the module docstring). Reject is also the answer on timeout."""

    template_fields = (*ApprovalOperator.template_fields, "run_dir")

    def __init__(self, *, run_dir: str = RUN_DIR, **kwargs: Any) -> None:
        super().__init__(subject="Execute this Kafka rebalance plan?", body="(filled in from the validated plan)",
                         defaults="Reject", response_timeout=DEFAULT_RESPONSE_TIMEOUT,
                         notifiers=[ApprovalWaitingNotifier()], **kwargs)
        self.run_dir = run_dir
        self.waiting: dict[str, Any] = {}  # what the decision says of the plan waiting, for the notifier

    def execute(self, context: Context) -> Any:
        from kafka_rebalancer.airflow.tasks import approval_decision

        decision = approval_decision(context, self.run_dir)
        if decision["state"] == "dry-run" or decision["state"] == "auto-approved":
            if decision["state"] == "dry-run":
                self.skip(ti=context["ti"], tasks=list(context["task"].get_direct_relatives(upstream=False)))
            return decision
        self.body = decision["body"]
        self.subject = decision["subject"]
        self.response_timeout = decision["response_timeout"]
        self.waiting = decision["waiting"]
        return super().execute(context)  # which calls the notifiers once the approval is waiting

    def skip(self, ti: RuntimeTaskInstanceProtocol, tasks: Iterable[DAGNode]) -> None:
        """Without an approval everything downstream that needs one is skipped here (execute and verify), not only
        the next task, so no task's outcome depends on how the scheduler propagates a skip through the mapped
        execute (CI once saw verify end upstream_failed); `report` (all_done) still runs."""
        needs_approval = [t for t in self.get_flat_relatives(upstream=False) if t.trigger_rule == "all_success"]
        super().skip(ti=ti, tasks=needs_approval)

    def execute_complete(self, context: Context, event: dict[str, Any]) -> Any:
        from kafka_rebalancer.airflow.tasks import record_answer

        timed_out = bool(event.get("timedout"))  # the scheduler applied the default answer, Reject
        user = event.get("responded_by_user") or {}
        record_answer(context, self.run_dir, approved=event["chosen_options"] == [self.APPROVE] and not timed_out,
                      by=user.get("name") or user.get("id"), timed_out=timed_out)
        return super().execute_complete(context, event)
