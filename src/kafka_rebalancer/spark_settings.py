"""Spark settings of the plan job, the same wherever it runs: the DAG's spark-submit, the CLI's local session,
the benchmark and the tests. Kept free of heavy imports: the DAG file reads it at parse time."""

from __future__ import annotations

import os

# The plan job is short and its data small by Spark's measure: on two cores the JVM's optimising compiler (C2)
# spent more CPU compiling (22 of 54 CPU seconds on the medium benchmark) than its faster code saved. The
# quick compiler alone (C1) halves the job's JVM CPU; see BENCHMARKS.md.
PLAN_JVM_OPTIONS = "-XX:TieredStopAtLevel=1"

# A class-data archive of the driver JVM (built by `python -m tools.jvm_archive`, see there): the plan job starts
# a fresh JVM every night, and loading and verifying Spark's classes from jars was a third of its time.
JVM_ARCHIVE_ENV = "KAFKA_REBALANCER_JVM_ARCHIVE"


def jvm_archive_options(archive: str | None) -> str:
    """The driver JVM's option to start from the class-data archive, when the archive exists. The JVM checks the
    archive against its own build and class path and, if it does not match, warns and starts without it."""
    return f"-XX:SharedArchiveFile={archive}" if archive and os.path.isfile(archive) else ""


def plan_spark_conf(extra_java_options: str = "", jvm_archive: str | None = None) -> dict[str, str]:
    """Spark conf of the plan job; `extra_java_options` (e.g. a log4j config) joins the JVM options.
    `jvm_archive` defaults to the file named by $KAFKA_REBALANCER_JVM_ARCHIVE; only the driver uses it (an
    executor on a cluster has another class path)."""
    archive = jvm_archive if jvm_archive is not None else os.environ.get(JVM_ARCHIVE_ENV)
    executor_options = f"{PLAN_JVM_OPTIONS} {extra_java_options}".strip()
    driver_options = f"{executor_options} {jvm_archive_options(archive)}".strip()
    return {"spark.driver.extraJavaOptions": driver_options, "spark.executor.extraJavaOptions": executor_options,
            "spark.sql.shuffle.partitions": "8",
            # Tables to and from pandas through Arrow, without a Python worker on the Spark side.
            "spark.sql.execution.arrow.pyspark.enabled": "true"}


# The largest snapshot (in replicas) the plan job works on the driver instead of with Spark jobs
# (`plan.balance.transforms.DRIVER_PLANNING_MAX_REPLICAS` is the default and says why): a whole number, 0 for Spark
# at every size. Read when a plan starts, so a DAG's task environment can set it.
DRIVER_MAX_REPLICAS_ENV = "KAFKA_REBALANCER_DRIVER_MAX_REPLICAS"


def driver_max_replicas_setting(default: int) -> int:
    """$KAFKA_REBALANCER_DRIVER_MAX_REPLICAS when set (RebalancerError naming it when it is not a whole number >= 0:
    the command stops with one line), else `default`."""
    text = os.environ.get(DRIVER_MAX_REPLICAS_ENV, "").strip()
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        from kafka_rebalancer.errors import RebalancerError  # here: DAG files import this module at parse time

        raise RebalancerError(f"${DRIVER_MAX_REPLICAS_ENV}: {text!r}, expected a whole number of replicas (0: always "
                         "Spark)")
    return value
