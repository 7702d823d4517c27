"""One validated config: cluster, broker pools, topic-to-pool rules, thresholds per resource, budgets and
execution limits.

The file is YAML. `${VAR}` and `${VAR:-default}` in string values are taken from the environment, so the same
file serves several environments. Relative paths are relative to the config file. Every error names the
file, the field and what was expected.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import re
from datetime import datetime, time, timedelta
from pathlib import Path
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import (
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from kafka_rebalancer.access_settings import RoleAccess
from kafka_rebalancer.config_file import load_pools_file, read_config_file
from kafka_rebalancer.config_types import ByteSize, Duration, parse_byte_size, parse_duration  # noqa: F401 - re-exported
from kafka_rebalancer.config_types import StrictModel as _Strict
from kafka_rebalancer.errors import ConfigError, RebalancerError
from kafka_rebalancer.forecast_settings import ForecastSettings
from kafka_rebalancer.model.resources import (
    CANONICAL_ORDER,
    DEFAULT_RESOURCES,
    RESOURCES,
    TRAFFIC_RESOURCES,
    CpuModel,
    Resource,
)
from kafka_rebalancer.model.topic_spread import TopicSpreadSettings
from kafka_rebalancer.notification_settings import NotificationSettings


class ClusterSettings(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    bootstrap_servers: str | None = None
    airflow_connection_id: str = "kafka_default"
    client_config: dict[str, str | int | float | bool] = Field(default_factory=dict)
    request_timeout_s: float = Field(default=30.0, gt=0)
    # The directory of Kafka's jars (a Kafka 4.x distribution's libs/): Kafka's ClusterTool runs from it to list
    # fenced brokers and unregister drained ones (kafka_cluster_tool). Checked when it is used, not on load.
    kafka_libs: Path | None = None


class BrokerCapacity(_Strict):
    disk_bytes: ByteSize | None = Field(default=None, gt=0)
    nw_in_bytes_per_s: ByteSize | None = Field(default=None, gt=0)
    nw_out_bytes_per_s: ByteSize | None = Field(default=None, gt=0)
    cpu_cores: float | None = Field(default=None, gt=0, allow_inf_nan=False)


class CapacitySettings(_Strict):
    cruise_control_file: Path | None = None
    default: BrokerCapacity | None = None
    brokers: dict[int, BrokerCapacity] = Field(default_factory=dict)
    disk_from_log_dirs: bool = False


class PoolClaim(_Strict):
    """Which new brokers a pool takes when one registers (automation's broker_added): an id in a range
    ("7-9", "12") or a rack matching a glob ("rack-c*"); either matching claims the broker."""

    broker_ids: list[str] = Field(default_factory=list)
    racks: list[str] = Field(default_factory=list)

    @field_validator("broker_ids")
    @classmethod
    def _ranges(cls, v: list[str]) -> list[str]:
        for entry in v:
            low, _, high = entry.partition("-")
            if not low.strip().isdigit() or (high and (not high.strip().isdigit() or int(high) < int(low))):
                raise ValueError(f"expected a broker id or a range like '7-9', got {entry!r}")
        return v

    def claims(self, broker_id: int, rack: str | None) -> bool:
        for entry in self.broker_ids:
            low, _, high = entry.partition("-")
            if int(low) <= broker_id <= int(high or low):
                return True
        return rack is not None and any(fnmatch.fnmatchcase(rack, pattern) for pattern in self.racks)


class PoolSettings(_Strict):
    brokers: list[int] = Field(min_length=1)
    claim: PoolClaim | None = None  # new brokers this pool takes (automation)

    @field_validator("brokers")
    @classmethod
    def _unique(cls, v: list[int]) -> list[int]:
        if len(set(v)) != len(v):
            raise ValueError(f"broker ids must be unique, got {v}")
        return v


class TopicRule(_Strict):
    topics: str = Field(description="glob pattern on the topic name, e.g. 'orders.*'")
    pool: str


class ResourceSettings(_Strict):
    threshold: float = Field(default=1.10, gt=1.0, le=3.0)
    margin: float = Field(default=0.9, gt=0.0, le=1.0)
    low_utilization: float = Field(default=0.0, ge=0.0)
    capacity_threshold: float | None = Field(default=None, gt=0.0, le=1.0)


class CpuModelSettings(_Strict):
    leader_cores_per_mib_in: float = Field(default=0.04, ge=0)
    leader_cores_per_mib_out: float = Field(default=0.01, ge=0)
    follower_cores_per_mib_in: float = Field(default=0.015, ge=0)

    def model(self) -> CpuModel:
        return CpuModel(**self.model_dump())


# The placeholders a PromQL template (metrics.prometheus.queries) may use; $brokers is required: each query asks
# for one batch of brokers, so a template without it would count every broker once per batch.
QUERY_PLACEHOLDERS = ("brokers", "broker_label", "rate_range")
_PLACEHOLDER = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")


class PrometheusQueries(_Strict):
    """PromQL templates replacing the defaults (README: Prometheus metrics); null: the default."""

    cpu: str | None = None
    bytes_in: str | None = None
    bytes_out: str | None = None
    log_end_offset: str | None = None
    produce_latency_ms: str | None = None
    network_bytes_per_s: str | None = None

    @field_validator("cpu", "bytes_in", "bytes_out", "log_end_offset", "produce_latency_ms", "network_bytes_per_s")
    @classmethod
    def _placeholders(cls, v: str | None) -> str | None:
        if v is None:
            return v
        unknown = sorted(set(_PLACEHOLDER.findall(v)) - set(QUERY_PLACEHOLDERS))
        if unknown:
            raise ValueError(f"unknown placeholder ${unknown[0]}, expected only "
                             f"{', '.join('$' + p for p in QUERY_PLACEHOLDERS)}")
        if "$brokers" not in v:
            raise ValueError("expected the placeholder $brokers in the series selector (the batch of brokers a "
                             "query asks for), e.g. {job=\"kafka\", $brokers}")
        return v


class PrometheusAuth(_Strict):
    """Basic (username and password), a bearer token, or an Airflow connection (its login and password, or
    `bearer_token` in its extra). Give secrets as ${VAR}: they stay out of messages, dumps and the fingerprint."""

    username: str | None = None
    password: SecretStr | None = None
    bearer_token: SecretStr | None = None
    airflow_connection_id: str | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> PrometheusAuth:
        if (self.username is None) != (self.password is None):
            raise ValueError("username and password go together, expected both or neither")
        kinds = [name for name, given in (("username and password", self.username is not None),
                                          ("bearer_token", self.bearer_token is not None),
                                          ("airflow_connection_id", self.airflow_connection_id is not None))
                 if given]
        if len(kinds) != 1:
            raise ValueError(f"expected exactly one of username and password, bearer_token or "
                             f"airflow_connection_id, got {' and '.join(kinds) or 'none'}")
        return self


class PrometheusTls(_Strict):
    ca_file: Path | None = None  # relative to the config file; default: the system's CAs
    insecure_skip_verify: bool = False


class PrometheusSettings(_Strict):
    """Traffic and CPU measured by Prometheus over the last `window` (README: Prometheus metrics)."""

    url: str = Field(pattern=r"^https?://[^/?#]+", description="e.g. https://prometheus.example:9090")
    window: Duration = 24 * 3600.0
    step: Duration = 300.0
    scrape_interval: Duration = 2.0  # of the Kafka targets: the rate range is at least 4 of them
    statistic: Literal["avg", "p50", "p95", "max"] = "p95"
    min_completeness: float = Field(default=0.9, gt=0.0, le=1.0)
    timeout_s: float = Field(default=60.0, gt=0)
    cpu: Literal["process", "node"] = "process"  # the broker's JVM, or the whole machine (node exporter)
    broker_label: str = Field(default="broker_id", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    brokers_per_query: int = Field(default=250, ge=1)
    queries: PrometheusQueries = Field(default_factory=PrometheusQueries)
    auth: PrometheusAuth | None = None
    tls: PrometheusTls = Field(default_factory=PrometheusTls)

    @field_validator("url")
    @classmethod
    def _no_credentials(cls, v: str) -> str:
        if "@" in v.split("://", 1)[1].split("/", 1)[0]:
            raise ValueError("credentials in the url, expected them under metrics.prometheus.auth (a url is "
                             "printed in messages and the snapshot's manifest)")
        return v.rstrip("/")

    @model_validator(mode="after")
    def _steps_fit(self) -> PrometheusSettings:
        if self.step >= self.window:
            raise ValueError(f"step ({self.step:g}s) is not below window ({self.window:g}s), expected several "
                             f"steps per window")
        if self.step < self.scrape_interval:
            raise ValueError(f"step ({self.step:g}s) is below scrape_interval ({self.scrape_interval:g}s), "
                             f"expected at least one scrape per step")
        return self


class MetricsSettings(_Strict):
    """Where per-partition traffic comes from: none, sampled from the cluster (offset growth of each partition and
    of each consumer group over sample_seconds), a CSV/Parquet file (topic, partition, bytes_in_per_s,
    bytes_out_per_s), or Prometheus (traffic and measured CPU per broker over a window)."""

    source: Literal["none", "sampled", "file", "prometheus"] = "none"
    sample_seconds: float = Field(default=30.0, gt=0)
    file: Path | None = None
    prometheus: PrometheusSettings | None = None
    cpu_model: CpuModelSettings = Field(default_factory=CpuModelSettings)


class Budgets(_Strict):
    max_replica_moves: int = Field(default=1000, ge=0)
    max_moved_bytes: ByteSize | None = None
    max_moves_per_broker: int | None = Field(default=None, ge=1)


class Exclusions(_Strict):
    topics: list[str] = Field(default_factory=lambda: ["__*"])
    brokers: list[int] = Field(default_factory=list)


class ThrottleControlSettings(_Strict):
    """A broker's throttle lowered while its load (metrics.prometheus) is over a line (README: Throttle control)."""

    produce_latency_ms: float | None = Field(default=None, gt=0)  # the broker's p99 of produce requests
    network_bytes_per_s: ByteSize | None = None  # bytes in and out: clients' and replication's
    interval_s: float = Field(default=15.0, gt=0)
    lower_by: float = Field(default=0.5, gt=0, lt=1)  # the throttle times this while over a line
    raise_below: float = Field(default=0.8, gt=0, le=1)  # raised again (divided by lower_by) below this share of lines
    min_bytes_per_s: ByteSize = Field(default=2**20, ge=1)

    @model_validator(mode="after")
    def _a_line(self) -> ThrottleControlSettings:
        if self.produce_latency_ms is None and self.network_bytes_per_s is None:
            raise ValueError("no line set, expected produce_latency_ms or network_bytes_per_s (or both)")
        return self


class ExecutionSettings(_Strict):
    max_moves_per_broker: int = Field(default=5, ge=1)
    max_moves_cluster: int = Field(default=20, ge=1)
    poll_interval_s: float = Field(default=2.0, gt=0)
    move_timeout_s: float = Field(default=900.0, gt=0)
    # A move whose new replicas gain no bytes for this long, its receiving brokers alive, is named as stalled.
    stall_after_s: float = Field(default=120.0, gt=0)
    # Make up Kafka's quota shortfall so copies average throttle_bytes_per_s, never above (execute.throttle_tuner).
    tune_throttle: bool = True
    throttle_control: ThrottleControlSettings | None = None
    run_timeout_s: float = Field(default=6 * 3600.0, gt=0)
    # Replication throttle on the brokers and topics of moving replicas; null: unthrottled.
    throttle_bytes_per_s: int | None = Field(default=50 * 2**20, ge=1)
    # Data moves start in this order (after leadership-only changes); bottleneck_first (the broker with the most bytes
    # left to receive or serve first): the fastest on `make bench-execute` with largest_first (README: Execution).
    order: Literal["smallest_first", "largest_first", "most_loaded_first", "bottleneck_first", "plan"] = \
        "bottleneck_first"
    # No new batch starts while the pool has under-replicated partitions besides the moving ones; this long at most.
    urp_wait_timeout_s: float = Field(default=600.0, gt=0)
    # execute-reviewed refuses a plan older than this (the cluster has moved on since).
    max_plan_age: Duration = 24 * 3600.0


class AutoApproveLimits(_Strict):
    """A scheduled run's plan within every limit executes unattended; null: no limit of that kind."""

    max_moved_bytes: ByteSize | None = 200 * 2**30
    max_replica_moves: int | None = Field(default=500, ge=0)
    max_duration_s: Duration | None = Field(default=4 * 3600.0, alias="max_duration")


class ExecutionWindow(_Strict):
    """Scheduled runs execute unattended only when they start inside [start, end) (may wrap past midnight)."""

    start: str = Field(pattern=r"^([01][0-9]|2[0-3]):[0-5][0-9]$")
    end: str = Field(pattern=r"^([01][0-9]|2[0-3]):[0-5][0-9]$")
    timezone: str = "UTC"

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, v: str) -> str:
        try:
            ZoneInfo(v)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {v!r} (an IANA name such as 'Europe/Berlin')") from None
        return v

    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    def contains(self, moment: datetime) -> bool:
        local = moment.astimezone(self.zone()).time()
        start, end = time.fromisoformat(self.start), time.fromisoformat(self.end)
        return start <= local < end if start <= end else (local >= start or local < end)


class ApprovalSettings(_Strict):
    auto_approve: AutoApproveLimits = Field(default_factory=AutoApproveLimits)
    window: ExecutionWindow | None = None
    # How long a run waits for a person at the approval step; no answer rejects it.
    response_timeout: Duration = 12 * 3600.0

    def response_timedelta(self) -> timedelta:
        return timedelta(seconds=self.response_timeout)


AutomationMode = Literal["off", "dry-run", "approve", "execute"]


class EventRule(_Strict):
    """What an event starts: nothing (off), a plan only (dry-run), a run that waits for a person (approve), or a
    run that executes within the auto-approval limits (execute)."""

    mode: AutomationMode = "off"


class BrokerLostRule(EventRule):
    grace_period_s: float = Field(default=1800.0, gt=0, allow_inf_nan=False)


class BrokerAddedRule(EventRule):
    """`settle_s`: a new broker is claimed once it, and every other new broker its pool claims, has been
    registered that long (brokers started one after another make one add-brokers run)."""

    settle_s: float = Field(default=120.0, ge=0, allow_inf_nan=False)


class OutOfBandRule(EventRule):
    """A pool with at least `share` of its brokers out of band (any balanced resource) for `sustained_s`, or a
    broker whose disk is above `disk_use` of its capacity, starts rebalance-pool; checked every
    `check_interval_s` by a task of the events DAG (it reads every replica's size: no work for the triggerer)."""

    check_interval_s: float = Field(default=900.0, gt=0, allow_inf_nan=False)
    share: float = Field(default=0.2, gt=0, le=1, allow_inf_nan=False)
    sustained_s: float = Field(default=3600.0, ge=0, allow_inf_nan=False)
    disk_use: float | None = Field(default=None, gt=0, le=1, allow_inf_nan=False)


class AutomationSettings(_Strict):
    """The cluster's events and the operations they start (README: Automation)."""

    poll_interval_s: float = Field(default=60.0, gt=0, allow_inf_nan=False)
    cooldown_s: float = Field(default=3600.0, ge=0, allow_inf_nan=False)  # after a pool's automatic run
    broker_lost: BrokerLostRule = Field(default_factory=BrokerLostRule)
    broker_added: BrokerAddedRule = Field(default_factory=BrokerAddedRule)
    out_of_band: OutOfBandRule = Field(default_factory=OutOfBandRule)


class RebalancerConfig(_Strict):
    cluster: ClusterSettings
    capacity: CapacitySettings = Field(default_factory=CapacitySettings)
    pools: dict[str, PoolSettings] = Field(default_factory=dict)
    pools_file: Path | None = None
    topic_pools: list[TopicRule] = Field(default_factory=list)
    default_pool: str | None = None
    resources: dict[str, ResourceSettings] = Field(
        default_factory=lambda: {name: ResourceSettings() for name in DEFAULT_RESOURCES})
    priority: list[str] | None = None  # default: the configured resources in the canonical order
    metrics: MetricsSettings = Field(default_factory=MetricsSettings)
    budgets: Budgets = Field(default_factory=Budgets)
    exclude: Exclusions = Field(default_factory=Exclusions)
    topic_spread: TopicSpreadSettings = Field(default_factory=TopicSpreadSettings)  # README: How a plan is made
    forecast: ForecastSettings = Field(default_factory=ForecastSettings)  # README: Capacity forecast
    execution: ExecutionSettings = Field(default_factory=ExecutionSettings)
    approval: ApprovalSettings = Field(default_factory=ApprovalSettings)
    automation: AutomationSettings = Field(default_factory=AutomationSettings)
    notifications: NotificationSettings = Field(default_factory=NotificationSettings)  # default: none sent
    # The nightly DAG's cron in a fleet folder (README: Fleet); null: a start time spread over the night.
    schedule: str | None = None
    access_control: dict[str, RoleAccess] = Field(default_factory=dict)  # Airflow roles -> the DAGs' permissions
    run_root: Path = Path("runs")
    source_file: Path | None = Field(default=None, exclude=True)

    @field_validator("resources")
    @classmethod
    def _known_resources(cls, v: dict[str, ResourceSettings]) -> dict[str, ResourceSettings]:
        for name in v:
            if name not in RESOURCES:
                raise ValueError(f"unknown resource {name!r}; supported: {', '.join(RESOURCES)}")
        return v

    @field_validator("schedule")
    @classmethod
    def _cron(cls, v: str | None) -> str | None:
        from croniter import croniter  # type: ignore[import-untyped]  # Airflow's cron parser: what it takes, we take

        if v is not None and not croniter.is_valid(v):
            raise ValueError(f"expected a cron expression such as '0 2 * * *' (minute hour day month weekday), "
                             f"got {v!r}")
        return v

    @model_validator(mode="after")
    def _cross_checks(self) -> RebalancerConfig:
        seen: dict[int, str] = {}
        for pool_name, pool in self.pools.items():
            for b in pool.brokers:
                if b in seen:
                    raise ValueError(f"broker {b} is in two pools: {seen[b]!r} and {pool_name!r}")
                seen[b] = pool_name
        if self.priority is not None:
            for name in self.priority:
                if name not in self.resources:
                    raise ValueError(f"priority names resource {name!r}, which is not configured under 'resources'")
            missing = [r for r in self.resources if r not in self.priority]
            if missing:
                raise ValueError(f"resources {missing} are configured but missing from 'priority'")
        traffic = sorted(TRAFFIC_RESOURCES & set(self.resources))
        if traffic and self.metrics.source == "none":
            raise ValueError(f"resources {traffic} need traffic metrics: set metrics.source to 'sampled', 'file' "
                             f"or 'prometheus'")
        if self.metrics.source == "file" and self.metrics.file is None:
            raise ValueError("metrics.source is 'file' but metrics.file is not set")
        if self.metrics.source == "prometheus" and self.metrics.prometheus is None:
            raise ValueError("metrics.source is 'prometheus' but metrics.prometheus is not set, expected at least "
                             "{url: https://...}")
        lacking = self.execution.throttle_control and (
            "metrics.prometheus is not set" if self.metrics.prometheus is None else
            "execution.throttle_bytes_per_s is null" if self.execution.throttle_bytes_per_s is None else None)
        if lacking:
            raise ValueError(f"execution.throttle_control reads the brokers' load from Prometheus and lowers their "
                             f"replication throttle, but {lacking}, expected metrics.prometheus and a throttle rate")
        return self

    # -- derived ---------------------------------------------------------------------------------
    def resource_list(self) -> list[Resource]:
        """The configured resources, in priority order."""
        order = self.priority or [name for name in CANONICAL_ORDER if name in self.resources]
        return [RESOURCES[name] for name in order]

    def broker_pool_of(self) -> dict[int, str]:
        return {b: name for name, pool in self.pools.items() for b in pool.brokers}

    def topic_pool(self, topic: str) -> str | None:
        """The pool a topic belongs to: the first matching rule, else the default pool (None: no pool)."""
        for rule in self.topic_pools:
            if fnmatch.fnmatchcase(topic, rule.topics):
                return rule.pool
        return self.default_pool

    def topic_excluded(self, topic: str) -> bool:
        return any(fnmatch.fnmatchcase(topic, pattern) for pattern in self.exclude.topics)

    def capacity_threshold(self, resource_name: str) -> float | None:
        settings = self.resources[resource_name]
        if settings.capacity_threshold is not None:
            return settings.capacity_threshold
        return RESOURCES[resource_name].default_capacity_threshold

    def run_dir(self, run_id: str) -> Path:
        return self.run_root / self.cluster.name / safe_run_id(run_id)

    def fingerprint(self) -> str:
        """Hash of everything that shapes a plan (execution limits and connection details excluded)."""
        planning = self.model_dump(mode="json", exclude={"execution": True, "run_root": True, "approval": True,
                                                         "automation": True, "schedule": True, "access_control": True,
                                                         "notifications": True, "pools": {"__all__": {"claim"}},
                                                         "cluster": {"bootstrap_servers", "client_config",
                                                                     "airflow_connection_id",
                                                                     "request_timeout_s", "kafka_libs"},
                                                         # how Prometheus is reached, not what it is asked
                                                         "metrics": {"prometheus": {"url", "timeout_s", "auth", "tls",
                                                                                    "brokers_per_query"}}})
        # Left at its default (on since issue 52), the spread is out of the fingerprint, as before the section
        # existed: a config file left as it was keeps the plans approved under it. Anything else is in it, so
        # `enabled: false` fingerprints apart from the default (under the old default, off, it did not).
        if self.topic_spread == TopicSpreadSettings():
            planning.pop("topic_spread")
        if self.forecast == ForecastSettings():  # likewise for the forecast (issue 55)
            planning.pop("forecast")
        return hashlib.sha256(json.dumps(planning, sort_keys=True).encode()).hexdigest()


def safe_run_id(run_id: str) -> str:
    """Airflow run ids contain ':' and '+'; keep folder names portable, and inside the cluster's folder."""
    name = re.sub(r"[^A-Za-z0-9._-]", "_", run_id)
    if not name.strip("."):
        raise RebalancerError(f"run id {run_id!r}: expected a name with a letter, digit, '_' or '-'")
    return name


def _loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def format_validation_error(file: str, exc: ValidationError) -> ConfigError:
    """The first problem pydantic found (of how many), as the field and what was expected."""
    first = exc.errors()[0]
    got = first.get("input")
    message = first["msg"].removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        message = "unknown field (check the spelling)"
    elif not isinstance(got, dict) and first["type"] != "value_error":
        message = f"{message} (got {got!r})"
    more = f" [+{len(exc.errors()) - 1} more problem(s)]" if len(exc.errors()) > 1 else ""
    return ConfigError(file, _loc(first["loc"]), message + more)


def load_config(path: str | Path) -> RebalancerConfig:
    path = Path(path).resolve()
    file, base = str(path), path.parent
    raw = read_config_file(path)
    if raw.get("pools_file") is not None:
        if raw.get("pools"):
            raise ConfigError(file, "pools_file", "give either 'pools' or 'pools_file', not both")
        if not isinstance(raw["pools_file"], str):
            raise ConfigError(file, "pools_file", f"expected a file path, got {raw['pools_file']!r}")
        raw["pools_file"] = str((base / raw["pools_file"]).resolve())
        raw["pools"] = load_pools_file(Path(raw["pools_file"]))
    try:
        config = RebalancerConfig.model_validate(raw)
    except ValidationError as exc:
        raise format_validation_error(file, exc) from None

    updates: dict[str, Any] = {"source_file": path, "run_root": (base / config.run_root).resolve()}
    if config.capacity.cruise_control_file is not None:
        cc = (base / config.capacity.cruise_control_file).resolve()
        if not cc.exists():
            raise ConfigError(file, "capacity.cruise_control_file", f"file not found: {cc}")
        updates["capacity"] = config.capacity.model_copy(update={"cruise_control_file": cc})
    if config.metrics.file is not None:
        metrics_file = (base / config.metrics.file).resolve()
        if not metrics_file.exists():
            raise ConfigError(file, "metrics.file", f"file not found: {metrics_file}")
        updates["metrics"] = config.metrics.model_copy(update={"file": metrics_file})
    if config.cluster.kafka_libs is not None:
        updates["cluster"] = config.cluster.model_copy(
            update={"kafka_libs": (base / config.cluster.kafka_libs).resolve()})
    prometheus = config.metrics.prometheus
    if prometheus is not None and prometheus.tls.ca_file is not None:
        ca_file = (base / prometheus.tls.ca_file).resolve()
        if not ca_file.is_file():
            raise ConfigError(file, "metrics.prometheus.tls.ca_file", f"file not found: {ca_file}, expected a PEM "
                                                                      f"file of CA certificates")
        tls = prometheus.tls.model_copy(update={"ca_file": ca_file})
        metrics = updates.get("metrics", config.metrics)
        updates["metrics"] = metrics.model_copy(update={"prometheus": prometheus.model_copy(update={"tls": tls})})
    config = config.model_copy(update=updates)
    _check_references(file, config)
    return config


def _check_references(file: str, config: RebalancerConfig) -> None:
    if not config.pools:
        raise ConfigError(file, "pools", "at least one broker pool is required (or pools_file)")
    known = ", ".join(sorted(config.pools))
    for i, rule in enumerate(config.topic_pools):
        if rule.pool not in config.pools:
            raise ConfigError(file, f"topic_pools[{i}].pool", f"unknown pool {rule.pool!r} (known: {known})")
    if config.default_pool is not None and config.default_pool not in config.pools:
        raise ConfigError(file, "default_pool", f"unknown pool {config.default_pool!r} (known: {known})")
    for i, route in enumerate(config.notifications.routes):
        for pool in set(route.pools or []) - set(config.pools):
            raise ConfigError(file, f"notifications.routes[{i}].pools", f"unknown pool {pool!r} (known: {known})")
