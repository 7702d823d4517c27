"""The plan job's Spark transforms: DataFrame -> DataFrame, each output in the schema named in its docstring.

Aggregation, bands, the brokers to fix and the pre-check candidates are plain DataFrame transforms; the move
selection, which is sequential within a pool, runs per pool in parallel with `cogroup(...).applyInPandas`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import reduce

import pandas as pd
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from kafka_rebalancer.balance.bands import Band, band_edges
from kafka_rebalancer.balance.model import PoolModel
from kafka_rebalancer.balance.planner import Budgets, Planner
from kafka_rebalancer.config import RebalancerConfig
from kafka_rebalancer.model.resources import Resource, resource
from kafka_rebalancer.model.schemas import (
    BANDS,
    BROKER_LOAD,
    BROKERS_TO_FIX,
    CANDIDATES,
    MOVES,
    PLANNER_NOTES,
    PLANNER_OUTPUT,
    TableSchema,
)

EPS = 1e-9


def conform(frame: DataFrame, schema: TableSchema) -> DataFrame:
    """Exactly the schema's columns, in order, cast to its types (the contract between stages)."""
    spark_schema = schema.spark()
    return frame.select([F.col(f.name).cast(f.dataType).alias(f.name) for f in spark_schema.fields])


# -- partitions: which may move ---------------------------------------------------------------------------
def partition_safety(partitions: DataFrame, brokers: DataFrame) -> DataFrame:
    """partitions + `skip_reason` (null when the partition may move). ISR safety (DESIGN §5, seed 002): a
    partition without a leader, or whose ISR is smaller than its replica set, is never moved."""
    pool_of = brokers.select("broker_id", "broker_pool", "alive", "excluded")
    members = (partitions.select("topic", "partition", "topic_pool", F.explode("replicas").alias("broker_id"))
               .join(pool_of, "broker_id", "left"))
    spans = members.groupBy("topic", "partition").agg(
        F.sum(F.when(F.col("excluded"), 1).otherwise(0)).alias("on_excluded"),
        F.sum(F.when(F.col("broker_pool").isNull() | (F.col("broker_pool") != F.col("topic_pool")), 1)
              .otherwise(0)).alias("outside_pool"))
    p = partitions.join(spans, ["topic", "partition"], "left")
    reason = (
        F.when(F.col("excluded"), F.lit("excluded topic (config exclude.topics)"))
        .when(F.col("topic_pool").isNull(), F.lit("topic matches no pool rule and there is no default_pool"))
        .when(F.col("leader") < 0, F.lit("no leader: the partition is offline"))
        .when(F.size("isr") < F.size("replicas"),
              F.concat(F.lit("under-replicated: ISR "), F.to_json("isr"), F.lit(" smaller than replicas "),
                       F.to_json("replicas")))
        .when(F.col("on_excluded") > 0, F.lit("a replica is on an excluded broker"))
        .when(F.col("outside_pool") > 0, F.lit("a replica is outside the topic's pool"))
    )
    return p.withColumn("skip_reason", reason).drop("on_excluded", "outside_pool")


# -- load and bands ---------------------------------------------------------------------------------------
def _replica_load(r: Resource) -> Column:
    return F.col(r.replica_load_column).cast("double") if r.replica_load_column else F.lit(1.0)


def broker_load(brokers: DataFrame, replicas: DataFrame, resources: list[Resource]) -> DataFrame:
    """One row per (pool broker, resource): load, capacity, usage = load / capacity. Schema BROKER_LOAD."""
    sums = [F.sum(_replica_load(r)).alias(f"load__{r.name}") for r in resources]
    per_broker = replicas.groupBy("broker_id").agg(*sums)
    pool_brokers = (brokers.where(F.col("broker_pool").isNotNull())
                    .withColumn("eligible", F.col("alive") & ~F.col("excluded"))
                    .join(per_broker, "broker_id", "left")
                    .fillna(0.0, subset=[f"load__{r.name}" for r in resources]))
    parts = []
    for r in resources:
        capacity = F.col(r.capacity_column).cast("double") if r.capacity_column else F.lit(1.0)
        load = F.col(f"load__{r.name}")
        parts.append(pool_brokers.select(
            "broker_pool", "broker_id", "rack", "alive", "eligible", F.lit(r.name).alias("resource"),
            load.alias("load"), capacity.alias("capacity"),
            F.when(capacity > 0, load / capacity).otherwise(F.lit(0.0)).alias("usage")))
    return conform(reduce(DataFrame.unionByName, parts), BROKER_LOAD)


def bands(load: DataFrame, config: RebalancerConfig) -> DataFrame:
    """The band per (pool, resource) from the brokers that may receive replicas (DESIGN §4). Schema BANDS."""
    totals = load.where("eligible").groupBy("broker_pool", "resource").agg(
        F.count(F.lit(1)).cast("int").alias("n_brokers"), F.sum("load").alias("total_load"),
        F.sum("capacity").alias("total_capacity"))
    mean = F.when(F.col("total_capacity") > 0, F.col("total_load") / F.col("total_capacity")).otherwise(0.0)
    parts = []
    for r in config.resource_list():
        settings = config.resources[r.name]
        edges = band_edges(mean, settings.threshold, settings.margin, is_count=r.is_count, ceil=F.ceil,
                           floor=F.floor)
        cap = config.capacity_threshold(r.name)
        balanced = (F.col("total_capacity") > 0) & (mean >= settings.low_utilization)
        parts.append(totals.where(F.col("resource") == r.name).select(
            "broker_pool", "resource", "n_brokers", mean.alias("mean"), F.lit(settings.threshold).alias("threshold"),
            *[e.cast("double").alias(n) for e, n in zip(edges, ("lower", "upper", "target_lower", "target_upper"),
                                                          strict=True)],
            F.lit(cap).cast("double").alias("capacity_threshold"), balanced.alias("balanced"),
            F.when(~balanced, F.concat(F.lit("mean usage under the low-utilisation floor "),
                                       F.lit(str(settings.low_utilization)), F.lit(": not balanced")))
            .alias("note")))
    return conform(reduce(DataFrame.unionByName, parts), BANDS)


def _with_band(load: DataFrame, band_table: DataFrame) -> DataFrame:
    upper = F.when(F.col("capacity_threshold").isNotNull(), F.least("upper", "capacity_threshold")) \
        .otherwise(F.col("upper"))
    return (load.join(band_table.drop("n_brokers", "mean", "threshold", "note"), ["broker_pool", "resource"])
            .withColumn("effective_upper", upper))


def inside_band(usage: Column, lower: Column, upper: Column) -> Column:
    return (usage >= lower - EPS) & (usage <= upper + EPS)


def brokers_to_fix(load: DataFrame, band_table: DataFrame) -> DataFrame:
    """Brokers outside the band of a balanced resource (or above its capacity threshold). BROKERS_TO_FIX."""
    b = _with_band(load, band_table).where("eligible AND balanced")
    direction = F.when(F.col("usage") > F.col("effective_upper") + EPS, "over") \
        .when(F.col("usage") < F.col("lower") - EPS, "under")
    distance = F.when(direction == "over", F.col("usage") - F.col("effective_upper")) \
        .otherwise(F.col("lower") - F.col("usage"))
    out = b.withColumn("direction", direction).where(F.col("direction").isNotNull()) \
        .withColumn("distance", distance).withColumn("upper", F.col("effective_upper"))
    return conform(out, BROKERS_TO_FIX)


def candidate_moves(fix: DataFrame, load: DataFrame, band_table: DataFrame, movable_replicas: DataFrame,
                    resources: list[Resource], per_broker: int = 50) -> DataFrame:
    """Seed 001's pre-check against the snapshot, with heterogeneous capacities (DESIGN §5). CANDIDATES.

    Over-loaded s: replicas of s whose load l keeps (load_s - l)/cap_s inside the band, to a broker t whose
    (load_t + l)/cap_t lands inside it. Under-loaded t: replicas of another broker s whose load lands t inside
    the band while s stays inside. The best fits (closest to the band's middle) per broker to fix are kept."""
    replica_load = movable_replicas.select(
        "topic", "partition", "broker_id", "broker_pool", "size_bytes",
        F.explode(F.array(*[F.struct(F.lit(r.name).alias("resource"), _replica_load(r).alias("replica_load"))
                            for r in resources])).alias("rl"),
    ).select("topic", "partition", "broker_id", "broker_pool", "size_bytes", "rl.resource", "rl.replica_load")
    hosts = movable_replicas.select(F.col("topic").alias("h_topic"), F.col("partition").alias("h_partition"),
                                    F.col("broker_id").alias("h_broker"))
    with_band = _with_band(load, band_table).where("eligible AND balanced")
    side = ["broker_pool", "resource", "broker_id", "load", "capacity", "lower", "effective_upper"]
    src = with_band.select(*[F.col(c).alias(f"s_{c}") if c not in ("broker_pool", "resource") else c for c in side])
    dst = with_band.select(*[F.col(c).alias(f"t_{c}") if c not in ("broker_pool", "resource") else c for c in side])

    def lands(prefix: str, sign: int) -> Column:
        after = (F.col(f"{prefix}_load") + sign * F.col("replica_load")) / F.col(f"{prefix}_capacity")
        return inside_band(after, F.col(f"{prefix}_lower"), F.col(f"{prefix}_effective_upper"))

    over = fix.where("direction = 'over'").select("broker_pool", "resource", F.col("broker_id").alias("broker_to_fix"),
                                                 "direction")
    under = fix.where("direction = 'under'").select("broker_pool", "resource",
                                                   F.col("broker_id").alias("broker_to_fix"), "direction")
    pairs_over = (over.join(src, ["broker_pool", "resource"]).where(F.col("s_broker_id") == F.col("broker_to_fix"))
                  .join(dst, ["broker_pool", "resource"]).where(F.col("t_broker_id") != F.col("s_broker_id")))
    pairs_under = (under.join(dst, ["broker_pool", "resource"]).where(F.col("t_broker_id") == F.col("broker_to_fix"))
                   .join(src, ["broker_pool", "resource"]).where(F.col("s_broker_id") != F.col("t_broker_id")))
    pairs = pairs_over.unionByName(pairs_under)
    cand = (pairs.join(replica_load.withColumnRenamed("broker_id", "s_broker_id"),
                       ["broker_pool", "resource", "s_broker_id"])
            .where((F.col("replica_load") > 0) & lands("s", -1) & lands("t", 1))
            .join(hosts, (F.col("h_topic") == F.col("topic")) & (F.col("h_partition") == F.col("partition"))
                  & (F.col("h_broker") == F.col("t_broker_id")), "left_anti"))
    fixed_side = F.when(F.col("direction") == "over", F.col("s_load") - F.col("replica_load")) \
        .otherwise(F.col("t_load") + F.col("replica_load"))
    fixed_cap = F.when(F.col("direction") == "over", F.col("s_capacity")).otherwise(F.col("t_capacity"))
    middle = (F.col("s_lower") + F.col("s_effective_upper")) / 2
    rank = F.row_number().over(Window.partitionBy("broker_pool", "resource", "broker_to_fix").orderBy(
        F.abs(fixed_side / fixed_cap - middle), "size_bytes", "topic", "partition", "t_broker_id"))
    out = (cand.withColumn("rank", rank).where(F.col("rank") <= per_broker)
           .withColumnRenamed("s_broker_id", "source_broker").withColumnRenamed("t_broker_id", "target_broker"))
    return conform(out, CANDIDATES)


# -- move selection per pool --------------------------------------------------------------------------------
@dataclass(frozen=True)
class PoolPlanningSettings:
    """What the per-pool planner needs, shipped to the Spark workers in the closure."""

    resource_names: tuple[str, ...]
    bands: dict[str, dict[str, Band]]  # pool -> resource -> band
    budgets: Budgets

    def plan(self, pool: str, brokers: pd.DataFrame, replicas: pd.DataFrame) -> pd.DataFrame:
        resources = [resource(n) for n in self.resource_names]
        model = PoolModel(brokers, replicas, resources)
        bands = self.bands.get(pool, {})
        planner = Planner(model, bands, [n for n in self.resource_names if n in bands], self.budgets)
        result = planner.run()
        rows = [
            (pool, "move", mv.seq, str(model.r_topic[mv.replica]), int(model.r_partition[mv.replica]),
             int(model.broker_ids[mv.source]), int(model.broker_ids[mv.target]), int(model.r_size[mv.replica]),
             mv.resource, None, None) for mv in result.moves]
        rows += [(pool, "note", None, None, None, None, None, None, res, b, text) for res, b, text in result.notes]
        return pd.DataFrame(rows, columns=PLANNER_OUTPUT.names)


def plan_pools(brokers: DataFrame, planner_replicas: DataFrame, settings: PoolPlanningSettings) -> DataFrame:
    """Select moves for every pool in parallel; schema PLANNER_OUTPUT (moves and notes)."""
    def run(key: tuple, replicas: pd.DataFrame, pool_brokers: pd.DataFrame) -> pd.DataFrame:
        pool = key[0]
        if len(pool_brokers) == 0:
            return pd.DataFrame(columns=PLANNER_OUTPUT.names)
        return settings.plan(pool, pool_brokers, replicas)

    # Fresh column identities: planner_replicas was joined from the same brokers table.
    pool_brokers = brokers.where(F.col("broker_pool").isNotNull()).select(
        [F.col(c).alias(c) for c in brokers.columns])
    return (planner_replicas.groupBy("broker_pool").cogroup(pool_brokers.groupBy("broker_pool"))
            .applyInPandas(run, schema=PLANNER_OUTPUT.spark()))


def split_planner_output(output: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    moves = output[output["kind"] == "move"].sort_values(["broker_pool", "seq"], kind="mergesort")
    notes = output[output["kind"] == "note"].sort_values(["broker_pool", "resource", "broker_id"], kind="mergesort")
    return moves[MOVES.names].reset_index(drop=True), notes[PLANNER_NOTES.names].reset_index(drop=True)


def lower_bounds(load: DataFrame, band_table: DataFrame) -> DataFrame:
    """Per (pool, resource): LB = max(sum of excess above the band, sum of deficit below it), in load units
    (bytes for disk). Any plan that balances the pool must move at least this much (DESIGN §5)."""
    b = _with_band(load, band_table).where("eligible AND balanced")
    excess = F.greatest(F.col("load") - F.col("effective_upper") * F.col("capacity"), F.lit(0.0))
    deficit = F.greatest(F.col("lower") * F.col("capacity") - F.col("load"), F.lit(0.0))
    return b.groupBy("broker_pool", "resource").agg(
        F.greatest(F.sum(excess), F.sum(deficit)).alias("lower_bound"))


def apply_moves(replicas: DataFrame, moves: DataFrame) -> DataFrame:
    """The replicas table after the plan: each moved replica now on its target broker."""
    m = moves.select("topic", "partition", F.col("source_broker").alias("broker_id"), "target_broker")
    return (replicas.join(m, ["topic", "partition", "broker_id"], "left")
            .withColumn("broker_id", F.coalesce("target_broker", "broker_id")).drop("target_broker"))


def moved_load(replicas: DataFrame, moves: DataFrame, resources: list[Resource]) -> DataFrame:
    """Per (pool, resource): the load the plan moves (bytes for disk, replicas for counts)."""
    m = moves.select("broker_pool", "topic", "partition", F.col("source_broker").alias("broker_id"))
    moved = replicas.join(m, ["topic", "partition", "broker_id"])
    parts = [moved.groupBy("broker_pool").agg(F.sum(_replica_load(r)).alias("moved"))
             .withColumn("resource", F.lit(r.name)) for r in resources]
    return reduce(DataFrame.unionByName, parts)
