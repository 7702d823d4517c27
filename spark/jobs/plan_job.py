"""spark-submit entry point of the plan step: read the run's snapshot, write its plan.

    spark-submit spark/jobs/plan_job.py --config CONFIG --run-dir RUN_DIR
"""

from __future__ import annotations

import argparse
import logging
import sys

from pyspark.sql import SparkSession

from kafka_rebalancer.errors import RebalancerError
from kafka_rebalancer.log_setup import quiet_libraries
from kafka_rebalancer.operations.request import run_config
from kafka_rebalancer.plan.job import SessionStop, run_plan
from kafka_rebalancer.run_folder import RunFolder
from kafka_rebalancer.snapshot.store import check_snapshot


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="kafka-rebalancer plan job")
    parser.add_argument("--config", required=True)
    parser.add_argument("--run-dir", required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    quiet_libraries()  # py4j's connection lines are not part of the plan's account
    run = RunFolder(args.run_dir)
    try:
        config = run_config(args.config, run)
        check_snapshot(run)  # before Spark starts: a damaged or edited snapshot never reaches it
    except RebalancerError as exc:
        print(f"plan failed: {exc}", file=sys.stderr)
        return 2
    spark = SparkSession.builder.appName("kafka-rebalancer-plan").getOrCreate()
    stop = SessionStop(spark)
    try:
        run_plan(spark, config, run, release=stop)  # its last log line is the plan's account
    except RebalancerError as exc:
        print(f"plan failed: {exc}", file=sys.stderr)
        return 2
    finally:
        stop.join()
    return 0


if __name__ == "__main__":
    sys.exit(main())
