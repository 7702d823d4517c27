"""One plan run in its own process (so the benchmark measures its memory alone): prints a JSON line."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time

from pyspark.sql import SparkSession

from kafka_rebalancer.config import load_config
from kafka_rebalancer.plan.job import run_plan
from kafka_rebalancer.run_folder import RunFolder
from kafka_rebalancer.spark_settings import plan_spark_conf


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", required=True)
    parser.add_argument("--run-dir", required=True)
    parser.add_argument("--driver-memory", default="2g")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s: %(message)s")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    started = time.monotonic()
    spark = (SparkSession.builder.master("local[2]").appName("kafka-rebalancer-bench")
             .config("spark.driver.memory", args.driver_memory).config("spark.ui.enabled", "false")
             .config(map=plan_spark_conf()).getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    session_s = time.monotonic() - started
    config = load_config(args.config)
    t0 = time.monotonic()
    summary = run_plan(spark, config, RunFolder(args.run_dir))
    wall = time.monotonic() - t0
    spark.stop()
    print(json.dumps({"wall_s": round(wall, 2), "session_start_s": round(session_s, 2),
                      "plan_hash": summary["plan_hash"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
