"""A manual operation's request, and what it changes for the planner.

A person asks for one action (isolate topics, drain brokers, ...; their table: model/run_actions.py). The
request is checked against the config before anything runs (each missing or wrong field is named), written into
the run folder as `request.json`, and from then on every step of the run reads it: the pool override it will
record (applied on top of the config for this run only, until the run is approved), and the planning scope (which
pools are planned and balanced, which brokers may receive or give replicas, leadership only).

Each action is a small function from (effective config, request) to (pool override, planning scope); the
planner, the validation, the executor and the artifacts are the nightly run's.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from kafka_rebalancer.config import RebalancerConfig, load_config
from kafka_rebalancer.errors import RebalancerError, RunFolderError
from kafka_rebalancer.model.run_actions import Action, RunAction, run_action
from kafka_rebalancer.model.schemas import BROKERS
from kafka_rebalancer.operations.overrides import (
    OverrideStore,
    PoolOverride,
    apply_overrides,
    current_user,
    now_iso,
)
from kafka_rebalancer.run_folder import SNAPSHOT, RunFolder, read_json, read_table, write_json

REQUEST_FILE = "request.json"
MAX_BROKER_ID = 2**31 - 1  # a Java int


class RequestError(RebalancerError):
    """A manual operation's parameters are missing or wrong."""


class PlanningScope(BaseModel):
    """What the planner may do in this run (the nightly run: everything, every pool). Decided when the request is
    made (against the pools before its own override) and kept in request.json."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    pools: frozenset[str] | None = None  # pools planned (None: all)
    balanced_pools: frozenset[str] | None = None  # pools whose bands are balanced; others do forced moves only
    no_receive: frozenset[int] = frozenset()  # brokers no replica moves onto
    no_give: frozenset[int] = frozenset()  # brokers that give replicas away only when forced
    leadership: Literal["elect", "demote"] | None = None  # leadership only: no replica moves
    demoted: frozenset[int] = frozenset()
    topics: tuple[str, ...] = ()  # leadership only, or a replication factor change: these topic patterns
    replication_factor: int | None = None  # change-replication-factor: the topics' partitions to this many replicas
    removed_log_dirs: frozenset[tuple[int, str]] = frozenset()  # remove-disks: (broker, path) emptied in place
    # The brokers the run drains, each with the pool it leaves (None: it was in no pool): they leave their pools,
    # are cordoned while it runs, and every replica on them goes home.
    drained: dict[int, str | None] = Field(default_factory=dict)
    promise: Action | None = None  # the action whose promise the run keeps (plan/promises.py), beyond the bands
    balances_log_dirs: bool = True  # the planned brokers' replicas are also balanced between their log dirs

    def balance_planned(self, broker_pool: str) -> bool:
        """Whether the balance planner plans this pool in this run (a leadership-only action plans none)."""
        return self.leadership is None and (self.pools is None or broker_pool in self.pools)


class ManualRequest(BaseModel):
    """What a person asked for. Fields an action does not use must be empty."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    action: Action
    broker_pool: str | None = None
    brokers: list[int] = Field(default_factory=list)
    topics: list[str] = Field(default_factory=list)
    reviewed_run_id: str | None = None  # execute-reviewed: the dry run whose plan is executed
    log_dirs: list[str] = Field(default_factory=list)  # remove-disks: "broker:path", the path as in log.dirs
    # drain-brokers: once verified, the drained brokers (dead, holding nothing) are unregistered (verify/unregister)
    unregister: bool = False
    replication_factor: int | None = Field(default=None, ge=1)  # change-replication-factor: the target
    reason: str = ""
    requested_by: str = Field(default_factory=current_user)
    requested_at: str = Field(default_factory=now_iso)
    override: PoolOverride | None = None  # the pool change this run records once approved
    scope: PlanningScope = Field(default_factory=PlanningScope)

    @model_validator(mode="before")
    @classmethod
    def _decided_as_today(cls, data: Any) -> Any:
        """A request.json written before the scope held the action's decisions gets them as the resolver decides
        them now, so that a run folder planned before still executes, checks and reports the same."""
        if not isinstance(data, dict) or not isinstance(data.get("scope"), dict) or "promise" in data["scope"]:
            return data
        override = data.get("override") if isinstance(data.get("override"), dict) else None
        source = Action.DEMOTE_BROKERS if data["scope"].get("leadership") == "demote" else \
            (override or data).get("kind" if override else "action")
        try:
            record = run_action(str(source))
        except ValueError:
            return data  # the field validation names it
        return {**data, "scope": {**data["scope"], **_decisions(record, override and PoolOverride.model_validate(
            override))}}


def _fail(action: str, name: str, message: str) -> RequestError:
    return RequestError(f"action {action}: parameter '{name}': {message}")


def _brokers_known(action: str, brokers: list[int], config: RebalancerConfig) -> None:
    if not brokers:
        raise _fail(action, "brokers", "at least one broker id is required")
    if len(set(brokers)) != len(brokers):
        raise _fail(action, "brokers", f"broker ids must be unique, got {brokers}")
    out_of_range = [b for b in brokers if not 0 <= b <= MAX_BROKER_ID]
    if out_of_range:
        raise _fail(action, "brokers", f"broker ids are numbers from 0 to {MAX_BROKER_ID} (Kafka's node.id), "
                    f"got {out_of_range}")


def _pool_known(action: str, pool: str | None, config: RebalancerConfig) -> str:
    if not pool:
        raise _fail(action, "broker_pool", "a pool name is required")
    if pool not in config.pools:
        raise _fail(action, "broker_pool", f"unknown pool {pool!r} (known: {', '.join(sorted(config.pools))})")
    return pool


def _needs_reason(request: ManualRequest) -> None:
    if not request.reason.strip():
        raise _fail(request.action, "reason", "required: this action changes pool membership (say why; it is "
                    "recorded with the pool override)")


def _decisions(record: RunAction, override: PoolOverride | None) -> dict[str, Any]:
    """What the action decides for every step after the request (the scope's fields its resolver leaves alone)."""
    return {"promise": record.action if record.promises else None, "balances_log_dirs": record.balances_log_dirs,
            "drained": {b: override.from_pools.get(b) for b in override.brokers}
            if record.drains and override is not None else {}}


def _unused(request: ManualRequest, allowed: tuple[str, ...]) -> None:
    for name in ("broker_pool", "brokers", "topics", "reviewed_run_id", "log_dirs", "unregister",
                 "replication_factor"):
        if name not in allowed and getattr(request, name):
            raise _fail(request.action, name, f"not used by {request.action}; leave it empty")


def _override(request: ManualRequest, config: RebalancerConfig, brokers: list[int]) -> PoolOverride:
    pool_of = config.broker_pool_of()
    return PoolOverride(id=1 + max((o.id for o in OverrideStore.of(config).read()), default=0),
                        kind=request.action, broker_pool=request.broker_pool, brokers=brokers,
                        from_pools={b: pool_of.get(b) for b in brokers}, topics=list(request.topics),
                        requested_by=request.requested_by, created_at=now_iso(), reason=request.reason,
                        run_id="pending")


# -- one function per action: (effective config, request) -> (override, scope) ----------------------------------
Resolved = tuple[PoolOverride | None, PlanningScope]


def _isolate_topics(r: ManualRequest, config: RebalancerConfig) -> Resolved:
    if not r.topics:
        raise _fail(r.action, "topics", "at least one topic name or glob pattern is required")
    if not r.broker_pool:
        raise _fail(r.action, "broker_pool", "the pool the topics move into is required (an existing pool, or a "
                    "new pool name together with its brokers)")
    _needs_reason(r)
    if r.broker_pool not in config.pools and not r.brokers:
        raise _fail(r.action, "brokers", f"pool {r.broker_pool!r} is new: name the brokers that form it")
    if r.brokers:
        _brokers_known(r.action, r.brokers, config)
        pool_of = config.broker_pool_of()
        leaving = {pool_of[b] for b in r.brokers if b in pool_of and pool_of[b] != r.broker_pool}
        for pool in leaving:
            if set(config.pools[pool].brokers) <= set(r.brokers):
                raise _fail(r.action, "brokers", f"would take every broker of pool {pool!r}; keep at least one")
    # Every pool may have replicas to send home; the receiving pool and those losing brokers are balanced.
    pool_of = config.broker_pool_of()
    affected = {r.broker_pool} | {pool_of[b] for b in r.brokers if b in pool_of}
    return _override(r, config, list(r.brokers)), PlanningScope(balanced_pools=frozenset(affected))


def _drain_brokers(r: ManualRequest, config: RebalancerConfig) -> Resolved:
    _brokers_known(r.action, r.brokers, config)
    _needs_reason(r)
    # An excluded broker's partitions are never touched: a drain of one could not keep its promise.
    excluded = sorted(set(r.brokers) & set(config.exclude.brokers))
    if excluded:
        raise _fail(r.action, "brokers", f"broker(s) {excluded} are in the config's exclude.brokers (never touched); "
                    "remove them from it to drain them")
    pool_of = config.broker_pool_of()
    for pool in {pool_of[b] for b in r.brokers if b in pool_of}:
        if set(config.pools[pool].brokers) <= set(r.brokers):
            raise _fail(r.action, "brokers", f"would drain every broker of pool {pool!r}; its replicas would have "
                        "nowhere to go")
    # The drained brokers leave their pools, so their replicas must go home, like replicas of a dead broker; the
    # pools they leave are balanced over their remaining brokers.
    return _override(r, config, list(r.brokers)), PlanningScope(
        balanced_pools=frozenset(pool_of[b] for b in r.brokers if b in pool_of))


def _add_brokers(r: ManualRequest, config: RebalancerConfig) -> Resolved:
    pool = _pool_known(r.action, r.broker_pool, config)
    _brokers_known(r.action, r.brokers, config)
    _needs_reason(r)
    already = [b for b in r.brokers if b in config.pools[pool].brokers]
    if already:
        raise _fail(r.action, "brokers", f"broker(s) {already} are already in pool {pool!r}")
    existing = frozenset(config.pools[pool].brokers)
    return _override(r, config, list(r.brokers)), PlanningScope(
        pools=frozenset({pool}), balanced_pools=frozenset({pool}), no_receive=existing, no_give=frozenset(r.brokers))


def _rebalance_pool(r: ManualRequest, config: RebalancerConfig) -> Resolved:
    pool = _pool_known(r.action, r.broker_pool, config)
    return None, PlanningScope(pools=frozenset({pool}))


def _elect_leaders(r: ManualRequest, config: RebalancerConfig) -> Resolved:
    pools = frozenset({_pool_known(r.action, r.broker_pool, config)}) if r.broker_pool else None
    return None, PlanningScope(pools=pools, leadership="elect", topics=tuple(r.topics))


def _demote_brokers(r: ManualRequest, config: RebalancerConfig) -> Resolved:
    _brokers_known(r.action, r.brokers, config)
    return None, PlanningScope(leadership="demote", demoted=frozenset(r.brokers))


def _remove_disks(r: ManualRequest, config: RebalancerConfig) -> Resolved:
    if not r.log_dirs:
        raise _fail(r.action, "log_dirs", "at least one broker:path is required (the path exactly as in the "
                    "broker's log.dirs, e.g. 3:/var/lib/kafka/d2)")
    removed = set()
    for entry in r.log_dirs:
        broker, _, path = entry.partition(":")
        if not broker.strip().isdigit() or not path.startswith("/"):
            raise _fail(r.action, "log_dirs", f"{entry!r}: expected broker:path with an absolute path, e.g. "
                        "3:/var/lib/kafka/d2")
        removed.add((int(broker), path))
    _brokers_known(r.action, sorted({b for b, _ in removed}), config)
    # Nothing moves between brokers: each directory is emptied onto its broker's other directories.
    return None, PlanningScope(pools=frozenset(), removed_log_dirs=frozenset(removed))


def _change_replication_factor(r: ManualRequest, config: RebalancerConfig) -> Resolved:
    if not r.topics:
        raise _fail(r.action, "topics", "at least one topic name or glob pattern is required (internal topics such as "
                    "__consumer_offsets too)")
    if r.replication_factor is None:
        raise _fail(r.action, "replication_factor", "the target replication factor is required (a whole number, at "
                    "least 1)")
    # No pool is balanced: replicas are only added or removed (plan/replication_factor.py); what the cluster must
    # allow (the topics exist, min.insync.replicas, brokers enough) is checked on the run's snapshot.
    return None, PlanningScope(pools=frozenset(), balanced_pools=frozenset(), topics=tuple(r.topics),
                               replication_factor=r.replication_factor)


def _execute_reviewed(r: ManualRequest, config: RebalancerConfig) -> Resolved:
    if not r.reviewed_run_id:
        raise _fail(r.action, "run_id", "the run id of the reviewed dry run is required")
    return None, PlanningScope()


def _nightly(r: ManualRequest, config: RebalancerConfig) -> Resolved:
    return None, PlanningScope()


# One per action (model/run_actions.py).
RESOLVERS: dict[Action, Callable[[ManualRequest, RebalancerConfig], Resolved]] = {
    Action.NIGHTLY: _nightly, Action.ISOLATE_TOPICS: _isolate_topics, Action.DRAIN_BROKERS: _drain_brokers,
    Action.ADD_BROKERS: _add_brokers, Action.REBALANCE_POOL: _rebalance_pool, Action.ELECT_LEADERS: _elect_leaders,
    Action.DEMOTE_BROKERS: _demote_brokers, Action.REMOVE_DISKS: _remove_disks,
    Action.CHANGE_REPLICATION_FACTOR: _change_replication_factor, Action.EXECUTE_REVIEWED: _execute_reviewed}


def make_request(config: RebalancerConfig, **params: object) -> ManualRequest:
    """Check a person's parameters against the effective config (overrides applied); RequestError names the
    first wrong one. The returned request carries the pool override it will record."""
    values = {k: v for k, v in params.items() if v is not None and v != "" and v != []}
    try:
        request = ManualRequest.model_validate(values)
    except ValidationError as exc:
        first = exc.errors()[0]
        name = ".".join(map(str, first["loc"])) or "action"
        raise RequestError(f"parameter '{name}': {first['msg']} (got {first.get('input')!r})") from None
    record = run_action(request.action)
    if request.action != Action.NIGHTLY:  # a manual action's other fields must be empty
        _unused(request, record.fields)
    override, scope = RESOLVERS[request.action](request, config)
    scope = scope.model_copy(update=_decisions(record, override))
    return request.model_copy(update={"override": override, "scope": scope})


def check_brokers_in_snapshot(run: RunFolder) -> None:
    """The brokers the run's request names exist in its snapshot, checked before planning: a typo would otherwise
    plan nothing, or a pool with a broker that is not there."""
    request = read_request(run)
    if request is not None and request.brokers:
        check_brokers_in_cluster(request, read_table(run.require(SNAPSHOT), BROKERS))


def check_brokers_in_cluster(request: ManualRequest, brokers: pd.DataFrame) -> None:
    """`brokers`: a snapshot's brokers table."""
    alive = set(brokers.loc[brokers["alive"].astype(bool), "broker_id"].tolist())
    known = set(brokers["broker_id"].tolist())  # running, in a pool, or holding replicas
    # Brokers that receive replicas must be running; those that give them away may be down (a dead broker is
    # drained).
    running = run_action(request.action).receivers_must_run
    missing = [b for b in request.brokers if b not in (alive if running else known)]
    if missing:
        what = "not running" if running else "unknown (not running, in no pool, holding no replica)"
        raise _fail(request.action, "brokers", f"broker(s) {missing} {what}; running brokers: "
                    f"{', '.join(map(str, sorted(alive))) or 'none'}")
    # Unregistering is for brokers that are gone: a running one would register again at once (verify/unregister).
    running_now = sorted(set(request.brokers) & alive)
    if request.unregister and running_now:
        raise _fail(request.action, "unregister", f"broker(s) {running_now} are running: only a dead broker is "
                    "unregistered (stop it first, or drain without unregister)")


def scope_of(request: ManualRequest | None) -> PlanningScope:
    return PlanningScope() if request is None else request.scope


# -- the request in the run folder, and the config every step of the run uses ---------------------------------
def write_request(run: RunFolder, request: ManualRequest) -> None:
    """Written once, before the snapshot; a retried first task finds the same request and keeps it."""
    run.path.mkdir(parents=True, exist_ok=True)
    path = run.path / REQUEST_FILE
    if path.exists():
        existing = read_request(run)
        same = {"action", "broker_pool", "brokers", "topics", "reviewed_run_id", "log_dirs", "unregister",
                "replication_factor", "reason"}
        if existing is not None and existing.model_dump(include=same) != request.model_dump(include=same):
            raise RunFolderError(f"{path} already holds another request ({existing.action}); use a new run")
        return
    write_json(path, request.model_dump(mode="json"))


def read_request(run: RunFolder) -> ManualRequest | None:
    path = run.path / REQUEST_FILE
    if not path.exists():
        return None
    try:
        return ManualRequest.model_validate(read_json(path))
    except ValidationError as exc:
        first = exc.errors()[0]
        raise RunFolderError(f"{path}: {'.'.join(map(str, first['loc'])) or 'request'}: {first['msg']}, expected "
                             "the run's request as it was made (start a new run)") from None


def run_config(config_path: str | Path, run: RunFolder | None = None) -> RebalancerConfig:
    """The config one run plans, executes and checks with: the file, the stored pool overrides (other runs'),
    and this run's own override (pending until it is approved, then stored; applied last either way, so the
    plan hash does not change when it is recorded)."""
    base = load_config(config_path)
    run_name = run.path.name if run is not None else None
    stored = [o for o in OverrideStore.of(base).active() if o.run_id != run_name]
    request = read_request(run) if run is not None else None
    own = [request.override] if request is not None and request.override is not None else []
    return apply_overrides(base, stored + own)


def record_override(config: RebalancerConfig, run: RunFolder, approved_by: str | None) -> PoolOverride | None:
    """Store the run's pool override once it is approved to execute (retry-safe: one per run)."""
    request = read_request(run)
    if request is None or request.override is None:
        return None
    return OverrideStore.of(config).record(request.override.model_copy(
        update={"run_id": run.path.name, "approved_by": approved_by}))
