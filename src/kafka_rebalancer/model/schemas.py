"""The tables passed between stages, defined once and rendered for pyarrow (snapshot, validation, execution)
and for Spark (the plan job). A stage's output is checked against its schema when it is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql.types import StructType

_ARROW = {
    "string": pa.string(), "int32": pa.int32(), "int64": pa.int64(), "double": pa.float64(),
    "bool": pa.bool_(), "list<int32>": pa.list_(pa.int32()),
}


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    nullable: bool = False


@dataclass(frozen=True)
class TableSchema:
    name: str
    columns: tuple[Column, ...]

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def arrow(self) -> pa.Schema:
        return pa.schema([pa.field(c.name, _ARROW[c.type], nullable=c.nullable) for c in self.columns])

    def spark(self) -> StructType:
        from pyspark.sql import types as T

        spark_types: dict[str, Any] = {
            "string": T.StringType(), "int32": T.IntegerType(), "int64": T.LongType(),
            "double": T.DoubleType(), "bool": T.BooleanType(), "list<int32>": T.ArrayType(T.IntegerType(), False),
        }
        return T.StructType([T.StructField(c.name, spark_types[c.type], c.nullable) for c in self.columns])

    def to_arrow_table(self, frame: pd.DataFrame) -> pa.Table:
        """Exactly these columns, in this order, with these types (raises if a column is missing or null)."""
        missing = [n for n in self.names if n not in frame.columns]
        if missing:
            raise ValueError(f"table {self.name}: missing columns {missing}")
        table = pa.Table.from_pandas(frame[self.names], schema=self.arrow(), preserve_index=False)
        for c in self.columns:
            if not c.nullable and table.column(c.name).null_count:
                raise ValueError(f"table {self.name}: column {c.name} has nulls but is not nullable")
        return table


def _t(name: str, *cols: tuple[str, str] | tuple[str, str, bool]) -> TableSchema:
    return TableSchema(name, tuple(Column(*c) for c in cols))


# -- snapshot (written by the snapshot task from the cluster) -------------------------------------
BROKERS = _t(
    "brokers",
    ("broker_id", "int32"), ("rack", "string", True), ("broker_pool", "string", True), ("alive", "bool"),
    ("excluded", "bool"), ("host", "string", True), ("port", "int32", True),
    ("disk_capacity_bytes", "int64"), ("disk_used_bytes", "int64"),
    ("log_dir_total_bytes", "int64", True), ("log_dir_usable_bytes", "int64", True),
    # 0 when the resource is not balanced (no capacity needed then).
    ("nw_in_capacity_bytes_per_s", "double"), ("nw_out_capacity_bytes_per_s", "double"),
    ("cpu_capacity_cores", "double"),
)
REPLICAS = _t(
    "replicas",
    ("topic", "string"), ("partition", "int32"), ("broker_id", "int32"), ("position", "int32"),
    ("is_leader", "bool"), ("in_isr", "bool"), ("size_bytes", "int64"),
    # This replica's traffic load in its current role (model/resources.py).
    ("nw_in_bytes_per_s", "double"), ("nw_out_bytes_per_s", "double"), ("cpu_cores", "double"),
)
PARTITIONS = _t(
    "partitions",
    ("topic", "string"), ("partition", "int32"), ("replication_factor", "int32"), ("replicas", "list<int32>"),
    ("isr", "list<int32>"), ("leader", "int32"), ("topic_pool", "string", True), ("excluded", "bool"),
    ("size_bytes", "int64"),
    # Traffic: produced and consumed bytes per second, and the CPU estimate of the leader and of a follower.
    ("bytes_in_per_s", "double"), ("bytes_out_per_s", "double"), ("cpu_leader_cores", "double"),
    ("cpu_follower_cores", "double"),
)
SNAPSHOT_TABLES = (BROKERS, REPLICAS, PARTITIONS)
# A broker's log directories (JBOD: several), each with its capacity and where that came from.
LOG_DIRS = _t(
    "log_dirs",
    ("broker_id", "int32"), ("log_dir", "string"), ("capacity_bytes", "int64", True), ("capacity_source", "string"),
    ("used_bytes", "int64"), ("volume_total_bytes", "int64", True), ("volume_usable_bytes", "int64", True),
    ("cordoned", "bool"), ("offline", "bool"),
)
# Each replica's log directory; future_log_dir: where an intra-broker move in progress is copying it.
REPLICA_LOG_DIRS = _t(
    "replica_log_dirs",
    ("topic", "string"), ("partition", "int32"), ("broker_id", "int32"), ("log_dir", "string"), ("size_bytes", "int64"),
    ("future_log_dir", "string", True),
)
LOG_DIR_TABLES = (LOG_DIRS, REPLICA_LOG_DIRS)
# Tiered storage (KIP-405, snapshot.tiered): each partition of a topic with remote.storage.enable, its local size
# beside what stays remote and what is not yet tiered (from the leader's remote log metrics; null where no broker
# reports them), and the bytes a move of one of its replicas copies (move_cost_bytes).
TIERED_PARTITIONS = _t(
    "tiered_partitions",
    ("topic", "string"), ("partition", "int32"), ("local_bytes", "int64"), ("remote_bytes", "int64", True),
    ("copy_lag_bytes", "int64", True), ("move_cost_bytes", "int64"),
)
# A plan's moves between a broker's log directories (remove-disks), by the partition's topic pool.
LOG_DIR_MOVES = _t(
    "log_dir_moves",
    ("broker_pool", "string", True), ("topic", "string"), ("partition", "int32"), ("broker_id", "int32"),
    ("source_dir", "string"), ("target_dir", "string"), ("size_bytes", "int64"),
)

# -- forecast (issue 55: growth per topic from Prometheus' log sizes, projected per broker and pool) --------------
# Each topic's log size (the largest replica of each partition, summed), one row per hourly sample present.
TOPIC_HISTORY = _t("topic_history", ("topic", "string"), ("time_s", "double"), ("size_bytes", "double"))
# A topic's trend: growth per day, or null with the reason (too few points, gaps); note: what was assumed.
TOPIC_GROWTH = _t(
    "topic_growth",
    ("topic", "string"), ("growth_bytes_per_day", "double", True), ("method", "string", True),
    ("points", "int32"), ("history_days", "double"), ("reason", "string", True), ("note", "string", True),
)
# Disk used now and projected; days_to_threshold: until used crosses capacity x the disk threshold (null: not
# within the horizon); unforecast_bytes: bytes of replicas whose topic has no trend (counted as not growing).
BROKER_FORECAST = _t(
    "broker_forecast",
    ("broker_pool", "string", True), ("broker_id", "int32"), ("disk_capacity_bytes", "int64"),
    ("used_bytes", "double"), ("growth_bytes_per_day", "double"), ("unforecast_bytes", "double"),
    ("used_7d_bytes", "double"), ("used_30d_bytes", "double"), ("used_90d_bytes", "double"),
    ("days_to_threshold", "double", True),
)
POOL_FORECAST = _t(
    "pool_forecast",
    ("broker_pool", "string", True), ("n_brokers", "int32"), ("disk_capacity_bytes", "int64"),
    ("threshold", "double"), ("used_bytes", "double"), ("growth_bytes_per_day", "double"),
    ("unforecast_bytes", "double"), ("used_7d_bytes", "double"), ("used_30d_bytes", "double"),
    ("used_90d_bytes", "double"), ("days_to_first_broker", "double", True), ("first_broker", "int32", True),
    ("days_to_pool_total", "double", True),
)

# -- plan (written by the Spark plan job) ------------------------------------------------------------
BROKER_LOAD = _t(
    "broker_load",
    ("broker_pool", "string"), ("broker_id", "int32"), ("rack", "string", True), ("alive", "bool"),
    ("eligible", "bool"), ("resource", "string"), ("load", "double"), ("capacity", "double"), ("usage", "double"),
)
BROKER_LOAD_AFTER = TableSchema("broker_load_after", BROKER_LOAD.columns)  # predicted by the plan
# The plan job's one aggregation of the replicas (`transforms.load_parts`): exact parts of the summed load.
LOAD_PARTS = _t(
    "load_parts",
    ("broker_id", "int32"), ("plan_pool", "string"), ("must_move", "bool"), ("resource", "string"),
    ("whole", "int64"), ("fraction", "int64"),
)
BANDS = _t(
    "bands",
    ("broker_pool", "string"), ("resource", "string"), ("n_brokers", "int32"), ("mean", "double"),
    ("threshold", "double"), ("lower", "double"), ("upper", "double"), ("target_lower", "double"),
    ("target_upper", "double"), ("capacity_threshold", "double", True), ("balanced", "bool"),
    ("note", "string", True),
)
BROKERS_TO_FIX = _t(
    "brokers_to_fix",
    ("broker_pool", "string"), ("resource", "string"), ("broker_id", "int32"), ("usage", "double"),
    ("lower", "double"), ("upper", "double"), ("direction", "string"), ("distance", "double"),
)
# The (source, target) pairs seed 001's pre-check tries (`status.precheck_pairs`), handed to Spark's candidates.
PRECHECK_PAIRS = _t(
    "precheck_pairs",
    ("broker_pool", "string"), ("resource", "string"), ("direction", "string"), ("broker_to_fix", "int32"),
    *[(f"{side}_{name}", kind) for side in ("s", "t") for name, kind in (
        ("broker_id", "int32"), ("load", "double"), ("capacity", "double"), ("lower", "double"),
        ("effective_upper", "double"))],
)
CANDIDATES = _t(
    "candidates",
    ("broker_pool", "string"), ("resource", "string"), ("broker_to_fix", "int32"), ("direction", "string"),
    ("topic", "string"), ("partition", "int32"), ("source_broker", "int32"), ("target_broker", "int32"),
    ("replica_load", "double"), ("size_bytes", "int64"),
)
# One row per replica move (a swap is two rows with one seq) or leadership transfer (action "leadership":
# source and target are the old and the new leader's brokers; nothing is copied).
MOVES = _t(
    "moves",
    ("broker_pool", "string"), ("seq", "int32"), ("action", "string"), ("topic", "string"), ("partition", "int32"),
    ("source_broker", "int32"), ("target_broker", "int32"), ("size_bytes", "int64"), ("resource", "string"),
    ("forced", "bool"),
)
SKIPPED = _t(
    "skipped",
    ("topic", "string"), ("partition", "int32"), ("broker_pool", "string", True), ("reason", "string"),
)
PLANNER_NOTES = _t(
    "planner_notes",
    ("broker_pool", "string"), ("resource", "string"), ("broker_id", "int32", True), ("note", "string"),
)
# The `resource` of a forced move (a replica leaving a dead or drained broker, or going home to its topic's pool),
# in the planner's log and its notes: a note of this resource says why such a replica stayed on that broker.
HARD = "hard"
# The per-pool move selection's output: moves and notes in one table (split by `kind` on the driver).
PLANNER_OUTPUT = _t(
    "planner_output",
    ("broker_pool", "string"), ("kind", "string"), ("seq", "int32", True), ("action", "string", True),
    ("topic", "string", True), ("partition", "int32", True), ("source_broker", "int32", True),
    ("target_broker", "int32", True), ("size_bytes", "int64", True), ("resource", "string", True),
    ("forced", "bool", True), ("broker_id", "int32", True), ("value", "double", True), ("limit", "double", True),
    ("count", "int32", True), ("brokers", "list<int32>", True), ("note", "string", True),
)
HOT_PARTITIONS = _t(
    "hot_partitions",
    ("broker_pool", "string"), ("topic", "string"), ("partition", "int32"), ("resource", "string"),
    ("load", "double"), ("band_width", "double"),
)
INFEASIBLE = _t(
    "infeasible",
    ("broker_pool", "string"), ("resource", "string"), ("brokers", "list<int32>"), ("count", "int32"),
    ("proof", "string"),
)
# What a manual action promises, per broker (and partition where one breaks it), with the verdict on a placement
# (plan.promises): kept, broken, cannot (the plan says why before approval), exempt (named, not owed).
PROMISES = _t(
    "promises",
    ("action", "string"), ("promise", "string"), ("broker_id", "int32", True), ("topic", "string", True),
    ("partition", "int32", True), ("verdict", "string"), ("detail", "string"),
)
# The plan as partition changes: the difference between the snapshot's assignment and the planned one.
PARTITION_CHANGES = _t(
    "partition_changes",
    ("broker_pool", "string"), ("topic", "string"), ("partition", "int32"), ("old_replicas", "list<int32>"),
    ("new_replicas", "list<int32>"), ("size_bytes", "int64"),
)
# The topic spread of the planned placement (issue 52), re-checked from plan.json: per (topic, broker, kind
# replicas or leaders) held above the topic's target (ceil(share) + margin) before or after the plan, the replicas
# and leaders held before and after, the target and the cap (max(held before, target)). Written when it is on.
TOPIC_SPREAD = _t(
    "topic_spread",
    ("broker_pool", "string"), ("topic", "string"), ("broker_id", "int32"), ("kind", "string"),
    ("held_before", "int32"), ("held", "int32"), ("target", "int32"), ("cap", "int32"),
)
