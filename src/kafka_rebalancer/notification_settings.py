"""The config's `notifications` section: the channels (a Slack incoming webhook, SMTP e-mail, a generic JSON
webhook), each naming the Airflow connection that holds its secret (the webhook token, the SMTP password: never
in the config), and the routes saying which kinds of message go to which channels, optionally per pool. Without
the section nothing is sent."""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import Field, model_validator

from kafka_rebalancer.config_types import Duration, StrictModel

NotificationKind = Literal[
    "approval_waiting",  # a run waits under Required Actions for a person
    "approval_reminder",  # it has waited remind_after
    "approval_answered",  # approved, rejected or timed out
    "run_failed",  # a task of a run failed: which task, the error's first line
    "verify_failed",  # verify found a promise not kept
    "execution_stalled",  # an execution stalled or was cancelled
    "automation_event",  # an event started a run, was held back, suppressed or reported
    "capacity_short",  # a run's capacity forecast: a pool over its disk threshold within forecast.warning_days
    "test",  # `kafka-rebalancer notify-test`
]
NOTIFICATION_KINDS: tuple[str, ...] = get_args(NotificationKind)


class NotificationChannel(StrictModel):
    """Where messages go. `airflow_connection_id` names the connection holding the address and the secret: for
    slack a `slackwebhook` connection (the webhook URL's token as its password), for smtp an `smtp` connection
    (host, port, login, password), for webhook an `http` connection (host, and a token in its password or
    headers in its extra)."""

    kind: Literal["slack", "smtp", "webhook"]
    airflow_connection_id: str = Field(min_length=1)
    to: list[str] = Field(default_factory=list)  # smtp: the recipients
    from_email: str | None = None  # smtp: default the connection's from_email
    endpoint: str = ""  # webhook: the path after the connection's host, e.g. "/hooks/kafka"

    @model_validator(mode="after")
    def _recipients(self) -> NotificationChannel:
        if self.kind == "smtp" and not self.to:
            raise ValueError("an smtp channel needs 'to': the recipients' addresses, e.g. [kafka-oncall@example.com]")
        if self.kind != "smtp" and (self.to or self.from_email):
            raise ValueError(f"'to' and 'from_email' are for smtp channels, not {self.kind}")
        if self.kind != "webhook" and self.endpoint:
            raise ValueError(f"'endpoint' is for webhook channels, not {self.kind}")
        return self


class NotificationRoute(StrictModel):
    """These kinds (of these pools; default every pool) go to these channels."""

    kinds: list[NotificationKind] = Field(min_length=1)
    channels: list[str] = Field(min_length=1)
    pools: list[str] | None = None


class NotificationSettings(StrictModel):
    channels: dict[str, NotificationChannel] = Field(default_factory=dict)
    routes: list[NotificationRoute] = Field(default_factory=list)
    remind_after: Duration = 4 * 3600.0  # an approval waiting this long is reminded of (before it times out)

    @model_validator(mode="after")
    def _known_channels(self) -> NotificationSettings:
        for i, route in enumerate(self.routes):
            for name in route.channels:
                if name not in self.channels:
                    known = ", ".join(sorted(self.channels)) or "none configured"
                    raise ValueError(f"routes[{i}] names channel {name!r}, which is not under 'channels' "
                                     f"(known: {known})")
        return self

    def channels_for(self, kind: str, pool: str | None) -> list[str]:
        """The channels a message of `kind` about `pool` goes to (None: about no single pool), in config order."""
        names: list[str] = []
        for route in self.routes:
            if kind in route.kinds and (route.pools is None or pool is None or pool in route.pools):
                names += [name for name in route.channels if name not in names]
        return names
