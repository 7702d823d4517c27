"""Each topic's growth on Spark: a run's log size history read with its schema (TOPIC_HISTORY), one group per
topic through `trend.topic_growth` (applyInPandas, TOPIC_GROWTH out), so a history of tens of thousands of topics
is worked out on every core. The topics of the cluster without a series get their row on the driver."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pandas as pd
from pyspark.sql import SparkSession

from kafka_rebalancer.forecast.trend import topic_growth
from kafka_rebalancer.model.schemas import TOPIC_GROWTH, TOPIC_HISTORY


def growth_on_spark(spark: SparkSession, history_file: Path, step_s: float, history_days: float,
                    topics: Iterable[str]) -> pd.DataFrame:
    """TOPIC_GROWTH of every topic of `history_file` and of `topics`, sorted by topic."""
    def growth(series: pd.DataFrame) -> pd.DataFrame:  # its type hints tell Spark it is a grouped map
        return topic_growth(series, step_s, history_days)

    history = spark.read.schema(TOPIC_HISTORY.spark()).parquet(str(history_file))
    found: pd.DataFrame = history.groupBy("topic").applyInPandas(growth, TOPIC_GROWTH.spark()).toPandas()
    no_series = topic_growth(pd.DataFrame(columns=TOPIC_HISTORY.names), step_s, history_days,
                             set(topics) - set(found["topic"]))
    every = pd.concat([found, no_series], ignore_index=True) if len(no_series) else found
    return every.sort_values("topic", ignore_index=True).astype({"points": "int32", "history_days": float})
