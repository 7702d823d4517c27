"""What the cluster's watcher sees between two looks at its metadata, as events (README: Automation). Pure: the
registered brokers now and the state kept from the looks before in, the new state and the events out; the
triggerer's loop (`airflow.cluster_watch`) reads the cluster and keeps the state (`automation.events_log`).

- A broker of a pool that stops being registered is down from the first look that misses it; once down longer than
  `broker_lost.grace_period_s` it is `broker_lost` (once per outage). Back, it is `broker_back` with how long it was
  gone (inside the grace period: a flap), which starts nothing. While another broker of the same pool is down but
  still inside its grace period, a lost one waits for it (at most one more grace period): brokers of a pool lost a
  few looks apart are raised on one look, so they make one drain.
- A registered broker no pool holds is `broker_added` into the pool whose claim rule takes it (by id range or rack
  pattern), or `broker_unclaimed` when none does (reported, never placed); once per broker while it stays
  registered. A claimed one is raised once it and every other new broker its pool claims have been registered for
  `broker_added.settle_s` (at most twice that for the first): brokers started one after another make one addition.
- With the out-of-band rule on, `band_check_due` every `out_of_band.check_interval_s`: a timer, not an event of the
  cluster; the events DAG's run then measures the bands (automation.band_check), work too heavy for the triggerer.
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
    # The band check's: where the pool's replicas are and what is out of band, as a fingerprint (the same again: a
    # rebalance would plan the same)
    situation: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "broker_id": self.broker_id, "broker_pool": self.broker_pool,
                "observed": self.observed, "at": self.at, **({"situation": self.situation} if self.situation else {})}


@dataclass
class WatchState:
    """Kept between looks (and across triggerer restarts): when each missing broker was first missed, which outages
    were reported, and which unpooled brokers were."""

    down_since: dict[int, float] = field(default_factory=dict)
    lost_reported: set[int] = field(default_factory=set)
    added_reported: set[int] = field(default_factory=set)
    bands_due_at: float | None = None  # the last band_check_due
    unpooled_since: dict[int, float] = field(default_factory=dict)  # first look that saw it registered in no pool

    def as_dict(self) -> dict[str, Any]:
        return {"down_since": {str(b): t for b, t in sorted(self.down_since.items())},
                "lost_reported": sorted(self.lost_reported), "added_reported": sorted(self.added_reported),
                "bands_due_at": self.bands_due_at,
                "unpooled_since": {str(b): t for b, t in sorted(self.unpooled_since.items())}}

    def forget(self, kind: str, broker_id: int) -> None:
        """Raise this event again at the next look where it still holds (a decision held it back)."""
        {BROKER_LOST: self.lost_reported, BROKER_ADDED: self.added_reported}.get(kind, set()).discard(broker_id)

    @classmethod
    def of(cls, raw: Mapping[str, Any]) -> WatchState:
        due = raw.get("bands_due_at")
        return cls({int(b): float(t) for b, t in dict(raw.get("down_since") or {}).items()},
                   {int(b) for b in raw.get("lost_reported") or []}, {int(b) for b in raw.get("added_reported") or []},
                   None if due is None else float(due),
                   {int(b): float(t) for b, t in dict(raw.get("unpooled_since") or {}).items()})


def observe(state: WatchState, registered: Mapping[int, str | None], now: float,
            config: RebalancerConfig) -> list[ClusterEvent]:
    """The events of one look at the registered brokers (id -> rack); `state` is updated in place."""
    pool_of = config.broker_pool_of()
    events = _lost_or_back(state, registered, now, pool_of, config.automation.broker_lost.grace_period_s)
    events += _added(state, registered, now, pool_of, config)
    rule = config.automation.out_of_band
    if rule.mode != "off" and (state.bands_due_at is None or now - state.bands_due_at >= rule.check_interval_s):
        state.bands_due_at = now
        events.append(ClusterEvent(BANDS_DUE, None, None, "the bands are due for a check", now))
    return events


def _settled(waiting_s: list[float], settle_s: float) -> bool:
    """Whether brokers waiting this long (each since its own start) are raised now: every one has waited
    `settle_s`, or the first of them twice that (so a pool with brokers coming and going cannot hold one forever)."""
    return min(waiting_s) >= settle_s or max(waiting_s) >= 2 * settle_s


def _added(state: WatchState, registered: Mapping[int, str | None], now: float, pool_of: Mapping[int, str],
           config: RebalancerConfig) -> list[ClusterEvent]:
    unpooled = set(registered) - set(pool_of)
    state.unpooled_since = {b: state.unpooled_since.get(b, now) for b in unpooled}
    state.added_reported &= unpooled  # one that left, or joined a pool, is new again later
    events: list[ClusterEvent] = []
    claimed: dict[str, list[int]] = {}
    for broker in sorted(unpooled - state.added_reported):
        rack = registered[broker]
        claiming = [name for name, pool in sorted(config.pools.items())
                    if pool.claim is not None and pool.claim.claims(broker, rack)]
        if claiming:
            claimed.setdefault(claiming[0], []).append(broker)
        else:
            state.added_reported.add(broker)
            events.append(ClusterEvent(BROKER_UNCLAIMED, broker, None, f"broker {broker} (rack {rack or 'none'}) "
                                       "registered, in no pool; no pool's claim takes it", now))
    settle_s = config.automation.broker_added.settle_s
    for broker_pool, brokers in sorted(claimed.items()):
        if not _settled([now - state.unpooled_since[b] for b in brokers], settle_s):
            continue
        for broker in brokers:
            if now - state.unpooled_since[broker] >= settle_s:  # one just started waits for the next addition
                state.added_reported.add(broker)
                events.append(ClusterEvent(BROKER_ADDED, broker, broker_pool,
                                           f"broker {broker} (rack {registered[broker] or 'none'}) registered, in "
                                           f"no pool; pool {broker_pool}'s claim takes it", now))
    return sorted(events, key=lambda e: e.broker_id or 0)


def _lost_or_back(state: WatchState, registered: Mapping[int, str | None], now: float, pool_of: Mapping[int, str],
                  grace_s: float) -> list[ClusterEvent]:
    events = []
    for broker in sorted(set(state.down_since) & set(registered)):
        gone_s = now - state.down_since.pop(broker)
        why = "reported lost before" if broker in state.lost_reported else f"inside the grace period of {grace_s:.0f}s"
        events.append(ClusterEvent(BROKER_BACK, broker, pool_of.get(broker),
                                   f"broker {broker} registered again after {gone_s:.0f}s, {why}", now))
        state.lost_reported.discard(broker)
    down = sorted(set(pool_of) - set(registered))
    for broker in down:
        state.down_since.setdefault(broker, now)
    for broker_pool in sorted({pool_of[b] for b in down}):
        # The pool's brokers down inside their grace period pass it or come back first: one drain for them all.
        waiting = {b: now - state.down_since[b] for b in down
                   if pool_of[b] == broker_pool and b not in state.lost_reported}
        if not waiting or not _settled(list(waiting.values()), grace_s):
            continue
        for broker, gone_s in sorted(waiting.items()):
            if gone_s >= grace_s:  # one still inside its grace period is raised on its own, if it stays gone
                state.lost_reported.add(broker)
                events.append(ClusterEvent(BROKER_LOST, broker, broker_pool,
                                           f"broker {broker} of pool {broker_pool} not registered for "
                                           f"{gone_s:.0f}s (grace period {grace_s:.0f}s)", now))
    return events
