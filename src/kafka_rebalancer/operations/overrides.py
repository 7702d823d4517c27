"""Pool overrides: the lasting pool changes of manual operations, kept on top of the config.

Isolating topics, draining brokers and adding brokers change which brokers form a pool and which topics live in it.
Those changes must outlast the run that made them (the next nightly run must not move anything back), so they are
recorded here, in one JSON file per cluster under the run root, that every step reads through
`apply_overrides`. An override is recorded only when its run is approved to execute; it can be reverted.

Each override remembers the pool every broker it moves came from: if the config has changed since (the broker is
in another pool now, or the pool it joins is gone), the override no longer fits and loading the config fails,
naming it, instead of silently planning something else.
"""

from __future__ import annotations

import fcntl
import getpass
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from kafka_rebalancer.errors import ConfigError, RebalancerError
from kafka_rebalancer.model.run_actions import Action, run_action

if TYPE_CHECKING:
    from kafka_rebalancer.config import RebalancerConfig

CONFIG = "config"  # the source of a pool's brokers and rules that no override changed


class PoolOverride(BaseModel):
    """One lasting pool change. `from_pools`: each moved broker's pool before (None: in no pool)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: int = Field(ge=1)
    kind: Action  # the action that made it: one that changes pools
    broker_pool: str | None = None  # the pool brokers join / topics move into; None for a drain
    brokers: list[int] = Field(default_factory=list)
    from_pools: dict[int, str | None] = Field(default_factory=dict)
    topics: list[str] = Field(default_factory=list)
    requested_by: str
    approved_by: str | None = None
    created_at: str
    reason: str
    run_id: str
    state: Literal["active", "reverted"] = "active"
    reverted_by: str | None = None
    reverted_at: str | None = None

    @field_validator("kind")
    @classmethod
    def _changes_pools(cls, kind: Action) -> Action:
        if not run_action(kind).changes_pools:
            raise ValueError(f"{kind} changes no pool")
        return kind

    @property
    def drains(self) -> bool:
        """Its brokers left their pools (else they joined `broker_pool`)."""
        return run_action(self.kind).drains

    def describe(self) -> str:
        what = ("drain (leave their pool)" if self.drains else
                f"topics {', '.join(self.topics)} into pool {self.broker_pool!r}" if self.topics else
                f"join pool {self.broker_pool!r}")
        brokers = f"brokers {', '.join(map(str, self.brokers))} " if self.brokers else ""
        return f"#{self.id} {self.kind}: {brokers}{what}"


class _StoreFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: Literal[1] = 1
    overrides: list[PoolOverride] = Field(default_factory=list)


def store_path(run_root: Path, cluster: str) -> Path:
    return run_root / cluster / "pool_overrides.json"


def current_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (some containers)
        return f"uid {os.getuid()}"


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class OverrideStore:
    """The overrides of one cluster. Reads see a whole file; writes replace it atomically under a lock."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def of(cls, config: RebalancerConfig) -> OverrideStore:
        return cls(store_path(config.run_root, config.cluster.name))

    def read(self) -> list[PoolOverride]:
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return []
        try:
            return _StoreFile.model_validate_json(text).overrides
        except ValidationError as exc:
            first = exc.errors()[0]
            raise ConfigError(str(self.path), ".".join(map(str, first["loc"])), first["msg"]) from None

    def active(self) -> list[PoolOverride]:
        return [o for o in self.read() if o.state == "active"]

    @contextmanager
    def _locked(self) -> Iterator[list[PoolOverride]]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_name(self.path.name + ".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            overrides = self.read()
            yield overrides
            tmp = self.path.with_name(f".{self.path.name}.tmp-{os.getpid()}")
            tmp.write_text(_StoreFile(overrides=overrides).model_dump_json(indent=2) + "\n")
            tmp.replace(self.path)

    def record(self, override: PoolOverride) -> PoolOverride:
        """Store `override` with the next id; a second record for the same run returns the first (retry-safe)."""
        with self._locked() as overrides:
            for existing in overrides:
                if existing.run_id == override.run_id and existing.state == "active":
                    return existing
            stored = override.model_copy(update={"id": max((o.id for o in overrides), default=0) + 1})
            overrides.append(stored)
        return stored

    def revert(self, override_id: int, by: str) -> PoolOverride:
        with self._locked() as overrides:
            for i, existing in enumerate(overrides):
                if existing.id == override_id:
                    if existing.state == "reverted":
                        raise RebalancerError(f"override #{override_id} was already reverted "
                                              f"(by {existing.reverted_by} at {existing.reverted_at})")
                    overrides[i] = existing.model_copy(update={"state": "reverted", "reverted_by": by,
                                                               "reverted_at": now_iso()})
                    return overrides[i]
        known = ", ".join(f"#{o.id}" for o in overrides) or "none"
        raise RebalancerError(f"no override #{override_id} in {self.path} (known: {known})")


@dataclass(frozen=True)
class PoolLayout:
    """Pools and topic rules after the overrides, with where each broker and rule comes from."""

    pools: dict[str, list[int]]
    topic_rules: list[tuple[str, str]]  # (pattern, pool), first match wins
    broker_source: dict[int, str]  # broker -> "config" or "override #N"
    rule_source: list[str]
    drained: dict[int, str]  # broker -> the override that drained it


def layout(config: RebalancerConfig, overrides: list[PoolOverride]) -> PoolLayout:
    """Apply the overrides (in the order given: the store's, oldest first) to the config's pools; an override that
    no longer fits is a ConfigError naming it."""
    pools = {name: list(p.brokers) for name, p in config.pools.items()}
    rules = [(r.topics, r.pool) for r in config.topic_pools]
    broker_source = {b: CONFIG for brokers in pools.values() for b in brokers}
    rule_source = [CONFIG] * len(rules)
    drained: dict[int, str] = {}
    file = str(config.source_file or "config")
    for o in overrides:
        name = f"override #{o.id} ({o.kind}, run {o.run_id})"
        pool_of = {b: p for p, brokers in pools.items() for b in brokers}
        for b in o.brokers:
            was = o.from_pools.get(b)
            if pool_of.get(b) != was:
                now = f"pool {pool_of[b]!r}" if b in pool_of else "no pool"
                before = f"pool {was!r}" if was else "no pool"
                raise ConfigError(file, "pools", f"{name} no longer fits: broker {b} was in {before} when it was "
                                  f"made and is in {now} now; revert it (kafka-rebalancer overrides revert "
                                  f"{o.id}) or restore the config")
        # An isolation may create its pool (with brokers); an addition joins one that must still exist.
        creates_pool = bool(o.topics) and bool(o.brokers)
        if not o.drains and o.broker_pool not in pools and not creates_pool:
            raise ConfigError(file, "pools", f"{name} no longer fits: pool {o.broker_pool!r} is not in the config "
                              f"(known: {', '.join(sorted(pools))})")
        for b in o.brokers:
            if pool_of.get(b) is not None:
                pools[pool_of[b]].remove(b)
            if o.drains:
                drained[b] = f"override #{o.id}"
                broker_source.pop(b, None)
            else:
                pools.setdefault(o.broker_pool, []).append(b)  # type: ignore[arg-type]  # only a drain has no pool
                broker_source[b] = f"override #{o.id}"
        emptied = [p for p, brokers in pools.items() if not brokers]
        if emptied:
            raise ConfigError(file, "pools", f"{name} leaves pool(s) {', '.join(emptied)} without brokers")
        if o.topics:  # an isolation: its topics live in its pool
            rules = [(t, o.broker_pool) for t in o.topics] + rules  # type: ignore[assignment]  # an isolation names its pool
            rule_source = [f"override #{o.id}"] * len(o.topics) + rule_source
    return PoolLayout(pools, rules, broker_source, rule_source, drained)


def apply_overrides(config: RebalancerConfig, overrides: list[PoolOverride]) -> RebalancerConfig:
    """The config with the overrides' pools and topic rules (what every step plans, executes and checks with)."""
    if not overrides:
        return config
    from kafka_rebalancer.config import PoolSettings, TopicRule

    result = layout(config, overrides)
    return config.model_copy(update={
        "pools": {name: PoolSettings(brokers=brokers) for name, brokers in result.pools.items()},
        "topic_pools": [TopicRule(topics=t, pool=p) for t, p in result.topic_rules]})
