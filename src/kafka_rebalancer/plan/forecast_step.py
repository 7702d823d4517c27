"""The plan step's capacity forecast (issue 55; README: Capacity forecast): each topic's growth from the log size
history the run's snapshot kept, worked out beside the plan (on Spark, or on the driver where the plan works on the
driver: a small cluster), then disk use per broker and pool projected on the planned placement and written as the
run's forecast stage (TOPIC_GROWTH, BROKER_FORECAST, POOL_FORECAST and forecast.json). It never fails the plan: a
run without a history (Prometheus not set, not answering, nothing kept), or whose growth table fails its check at
the boundary (`check_growth`), writes the stage with the reason."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pandas as pd
from pyspark.sql import SparkSession

from kafka_rebalancer.config import RebalancerConfig
from kafka_rebalancer.errors import one_line
from kafka_rebalancer.forecast import disk_threshold
from kafka_rebalancer.forecast.on_spark import growth_on_spark
from kafka_rebalancer.forecast.projection import broker_forecast, pool_forecast, replicas_after
from kafka_rebalancer.forecast.summary import forecast_summary, no_forecast, pool_line
from kafka_rebalancer.forecast.trend import topic_growth
from kafka_rebalancer.model.schemas import BROKER_FORECAST, POOL_FORECAST, TOPIC_GROWTH, TOPIC_HISTORY
from kafka_rebalancer.run_folder import FORECAST, SNAPSHOT, RunFolder, read_table, write_json, write_table
from kafka_rebalancer.snapshot.build import SnapshotTables
from kafka_rebalancer.snapshot.log_size_history import STEP_S

log = logging.getLogger(__name__)

NO_HISTORY_KEPT = "the run's snapshot kept no log size history (taken before forecasts were made, or by a step " \
                  "that keeps none): no capacity forecast"


@dataclass(frozen=True)
class Growth:
    """Each topic's growth being worked out beside the plan (None: no history to work from), and what the
    snapshot's manifest says of its history."""

    future: Future[pd.DataFrame] | None
    history: dict[str, Any]
    worker: ThreadPoolExecutor | None  # the future's thread, shut down once it is read

    def released_after(self, release: Callable[[], None]) -> Callable[[], None]:
        """`release` (the plan's Spark session) once the growth no longer needs Spark either."""
        future = self.future
        if future is None:
            return release
        return lambda: future.add_done_callback(lambda _: release())


def start_growth(spark: SparkSession, config: RebalancerConfig, run: RunFolder, manifest: dict[str, Any],
                 topics: Sequence[str], on_driver: bool) -> Growth:
    """Start each topic's growth from the snapshot's history, on a thread of its own."""
    history = manifest.get("forecast_history") or {"notes": [NO_HISTORY_KEPT]}
    snapshot = run.require(SNAPSHOT)
    path = snapshot / f"{TOPIC_HISTORY.name}.parquet"
    if not path.is_file():
        return Growth(None, history, None)
    step_s, days = float(history.get("step_s") or STEP_S), float(config.forecast.history_days)
    work: Callable[[], pd.DataFrame] = (
        (lambda: topic_growth(read_table(snapshot, TOPIC_HISTORY), step_s, days, topics)) if on_driver
        else (lambda: growth_on_spark(spark, path, step_s, days, topics)))
    worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="plan-job-forecast")
    return Growth(worker.submit(work), history, worker)


def write_forecast(config: RebalancerConfig, run: RunFolder, tables: SnapshotTables, changes: pd.DataFrame,
                   growth: Growth) -> dict[str, Any]:
    """The forecast on the planned placement (`changes`: PARTITION_CHANGES), written as the run's forecast stage and
    logged a line per pool; returns forecast.json's content."""
    settings, threshold = config.forecast, disk_threshold(config)
    frames: list[tuple[Any, pd.DataFrame]] = []
    if growth.future is None:
        facts = no_forecast(growth.history)
    else:
        try:
            per_topic = growth.future.result()
            check_growth(per_topic, tables.partitions["topic"])
            per_broker = broker_forecast(tables.brokers, replicas_after(tables.replicas, changes),
                                         tables.partitions, per_topic, threshold, settings.horizon_days)
            per_pool = pool_forecast(per_broker, threshold, settings.horizon_days)
            facts = forecast_summary(per_topic, per_pool, list(growth.history.get("notes") or []), threshold,
                                     settings.horizon_days, settings.warning_days, growth.history)
            frames = [(TOPIC_GROWTH, per_topic), (BROKER_FORECAST, per_broker), (POOL_FORECAST, per_pool)]
        except Exception as exc:  # a forecast is advice: its failure is said, the plan goes on to validation
            log.exception("capacity forecast failed")
            facts = no_forecast({**growth.history, "notes": [
                *(growth.history.get("notes") or []),
                f"the forecast failed ({type(exc).__name__}: {one_line(exc)}); the plan is not affected"]})
        finally:
            if growth.worker is not None:
                growth.worker.shutdown(wait=False)
    with run.stage(FORECAST) as out:
        for schema, frame in frames:
            write_table(out, schema, frame)
        write_json(out / "forecast.json", facts)
    log_forecast(facts)
    return facts


def check_growth(growth: pd.DataFrame, topics: pd.Series) -> None:
    """The growth table at the boundary: one row per topic, every topic of the snapshot among them, a number or a
    reason in each."""
    problems = []
    if growth["topic"].duplicated().any():
        problems.append(f"topics given twice: {sorted(set(growth.loc[growth['topic'].duplicated(), 'topic']))[:5]}")
    missing = set(topics) - set(growth["topic"])
    if missing:
        problems.append(f"topics of the snapshot without a row: {sorted(missing)[:5]}")
    neither = growth["growth_bytes_per_day"].isna() & growth["reason"].isna()
    if neither.any():
        problems.append(f"rows with neither a growth nor a reason: {growth.loc[neither, 'topic'].head(5).tolist()}")
    if problems:
        raise ValueError(f"table {TOPIC_GROWTH.name}: " + "; ".join(problems))


def log_forecast(facts: dict[str, Any]) -> None:
    """The forecast's lines of the plan's task log (before its account, which stays the last word)."""
    for note in facts["notes"]:
        log.info("capacity forecast: %s", note)
    if not facts["made"]:
        return
    for pool in facts["pools"]:
        log.info("capacity forecast: %s", pool_line(pool, facts["horizon_days"], facts["warning_days"]))
    topics = facts["topics"]
    if topics["without_trend"]:
        log.info("capacity forecast: %d topics without a trend (counted as not growing), e.g. %s",
                 topics["without_trend"], "; ".join(f"{t['topic']}: {t['reason']}"
                                                   for t in topics["without_trend_listed"][:3]))
