"""Writing and reading the snapshot stage of a run folder.

The manifest carries a content hash of the tables (independent of when the snapshot was taken), so the plan's
hash identifies the cluster state and config it was computed from.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from kafka_rebalancer.errors import RunFolderError, one_line
from kafka_rebalancer.model.resources import RESOURCES
from kafka_rebalancer.model.schemas import (
    BROKERS,
    LOG_DIR_TABLES,
    PARTITIONS,
    REPLICAS,
    SNAPSHOT_TABLES,
    TIERED_PARTITIONS,
    TOPIC_HISTORY,
    TableSchema,
)
from kafka_rebalancer.operations.request import read_request
from kafka_rebalancer.run_folder import SNAPSHOT, RunFolder, read_json, read_table, write_json, write_table
from kafka_rebalancer.snapshot.build import SnapshotTables
from kafka_rebalancer.snapshot.evacuation import as_planned
from kafka_rebalancer.snapshot.row_checks import check_snapshot_tables

_SORT_KEYS = {"brokers": ["broker_id"], "replicas": ["topic", "partition", "position"],
              "partitions": ["topic", "partition"], "log_dirs": ["broker_id", "log_dir"],
              "replica_log_dirs": ["topic", "partition", "broker_id"], "tiered_partitions": ["topic", "partition"]}


def canonical(tables: SnapshotTables) -> SnapshotTables:
    """Rows in a fixed order, so the same cluster state always gives the same tables."""
    def sort(frame: pd.DataFrame, name: str) -> pd.DataFrame:
        return frame.sort_values(_SORT_KEYS[name], kind="mergesort").reset_index(drop=True)

    def sort_optional(frame: pd.DataFrame | None, name: str) -> pd.DataFrame | None:
        return None if frame is None else sort(frame, name)
    return SnapshotTables(sort(tables.brokers, "brokers"), sort(tables.replicas, "replicas"),
                          sort(tables.partitions, "partitions"), list(tables.warnings),
                          sort_optional(tables.log_dirs, "log_dirs"),
                          sort_optional(tables.replica_log_dirs, "replica_log_dirs"),
                          sort_optional(tables.tiered_partitions, "tiered_partitions"))


def _present(tables: SnapshotTables) -> list[tuple[TableSchema, pd.DataFrame]]:
    """The tables with their schemas; the log directories' and the tiered partitions' where the snapshot has them."""
    present = list(zip(SNAPSHOT_TABLES, (tables.brokers, tables.replicas, tables.partitions), strict=True))
    optional = zip((*LOG_DIR_TABLES, TIERED_PARTITIONS),
                   (tables.log_dirs, tables.replica_log_dirs, tables.tiered_partitions), strict=True)
    return present + [(s, f) for s, f in optional if f is not None]


def content_hash(tables: SnapshotTables) -> str:
    digest = hashlib.sha256()
    for schema, frame in _present(tables):
        arrow = schema.to_arrow_table(frame)
        digest.update(schema.name.encode())
        for column in schema.names:
            values = arrow.column(column).to_pylist() if column in ("replicas", "isr") else None
            if values is not None:
                digest.update(repr(values).encode())
            else:
                series = arrow.column(column).to_pandas()
                digest.update(pd.util.hash_pandas_object(series, index=False).to_numpy().tobytes())
    return digest.hexdigest()


def write_snapshot(run: RunFolder, tables: SnapshotTables, manifest: dict[str, Any],
                   stage: str = SNAPSHOT, history: pd.DataFrame | None = None) -> dict[str, Any]:
    """`history`: the log size history the run's forecast reads (TOPIC_HISTORY), kept beside the tables and out of
    the content hash (the plan does not depend on it)."""
    tables = canonical(tables)
    manifest = {
        **manifest,
        "taken_at": manifest.get("taken_at") or datetime.now(UTC).isoformat(timespec="seconds"),
        "content_hash": content_hash(tables),
        "rows": {"brokers": len(tables.brokers), "replicas": len(tables.replicas),
                 "partitions": len(tables.partitions)},
        "warnings": tables.warnings,
    }
    with run.stage(stage) as folder:
        for schema, frame in _present(tables):
            write_table(folder, schema, frame)
        if history is not None:
            write_table(folder, TOPIC_HISTORY, history)
        write_json(folder / "manifest.json", manifest)
    return manifest


def read_snapshot(run: RunFolder, stage: str = SNAPSHOT) -> tuple[SnapshotTables, dict[str, Any]]:
    """The snapshot stage, its files checked against their record (`RunFolder.require`). A snapshot written before
    records began is checked row by row as when it was built instead: it may have been edited since (SnapshotError
    names the file and row). The run's own snapshot comes as the run plans it: the partitions no pool balances that
    a drain or demotion must touch carry the pool that plans them (`evacuation.as_planned`)."""
    folder = run.require(stage)
    manifest_file = folder / "manifest.json"
    manifest = read_json(manifest_file)
    if not isinstance(manifest, dict):
        raise RunFolderError(f"{manifest_file}: {type(manifest).__name__}, expected a JSON object")
    balanced = manifest.get("balanced_resources", [])
    if not isinstance(balanced, list) or not all(isinstance(r, str) and r in RESOURCES for r in balanced):
        raise RunFolderError(f"{manifest_file}: balanced_resources: {balanced!r}, expected a list of resource "
                             f"names ({', '.join(RESOURCES)})")
    tables = SnapshotTables(read_table(folder, BROKERS), read_table(folder, REPLICAS),
                            read_table(folder, PARTITIONS), manifest.get("warnings", []),
                            *(read_table(folder, s) if (folder / f"{s.name}.parquet").exists() else None
                              for s in (*LOG_DIR_TABLES, TIERED_PARTITIONS)))
    if not run.recorded(stage) and stage not in run.rows_checked:
        check_snapshot_tables(tables.brokers, tables.replicas, tables.partitions,
                              {s.name: str(folder / f"{s.name}.parquet") for s in SNAPSHOT_TABLES}, balanced)
        run.rows_checked.add(stage)
    if stage == SNAPSHOT:
        tables.partitions = as_planned(tables.partitions, tables.brokers, read_request(run))
    return tables, manifest


def cordoned_brokers(manifest: dict[str, Any]) -> frozenset[int]:
    """The brokers the snapshot found cordoned (KIP-1066): Kafka places no new partition on them, and no plan may
    move a replica onto them either."""
    return frozenset(int(b) for b in manifest.get("cordoned_brokers") or [])


def check_snapshot(run: RunFolder, stage: str = SNAPSHOT) -> None:
    """What planning checks before Spark reads the snapshot: its files against their record, or, written before
    records began, its rows (RunFolderError or SnapshotError). Once per RunFolder: the later reads trust it."""
    run.require(stage)
    if not run.recorded(stage) and stage not in run.rows_checked:
        read_snapshot(run, stage)


def snapshot_topics(folder: Path) -> list[str]:
    """Every topic of the snapshot's partitions table in `folder`, sorted (its one column read, not the table)."""
    path = folder / f"{PARTITIONS.name}.parquet"
    try:
        column = pq.read_table(path, columns=["topic"]).column("topic")
    except (OSError, pa.ArrowException, KeyError) as exc:
        raise RunFolderError(f"{path}: expected the snapshot's partitions table with a topic column "
                             f"({one_line(exc)})") from None
    return sorted(cast("list[str]", pc.unique(column).to_pylist()))  # cast: the schema's topic is a string
