"""Prometheus' HTTP API, reached with urllib: range queries with a bounded timeout, credentials and TLS from
`metrics.prometheus`, and every failure as one message naming the URL and the query (never a credential).

- no answer (refused, DNS, timeout) or a 5xx: PrometheusUnreachableError (exit code 3, retried as an unreachable
  cluster is);
- a 4xx (a bad query, refused credentials) or `status: error`: PrometheusQueryError (exit code 2).
"""

from __future__ import annotations

import base64
import json
import logging
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka_rebalancer.config import PrometheusSettings
from kafka_rebalancer.errors import ConfigError, PrometheusQueryError, PrometheusUnreachableError

log = logging.getLogger(__name__)
_SHOWN_ERROR_CHARS = 300  # of Prometheus' own error text (a PromQL parse error says where)


@dataclass(frozen=True)
class QueryWindow:
    """[start, end] in Unix seconds at `step` seconds; both ends on multiples of the step, so the same window
    gives the same sample times (and Prometheus' results cache is hit on a retry)."""

    start: float
    end: float
    step: float

    @classmethod
    def ending_at(cls, now: float, window_s: float, step_s: float) -> QueryWindow:
        end = (now // step_s) * step_s
        return cls(end - (window_s // step_s) * step_s, end, step_s)

    @property
    def expected_samples(self) -> int:
        """Samples a series present all along the window has: one per step, both ends included."""
        return round((self.end - self.start) / self.step) + 1


@dataclass
class PrometheusHttp:
    """One Prometheus server; counts the queries made and the seconds they took (for the snapshot manifest)."""

    url: str
    timeout_s: float
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)  # may hold a credential
    ssl_context: ssl.SSLContext | None = None
    queries: int = 0
    seconds: float = 0.0

    def query_range(self, query: str, window: QueryWindow, shown_as: str) -> dict[str, Any]:
        """The `data` of a range query's answer. `shown_as` names the query in messages (the template and the batch
        of brokers: the expanded query repeats hundreds of broker ids)."""
        body = urllib.parse.urlencode({"query": query, "start": f"{window.start:.3f}", "end": f"{window.end:.3f}",
                                       "step": f"{window.step:g}", "timeout": f"{self.timeout_s:g}s"}).encode()
        # POST: a batch's broker matcher makes queries longer than some proxies accept in a URL.
        request = urllib.request.Request(f"{self.url}/api/v1/query_range", data=body, method="POST",
                                         headers={**self.headers,
                                                  "Content-Type": "application/x-www-form-urlencoded"})
        where = f"Prometheus at {self.url}"
        started = time.monotonic()
        self.queries += 1
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s, context=self.ssl_context) as response:
                payload = _json(response.read())
        except urllib.error.HTTPError as exc:
            text = _error_text(exc)
            if exc.code >= 500:
                raise PrometheusUnreachableError(f"{where} answered HTTP {exc.code} ({text}) to the query {shown_as}"
                                                 ) from None
            raise PrometheusQueryError(f"{where} refused the query {shown_as}: HTTP {exc.code} ({text})") from None
        except TimeoutError:
            raise PrometheusUnreachableError(f"{where} did not answer within {self.timeout_s:g}s "
                                             f"(metrics.prometheus.timeout_s) to the query {shown_as}") from None
        except urllib.error.URLError as exc:
            reason = exc.reason
            if isinstance(reason, TimeoutError):
                raise PrometheusUnreachableError(f"{where} did not answer within {self.timeout_s:g}s "
                                                 f"(metrics.prometheus.timeout_s) to the query {shown_as}") from None
            raise PrometheusUnreachableError(f"{where} is unreachable ({reason}) for the query {shown_as}") from None
        except OSError as exc:  # a connection reset while reading
            raise PrometheusUnreachableError(f"{where} broke off the answer ({exc}) to the query {shown_as}") from None
        finally:
            self.seconds += time.monotonic() - started
        if not isinstance(payload, dict) or payload.get("status") != "success" or not isinstance(
                payload.get("data"), dict):
            detail = payload.get("error") if isinstance(payload, dict) else None
            raise PrometheusQueryError(f"{where} answered the query {shown_as} with "
                                       f"{str(detail or payload)[:_SHOWN_ERROR_CHARS]!r}, expected status success "
                                       f"and data")
        for warning in payload.get("warnings") or []:
            log.warning("%s, query %s: %s", where, shown_as, warning)
        return payload["data"]


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return raw[:_SHOWN_ERROR_CHARS].decode("utf-8", "replace")


def _error_text(exc: urllib.error.HTTPError) -> str:
    """Prometheus' `error` field when the body is its JSON, else the body's start (a proxy's page)."""
    try:
        payload = _json(exc.read())
    except OSError:
        return exc.reason or "no body"
    text = payload.get("error", payload) if isinstance(payload, dict) else payload
    return str(text)[:_SHOWN_ERROR_CHARS] or str(exc.reason)


def prometheus_http(settings: PrometheusSettings, config_file: str) -> PrometheusHttp:
    """The client for `settings`: credentials resolved (an Airflow connection is looked up here) and the CA file
    read, so a bad one fails before the cluster is contacted."""
    return PrometheusHttp(settings.url, settings.timeout_s, _auth_headers(settings, config_file),
                          _ssl_context(settings, config_file) if settings.url.startswith("https") else None)


def _auth_headers(settings: PrometheusSettings, config_file: str) -> dict[str, str]:
    auth = settings.auth
    if auth is None:
        return {}
    if auth.airflow_connection_id is not None:
        return _airflow_connection_headers(auth.airflow_connection_id, config_file)
    if auth.bearer_token is not None:
        return {"Authorization": f"Bearer {auth.bearer_token.get_secret_value()}"}
    assert auth.username is not None and auth.password is not None  # PrometheusAuth allows no other case
    return _basic(auth.username, auth.password.get_secret_value())


def _basic(username: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()}


def _airflow_connection_headers(connection_id: str, config_file: str) -> dict[str, str]:
    """An Airflow connection's login and password (basic), or `bearer_token` in its extra."""
    field_name = "metrics.prometheus.auth.airflow_connection_id"
    try:
        from airflow.sdk import BaseHook
        from airflow.sdk.exceptions import AirflowNotFoundException
    except ImportError:
        raise ConfigError(config_file, field_name, "Airflow is not installed here, expected username and password "
                                                   "or bearer_token (from ${VAR})") from None
    try:
        connection = BaseHook.get_connection(connection_id)
    except AirflowNotFoundException:
        raise ConfigError(config_file, field_name, f"no Airflow connection {connection_id!r}, expected one with a "
                                                   f"login and password, or bearer_token in its extra") from None
    token = connection.extra_dejson.get("bearer_token")
    if token:
        return {"Authorization": f"Bearer {token}"}
    if connection.login and connection.password:
        return _basic(connection.login, connection.password)
    raise ConfigError(config_file, field_name, f"Airflow connection {connection_id!r} has neither a login and "
                                               f"password nor bearer_token in its extra")


def _ssl_context(settings: PrometheusSettings, config_file: str) -> ssl.SSLContext:
    tls = settings.tls
    try:
        context = ssl.create_default_context(cafile=str(tls.ca_file) if tls.ca_file else None)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(config_file, "metrics.prometheus.tls.ca_file", f"cannot read {tls.ca_file} ({exc}), "
                                                                         f"expected a PEM file of CA certificates"
                          ) from None
    if tls.insecure_skip_verify:  # the operator's explicit choice, e.g. a self-signed test server
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context
