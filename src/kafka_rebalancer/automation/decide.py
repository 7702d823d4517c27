"""What the watcher's events start (README: Automation): per event its rule's mode decides whether it starts a run
(`started`), is held back (`suppressed`, with why) or only recorded (`reported`: a broker back, or one no pool
claims). Events of one look for one pool and action make one run (two brokers lost together: one drain of both);
a pool whose automatic run started less than `cooldown_s` ago, or that another run holds (holds.claims),
starts nothing. An event held back that way carries `retry_at`: the watcher raises it again then if it still holds
(the broker still gone, still in no pool), so a lost broker is not forgotten because its pool was busy; a pool's
held-back events are raised together (automation.events_log.take_retries), and the watcher brings a pool's brokers lost
or added a few looks apart onto one look (automation.watch): a pool's events make one run whatever their timing.
An out-of-band event in the situation the pool's last automatic rebalance was planned in (its replicas where they
were then, the same out of band) starts nothing: it would plan the same again (a pool no plan brings in band would
otherwise start a run after every cooldown).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kafka_rebalancer.automation.band_check import DISK_OVER_USE, POOL_OUT_OF_BAND
from kafka_rebalancer.automation.watch import BROKER_ADDED, BROKER_LOST, ClusterEvent
from kafka_rebalancer.config import RebalancerConfig
from kafka_rebalancer.model.run_actions import AUTOMATIC, Action, run_action

STARTED, SUPPRESSED, REPORTED = "started", "suppressed", "reported"
ACTION_OF = {BROKER_LOST: Action.DRAIN_BROKERS, BROKER_ADDED: Action.ADD_BROKERS,
             POOL_OUT_OF_BAND: Action.REBALANCE_POOL, DISK_OVER_USE: Action.REBALANCE_POOL}


@dataclass(frozen=True)
class AutomaticRun:
    """A run the events start: the manual operation's parameters, and the events it answers."""

    action: Action
    broker_pool: str
    brokers: tuple[int, ...]
    mode: str  # dry-run, approve or execute
    events: tuple[ClusterEvent, ...]

    def reason(self) -> str:
        return "automation: " + "; ".join(e.observed for e in self.events)

    def describe(self) -> str:
        return f"{self.action} of broker(s) {list(self.brokers)} in pool {self.broker_pool}" if self.brokers \
            else f"{self.action} of pool {self.broker_pool}"


def planned_situations(entries: Iterable[Mapping[str, Any]], has_plan: Callable[[str], bool]) -> dict[str, set[str]]:
    """Per pool, the situations of the events its latest automatic rebalance was started for, if that run reached
    its plan (`entries`: the events log, oldest first; `has_plan`: whether a run id's plan was written)."""
    latest: dict[str, tuple[str, set[str]]] = {}
    for entry in entries:
        if entry.get("decision") == STARTED and entry.get("action") == Action.REBALANCE_POOL \
                and entry.get("situation"):
            run_id, pool = str(entry.get("run_id")), str(entry.get("broker_pool"))
            if latest.get(pool, ("", set()))[0] != run_id:
                latest[pool] = (run_id, set())
            latest[pool][1].add(str(entry["situation"]))
    return {pool: situations for pool, (run_id, situations) in latest.items() if has_plan(run_id)}


def decide(events: Iterable[ClusterEvent], config: RebalancerConfig, last_started: Mapping[str, float],
           now: float, held: Mapping[str, str] | None = None,
           planned: Mapping[str, set[str]] | None = None) -> tuple[list[AutomaticRun], list[dict[str, Any]]]:
    """The runs to start, and a record per event (its fields, decision, why, and the action where one applies);
    `last_started`: when each pool's latest automatic run started; `held`: the pools another run holds, with
    which run; `planned`: planned_situations."""
    automation = config.automation
    rules = {BROKER_LOST: automation.broker_lost, BROKER_ADDED: automation.broker_added,
             POOL_OUT_OF_BAND: automation.out_of_band, DISK_OVER_USE: automation.out_of_band}
    records: list[dict[str, Any]] = []
    grouped: dict[tuple[str, Action], list[ClusterEvent]] = {}
    for event in events:
        if event.kind not in rules or event.broker_pool is None:
            records.append({**event.as_dict(), "decision": REPORTED, "why": "starts nothing"})
            continue
        cooldown_s = config.automation.cooldown_s
        since = now - last_started.get(event.broker_pool, float("-inf"))
        held_by = (held or {}).get(event.broker_pool)
        retry_at: float | None = now + cooldown_s
        if rules[event.kind].mode == "off":
            why, retry_at = f"automation.{event.kind}.mode is off", None
        elif event.situation is not None and event.situation in (planned or {}).get(event.broker_pool, set()):
            why, retry_at = f"pool {event.broker_pool}'s last automatic rebalance was planned with its replicas " \
                            "where they are now and the same out of band: it would plan the same again; nothing " \
                            "starts until either changes", None
        elif since < cooldown_s:
            why = f"pool {event.broker_pool}'s last automatic run started {since:.0f}s ago, inside the cooldown " \
                  f"of {cooldown_s:.0f}s"
            retry_at = now - since + cooldown_s
        elif held_by is not None:
            why = f"pool {event.broker_pool} is held by {held_by}"
        else:
            grouped.setdefault((event.broker_pool, ACTION_OF[event.kind]), []).append(event)
            continue
        records.append({**event.as_dict(), "decision": SUPPRESSED, "why": why, "action": ACTION_OF[event.kind],
                        **({"retry_at": retry_at} if retry_at is not None else {})})
    runs: list[AutomaticRun] = []
    # Per pool the action that goes first (a lost broker's drain: its partitions are short of a replica until it
    # runs), the others held back.
    for (pool, action), pooled in sorted(grouped.items(), key=lambda kv: (kv[0][0], AUTOMATIC.index(kv[0][1]))):
        if any(r.broker_pool == pool for r in runs):  # one automatic run per pool at a time
            records += [{**e.as_dict(), "decision": SUPPRESSED, "action": action,
                         "retry_at": now + config.automation.cooldown_s,
                         "why": f"another automatic run for pool {pool} starts on the same look"} for e in pooled]
            continue
        # A drain or an addition names its brokers; a rebalance the whole pool.
        brokers = () if "brokers" not in run_action(action).fields else tuple(sorted(
            {e.broker_id for e in pooled if e.broker_id is not None}))
        run = AutomaticRun(action, pool, brokers, rules[pooled[0].kind].mode, tuple(pooled))
        runs.append(run)
        records += [{**e.as_dict(), "decision": STARTED, "action": run.action, "mode": run.mode,
                     "brokers": list(run.brokers), "why": run.describe()} for e in pooled]
    return runs, records


def held_back(started: Iterable[Mapping[str, Any]], why: str, now: float, cooldown_s: float,
              run_id: str) -> list[dict[str, Any]]:
    """The events an automatic run was started for, held back after all: the run found its pool held when it
    started (another run took it in between). Recorded like the decision's own held-back events (suppressed, with
    why and a retry_at after the cooldown), decided in that run, which the why names (it has no run of its own)."""
    return [{**{k: v for k, v in e.items() if k != "run_id"}, "decision": SUPPRESSED,
             "why": f"{why}: run {run_id} started nothing", "retry_at": now + cooldown_s, "decided_at": now,
             "decided_in": run_id} for e in started]
