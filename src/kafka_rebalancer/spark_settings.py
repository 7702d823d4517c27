"""Spark settings of the plan job, the same wherever it runs: the DAG's spark-submit, the CLI's local session,
the benchmark and the tests. Kept free of heavy imports: the DAG file reads it at parse time."""

from __future__ import annotations

# The plan job is short and its data small by Spark's measure: on two cores the JVM's optimising compiler (C2)
# spent more CPU compiling (22 of 54 CPU seconds on the medium benchmark) than its faster code saved. The
# quick compiler alone (C1) halves the job's JVM CPU; see BENCHMARKS.md.
PLAN_JVM_OPTIONS = "-XX:TieredStopAtLevel=1"


def plan_spark_conf(extra_java_options: str = "") -> dict[str, str]:
    """Spark conf of the plan job; `extra_java_options` (e.g. a log4j config) joins the JVM options."""
    java_options = f"{PLAN_JVM_OPTIONS} {extra_java_options}".strip()
    return {"spark.driver.extraJavaOptions": java_options, "spark.executor.extraJavaOptions": java_options,
            "spark.sql.shuffle.partitions": "8",
            # Tables to and from pandas through Arrow, without a Python worker on the Spark side.
            "spark.sql.execution.arrow.pyspark.enabled": "true"}
