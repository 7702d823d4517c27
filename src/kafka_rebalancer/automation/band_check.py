"""The out-of-band events (README: Automation): when the watcher says the bands are due, a task of the events DAG
captures the cluster as a run's snapshot would (in memory, nothing written), judges every pool broker in its
pool's band, and raises
- `pool_out_of_band` for a pool with at least `out_of_band.share` of its brokers outside the band (any balanced
  resource) for at least `sustained_s` (since the first check that found it so; kept in `bands_state.json`), and
- `disk_over_use` for a pool broker whose disk is above `out_of_band.disk_use` of its capacity,
each starting `rebalance-pool` for the pool. Each event carries its situation: a fingerprint of where the pool's
replicas and leaders are (not their sizes) and what is out of band; a pool whose last automatic rebalance was planned
in the same situation starts nothing (automation.decide): it would plan the same again.
`pool_out_of_band_events` is pure; `check_bands` reads the cluster.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import pandas as pd

from kafka_rebalancer.automation.events_log import append_events, automation_dir, write_whole
from kafka_rebalancer.automation.watch import ClusterEvent
from kafka_rebalancer.config import RebalancerConfig
from kafka_rebalancer.errors import RunFolderError
from kafka_rebalancer.kafka_admin import KafkaConnection
from kafka_rebalancer.model.band_status import band_status, broker_load_frame
from kafka_rebalancer.plan.balance.pool_bands import bands_frame
from kafka_rebalancer.snapshot import capture

POOL_OUT_OF_BAND, DISK_OVER_USE = "pool_out_of_band", "disk_over_use"


@dataclass
class BandWatch:
    """Since when each pool has had its share of brokers out of band (kept between checks)."""

    out_since: dict[str, float] = field(default_factory=dict)


def pool_layouts(replicas: pd.DataFrame, broker_pool_of: Mapping[int, str]) -> dict[str, str]:
    """Per pool, a fingerprint of where its replicas and leaders are (a replica table's rows on its brokers)."""
    rows = replicas.assign(broker_pool=replicas["broker_id"].map(broker_pool_of)).dropna(subset=["broker_pool"])
    layouts = {}
    for pool, placed in rows.groupby("broker_pool", sort=True):
        placed = placed.sort_values(["topic", "partition", "broker_id"])[["topic", "partition", "broker_id",
                                                                          "is_leader"]]
        digest = pd.util.hash_pandas_object(placed, index=False).to_numpy().tobytes()
        layouts[str(pool)] = hashlib.sha256(digest).hexdigest()[:16]
    return layouts


def pool_out_of_band_events(status: pd.DataFrame, watch: BandWatch, now: float, config: RebalancerConfig,
                            layouts: Mapping[str, str] | None = None) -> list[ClusterEvent]:
    """The events of one check (`status`: band_status rows of every pool broker and resource; `layouts`:
    pool_layouts of the cluster now); `watch` updated."""
    layouts = layouts or {}
    rule = config.automation.out_of_band
    events = []
    counted = status[status["counted"]]
    for pool, rows in counted.groupby("broker_pool", sort=True):
        brokers = rows["broker_id"].nunique()
        outside = sorted(int(b) for b in rows.loc[~rows["inside"], "broker_id"].unique())
        if not outside or len(outside) / brokers < rule.share:
            watch.out_since.pop(str(pool), None)
            continue
        since = watch.out_since.setdefault(str(pool), now)
        if now - since >= rule.sustained_s:
            resources = sorted(set(rows.loc[~rows["inside"], "resource"]))
            events.append(ClusterEvent(POOL_OUT_OF_BAND, None, str(pool), (
                f"{len(outside)} of {brokers} brokers of pool {pool} out of band ({', '.join(resources)}: brokers "
                f"{outside}), {len(outside) / brokers:.0%} >= {rule.share:.0%}, for {now - since:.0f}s "
                f"(sustained_s {rule.sustained_s:.0f})"), now, _situation(layouts, str(pool), f"out {outside}")))
    for pool in set(watch.out_since) - set(counted["broker_pool"].astype(str)):
        watch.out_since.pop(pool)  # a pool no longer configured, or no longer balanced
    if rule.disk_use is not None:
        disk = status[(status["resource"] == "disk") & status["broker_pool"].notna() & status["usage"].notna()]
        for row in disk[disk["usage"] > rule.disk_use].sort_values("broker_id").itertuples(index=False):
            events.append(ClusterEvent(DISK_OVER_USE, int(row.broker_id), str(row.broker_pool), (
                f"broker {int(row.broker_id)} of pool {row.broker_pool}: disk at {float(row.usage):.1%} of its "
                f"capacity, over disk_use {rule.disk_use:.0%}"), now,
                _situation(layouts, str(row.broker_pool), f"disk over on {int(row.broker_id)}")))
    return events


def _situation(layouts: Mapping[str, str], broker_pool: str, what: str) -> str | None:
    layout = layouts.get(broker_pool)
    return None if layout is None else f"{layout} {what}"


def band_status_now(config: RebalancerConfig, connection: KafkaConnection) -> tuple[pd.DataFrame, dict[str, str]]:
    """Every pool broker's usage against its pool's band, as the cluster is now; and each pool's layout."""
    tables, _ = capture(config, connection)
    resources = config.resource_list()
    load = broker_load_frame(tables.brokers, tables.replicas, resources)
    return band_status(load, bands_frame(load, config)), pool_layouts(tables.replicas, config.broker_pool_of())


def check_bands(config: RebalancerConfig, connection: KafkaConnection, now: float | None = None) -> list[ClusterEvent]:
    """One check: the cluster's bands now, the events they raise (recorded as observed), the watch kept."""
    now = time.time() if now is None else now
    watch = _load(config)
    status, layouts = band_status_now(config, connection)
    events = pool_out_of_band_events(status, watch, now, config, layouts)
    _save(config, watch)
    append_events(config, [{**e.as_dict(), "decision": "observed"} for e in events])
    return events


def _load(config: RebalancerConfig) -> BandWatch:
    path = automation_dir(config) / "bands_state.json"
    if not path.exists():
        return BandWatch()
    try:
        return BandWatch({str(p): float(t) for p, t in dict(json.loads(path.read_text())["out_since"]).items()})
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise RunFolderError(f"{path}: not a readable band watch ({type(exc).__name__}: {exc}); move it aside to "
                             "start watching the bands afresh") from exc


def _save(config: RebalancerConfig, watch: BandWatch) -> None:
    write_whole(config, "bands_state.json", {"out_since": dict(sorted(watch.out_since.items()))})
