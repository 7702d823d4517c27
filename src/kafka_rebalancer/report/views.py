"""The records the run's page shows (report/index.html): what `collect` reads from a run folder and `render` draws,
one record per section, and the caps that keep a large run's page small."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kafka_rebalancer.report.charts import BrokerUsage, Flow, LogMarker, ProgressPoint, ProjectedUse

# What a page of a large run (1,000 brokers, 100,000 moves) still shows; the rest is in the artifacts it names.
MOVES_SHOWN = 2_000
BROKERS_SHOWN = 50  # per pool and resource
SANKEY_BROKERS = 25  # per side of a pool's Sankey; the other senders and receivers are grouped
PROGRESS_POINTS = 1_000  # per pool's timeline
MARKERS_SHOWN = 200  # per pool and kind of event
SKIPPED_SHOWN = 200
NOTES_SHOWN = 500  # per pool
FAILED_ROWS_SHOWN = 50  # per failed expectation
NOT_AT_PLAN_SHOWN = 200
LOG_DIRS_SHOWN = 2_000  # directories of the brokers with moves between their log dirs (whole brokers)
VERIFY_TEXT_CHARS = 200_000


@dataclass(frozen=True)
class Header:
    cluster: str
    run_id: str
    trigger: str  # scheduled | airflow | cli | ..., with the run id's prefix
    action: str  # nightly, or the manual operation request.json asked for
    requested_by: str | None
    reason: str | None
    mode: str  # dry-run | execute | -
    status: str  # how far the run got
    approval: str  # approved by X | auto-approved | dry run | rejected by X | timed out | -
    decided_at: str | None
    decision_why: list[str]
    plan_hash: str | None
    snapshot_taken_at: str | None


@dataclass(frozen=True)
class SnapshotView:
    taken_at: str | None
    rows: dict[str, int]
    capture_seconds: float | None
    content_hash: str | None
    warnings: list[str]
    # tiered topics (snapshot.tiered.tiered_summary) and whether moves copy only what is past the last tiered offset
    tiered: list[dict[str, Any]] = field(default_factory=list)
    last_tiered_fetch: bool = False


@dataclass(frozen=True)
class ResourceView:
    resource: str
    is_count: bool
    lower: float | None
    upper: float | None  # capped by the capacity threshold, as band status counts it
    before_band: tuple[float | None, float | None] | None  # the current placement's (lower, capped upper)
    balanced: bool
    note: str | None
    brokers: list[BrokerUsage]  # the ones shown
    brokers_total: int
    out_of_band_before: list[int]
    out_of_band_after: list[int]
    fixed_outside_target_band: list[int]  # out of band before, short of the target band after
    taken_outside_target_band: list[int]  # inside the band before, taken out of the target band (or further)
    lower_bound: float | None  # of the balance part, against the band of the current placement
    moved: float | None  # by balance moves
    moved_over_lb: float | None
    forced_moved: float | None  # by forced moves
    forced_moved_by_reason: dict[str, float]
    forced_lower_bound: float | None  # what must leave its broker
    forced_moved_over_lb: float | None
    infeasible: int
    infeasibility_proofs: list[dict[str, Any]]  # brokers, count, proof


@dataclass(frozen=True)
class PlannerNote:
    resource: str
    broker_id: int | None
    note: str


@dataclass(frozen=True)
class PoolPlanView:
    broker_pool: str
    partitions_changed: int | None
    replica_moves: int | None
    preferred_leader_changes: int | None
    moved_bytes: int | None
    forced_bytes: int | None
    forced_bytes_by_reason: dict[str, int]
    forced_lower_bound_bytes: float | None  # the bytes that must leave their brokers
    forced_moved_over_lb: float | None
    balance_bytes: int | None
    lower_bound_bytes: float | None  # of the balance part
    lower_bound_edges: str | None  # against the edges the plan promises ("promised") or the band's ("band")
    moved_over_lb: float | None  # balance bytes / its lower bound
    resources: list[ResourceView]
    flows: list[Flow]  # by sender and receiver, the ones past SANKEY_BROKERS grouped (broker None)
    flows_total: int  # broker-to-broker pairs before grouping
    senders_grouped: int
    receivers_grouped: int
    notes: list[PlannerNote]  # the first NOTES_SHOWN
    notes_total: int
    # With the topic spread on: per kind (replicas, leaders) its figures (plan summary's `topic_spread`).
    topic_spread: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class MoveRow:
    broker_pool: str
    topic: str
    partition: int
    old: tuple[int, ...]
    new: tuple[int, ...]
    size_bytes: int
    bytes_to_copy: int  # the partition's size for each replica added

    @property
    def leadership_change(self) -> str:
        old_leader, new_leader = (self.old[0] if self.old else None), (self.new[0] if self.new else None)
        return "" if old_leader == new_leader else f"{old_leader} → {new_leader}"


@dataclass(frozen=True)
class PlanView:
    totals: dict[str, Any]
    budgets: dict[str, Any]
    plan_seconds: float | None
    pools: list[PoolPlanView]
    moves: list[MoveRow]  # the largest MOVES_SHOWN, by bytes to copy
    # The re-check's totals (plan.json against the snapshot); a summary older than them: counted from the moves.
    moves_total: int  # partitions the plan changes
    replica_moves: int
    preferred_leader_changes: int
    leadership_only_changes: int | None
    bytes_total: int
    moves_source: str  # where the moves listed were read from
    skipped_by_reason: dict[str, int]
    skipped: list[dict[str, Any]]
    skipped_total: int
    hot_partitions: list[dict[str, Any]]
    hot_total: int
    replication_factor: dict[str, Any] | None = None  # a replication factor change's (the plan summary's)


@dataclass(frozen=True)
class LogDirUsage:
    """One log directory of a broker with moves between its directories or replicas arriving into a directory the
    plan names: the snapshot's capacity and use, and its use after them (before, less the bytes moving out, plus
    the bytes moving in and arriving)."""

    broker_id: int
    log_dir: str
    capacity_bytes: int | None  # None: unknown (or the directory is not in the snapshot)
    capacity_source: str | None
    used_before: int | None  # None: the snapshot has no such directory (an older snapshot, or a renamed one)
    used_after: int | None
    moves_out: int
    moves_in: int
    bytes_out: int
    bytes_in: int
    state: str  # "removed", "cordoned", "offline" (comma-separated), or ""
    arrivals: int = 0  # replicas arriving from other brokers into this directory (plan.json's log_dirs)
    arrival_bytes: int = 0

    def usage(self, used: int | None) -> float | None:
        return None if used is None or not self.capacity_bytes else used / self.capacity_bytes


@dataclass(frozen=True)
class LogDirMoveRow:
    broker_pool: str
    topic: str
    partition: int
    broker_id: int
    source_dir: str
    target_dir: str
    size_bytes: int


@dataclass(frozen=True)
class LogDirsView:
    """The plan's moves between a broker's log directories (JBOD): plan/log_dir_moves.parquet, the summary's
    log_dir_moves and the snapshot's log_dirs."""

    why: str | None  # remove-disks, or each broker's log dirs into their band
    removed: list[str]  # broker:path
    moves_total: int
    bytes_total: int
    directories: list[LogDirUsage]  # of the brokers shown, by broker and path
    brokers_total: int  # brokers with moves between their directories, or with a removed one
    brokers_shown: int
    moves: list[LogDirMoveRow]  # the largest MOVES_SHOWN
    stranded: list[str]  # replicas left in a removed directory, with why: the first SKIPPED_SHOWN
    stranded_total: int
    snapshot_has_log_dirs: bool
    arrivals_total: int = 0  # replicas arriving from other brokers whose directory plan.json names
    arrival_bytes_total: int = 0


@dataclass(frozen=True)
class ExpectationResult:
    table: str
    expectation: str
    description: str
    success: bool
    unexpected_count: int | None
    element_count: int | None


@dataclass(frozen=True)
class FailedExpectation:
    table: str
    expectation: str
    description: str
    unexpected_count: int | None
    rows: list[dict[str, Any]]  # the first FAILED_ROWS_SHOWN
    rows_total: int


@dataclass(frozen=True)
class ValidationView:
    success: bool
    plan_hash: str | None
    expectations: int | None
    partitions_checked: int | None
    broker_resource_pairs_checked: int | None
    results: list[ExpectationResult]  # per expectation evaluated (validation/gx_results.json)
    failures: list[FailedExpectation]


@dataclass(frozen=True)
class PoolExecutionView:
    broker_pool: str
    state: str
    moves_planned: int | None
    moves_done: int
    bytes_done: int
    result: dict[str, Any] | None  # result.json
    cancel: dict[str, Any] | None  # cancel.json
    dry_run: dict[str, int] | None  # dry_run.json: how many moves per verdict
    progress: list[ProgressPoint]  # at most PROGRESS_POINTS
    markers: list[LogMarker]  # at most MARKERS_SHOWN per kind
    markers_total: int
    log_entries: int


@dataclass(frozen=True)
class VerifyView:
    plan_hash: str | None
    partitions_planned: int | None
    not_at_plan: list[dict[str, Any]]
    not_at_plan_total: int
    out_of_band_before: int | None
    out_of_band_after: int | None
    pools: dict[str, dict[str, dict[str, list[int]]]]
    report_text: str | None
    report_text_truncated: bool
    # What the run's action promised, with the verdict on the cluster after execution (plan.promises' rows).
    promises: list[dict[str, Any]] = field(default_factory=list)
    # With the topic spread on: kept, over_cap_by_plan, and per pool and kind its figures after execution.
    topic_spread: dict[str, Any] | None = None


@dataclass(frozen=True)
class ForecastView:
    """The run's capacity forecast: forecast.json as the plan step wrote it, and per pool the brokers charted (at
    most BROKERS_SHOWN: the soonest over the threshold, then the fullest at the horizon) of how many it has."""

    facts: dict[str, Any]
    brokers: dict[str, list[ProjectedUse]]
    brokers_total: dict[str, int]


@dataclass(frozen=True)
class RunReportData:
    header: Header
    snapshot: SnapshotView | None  # None: the stage did not run (or could not be read: see unreadable)
    plan: PlanView | None
    validation: ValidationView | None
    executions: list[PoolExecutionView] | None
    verification: VerifyView | None
    log_dirs: LogDirsView | None = None  # None: the plan moves nothing between log directories (or no plan)
    forecast: ForecastView | None = None  # None: the run has no forecast stage (no plan, or planned before forecasts)
    unreadable: dict[str, str] = field(default_factory=dict)  # section -> what went wrong reading it
