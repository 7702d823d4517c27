"""What a message says, and how each channel shows it: Slack blocks, a plain-text e-mail, generic JSON.

A message says what happened and what to do, with the facts a person acts on (cluster, pool, action, reason,
the plan's moves, bytes and estimated duration, the run id) and links: the approval in Airflow's UI and the run's
report. The links need Airflow's base URL (`[api] base_url` in Airflow's config, passed in by the caller); a run
without one (the demo's `dag.test()` run has none) says so in place of the link and gives the report's file path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kafka_rebalancer.model.units import human_bytes, human_duration

NO_BASE_URL = "no link: Airflow's [api] base_url is not set (a dag.test() run has none)"


@dataclass(frozen=True)
class Notice:
    """One message: `kind` (notification_settings.NOTIFICATION_KINDS) and `state` (the occasion within the run,
    e.g. the failed task's id) are what it is sent once for."""

    kind: str
    state: str
    title: str
    happened: str
    to_do: str
    cluster: str
    run_id: str | None = None
    pool: str | None = None
    facts: dict[str, str] = field(default_factory=dict)  # label -> value, in the order shown
    links: dict[str, str] = field(default_factory=dict)  # label -> URL, or why there is none

    @property
    def key(self) -> str:
        return message_key(self.kind, self.state)


def message_key(kind: str, state: str) -> str:
    """What a message is sent once for (its entry in a notifications record)."""
    return f"{kind}:{state}"


def _facts_of(notice: Notice) -> dict[str, str]:
    shown = {"cluster": notice.cluster}
    if notice.pool:
        shown["pool"] = notice.pool
    shown.update(notice.facts)
    if notice.run_id:
        shown["run id"] = notice.run_id
    return shown


def plain_text(notice: Notice) -> tuple[str, str]:
    """(subject, body) of an e-mail that reads well in a plain-text client: label: value lines, URLs whole."""
    facts = _facts_of(notice)
    width = max(len(label) for label in facts) + 1
    lines = [notice.happened, "", *(f"{label + ':':<{width}} {value}" for label, value in facts.items()),
             "", f"What to do: {notice.to_do}"]
    if notice.links:
        lines += ["", *(f"{label}: {target}" for label, target in notice.links.items())]
    return f"[kafka-rebalancer] {notice.title}", "\n".join(lines) + "\n"


def _slack_link(label: str, target: str) -> str:
    return f"<{target}|{label}>" if target.startswith(("http://", "https://")) else f"{label}: {target}"


def slack_message(notice: Notice) -> tuple[str, list[dict[str, Any]]]:
    """(fallback text, blocks) for a Slack incoming webhook."""
    facts = _facts_of(notice)
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": notice.title[:150]}},
        {"type": "section", "text": {"type": "mrkdwn", "text": notice.happened[:3000]}},
        {"type": "section", "fields": [{"type": "mrkdwn", "text": f"*{label}*\n{value}"[:2000]}
                                       for label, value in list(facts.items())[:10]]},
        {"type": "section", "text": {"type": "mrkdwn", "text": f"*What to do:* {notice.to_do}"[:3000]}},
    ]
    if notice.links:
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": _slack_link(label, target)}
                                                       for label, target in notice.links.items()]})
    return f"{notice.title}: {notice.happened}", blocks


def json_payload(notice: Notice) -> dict[str, Any]:
    """The generic webhook's body: every field by name."""
    return {"source": "kafka-rebalancer", "kind": notice.kind, "state": notice.state, "title": notice.title,
            "happened": notice.happened, "to_do": notice.to_do, "cluster": notice.cluster, "pool": notice.pool,
            "run_id": notice.run_id, "facts": notice.facts, "links": notice.links}


def report_link(base_url: str | None, run_id: str, report_file: str | None) -> str:
    """The run's report on the API server's runs page (airflow/ui.py), else where its file is."""
    if base_url:
        return f"{base_url.rstrip('/')}/kafka-rebalancer/report/{run_id}"
    return f"{report_file or 'report/index.html in the run folder'} ({NO_BASE_URL})"


def test_notice(cluster: str, channel: str) -> Notice:
    return Notice(kind="test", state=channel, title=f"Test message to channel {channel}",
                  happened=f"kafka-rebalancer notify-test sent this to channel {channel!r}.",
                  to_do="nothing: this channel works.", cluster=cluster)


def run_failed_notice(cluster: str, run_id: str, task_id: str, error: str, report: str, *,
                      pool: str | None = None) -> Notice:
    """A task of a run failed (after its retries): which task and the error's first line."""
    return Notice(kind="run_failed", state="failed", title=f"Run failed at {task_id} on {cluster}",
                  happened=f"Task `{task_id}` of run {run_id} failed: {_first_line(error)}",
                  to_do="read the task's log in Airflow and the run's report; the run's pools are free again once "
                        "its report task has run. Fix the cause, then trigger the run again.",
                  cluster=cluster, run_id=run_id, pool=pool, facts={"task": task_id}, links={"report": report})


@dataclass(frozen=True)
class WaitingPlan:
    """What the approval step knows of the plan a person is asked to approve."""

    cluster: str
    run_id: str
    action: str
    pool: str | None
    reason: str
    replica_moves: int
    moved_bytes: int
    duration_s: float | None
    why_asked: list[str]  # why it was not approved unattended


def approval_waiting_notice(plan: WaitingPlan, approval_link: str, report: str, timeout: str) -> Notice:
    facts = {"action": plan.action, "reason": plan.reason or "(none given)",
             "moves": f"{plan.replica_moves} replica moves", "bytes": human_bytes(plan.moved_bytes),
             "estimated duration": human_duration(plan.duration_s), "waits at most": timeout}
    return Notice(kind="approval_waiting", state="waiting", title=f"Approval waiting: {plan.action} on {plan.cluster}",
                  happened=f"Run {plan.run_id} planned {plan.replica_moves} replica moves "
                           f"({human_bytes(plan.moved_bytes)}) and waits for a person: " + "; ".join(plan.why_asked),
                  to_do=f"review the plan in the report, then Approve or Reject it in Airflow (Required Actions). "
                        f"No answer within {timeout} rejects it; the cluster is not touched until it is approved.",
                  cluster=plan.cluster, run_id=plan.run_id, pool=plan.pool, facts=facts,
                  links={"approve or reject": approval_link, "report": report})


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "(no message)")[:500]


def _listed(items: list[str], limit: int = 10) -> str:
    """Items as '- ' lines, the first `limit`, then how many more."""
    more = [f"... and {len(items) - limit} more"] if len(items) > limit else []
    return "\n".join([f"- {item}" for item in items[:limit]] + more)


def verify_failed_notice(cluster: str, run_id: str, not_kept: list[str], error: str, report: str, *,
                         pool: str | None = None) -> Notice:
    """Verify found the run's promises (or the topic spread cells its plan added to) not kept on the cluster."""
    items = not_kept or [_first_line(error)]
    return Notice(kind="verify_failed", state="not kept", title=f"Promise not kept by run {run_id} on {cluster}",
                  happened=f"Run {run_id} executed its plan, but verify found {len(items)} promise(s) or topic spread "
                           f"cell(s) not kept on the cluster:\n{_listed(items)}",
                  to_do="read promises.csv and topic_spread.csv in the run folder's verify/ and the report: a "
                        "broker that died or a reassignment made by someone else meanwhile explains most; run the "
                        "action again or rebalance the pool once the cause is gone.",
                  cluster=cluster, run_id=run_id, pool=pool, facts={"not kept": str(len(items))},
                  links={"report": report})


def execution_stalled_notice(cluster: str, run_id: str, pool: str, stalled: list[str], stall_after_s: float,
                             report: str) -> Notice:
    """Moves of a pool's execution copy no bytes (execute.stall): told once per run and pool, while it runs."""
    return Notice(kind="execution_stalled", state=f"stalled:{pool}",
                  title=f"Execution stalled in pool {pool} on {cluster}",
                  happened=f"Run {run_id} is executing pool {pool}; {len(stalled)} move(s) copied no bytes for "
                           f"{human_duration(stall_after_s)}: {', '.join(stalled[:10])}"
                           + (f" and {len(stalled) - 10} more" if len(stalled) > 10 else ""),
                  to_do="look at the receiving brokers of those moves (disk full, network, a throttle too low). "
                        "The execution goes on until its timeout; `kafka-rebalancer cancel` (or the cancel DAG) "
                        "stops it and reverts the moves in flight.",
                  cluster=cluster, run_id=run_id, pool=pool, facts={"stalled moves": str(len(stalled))},
                  links={"report": report})


def execution_ended_notice(cluster: str, run_id: str, pool: str, cancelled: bool, error: str,
                           report: str) -> Notice:
    """A pool's execution ended unfinished: timed out (run or move timeout, stalled moves named) or cancelled."""
    how = "cancelled" if cancelled else "timed out"
    to_do = ("nothing if the cancel was meant: the moves in flight were reverted and the throttles cleared; to "
             "execute the plan anyway, trigger execute-reviewed with resume_cancelled.") if cancelled else (
        "a rerun continues from the execution log (clear the execute task, or execute-reviewed with the run id); "
        "`kafka-rebalancer cancel` reverts the moves in flight. Look first at why moves did not finish.")
    return Notice(kind="execution_stalled", state=f"{how}:{pool}", title=f"Execution {how} in pool {pool} on {cluster}",
                  happened=f"Run {run_id}'s execution of pool {pool} {how}: {_first_line(error)}", to_do=to_do,
                  cluster=cluster, run_id=run_id, pool=pool, facts={"execution": how}, links={"report": report})


def approval_reminder_notice(plan: WaitingPlan, approval_link: str, report: str, waited_s: float,
                             left_s: float) -> Notice:
    """The approval has waited `remind_after` and has not timed out yet."""
    notice = approval_waiting_notice(plan, approval_link, report, human_duration(left_s))
    return Notice(kind="approval_reminder", state="reminder",
                  title=f"Still waiting for approval: {plan.action} on {plan.cluster}",
                  happened=f"Run {plan.run_id} has waited {human_duration(waited_s)} for a person to approve "
                           f"{plan.replica_moves} replica moves ({human_bytes(plan.moved_bytes)}); it is rejected in "
                           f"{human_duration(left_s)} without an answer.",
                  to_do=notice.to_do, cluster=plan.cluster, run_id=plan.run_id, pool=plan.pool,
                  facts={**notice.facts, "waited": human_duration(waited_s)}, links=notice.links)


def approval_answered_notice(plan: WaitingPlan, approved: bool, by: str | None, timed_out: bool,
                             report: str) -> Notice:
    """The approval was answered (approved or rejected, by whom) or timed out (rejected)."""
    answer = "timed out (rejected)" if timed_out else (
        f"{'approved' if approved else 'rejected'} by {by or 'an unknown user'}")
    to_do = "nothing: the run executes the plan now; the report follows it." if approved else (
        "nothing: the cluster was not touched. To execute the plan later, trigger execute-reviewed with this "
        "run id; a new run plans afresh.")
    return Notice(kind="approval_answered", state="answered",
                  title=f"{'Approval timed out' if timed_out else answer.capitalize()}: {plan.action} on "
                        f"{plan.cluster}",
                  happened=f"Run {plan.run_id}'s plan of {plan.replica_moves} replica moves "
                           f"({human_bytes(plan.moved_bytes)}) was {answer}.",
                  to_do=to_do, cluster=plan.cluster, run_id=plan.run_id, pool=plan.pool,
                  facts={"action": plan.action, "answer": answer}, links={"report": report})


def automation_outcome(record: dict[str, Any]) -> str:
    """What the automation did with an event: started, held back (suppressed, raised again at retry_at),
    suppressed (for good) or reported."""
    decision = str(record.get("decision"))
    return "held back" if decision == "suppressed" and record.get("retry_at") is not None else decision


_AUTOMATION_TO_DO = {
    "started": "follow the run in Airflow: in mode approve it waits for a person under Required Actions, in mode "
               "execute it goes on within the auto-approval limits.",
    "held back": "nothing yet: the event is looked at again after the cooldown if it still holds; to act now, "
                 "trigger the manual DAG with the action.",
    "suppressed": "act yourself if it needs acting on (the manual DAG with the action): the automation will not "
                  "start a run for it as things are.",
    "reported": "nothing starts: check the broker (and the pools' claims, if it belongs to no pool).",
}


def automation_notice(cluster: str, records: list[dict[str, Any]], state: str, report: str | None) -> Notice:
    """One event the automation decided on, or the events one started run answers (`records`, same outcome)."""
    first = records[0]
    outcome = automation_outcome(first)
    broker = "" if first.get("broker_id") is None else f"broker {first['broker_id']} "
    subject = f"{first.get('kind')} {broker}".strip()
    facts = {"event": ", ".join(dict.fromkeys(str(r.get("kind")) for r in records)), "outcome": outcome}
    if first.get("action"):
        facts["action"] = str(first["action"]) + (f" (mode {first['mode']})" if first.get("mode") else "")
    if first.get("why") and outcome != "reported":
        facts["why"] = str(first["why"])
    if first.get("retry_at") is not None:
        facts["looked at again"] = datetime.fromtimestamp(float(first["retry_at"]), UTC).strftime(
            "%Y-%m-%d %H:%M:%S UTC")
    observed = "; ".join(str(r.get("observed")) for r in records)
    happened = {"started": f"The automation started run {first.get('run_id')}: {first.get('why')}. It saw: {observed}",
                "held back": f"The automation held back {subject}: {first.get('why')}. It saw: {observed}",
                "suppressed": f"The automation starts nothing for {subject}: {first.get('why')}. It saw: {observed}",
                "reported": f"The automation saw {subject}: {observed}"}.get(outcome, observed)
    return Notice(kind="automation_event", state=state, title=f"Automation {outcome}: {subject} on {cluster}",
                  happened=happened, to_do=_AUTOMATION_TO_DO.get(outcome, "see the runs page's events."),
                  cluster=cluster, run_id=first.get("run_id"), pool=first.get("broker_pool"), facts=facts,
                  links={"report": report} if report else {})
