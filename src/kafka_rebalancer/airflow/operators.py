"""The approval step: the standard provider's ApprovalOperator (it shows up under the UI's required actions),
taught to decide first. A dry run stops there (execute and verify are skipped), a scheduled run within the
auto-approval limits and the execution window goes on unattended, anything else waits for a person, whose answer
(or the timeout, which rejects) is recorded in the run folder with the plan hash it approves."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.providers.standard.operators.hitl import ApprovalOperator
from airflow.sdk.bases.notifier import BaseNotifier
from airflow.sdk.timezone import utcnow

if TYPE_CHECKING:
    from airflow.sdk import Context
    from airflow.sdk.definitions._internal.node import DAGNode
    from airflow.sdk.types import RuntimeTaskInstanceProtocol

    from kafka_rebalancer.notify.messages import Notice, WaitingPlan

RUN_DIR = "{{ ti.xcom_pull(task_ids='snapshot') }}"  # the run folder, as the snapshot task returns it
DEFAULT_RESPONSE_TIMEOUT = timedelta(hours=12)
log = logging.getLogger(__name__)


def send_approval_notice(context: Context, operator: PlanApprovalOperator, waiting: dict[str, Any],
                         build: Callable[[WaitingPlan, str, str], Notice]) -> None:
    """Send the notice `build(plan, approval link, report link)` makes of the plan waiting; never raises (the HITL
    operator calls its notifiers unguarded, and an answer is recorded whatever the channels do)."""
    try:
        from kafka_rebalancer.airflow.deployment import cluster_of
        from kafka_rebalancer.airflow.notifications import airflow_base_url, run_record
        from kafka_rebalancer.airflow.tasks import run_config_of
        from kafka_rebalancer.notify.messages import NO_BASE_URL, WaitingPlan, report_link
        from kafka_rebalancer.notify.outbox import deliver

        config = run_config_of(context, operator.run_dir)
        if not config.notifications.routes:
            return
        base_url = airflow_base_url()
        approval = operator.generate_link_to_ui_from_context(context=context, base_url=base_url) if base_url \
            else f"Airflow's UI, Required Actions ({NO_BASE_URL})"
        report = report_link(base_url, context["run_id"], waiting["report_file"], cluster_of(context["ti"].dag_id))
        deliver(config.notifications, build(WaitingPlan(**waiting["plan"]), approval, report),
                run_record(Path(operator.run_dir)))
    except Exception:  # a notification never fails the approval step
        log.exception("the approval notification was not sent")


class ApprovalWaitingNotifier(BaseNotifier):
    """Tells the configured channels that a plan waits for a person: the operator (context["task"]) holds the
    waiting plan its decision described and the run folder."""

    def notify(self, context: Context) -> None:
        from kafka_rebalancer.notify.messages import approval_waiting_notice

        operator = context["task"]
        if isinstance(operator, PlanApprovalOperator):  # the notifier of that operator only
            timeout = operator.waiting["timeout"]
            send_approval_notice(context, operator, operator.waiting,
                                 lambda plan, approval, report: approval_waiting_notice(plan, approval, report,
                                                                                        timeout))


class PlanApprovalOperator(ApprovalOperator):
    """Approval of exactly the validated plan (see the module docstring). Reject is also the answer on timeout.

    The reminder: Airflow 3.3 parks the waiting task in AWAITING_INPUT (no trigger, no triggerer) and the
    scheduler's timeout sweep resumes it at its timeout with the default answer, Reject, marked timed out. When a
    reminder is routed and `notifications.remind_after` comes before the response timeout, the task parks until the
    reminder's time instead; resumed then (a timed-out answer before the real deadline), it sends the reminder,
    takes the sweep's default answer back (upserting the request clears a response) and parks again until the
    deadline. So the reminder fires from the scheduler, whichever of the triggerer or the automation runs; a person
    answering in the few seconds the task is resumed is told the request was already answered, and answers again.
    """
    template_fields = (*ApprovalOperator.template_fields, "run_dir")

    def __init__(self, *, run_dir: str = RUN_DIR, **kwargs: Any) -> None:
        super().__init__(subject="Execute this Kafka rebalance plan?", body="(filled in from the validated plan)",
                         defaults="Reject", response_timeout=DEFAULT_RESPONSE_TIMEOUT,
                         notifiers=[ApprovalWaitingNotifier()], **kwargs)
        self.run_dir = run_dir
        self.waiting: dict[str, Any] = {}  # what the decision says of the plan waiting, for the notifier

    def execute(self, context: Context) -> Any:
        from airflow.sdk.exceptions import TaskAwaitingInput

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
        try:
            return super().execute(context)  # which calls the notifiers once the approval is waiting
        except TaskAwaitingInput:  # parked: until the reminder's time, else the response timeout
            raise self._park(context, {"waiting": self.waiting, "since": utcnow().isoformat(),
                                       "deadline": (utcnow() + decision["response_timeout"]).isoformat()}) from None

    def _park(self, context: Context, waiting: dict[str, Any]) -> BaseException:
        """The parking of the task until the reminder is due (when one is routed and comes before the deadline), else
        until the deadline; `waiting` comes back to execute_complete."""
        from airflow.sdk.exceptions import TaskAwaitingInput

        from kafka_rebalancer.airflow.tasks import run_config_of

        left = datetime.fromisoformat(waiting["deadline"]) - utcnow()
        settings = run_config_of(context, self.run_dir).notifications
        remind_at = datetime.fromisoformat(waiting["since"]) + timedelta(seconds=settings.remind_after)
        reminder_due = not waiting.get("reminded") and settings.channels_for(
            "approval_reminder", waiting["waiting"]["plan"].get("pool")) and remind_at - utcnow() < left
        timeout = max(remind_at - utcnow(), timedelta(seconds=1)) if reminder_due else left
        return TaskAwaitingInput(method_name="execute_complete", kwargs=waiting, timeout=timeout)

    def skip(self, ti: RuntimeTaskInstanceProtocol, tasks: Iterable[DAGNode]) -> None:
        """Without an approval everything downstream that needs one is skipped here (execute and verify), not only
        the next task, so no task's outcome depends on how the scheduler propagates a skip through the mapped
        execute (CI once saw verify end upstream_failed); `report` (all_done) still runs."""
        needs_approval = [t for t in self.get_flat_relatives(upstream=False) if t.trigger_rule == "all_success"]
        super().skip(ti=ti, tasks=needs_approval)

    def execute_complete(self, context: Context, event: dict[str, Any], **waiting: Any) -> Any:
        from kafka_rebalancer.airflow.tasks import record_answer
        from kafka_rebalancer.notify.messages import approval_answered_notice, approval_reminder_notice

        timed_out = bool(event.get("timedout"))  # the scheduler applied the default answer, Reject
        if timed_out and waiting.get("deadline") and utcnow() < datetime.fromisoformat(waiting["deadline"]):
            # The reminder's time, not the deadline: remind, take the default answer back, wait on.
            since, deadline = (datetime.fromisoformat(waiting[k]) for k in ("since", "deadline"))
            send_approval_notice(context, self, waiting["waiting"], lambda plan, approval, report: (
                approval_reminder_notice(plan, approval, report, (utcnow() - since).total_seconds(),
                                         (deadline - utcnow()).total_seconds())))
            self._reopen(context)
            raise self._park(context, {**waiting, "reminded": True})
        user = event.get("responded_by_user") or {}
        approved, by = event["chosen_options"] == [self.APPROVE] and not timed_out, user.get("name") or user.get("id")
        record_answer(context, self.run_dir, approved=approved, by=by, timed_out=timed_out)
        if waiting.get("waiting"):  # a task parked before the reminders came carries no plan to tell of
            send_approval_notice(context, self, waiting["waiting"], lambda plan, approval, report: (
                approval_answered_notice(plan, approved, by, timed_out, report)))
        return super().execute_complete(context, event)

    def _reopen(self, context: Context) -> None:
        """Clear the default answer the scheduler wrote at the reminder's time: upserting the request of a task
        instance whose request has a response clears that response (Airflow's execution API)."""
        from airflow.sdk.execution_time.hitl import upsert_hitl_detail

        upsert_hitl_detail(ti_id=context["task_instance"].id, options=self.options, subject=self.subject,
                           body=self.body, defaults=self.defaults, multiple=self.multiple,
                           params=self.serialized_params, assigned_users=self.assigned_users)
