"""The plan job's Spark transforms: DataFrame -> DataFrame, each output in the schema named in its docstring.

The replicas' load is aggregated per broker and plan pool in one pass (`load_parts`); the driver adds those rows
up to the per-broker tables, bands and brokers to fix (`balance.per_broker`, `balance.pool_bands`: a few rows per
broker). The pre-check candidates are a plain DataFrame transform; the move selection, which is sequential within
a pool, runs per pool in parallel with `mapInArrow`, one Spark partition per pool (`plan_pools`), or, for a small
cluster, on the driver (`plans_on_driver`). A small cluster's tables are worked out on the driver too, by the
pandas twins of these transforms (`local`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from kafka_rebalancer.model.resources import Resource, resource
from kafka_rebalancer.model.schemas import (
    CANDIDATES,
    HOT_PARTITIONS,
    INFEASIBLE,
    LOAD_PARTS,
    MOVES,
    PLANNER_NOTES,
    PLANNER_OUTPUT,
    SKIPPED,
    TableSchema,
)
from kafka_rebalancer.model.topic_spread import TopicSpreadSettings
from kafka_rebalancer.plan.balance.bands import Band
from kafka_rebalancer.plan.balance.model import PoolModel
from kafka_rebalancer.plan.balance.planner import Budgets, Planner
from kafka_rebalancer.snapshot.evacuation import NO_POOL
from kafka_rebalancer.spark_settings import driver_max_replicas_setting

EPS = 1e-9
FRACTION_UNITS = 2.0**32


def conform(frame: DataFrame, schema: TableSchema) -> DataFrame:
    """Exactly the schema's columns, in order, cast to its types (the contract between stages)."""
    spark_schema = schema.spark()
    return frame.select([F.col(f.name).cast(f.dataType).alias(f.name) for f in spark_schema.fields])


# -- partitions: which may move, and how ---------------------------------------------------------------------
def planner_replicas(replicas: DataFrame, partitions: DataFrame, brokers: DataFrame, brokers_pdf: pd.DataFrame,
                     topics: Sequence[str], leaving: Iterable[int] = (),
                     held: pd.DataFrame | None = None) -> DataFrame:
    """Every replica with its partition's facts and traffic, its broker's pool, and what may happen to it.

    ISR safety (seed 002): a partition without a leader, or with a live replica outside the ISR, is
    never moved (`status` "skip", with `skip_reason`). Otherwise "drain" when replicas sit on dead brokers, or
    when no pool balances the partition but the run's action must touch it (`held`: topic, partition, run_pool of
    `snapshot.evacuation.held_pools`; only the replicas on dead or `leaving` brokers move), else "move".
    `movable`, `must_move` (a replica on a dead or leaving broker of a "drain" partition, or of a "move" partition
    on a broker outside the topic's pool: it goes home) and `plan_pool` (the pool whose planner decides: the
    topic's, a held partition's run pool, or the broker's for a skipped partition) follow. The
    partitions that go home are `homecoming_partitions`.

    No shuffle: a partition's flags are set operations on its replica list against the (small) sets of dead and
    excluded brokers, compiled by Spark (a lambda over the list per partition runs interpreted and cost twice as
    much); the replicas then meet their partition and their broker in broadcast joins. Whether a replica is
    outside its topic's pool is decided per replica, by its broker's pool: a set operation against the pool's
    members costs a hash set of the whole pool per partition (most of this job at 1,000 brokers). Every broker a
    replica names is in `brokers` (the snapshot lists them, alive or not). `brokers_pdf` is the same table on the
    driver (the dead and excluded brokers are read from it: a Spark job of its own cost a second on a cold JVM).
    `topic_id` is the topic's index in `topics` (every topic of the partitions, sorted): the planner's rows carry
    it instead of the name (`PoolPlanningSettings.topics`).
    """
    dead = _broker_ids(brokers_pdf.loc[~brokers_pdf["alive"].astype(bool), "broker_id"])
    excluded = _broker_ids(brokers_pdf.loc[brokers_pdf["excluded"].astype(bool), "broker_id"])
    live = F.array_except("replicas", dead)
    leaving_ids = [int(b) for b in leaving]
    spark = partitions.sparkSession
    p = partitions.join(F.broadcast(_topic_ids(spark, topics)), "topic")
    if held is not None and held["run_pool"].notna().any():
        pools = spark.createDataFrame(held.dropna(subset=["run_pool"]), "topic string, partition int, run_pool string")
        p = p.join(F.broadcast(pools), ["topic", "partition"], "left")
    else:
        p = p.withColumn("run_pool", F.lit(None).cast("string"))
    p = p.select(
        *[c for c in p.columns if c != "topic_pool"], F.coalesce("run_pool", "topic_pool").alias("topic_pool"),
        F.col("run_pool").isNotNull().alias("held"),
        (F.size(F.array_intersect("replicas", _broker_ids(leaving_ids))) if leaving_ids else F.lit(0))
        .alias("on_leaving"),
        F.size(F.array_intersect("replicas", excluded)).alias("on_excluded"),
        (F.size("replicas") - F.size(live)).alias("on_dead"),
        F.size(F.array_except(live, "isr")).alias("live_out_of_isr"))
    reason = (
        F.when((F.col("on_leaving") > 0) & ~F.col("held") & (F.col("excluded") | F.col("topic_pool").isNull()),
               F.lit(NO_POOL))
        .when(F.col("excluded") & ~F.col("held"), F.lit("excluded topic (config exclude.topics)"))
        .when(F.col("topic_pool").isNull(), F.lit("topic matches no pool rule and there is no default_pool"))
        .when(F.col("leader") < 0, F.lit("no leader: the partition is offline"))
        .when(F.col("on_excluded") > 0, F.lit("a replica is on an excluded broker"))
        .when(F.col("live_out_of_isr") > 0,
              F.concat(F.lit("under-replicated: ISR "), F.to_json("isr"), F.lit(" smaller than replicas "),
                       F.to_json("replicas")))
    )
    status = F.when(reason.isNotNull(), "skip").when((F.col("on_dead") > 0) | F.col("held"), "drain") \
        .otherwise("move")
    facts = p.select(
        "topic", "partition", "topic_id", "topic_pool", "leader", "replication_factor", "bytes_in_per_s",
        "bytes_out_per_s", "cpu_leader_cores", "cpu_follower_cores", reason.alias("skip_reason"),
        status.alias("status"), F.col("replicas").alias("members"))
    broker_facts = brokers.select("broker_id", "broker_pool", F.col("alive").alias("broker_alive"))
    r = (replicas.join(F.broadcast(facts), ["topic", "partition"])
         .join(F.broadcast(broker_facts), "broker_id", "left")
         .withColumn("broker_alive", F.coalesce("broker_alive", F.lit(False))))
    active = F.col("status") == "move"
    # A drained broker's replica leaves a "drain" partition with the dead brokers' (it is going away too).
    on_leaving = F.col("broker_id").isin(leaving_ids) if leaving_ids else F.lit(False)
    dead_replica = (F.col("status") == "drain") & (~F.col("broker_alive") | on_leaving)
    outside_pool = F.col("broker_pool").isNull() | (F.col("broker_pool") != F.col("topic_pool"))
    return r.select(
        *r.columns, (active | dead_replica).alias("movable"),
        ((active & outside_pool & F.col("broker_alive")) | dead_replica).alias("must_move"),
        F.when(F.col("status") != "skip", F.col("topic_pool")).otherwise(F.col("broker_pool")).alias("plan_pool"),
    ).where(F.col("plan_pool").isNotNull())


def _topic_ids(spark: Any, topics: Sequence[str]) -> DataFrame:
    """topic, topic_id: each topic's index in `topics`."""
    frame = pd.DataFrame({"topic": pd.Series(topics, dtype=object), "topic_id": range(len(topics))})
    return spark.createDataFrame(frame, "topic string, topic_id int")


def _broker_ids(ids: Iterable[int]) -> Column:
    """An array literal of broker ids, parsed by Spark in one call (a column per id costs a Py4J call each,
    seconds at a thousand brokers)."""
    return F.expr(f"cast(array({','.join(str(int(b)) for b in ids)}) as array<int>)")


def homecoming_partitions(planner_input: DataFrame) -> DataFrame:
    """The partitions of status "move" with replicas outside the topic's pool (those go home): topic, partition.
    Few rows: only the replicas that must move are looked at."""
    return planner_input.where((F.col("status") == "move") & F.col("must_move")).select(
        "topic", "partition").distinct()


def skipped_partitions(planner_input: DataFrame) -> DataFrame:
    """The partitions no action may touch, with the reason (one row each). Schema SKIPPED."""
    first = planner_input.where((F.col("status") == "skip") & (F.col("position") == 0))
    return conform(first.select("topic", "partition", F.col("topic_pool").alias("broker_pool"),
                                F.col("skip_reason").alias("reason")), SKIPPED)


# -- load and bands ---------------------------------------------------------------------------------------
def _replica_load(r: Resource) -> Column:
    return F.col(r.replica_load_column).cast("double") if r.replica_load_column else F.lit(1.0)


def load_parts(planner_input: DataFrame, resources: list[Resource]) -> DataFrame:
    """Per (broker, plan pool, must move) and resource: the replicas' summed load in exact parts, the sum of their
    whole parts and the sum of the rest in 2^-32 units (far below any measured load), both longs. Doubles added
    in another order differ in their last bits, and a band edge a bit off can change the plan; longs add exactly
    in any order, on Spark and on the driver, which adds these groups up to the broker loads, the load that must
    move between pools and the brokers each pool's planner sees (`balance.per_broker`). ANSI mode makes an
    overflow fail instead of wrap. Schema LOAD_PARTS."""
    sums = []
    for r in resources:
        value = _replica_load(r)
        whole = F.floor(value)
        fraction = F.rint((value - whole) * FRACTION_UNITS).cast("long")  # value - floor(value) is exact
        sums += [F.sum(whole).alias(f"{r.name}_whole"), F.sum(fraction).alias(f"{r.name}_fraction")]
    wide = planner_input.groupBy("broker_id", "plan_pool", "must_move").agg(*sums)
    # One row per resource (stack: the aggregate is small, the replicas are not multiplied).
    stacked = ", ".join(f"'{r.name}', `{r.name}_whole`, `{r.name}_fraction`" for r in resources)
    return conform(wide.select("broker_id", "plan_pool", "must_move", F.expr(
        f"stack({len(resources)}, {stacked}) AS (resource, whole, fraction)")), LOAD_PARTS)


def inside_band(usage: Column, lower: Column, upper: Column) -> Column:
    return (usage >= lower - EPS) & (usage <= upper + EPS)


def candidate_moves(pairs: DataFrame, movable_replicas: DataFrame, resources: list[Resource],
                    per_broker: int = 50) -> DataFrame:
    """Seed 001's pre-check against the snapshot, with heterogeneous capacities. CANDIDATES.

    Over-loaded s: replicas of s whose load l keeps (load_s - l)/cap_s inside the band, to a broker t whose
    (load_t + l)/cap_t lands inside it. Under-loaded t: replicas of another broker s whose load lands t inside
    the band while s stays inside. The (source, target) pairs to try are a small table (`status.precheck_pairs`);
    the replicas meet it in one broadcast join on their broker, each replica taking the load of the pair's
    resource (no row per replica and resource). The best fits (closest to the band's middle) per broker to fix
    are kept."""
    replica_load = F.lit(None).cast("double")
    for r in resources:
        replica_load = F.when(F.col("resource") == r.name, _replica_load(r)).otherwise(replica_load)

    def lands(prefix: str, sign: int) -> Column:
        after = (F.col(f"{prefix}_load") + sign * F.col("replica_load")) / F.col(f"{prefix}_capacity")
        return inside_band(after, F.col(f"{prefix}_lower"), F.col(f"{prefix}_effective_upper"))

    columns = dict.fromkeys(["topic", "partition", "broker_id", "size_bytes", "members",
                             *[r.replica_load_column for r in resources if r.replica_load_column]])
    cand = (movable_replicas.select(*columns)
            .join(F.broadcast(pairs), F.col("broker_id") == F.col("s_broker_id"))
            .withColumn("replica_load", replica_load)
            .where((F.col("replica_load") > 0) & lands("s", -1) & lands("t", 1)
                   & ~F.array_contains("members", F.col("t_broker_id"))))
    fixed_side = F.when(F.col("direction") == "over", F.col("s_load") - F.col("replica_load")) \
        .otherwise(F.col("t_load") + F.col("replica_load"))
    fixed_cap = F.when(F.col("direction") == "over", F.col("s_capacity")).otherwise(F.col("t_capacity"))
    middle = (F.col("s_lower") + F.col("s_effective_upper")) / 2
    rank = F.row_number().over(Window.partitionBy("broker_pool", "resource", "broker_to_fix").orderBy(
        F.abs(fixed_side / fixed_cap - middle), "size_bytes", "topic", "partition", "t_broker_id"))
    # The rows in one order whatever the shuffle's partitions (`local.candidate_moves` writes the same): per (pool,
    # resource, broker to fix), best first. The kept rows are few: one task sorts them, without a job of its own.
    out = (cand.withColumn("rank", rank).where(F.col("rank") <= per_broker).coalesce(1)
           .sortWithinPartitions("broker_pool", "resource", "broker_to_fix", "rank")
           .withColumnsRenamed({"s_broker_id": "source_broker", "t_broker_id": "target_broker"}))
    return conform(out, CANDIDATES)


# -- move selection per pool --------------------------------------------------------------------------------
# What PoolModel reads of a replica (only these travel to the planner's Python workers). The topic travels as its
# index: at 1.5 million rows its name was about a quarter of the time the JVM took to hand the rows over.
POOL_MODEL_COLUMNS = ("topic_id", "partition", "broker_id", "position", "is_leader", "in_isr", "size_bytes", "movable",
                      "must_move", "replication_factor", "bytes_in_per_s", "bytes_out_per_s", "cpu_leader_cores",
                      "cpu_follower_cores")

@dataclass(frozen=True)
class PoolPlanningSettings:
    """What the per-pool planner needs, shipped to the Spark workers in the closure (all of it small)."""

    resource_names: tuple[str, ...]
    bands: dict[str, dict[str, Band]]  # pool -> resource -> band
    budgets: Budgets
    brokers: dict[str, pd.DataFrame]  # pool -> its brokers, and others' brokers holding replicas it must take home
    topics: tuple[str, ...]  # every topic, sorted: the rows' topic_id indexes it
    # pool -> resource -> the brokers outside the band of the current placement (the planner fixes them too)
    out_of_band_now: dict[str, dict[str, tuple[int, ...]]] = field(default_factory=dict)
    topic_spread: TopicSpreadSettings = field(default_factory=TopicSpreadSettings)  # the config's section

    def plan(self, pool: str, replicas: pd.DataFrame) -> pd.DataFrame:
        # The names back as categories in sorted order: the model sorts by them as by the names (by their codes).
        topic = pd.Categorical.from_codes(replicas.pop("topic_id"), categories=pd.Index(self.topics, dtype=object))
        replicas.insert(0, "topic", topic)
        resources = [resource(n) for n in self.resource_names]
        model = PoolModel(self.brokers[pool], replicas, resources)
        start_load = model.load.copy()
        bands = self.bands.get(pool, {})
        result = Planner(model, bands, [n for n in self.resource_names if n in bands], self.budgets,
                         out_of_band_now=self.out_of_band_now.get(pool), topic_spread=self.topic_spread).run()
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
        # The model's own bookkeeping of what the plan does to each broker (the claim the validation holds to the
        # re-check of plan.json): the change of every load the planner changed.
        changed = model.load - start_load
        rows += [{"kind": "load_change", "broker_id": int(ids[b]), "resource": self.resource_names[k],
                  "value": float(changed[b, k])} for b, k in zip(*np.nonzero(changed), strict=True)]
        empty = dict.fromkeys(PLANNER_OUTPUT.names)
        return pd.DataFrame([{**empty, **row, "broker_pool": pool} for row in rows], columns=PLANNER_OUTPUT.names)


def plan_pools_on_driver(frame: pd.DataFrame, settings: PoolPlanningSettings) -> pd.DataFrame:
    """`plan_pools` on the driver, one pool after the other: `frame` holds POOL_MODEL_COLUMNS and plan_pool of the
    planner's input (Spark's types: `local.planner_replicas` gives them too)."""
    plan_pool = frame["plan_pool"].to_numpy(object)
    rows_of = {pool: np.flatnonzero(plan_pool == pool) for pool in sorted(settings.brokers)}
    tables = [PLANNER_OUTPUT.to_arrow_table(settings.plan(str(pool), _pool_rows(frame, rows, POOL_MODEL_COLUMNS)))
              for pool, rows in rows_of.items() if len(rows)]
    # Through Arrow, as the workers' output comes back: both ways give the same frame.
    return (pa.concat_tables(tables) if tables else PLANNER_OUTPUT.arrow().empty_table()).to_pandas()


def _pool_rows(frame: pd.DataFrame, rows: np.ndarray, columns: Sequence[str]) -> pd.DataFrame:
    """`columns` of the `rows` of `frame`, numbered from 0; the frame's own arrays when the rows are all of it (one
    pool: at 5 million replicas each copy of them cost the driver half a GB or more)."""
    whole = len(rows) == len(frame)
    return pd.DataFrame({c: frame[c].to_numpy() if whole else frame[c].to_numpy()[rows] for c in columns}, copy=False)


def _one_pool_per_partition(spark: Any, pools: list[str]) -> dict[str, int]:
    """Integer keys that Spark's hash partitioning sends to distinct partitions (of len(pools)), so every pool is
    planned by its own task and the pools run in parallel."""
    n = len(pools)
    rows = spark.range(0, 64 * n).select("id", F.expr(f"pmod(hash(id), {n})").alias("slot")).collect()
    first: dict[int, int] = {}
    for row in rows:
        first.setdefault(row["slot"], row["id"])
    return {pool: first[slot] for slot, pool in enumerate(pools)}


def start_planner_workers(spark: Any, workers: int) -> None:
    """Start the Python workers that plan the pools, with the planner imported, before the pools' rows are
    ready: `workers` tiny tasks run while the driver works out the bands, and Spark reuses the idle workers for
    `plan_pools` (a cold worker took 1.5 to 2 s to start and import before it read the first row)."""
    workers = max(1, min(workers, spark.sparkContext.defaultParallelism))
    spark.range(0, workers, numPartitions=workers).mapInArrow(_with_planner_imported, "id long").collect()


def _with_planner_imported(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    # Unpickling this function imports this module, and with it the planner.
    yield from batches


# Up to this many replicas, the plan job works on the driver, with pandas and numpy (`local`): it reads the snapshot
# there (the re-check reads it anyway), works out the same tables and plans the pools one after the other, and
# runs no Spark job. Spark's fixed costs (its reads, query planning and code generation, the Python workers' start:
# 1.5 to 3 s of a cold two-core machine) were most of such a plan. Whole plan processes, driver / Spark, on two
# cores (issue 36): 0.4 to 0.6 up to 600,000 replicas, in one pool or four; at 1.5 million 0.87 in ten pools (the
# driver plans the pools one after the other on one core, where Spark plans them in parallel, on as many executors
# as a cluster has). So up to 600,000 replicas (400 brokers of 1,500 replicas) the driver; above, Spark, as the
# DAG's cluster is there for, unless every broker is in one pool (below).
DRIVER_PLANNING_MAX_REPLICAS = 600_000
# One broker pool is one planner, on one core whichever plans it: Spark's executors only read the tables for it and
# hand all of its rows to one Python worker, which holds them as the driver would (and the re-check reads the whole
# snapshot on the driver anyway). At 1,000 brokers and 1.5 million replicas in one pool the driver's whole process
# took 0.70 of Spark's (20.6 s against 29.3 s, the same plan) at 3.0 GB peak against 5 GB; at 3,000 brokers and 5
# million replicas (issue 52) 6.5 GB peak against 10.1 to 11.2 GB, the same plan: Spark's JVM (4 to 5 GB) and its
# worker's copy of the rows (2.2 GB) left out. Up to 6 million replicas in one pool, the driver.
DRIVER_ONE_POOL_MAX_REPLICAS = 6_000_000


def driver_max_replicas(broker_pools: int) -> int:
    """The largest input the plan job works on the driver, for a cluster of this many broker pools:
    $KAFKA_REBALANCER_DRIVER_MAX_REPLICAS (`spark_settings.DRIVER_MAX_REPLICAS_ENV`, one limit at every pool
    count, 0 for Spark always) when set, else DRIVER_ONE_POOL_MAX_REPLICAS for one pool and
    DRIVER_PLANNING_MAX_REPLICAS for more."""
    return driver_max_replicas_setting(DRIVER_ONE_POOL_MAX_REPLICAS if broker_pools <= 1
                                       else DRIVER_PLANNING_MAX_REPLICAS)


def plans_on_driver(replicas: int, broker_pools: int) -> bool:
    """Whether the plan job works on the driver (`local`) for a snapshot of this many replicas, and whether
    `plan_pools` plans on the driver a planner input of this many (a snapshot read by Spark whose planner input
    is smaller: most of its partitions skipped)."""
    return replicas <= driver_max_replicas(broker_pools)


def plan_pools(planner_input: DataFrame, settings: PoolPlanningSettings, on_driver: bool = False) -> pd.DataFrame:
    """Select actions for every pool in parallel, one pool per task (`on_driver`: one after the other on the
    driver, see `plans_on_driver`); schema PLANNER_OUTPUT (moves, notes, hot partitions, infeasibility proofs,
    bounds)."""
    spark = planner_input.sparkSession
    pools = sorted(settings.brokers)
    if not pools:
        return pd.DataFrame(columns=PLANNER_OUTPUT.names)
    if on_driver:
        return plan_pools_on_driver(planner_input.where(F.col("plan_pool").isin(pools))
                                    .select(*POOL_MODEL_COLUMNS, "plan_pool").toPandas(), settings)
    # One pool is coalesced into one task (below): any key will do, no job to find one.
    keys = _one_pool_per_partition(spark, pools) if len(pools) > 1 else {pools[0]: 0}
    pool_of_key = {v: k for k, v in keys.items()}
    key = F.lit(None).cast("long")
    for pool, value in keys.items():
        key = F.when(F.col("plan_pool") == pool, F.lit(value)).otherwise(key)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        # Every row of a Spark partition belongs to the same pool (below); the model orders the rows itself. The
        # batches become one pandas frame in one conversion, on every core (a conversion per batch of 10,000
        # rows, then a concat, took 2 s of the planner task at 1.5 million rows).
        filled = [batch for batch in batches if batch.num_rows]
        if filled:
            table = pa.Table.from_batches(filled).drop_columns("pool_key")
            pool = pool_of_key[filled[0].column("pool_key")[0].as_py()]
            del filled  # the table alone holds the rows: the conversion frees each column once converted
            output = settings.plan(pool, table.to_pandas(self_destruct=True))
            yield from PLANNER_OUTPUT.to_arrow_table(output).to_batches()

    rows = planner_input.where(F.col("plan_pool").isin(pools)).select(*POOL_MODEL_COLUMNS, key.alias("pool_key"))
    # Exactly one Spark partition per pool: a repartition to a number is never coalesced. One pool needs no
    # shuffle: its rows are merged into one task as they are (at 1,000 brokers the shuffle of 1.5 million rows
    # into one task cost 7 to 10 s). No grouping either (it would sort every row by the pool's key).
    one_per_pool = rows.coalesce(1) if len(pools) == 1 else rows.repartition(len(pools), "pool_key")
    return one_per_pool.mapInArrow(run, schema=PLANNER_OUTPUT.spark()).toPandas()


def split_planner_output(output: pd.DataFrame) -> dict[str, Any]:
    """The planner's output as the plan's tables: moves, notes, hot partitions, infeasibility proofs, the lower
    bound of bytes per pool, and the models' change of every broker's load (the planner's claim)."""
    by_kind = {kind: output[output["kind"] == kind]
               for kind in ("move", "note", "hot", "infeasible", "bound", "load_change")}
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
        # Per broker and resource, the planners' change of its load (a broker may hold replicas of several pools).
        "load_changes": by_kind["load_change"].groupby(["broker_id", "resource"], as_index=False)["value"].sum()
        .rename(columns={"value": "delta"}).astype({"broker_id": "int64"}),
    }
