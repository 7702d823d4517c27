"""What the cluster's watcher sees between two looks at its metadata, as events (README: Automation). Pure: the
registered brokers now and the state kept from the looks before in, the new state and the events out; the
triggerer's loop (`airflow.cluster_watch`) reads the cluster and keeps the state (`automation.store`).

- A broker of a pool that stops being registered is down from the first look that misses it; once down longer than
  `broker_lost.grace_period_s` it is `broker_lost` (once per outage). Back, it is `broker_back` with how long it was
  gone (inside the grace period: a flap), which starts nothing.
- A registered broker no pool holds is `broker_added` into the pool whose claim rule takes it (by id range or rack
  pattern), or `broker_unclaimed` when none does (reported, never placed); once per broker while it stays
  registered.
- With the out-of-band rule on, `band_check_due` every `out_of_band.check_interval_s`: a timer, not an event of the
  cluster; the events DAG's run then measures the bands (automation.bands), work too heavy for the triggerer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka_rebalancer.config import RebalancerConfig

BROKER_LOST, BROKER_BACK, BROKER_ADDED, BROKER_UNCLAIMED = "broker_lost", "broker_back", "broker_added", \
    "broker_unclaimed"
BANDS_DUE = "band_check_due"


@dataclass(frozen=True)
class ClusterEvent:
    kind: str
    broker_id: int | None  # None: an event of a pool, or the band check's timer
    broker_pool: str | None
    observed: str  # what the watcher saw, in words: the run's trigger says it
    at: float  # epoch seconds of the look that raised it

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "broker_id": self.broker_id, "broker_pool": self.broker_pool,
                "observed": self.observed, "at": self.at}


@dataclass
class WatchState:
    """Kept between looks (and across triggerer restarts): when each missing broker was first missed, which outages
    were reported, and which unpooled brokers were."""

    down_since: dict[int, float] = field(default_factory=dict)
    lost_reported: set[int] = field(default_factory=set)
    added_reported: set[int] = field(default_factory=set)
    bands_due_at: float | None = None  # the last band_check_due

    def as_dict(self) -> dict[str, Any]:
        return {"down_since": {str(b): t for b, t in sorted(self.down_since.items())},
                "lost_reported": sorted(self.lost_reported), "added_reported": sorted(self.added_reported),
                "bands_due_at": self.bands_due_at}

    def forget(self, kind: str, broker_id: int) -> None:
        """Raise this event again at the next look where it still holds (a decision held it back)."""
        {BROKER_LOST: self.lost_reported, BROKER_ADDED: self.added_reported}.get(kind, set()).discard(broker_id)

    @classmethod
    def of(cls, raw: Mapping[str, Any]) -> WatchState:
        due = raw.get("bands_due_at")
        return cls({int(b): float(t) for b, t in dict(raw.get("down_since") or {}).items()},
                   {int(b) for b in raw.get("lost_reported") or []}, {int(b) for b in raw.get("added_reported") or []},
                   None if due is None else float(due))


def observe(state: WatchState, registered: Mapping[int, str | None], now: float,
            config: RebalancerConfig) -> list[ClusterEvent]:
    """The events of one look at the registered brokers (id -> rack); `state` is updated in place."""
    pool_of = config.broker_pool_of()
    events = _lost_or_back(state, registered, now, pool_of, config.automation.broker_lost.grace_period_s)
    for broker in sorted(set(registered) - set(pool_of)):
        if broker in state.added_reported:
            continue
        state.added_reported.add(broker)
        rack = registered[broker]
        claiming = [name for name, pool in sorted(config.pools.items())
                    if pool.claim is not None and pool.claim.claims(broker, rack)]
        where = f"broker {broker} (rack {rack or 'none'}) registered, in no pool"
        if claiming:
            events.append(ClusterEvent(BROKER_ADDED, broker, claiming[0],
                                       f"{where}; pool {claiming[0]}'s claim takes it", now))
        else:
            events.append(ClusterEvent(BROKER_UNCLAIMED, broker, None, f"{where}; no pool's claim takes it", now))
    state.added_reported &= set(registered) - set(pool_of)  # one that left, or joined a pool, is new again later
    rule = config.automation.out_of_band
    if rule.mode != "off" and (state.bands_due_at is None or now - state.bands_due_at >= rule.check_interval_s):
        state.bands_due_at = now
        events.append(ClusterEvent(BANDS_DUE, None, None, "the bands are due for a check", now))
    return events


def _lost_or_back(state: WatchState, registered: Mapping[int, str | None], now: float, pool_of: Mapping[int, str],
                  grace_s: float) -> list[ClusterEvent]:
    events = []
    for broker in sorted(set(state.down_since) & set(registered)):
        gone_s = now - state.down_since.pop(broker)
        why = "reported lost before" if broker in state.lost_reported else f"inside the grace period of {grace_s:.0f}s"
        events.append(ClusterEvent(BROKER_BACK, broker, pool_of.get(broker),
                                   f"broker {broker} registered again after {gone_s:.0f}s, {why}", now))
        state.lost_reported.discard(broker)
    for broker in sorted(set(pool_of) - set(registered)):
        since = state.down_since.setdefault(broker, now)
        if now - since >= grace_s and broker not in state.lost_reported:
            state.lost_reported.add(broker)
            events.append(ClusterEvent(BROKER_LOST, broker, pool_of[broker],
                                       f"broker {broker} of pool {pool_of[broker]} not registered for "
                                       f"{now - since:.0f}s (grace period {grace_s:.0f}s)", now))
    return events
