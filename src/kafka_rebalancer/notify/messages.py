"""What a message says, and how each channel shows it: Slack blocks, a plain-text e-mail, generic JSON.

A message says what happened and what to do, with the facts a person acts on (cluster, pool, action, reason,
the plan's moves, bytes and estimated duration, the run id) and links: the approval in Airflow's UI and the run's
report. The links need Airflow's base URL (`[api] base_url` in Airflow's config, passed in by the caller); a run
without one (the demo's `dag.test()` run has none) says so in place of the link and gives the report's file path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
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
        return f"{self.kind}:{self.state}"


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
    first_line = next((line.strip() for line in error.splitlines() if line.strip()), "(no message)")
    return Notice(kind="run_failed", state="failed", title=f"Run failed at {task_id} on {cluster}",
                  happened=f"Task `{task_id}` of run {run_id} failed: {first_line[:500]}",
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
