"""The planner's input (every replica with its partition's state) and the tables the plan job works out from it,
two ways: with Spark jobs on a checkpointed DataFrame (`SparkInput`, a large cluster), or with pandas on the
driver (`DriverInput`, a cluster up to `transforms.driver_max_replicas`: no Spark job at all).
Both give the same tables: a Spark test holds them to each other (tests/spark/test_driver_plan_path.py)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from kafka_rebalancer.model.resources import Resource
from kafka_rebalancer.model.schemas import PRECHECK_PAIRS
from kafka_rebalancer.plan.balance import local
from kafka_rebalancer.plan.balance.transforms import (
    PoolPlanningSettings,
    candidate_moves,
    homecoming_partitions,
    load_parts,
    plan_pools,
    plan_pools_on_driver,
    plans_on_driver,
    skipped_partitions,
    start_planner_workers,
)


@dataclass(frozen=True)
class SparkInput:
    """The planner's input as Spark's (`transforms.planner_replicas`, checkpointed), `replicas` rows of it, of a
    cluster of `broker_pools` pools."""

    frame: DataFrame
    replicas: int
    broker_pools: int

    reads_on_driver = False

    @property
    def plans_on_driver(self) -> bool:
        return plans_on_driver(self.replicas, self.broker_pools)

    def start_planner_workers(self, pools: int) -> None:
        if not self.plans_on_driver:
            start_planner_workers(self.frame.sparkSession, pools)

    def load_parts(self, resources: list[Resource]) -> pd.DataFrame:
        return load_parts(self.frame, resources).toPandas()

    def skipped_and_statuses(self) -> tuple[pd.DataFrame, dict[str, int]]:
        """The partitions no action may touch (with the reason), and the partitions per status."""
        return skipped_partitions(self.frame).orderBy("topic", "partition").toPandas(), self._status_counts()

    def _status_counts(self) -> dict[str, int]:
        """Partitions per status: move, home (a "move" partition with replicas outside the topic's pool), drain,
        skip."""
        first = self.frame.where(F.col("position") == 0)
        counts = {row["status"]: int(row["count"]) for row in first.groupBy("status").count().collect()}
        home = homecoming_partitions(self.frame).count()
        if home:
            counts["home"] = home
            counts["move"] -= home
        return {status: n for status, n in counts.items() if n}

    def candidates(self, pairs: pd.DataFrame, resources: list[Resource]) -> pd.DataFrame:
        # The pairs go to Spark as a local table whose size it knows (it broadcasts it).
        spark: SparkSession = self.frame.sparkSession
        return candidate_moves(spark.createDataFrame(pairs, PRECHECK_PAIRS.spark()),
                               self.frame.where("movable AND NOT must_move"), resources).toPandas()

    def plan_pools(self, settings: PoolPlanningSettings) -> pd.DataFrame:
        return plan_pools(self.frame, settings, self.plans_on_driver)

    def leadership_partitions(self) -> pd.DataFrame:
        """`local.leadership_partitions` on Spark."""
        # "drain": a held partition a demotion takes leadership from (snapshot.evacuation), or one with a dead
        # replica.
        first = self.frame.where((F.col("position") == 0) & (F.col("status") != "skip")).join(
            homecoming_partitions(self.frame), ["topic", "partition"], "left_anti")
        partitions: pd.DataFrame = first.select("topic", "partition", F.col("members").alias("replicas"), "leader",
                                                F.col("topic_pool").alias("broker_pool")).toPandas()
        isr = self.frame.where("in_isr AND broker_alive").groupBy("topic", "partition").agg(
            F.collect_list("broker_id").alias("isr")).toPandas()
        partitions = partitions.merge(isr, on=["topic", "partition"], how="left")
        partitions["isr"] = partitions["isr"].apply(lambda v: list(v) if isinstance(v, list | np.ndarray) else [])
        return partitions


@dataclass(frozen=True)
class DriverInput:
    """The planner's input on the driver (`local.planner_replicas`), with the snapshot's partitions table its
    `part_row` numbers."""

    frame: pd.DataFrame
    partitions: pd.DataFrame

    reads_on_driver = True
    plans_on_driver = True

    @classmethod
    def of(cls, replicas: pd.DataFrame, partitions: pd.DataFrame, brokers: pd.DataFrame, topics: list[str],
           leaving: Iterable[int], held: pd.DataFrame | None) -> DriverInput:
        partitions = partitions.reset_index(drop=True)
        return cls(local.planner_replicas(replicas, partitions, brokers, topics, leaving, held), partitions)

    @property
    def replicas(self) -> int:
        return len(self.frame)

    def start_planner_workers(self, pools: int) -> None:
        """No workers: the driver plans the pools."""

    def load_parts(self, resources: list[Resource]) -> pd.DataFrame:
        return local.load_parts(self.frame, resources)

    def skipped_and_statuses(self) -> tuple[pd.DataFrame, dict[str, int]]:
        return local.skipped_partitions(self.frame), local.status_counts(self.frame)

    def candidates(self, pairs: pd.DataFrame, resources: list[Resource]) -> pd.DataFrame:
        return local.candidate_moves(pairs, self.frame, self.partitions, resources)

    def plan_pools(self, settings: PoolPlanningSettings) -> pd.DataFrame:
        return plan_pools_on_driver(self.frame, settings)

    def leadership_partitions(self) -> pd.DataFrame:
        return local.leadership_partitions(self.frame, self.partitions)


PlannerInput = SparkInput | DriverInput


def spark_input(frame: DataFrame, broker_pools: int) -> SparkInput:
    """The planner's input on Spark, checkpointed (the checkpoint cuts the lineage: later queries start from this
    table instead of re-planning its inputs) and counted."""
    checkpointed = frame.localCheckpoint()
    return SparkInput(checkpointed, checkpointed.count(), broker_pools)
