"""The plan job's Spark transforms: DataFrame -> DataFrame, each output in the schema named in its docstring.

Aggregation, bands, the brokers to fix and the pre-check candidates are plain DataFrame transforms; the move
selection, which is sequential within a pool, runs per pool in parallel with `cogroup(...).applyInPandas`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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
    HOT_PARTITIONS,
    INFEASIBLE,
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


# -- partitions: which may move, and how ---------------------------------------------------------------------
def partition_safety(partitions: DataFrame, brokers: DataFrame) -> DataFrame:
    """partitions + `status` and `skip_reason`. ISR safety (DESIGN §5, seed 002): a partition without a leader,
    or with a live replica outside the ISR, is never moved (status "skip", with the reason). Otherwise "drain"
    when replicas sit on dead brokers (only those move), "home" when replicas sit outside the topic's pool
    (those must move), else "move"."""
    pool_of = brokers.select("broker_id", "broker_pool", "alive", "excluded")
    members = (partitions.select("topic", "partition", "topic_pool", "isr", F.explode("replicas").alias("broker_id"))
               .join(pool_of, "broker_id", "left")
               .withColumn("alive", F.coalesce("alive", F.lit(False))))
    flag = lambda cond: F.sum(F.when(cond, 1).otherwise(0))  # noqa: E731 - a count of replicas meeting cond
    spans = members.groupBy("topic", "partition").agg(
        flag(F.coalesce(F.col("excluded"), F.lit(False))).alias("on_excluded"),
        flag(~F.col("alive")).alias("on_dead"),
        flag(F.col("alive") & ~F.expr("array_contains(isr, broker_id)")).alias("live_out_of_isr"),
        flag(F.col("alive") & (F.col("broker_pool").isNull() | (F.col("broker_pool") != F.col("topic_pool"))))
        .alias("outside_pool"))
    p = partitions.join(spans, ["topic", "partition"], "left")
    reason = (
        F.when(F.col("excluded"), F.lit("excluded topic (config exclude.topics)"))
        .when(F.col("topic_pool").isNull(), F.lit("topic matches no pool rule and there is no default_pool"))
        .when(F.col("leader") < 0, F.lit("no leader: the partition is offline"))
        .when(F.col("on_excluded") > 0, F.lit("a replica is on an excluded broker"))
        .when(F.col("live_out_of_isr") > 0,
              F.concat(F.lit("under-replicated: ISR "), F.to_json("isr"), F.lit(" smaller than replicas "),
                       F.to_json("replicas")))
    )
    status = (F.when(reason.isNotNull(), "skip").when(F.col("on_dead") > 0, "drain")
              .when(F.col("outside_pool") > 0, "home").otherwise("move"))
    return p.withColumn("skip_reason", reason).withColumn("status", status).drop(
        "on_excluded", "on_dead", "live_out_of_isr", "outside_pool")


def planner_replicas(replicas: DataFrame, brokers: DataFrame, safety: DataFrame) -> DataFrame:
    """Replicas with their partition's traffic, `movable`, `must_move` (dead broker, or outside the topic's pool)
    and `plan_pool`: the pool whose planner decides about them (the topic's pool unless the partition is
    skipped, then the broker's)."""
    traffic = safety.select("topic", "partition", "status", "topic_pool", "replication_factor", "bytes_in_per_s",
                            "bytes_out_per_s", "cpu_leader_cores", "cpu_follower_cores")
    r = (replicas.join(traffic, ["topic", "partition"])
         .join(brokers.select("broker_id", "broker_pool", F.col("alive").alias("broker_alive")), "broker_id", "left")
         .withColumn("broker_alive", F.coalesce("broker_alive", F.lit(False))))
    active = F.col("status").isin("move", "home")
    dead_replica = (F.col("status") == "drain") & ~F.col("broker_alive")
    outside = F.col("broker_pool").isNull() | (F.col("broker_pool") != F.col("topic_pool"))
    return (r.withColumn("movable", active | dead_replica)
            .withColumn("must_move", (active & outside & F.col("broker_alive")) | dead_replica)
            .withColumn("plan_pool", F.when(F.col("status") != "skip", F.col("topic_pool"))
                        .otherwise(F.col("broker_pool")))
            .where(F.col("plan_pool").isNotNull()))


def planning_brokers(brokers: DataFrame, replicas: DataFrame) -> DataFrame:
    """Per plan pool: its brokers, plus brokers of other pools holding replicas it must bring home (as excluded:
    sources only, never balanced, never targets)."""
    home = brokers.where(F.col("broker_pool").isNotNull()).withColumn("plan_pool", F.col("broker_pool"))
    foreign = (replicas.where(F.col("broker_pool").isNull() | (F.col("broker_pool") != F.col("plan_pool")))
               .select("plan_pool", "broker_id").distinct()
               .join(brokers.drop("broker_pool"), "broker_id")
               .withColumn("excluded", F.lit(True)).withColumn("broker_pool", F.col("plan_pool")))
    return home.unionByName(foreign.select(*home.columns))


# -- load and bands ---------------------------------------------------------------------------------------
def _replica_load(r: Resource) -> Column:
    return F.col(r.replica_load_column).cast("double") if r.replica_load_column else F.lit(1.0)


def replica_loads(replicas: DataFrame, resources: list[Resource], *keep: str) -> DataFrame:
    """Long format: one row per (replica, resource) with the replica's load, plus the `keep` columns."""
    per_resource = F.array(*[F.struct(F.lit(r.name).alias("resource"), _replica_load(r).alias("load"))
                             for r in resources])
    return replicas.select(*keep, F.explode(per_resource).alias("x")).select(*keep, "x.resource", "x.load")


def _capacity(resources: list[Resource]) -> Column:
    capacity = F.lit(1.0)
    for r in resources:
        if r.capacity_column:
            capacity = F.when(F.col("resource") == r.name, F.col(r.capacity_column).cast("double")).otherwise(capacity)
    return capacity


def broker_load(brokers: DataFrame, replicas: DataFrame, resources: list[Resource]) -> DataFrame:
    """One row per (pool broker, resource): load, capacity, usage = load / capacity. Schema BROKER_LOAD."""
    spark = brokers.sparkSession
    per_broker = replica_loads(replicas, resources, "broker_id").groupBy("broker_id", "resource").agg(
        F.sum("load").alias("load"))
    names = spark.createDataFrame([(r.name,) for r in resources], "resource string")
    out = (brokers.where(F.col("broker_pool").isNotNull()).crossJoin(names)
           .join(per_broker, ["broker_id", "resource"], "left")
           .withColumn("eligible", F.col("alive") & ~F.col("excluded"))
           .withColumn("load", F.coalesce("load", F.lit(0.0)))
           .withColumn("capacity", _capacity(resources)))
    return conform(out.withColumn("usage", F.when(F.col("capacity") > 0, F.col("load") / F.col("capacity"))
                                  .otherwise(F.lit(0.0))), BROKER_LOAD)


def incoming_load(replicas: DataFrame, load: DataFrame, resources: list[Resource]) -> DataFrame:
    """Per (pool, resource): the load its eligible brokers will gain from replicas that must move (arriving from
    dead brokers or other pools, minus those leaving them), so the band is the one the pool is balanced to."""
    must = replica_loads(replicas.where("must_move"), resources, "broker_id", "plan_pool")
    arriving = must.select(F.col("plan_pool").alias("broker_pool"), "resource", "load")
    eligible = load.where("eligible").select("broker_id", "broker_pool").distinct()
    leaving = must.join(eligible, "broker_id").select("broker_pool", "resource", (-F.col("load")).alias("load"))
    return arriving.unionByName(leaving).groupBy("broker_pool", "resource").agg(F.sum("load").alias("incoming"))


def _resource_settings(spark: Any, config: RebalancerConfig) -> DataFrame:
    rows = [(r.name, r.is_count, config.resources[r.name].threshold, config.resources[r.name].margin,
             config.resources[r.name].low_utilization, config.capacity_threshold(r.name))
            for r in config.resource_list()]
    return spark.createDataFrame(rows, "resource string, is_count boolean, threshold double, margin double, "
                                       "low_utilization double, capacity_threshold double")


def bands(load: DataFrame, config: RebalancerConfig, incoming: DataFrame | None = None) -> DataFrame:
    """The band per (pool, resource) from the brokers that may receive replicas (DESIGN §4), counting the load
    that must arrive or leave (`incoming_load`). Schema BANDS."""
    totals = load.where("eligible").groupBy("broker_pool", "resource").agg(
        F.count(F.lit(1)).cast("int").alias("n_brokers"), F.sum("load").alias("total_load"),
        F.sum("capacity").alias("total_capacity"))
    if incoming is not None:
        totals = (totals.join(incoming, ["broker_pool", "resource"], "left")
                  .withColumn("total_load", F.col("total_load") + F.coalesce("incoming", F.lit(0.0))))
    t = (totals.join(_resource_settings(load.sparkSession, config), "resource")
         .withColumn("mean", F.when(F.col("total_capacity") > 0, F.col("total_load") / F.col("total_capacity"))
                     .otherwise(0.0)))
    # The formula is the same for every resource; counts round their edges (DESIGN §4).
    plain = band_edges(F.col("mean"), F.col("threshold"), F.col("margin"), is_count=False)
    counts = band_edges(F.col("mean"), F.col("threshold"), F.col("margin"), is_count=True, ceil=F.ceil,
                        floor=F.floor)
    for name, a, b in zip(("lower", "upper", "target_lower", "target_upper"), plain, counts, strict=True):
        t = t.withColumn(name, F.when(F.col("is_count"), b.cast("double")).otherwise(a))
    balanced = (F.col("total_capacity") > 0) & (F.col("mean") >= F.col("low_utilization"))
    t = t.withColumn("balanced", balanced).withColumn("note", F.when(~balanced, F.concat(
        F.lit("mean usage under the low-utilisation floor "), F.col("low_utilization").cast("string"),
        F.lit(": not balanced"))))
    return conform(t, BANDS)


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
    replica_load = replica_loads(movable_replicas, resources, "topic", "partition", "broker_id", "broker_pool",
                                 "size_bytes").withColumnRenamed("load", "replica_load")
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
        result = Planner(model, bands, [n for n in self.resource_names if n in bands], self.budgets).run()
        ids = model.broker_ids
        rows = [{"kind": "move", "seq": mv.seq, "action": mv.action, "topic": str(model.r_topic[mv.replica]),
                 "partition": int(model.r_partition[mv.replica]), "source_broker": int(ids[mv.source]),
                 "target_broker": int(ids[mv.target]), "resource": mv.resource, "forced": mv.forced,
                 "size_bytes": int(model.r_size[mv.replica]) if mv.action == "replica" else 0}
                for mv in result.moves]
        rows += [{"kind": "note", "resource": res, "broker_id": b, "note": text} for res, b, text in result.notes]
        rows += [{"kind": "hot", "topic": str(model.r_topic[r]), "partition": int(model.r_partition[r]),
                  "resource": res, "value": load, "limit": width} for r, res, load, width in result.hot]
        rows += [{"kind": "infeasible", "resource": x.resource, "count": x.count, "brokers": list(x.brokers),
                  "note": x.proof} for x in result.infeasible]
        rows.append({"kind": "bound", "value": result.lower_bound_bytes})
        empty = dict.fromkeys(PLANNER_OUTPUT.names)
        return pd.DataFrame([{**empty, **row, "broker_pool": pool} for row in rows], columns=PLANNER_OUTPUT.names)


def plan_pools(brokers: DataFrame, planner_input: DataFrame, settings: PoolPlanningSettings) -> DataFrame:
    """Select actions for every pool in parallel; schema PLANNER_OUTPUT (moves, notes, hot partitions, proofs)."""
    def run(key: tuple, replicas: pd.DataFrame, pool_brokers: pd.DataFrame) -> pd.DataFrame:
        if len(pool_brokers) == 0:
            return pd.DataFrame(columns=PLANNER_OUTPUT.names)
        return settings.plan(key[0], pool_brokers, replicas)

    # Fresh column identities: the planner input was joined from the same brokers table.
    pool_brokers = planning_brokers(brokers, planner_input).select(
        [F.col(c).alias(c) for c in [*brokers.columns, "plan_pool"]])
    return (planner_input.groupBy("plan_pool").cogroup(pool_brokers.groupBy("plan_pool"))
            .applyInPandas(run, schema=PLANNER_OUTPUT.spark()))


def split_planner_output(output: pd.DataFrame) -> dict[str, Any]:
    """The planner's output as the plan's tables: moves, notes, hot partitions, infeasibility proofs, and the
    lower bound of bytes per pool."""
    by_kind = {kind: output[output["kind"] == kind] for kind in ("move", "note", "hot", "infeasible", "bound")}
    moves = by_kind["move"].sort_values(["broker_pool", "seq", "action", "topic", "partition"], kind="mergesort")
    notes = by_kind["note"].sort_values(["broker_pool", "resource", "broker_id"], kind="mergesort")
    hot = by_kind["hot"].rename(columns={"value": "load", "limit": "band_width"}).sort_values(
        ["broker_pool", "resource", "topic", "partition"], kind="mergesort")
    infeasible = by_kind["infeasible"].rename(columns={"note": "proof"}).sort_values(
        ["broker_pool", "resource"], kind="mergesort")
    return {
        "moves": moves[MOVES.names].astype({"seq": "int32", "partition": "int32", "source_broker": "int32",
                                            "target_broker": "int32", "size_bytes": "int64", "forced": bool})
        .reset_index(drop=True),
        "notes": notes[PLANNER_NOTES.names].reset_index(drop=True),
        "hot": hot[HOT_PARTITIONS.names].reset_index(drop=True),
        "infeasible": infeasible[INFEASIBLE.names].reset_index(drop=True),
        "lower_bound_bytes": {pool: float(v) for pool, v in zip(by_kind["bound"]["broker_pool"],
                                                                  by_kind["bound"]["value"], strict=True)},
    }
