"""Sending one message on one channel through the providers' notifiers (Slack webhook, SMTP, HTTP), wrapped:
a channel that fails (refused, timed out, rejected) never raises and holds the caller at most SEND_TIMEOUT_S; what
went wrong comes back as one line with the connection's secret taken out."""

from __future__ import annotations

import html
import logging
import re
import threading
from dataclasses import dataclass
from typing import Any

from kafka_rebalancer.notification_settings import NotificationChannel
from kafka_rebalancer.notify.messages import Notice, json_payload, plain_text, slack_message

log = logging.getLogger(__name__)
SEND_TIMEOUT_S = 10.0
# Their DEBUG lines carry the webhook's URL, whose path is the Slack secret: never below INFO.
for _name in ("slack_sdk", "airflow.providers.slack"):
    logging.getLogger(_name).setLevel(max(logging.getLogger(_name).level, logging.INFO))


@dataclass(frozen=True)
class SendResult:
    channel: str
    ok: bool
    error: str | None = None  # one line, no secret


def provider_notifier(channel: NotificationChannel, notice: Notice) -> Any:
    """The provider's notifier that sends `notice` on `channel` (imported here: only a sending process needs it)."""
    timeout = int(SEND_TIMEOUT_S)
    if channel.kind == "slack":
        from airflow.providers.slack.notifications.slack_webhook import SlackWebhookNotifier

        text, blocks = slack_message(notice)
        # No retry by the SDK: its retry handler logs "Going to retry the same request: POST <the webhook's URL>",
        # token and all, at INFO (Airflow masks the task log, not the worker's output); the outbox tries again on
        # the next occasion.
        return SlackWebhookNotifier(slack_webhook_conn_id=channel.airflow_connection_id, text=text, blocks=blocks,
                                    timeout=timeout, retry_handlers=[])
    if channel.kind == "smtp":
        from airflow.providers.smtp.notifications.smtp import SmtpNotifier

        subject, body = plain_text(notice)
        # The provider sends HTML only: the text, preformatted, still reads as plain text when shown raw.
        return SmtpNotifier(to=channel.to, from_email=channel.from_email, subject=subject,
                            html_content=f"<pre>{html.escape(body, quote=False)}</pre>",
                            smtp_conn_id=channel.airflow_connection_id)
    from airflow.providers.http.notifications.http import HttpNotifier

    return HttpNotifier(http_conn_id=channel.airflow_connection_id, endpoint=channel.endpoint or None,
                        json=json_payload(notice), headers={"Content-Type": "application/json"},
                        extra_options={"timeout": timeout})


def _connection_secrets(conn_id: str) -> list[str]:
    """The connection's password and URL paths (a Slack webhook's path is its token), to take out of errors."""
    try:
        from airflow.sdk import BaseHook

        conn = BaseHook.get_connection(conn_id)
    except Exception:  # noqa: BLE001 - an unknown connection is reported by the send itself
        return []
    return [s for s in (conn.password, conn.host and re.sub(r"^https?://[^/]+", "", conn.host)) if s and len(s) > 3]


def one_line_without_secrets(exc: BaseException, secrets: list[str]) -> str:
    text = f"{type(exc).__name__}: {exc}".splitlines()[0] if str(exc) else type(exc).__name__
    for secret in secrets:
        text = text.replace(secret, "***")
    # Any URL's path may hold a token (a Slack webhook's does): only the scheme and host are shown.
    text = re.sub(r"(https?://[^/\s'\"]+)/[^\s'\")]*", r"\1/***", text)
    return re.sub(r"(with url: )/\S+", r"\1/***", text)[:300]


def send_on_channel(name: str, channel: NotificationChannel, notice: Notice) -> SendResult:
    """Send, in a thread the caller waits for at most SEND_TIMEOUT_S (the provider's own timeouts are not all
    settable: SMTP's is the connection's, default 30 s); never raises."""
    outcome: dict[str, BaseException | None] = {}
    try:
        notifier = provider_notifier(channel, notice)  # imports the provider: not part of the channel's time
    except Exception as exc:  # noqa: BLE001 - a provider missing or refusing its arguments is this channel's failure
        outcome["error"] = exc

    def send() -> None:
        try:
            notifier.notify({})  # notify, not __call__: our text is not a template
            outcome["error"] = None
        except BaseException as exc:  # noqa: BLE001 - every failure of a channel is reported, none raised
            outcome["error"] = exc

    if "error" not in outcome:
        sender = threading.Thread(target=send, name=f"notify-{name}", daemon=True)
        sender.start()
        sender.join(SEND_TIMEOUT_S)
    if "error" not in outcome:
        error = f"no answer within {SEND_TIMEOUT_S:.0f} s"
    elif outcome["error"] is not None:
        error = one_line_without_secrets(outcome["error"], _connection_secrets(channel.airflow_connection_id))
    else:
        log.info("notification %s sent on channel %s (%s)", notice.key, name, channel.kind)
        return SendResult(name, True)
    log.warning("notification %s on channel %s (%s) failed: %s", notice.key, name, channel.kind, error)
    return SendResult(name, False, error)
