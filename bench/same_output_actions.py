"""The manual runs `bench.same_output` compares: a drain, a demotion, an isolation, an add-brokers and a
remove-disks run, each on a small generated cluster as its own run would capture it.

The cluster: 18 brokers in two pools on three racks (three per rack and pool: a drained broker's replicas have
somewhere to go on its rack), and three spare brokers (one per rack: running, empty, in no
pool) that add-brokers adds to a pool and isolate-topics makes a new pool of; every broker has two log
directories (JBOD), its replicas split between them, for remove-disks. A run's snapshot is taken after its request
is made, with the request's pool override applied (as `snapshot.start.start_run` does): a drained broker is in no
pool and has no capacity, an added one is in its pool, an isolated topic in its new pool. The snapshot is built
once, with this checkout, and both checkouts plan the same one; each makes and writes the request itself.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from kafka_rebalancer.config import RebalancerConfig
from kafka_rebalancer.model.schemas import LOG_DIRS, REPLICA_LOG_DIRS
from kafka_rebalancer.operations.overrides import apply_overrides
from kafka_rebalancer.operations.request import make_request, run_config
from kafka_rebalancer.run_folder import RunFolder
from kafka_rebalancer.snapshot import write_snapshot
from kafka_rebalancer.snapshot.build import SnapshotTables
from kafka_rebalancer.snapshot.capacity import CAPACITY_FIELDS
from kafka_rebalancer.snapshot.synthetic import SyntheticSpec, generate

# Room enough (a third of capacity in use) for a drained broker's replicas on its rack's two other brokers of the
# pool (RF = racks: each stays on its rack) within the capacity thresholds; at 0.45 some could not leave.
SPEC = SyntheticSpec(n_brokers=18, n_racks=3, n_pools=2, n_partitions=300, replication_factor=3,
                     hot_brokers_per_pool=1, hot_weight=2.0, leader_skew=0.2, under_replicated_fraction=0.01,
                     target_usage=0.3, seed=5101)
SPARE = (19, 20, 21)  # one per rack, as brokers 1, 2 and 3 (ids alternate racks), twice their capacity
SPARE_CAPACITY = 2  # whole: the disk capacity stays an integer
LOG_DIR_PATHS = ("/data/d1", "/data/d2")
ACTIONS = ("drain-brokers", "demote-brokers", "isolate-topics", "add-brokers", "remove-disks")  # `action_runs`' order
# Fixed, so that both checkouts' requests say the same (a request's own time and user are shown in the report).
REQUESTED = {"requested_by": "bench", "requested_at": "2026-01-01T00:00:00+00:00"}


@dataclass(frozen=True)
class ActionRun:
    """One manual run: its name in the output, and `make_request`'s parameters."""

    name: str
    params: dict[str, Any]


def action_runs(tables: SnapshotTables) -> list[ActionRun]:
    """The runs, their brokers chosen on `tables`: the drain and the disk removal in both pools, the demotion of
    the broker that leads most partitions."""
    leaders = tables.replicas.loc[tables.replicas["is_leader"].astype(bool), "broker_id"]
    most_leading = int(leaders.value_counts().sort_index().idxmax())
    spare = list(SPARE)
    return [
        ActionRun("drain-brokers", {"action": "drain-brokers", "brokers": [1], "reason": "bench: drain"}),
        ActionRun("demote-brokers", {"action": "demote-brokers", "brokers": [most_leading]}),
        ActionRun("isolate-topics", {"action": "isolate-topics", "topics": ["pool-1.topic-0000"],
                                     "broker_pool": "isolated", "brokers": spare, "reason": "bench: isolate"}),
        ActionRun("add-brokers", {"action": "add-brokers", "brokers": spare, "broker_pool": "pool-0",
                                  "reason": "bench: add brokers"}),
        ActionRun("remove-disks", {"action": "remove-disks", "log_dirs": ["2:/data/d1", "11:/data/d2"],
                                   "reason": "bench: remove disks"}),
    ]


def jbod_cluster() -> tuple[SnapshotTables, dict[str, Any]]:
    """The generated cluster with the spare brokers and every broker's two log dirs, and its config's body."""
    tables, body = generate(SPEC)
    brokers = tables.brokers
    spare = brokers.set_index("broker_id").loc[[1, 2, 3]].reset_index()
    spare = spare.assign(broker_id=np.array(SPARE, dtype=brokers["broker_id"].dtype), broker_pool=None,
                         disk_used_bytes=0, **{c: spare[c] * SPARE_CAPACITY for c in CAPACITY_FIELDS})
    brokers = pd.concat([brokers, spare], ignore_index=True)
    on_dirs = tables.replicas[["topic", "partition", "broker_id", "size_bytes"]].assign(
        log_dir=[LOG_DIR_PATHS[(p + b) % 2] for p, b in zip(tables.replicas["partition"],
                                                              tables.replicas["broker_id"], strict=True)],
        future_log_dir=None)[REPLICA_LOG_DIRS.names]
    used = on_dirs.groupby(["broker_id", "log_dir"])["size_bytes"].sum()
    rows = []
    for broker, disk in zip(brokers["broker_id"], brokers["disk_capacity_bytes"], strict=True):
        for path in LOG_DIR_PATHS:  # two disks of half the broker's capacity each
            capacity, in_use = int(disk) // 2, int(used.get((broker, path), 0))
            rows.append({"broker_id": broker, "log_dir": path, "capacity_bytes": capacity,
                         "capacity_source": "volume", "used_bytes": in_use, "volume_total_bytes": capacity,
                         "volume_usable_bytes": max(0, capacity - in_use), "cordoned": False, "offline": False})
    dirs = pd.DataFrame(rows, columns=LOG_DIRS.names).astype(
        dict.fromkeys(("capacity_bytes", "volume_total_bytes", "volume_usable_bytes"), "Int64"))
    body = {**body, "budgets": {"max_replica_moves": 10 * SPEC.n_partitions}}
    return SnapshotTables(brokers, tables.replicas, tables.partitions, [], dirs, on_dirs), body


def as_captured(tables: SnapshotTables, config: RebalancerConfig) -> SnapshotTables:
    """The tables as a snapshot taken with `config` has them (`build_snapshot_tables`): each broker's pool (none:
    no capacity) and each topic's pool."""
    pool_of = config.broker_pool_of()
    brokers = tables.brokers.assign(broker_pool=[pool_of.get(int(b)) for b in tables.brokers["broker_id"]])
    outside = ~brokers["broker_id"].astype(int).isin(list(pool_of))
    for column in CAPACITY_FIELDS:
        brokers[column] = brokers[column].where(~outside, 0)
    partitions = tables.partitions.assign(topic_pool=[config.topic_pool(t) for t in tables.partitions["topic"]])
    return SnapshotTables(brokers, tables.replicas, partitions, [], tables.log_dirs, tables.replica_log_dirs)


def prepare_actions(out: Path) -> list[tuple[str, Path, Path, dict[str, Any]]]:
    """For each run: its name, the cluster's config, the snapshot the run plans and its request's parameters
    (all written afresh under `out`/actions: a few seconds)."""
    tables, body = jbod_cluster()
    folder = out / "actions"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    config_path = folder / "config.yaml"
    config_path.write_text(yaml.safe_dump({**body, "run_root": str(folder / "runs")}, sort_keys=False))
    base = run_config(config_path)
    inputs = []
    for run in action_runs(tables):
        params = {**run.params, **REQUESTED}
        request = make_request(base, **params)
        config = apply_overrides(base, [request.override] if request.override is not None else [])
        snapshot = RunFolder(folder / run.name)
        write_snapshot(snapshot, as_captured(tables, config), {"cluster": body["cluster"]["name"]})
        inputs.append((run.name, config_path, snapshot.stage_path("snapshot"), params))
    return inputs
