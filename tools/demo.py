"""`make demo`: a local Kafka cluster with an unbalanced workload, one run of the nightly DAG that plans and
executes, then the before/after table per pool and the run's artifacts.

Set KEEP_CLUSTER=1 to leave the cluster running afterwards (stop it with `make cluster-down`).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from tools.airflow_run import airflow_env, ensure_database, run_dag, write_connections
from tools.demo_workload import consume_and_check, create_workload
from tools.local_kafka import LocalKafkaCluster

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "config" / "demo.yaml"
STATE = REPO / ".state" / "demo"


def step(text: str) -> None:
    print(f"\n==> {text}", flush=True)


def main() -> int:
    from kafka_rebalancer.config import load_config

    config = load_config(CONFIG)
    cluster = LocalKafkaCluster("demo")
    started = time.monotonic()
    try:
        step("starting a local Kafka cluster (KRaft: 1 controller, 6 brokers on 3 racks)")
        if cluster.is_running():
            cluster.stop(quiet=True)
        state = cluster.start()
        bootstrap = state.bootstrap_servers
        print(f"bootstrap servers: {bootstrap}")

        step("creating an unbalanced workload (explicit replica assignments, skewed sizes, acks=all)")
        manifest = create_workload(bootstrap, STATE / "workload.json")
        produced = sum(p["count"] for t in manifest.values() for p in t.values())
        print(f"{len(manifest)} topics, {produced} messages produced")

        step("preparing Airflow (sqlite metadata database in .state/airflow)")
        env = airflow_env(REPO / ".state" / "airflow", CONFIG)
        ensure_database(env)
        connections = write_connections(STATE / "airflow-connections.json", config.cluster.airflow_connection_id,
                                        bootstrap)

        step("running the nightly DAG once: snapshot -> plan (Spark) -> validate (GX) -> approve -> execute[pool] "
             "-> verify -> report")
        log_file = STATE / "dag-run.log"
        result = run_dag(env, connections, {"mode": "execute"}, log_file)
        print(f"DAG run {result['run_id']}: {result['state']} (log: {log_file})")
        run_dir = config.run_dir(result["run_id"])
        if result["state"] != "success":
            print(f"the run failed; task logs in {log_file}, artifacts in {run_dir}", file=sys.stderr)
            return 1

        step("before -> after, per pool (band = the balance band, README: How a plan is made)")
        print((run_dir / "verify" / "report.txt").read_text())
        summary = json.loads((run_dir / "plan" / "summary.json").read_text())
        totals = summary["totals"]
        print(f"plan {summary['plan_hash'][:12]}: {totals['replica_moves']} replica moves, "
              f"{totals['moved_bytes'] / 2**20:.1f} MiB; out of band: {totals['out_of_band_before']} before, "
              f"{json.loads((run_dir / 'verify' / 'summary.json').read_text())['out_of_band_after']} after")
        for pool, body in summary["pools"].items():
            for note in body["notes"]:
                print(f"  note {pool}: broker {note['broker_id']} {note['resource']}: {note['note']}")

        step("checking every message produced before the run is still consumable")
        print(f"{consume_and_check(bootstrap, manifest)} messages consumed, counts and checksums match")

        step(f"artifacts in {run_dir}")
        for path in sorted(run_dir.rglob("*")):
            if path.is_file() and not path.name.startswith((".", "part-", "_")) and ".parquet" not in str(path):
                print(f"  {path.relative_to(run_dir)}")
        print("  (+ Parquet tables: snapshot, bands, brokers to fix, candidates, moves, ...)")
        print(f"done in {time.monotonic() - started:.0f}s")
        print(f"\nthe run's report (open it in a browser): {run_dir / 'report' / 'index.html'}\n"
              f"the same in the terminal: kafka-rebalancer show --config {CONFIG} {result['run_id']}")
        return 0
    finally:
        if os.environ.get("KEEP_CLUSTER") == "1":
            print(f"cluster left running: {cluster.load().bootstrap_servers} (make cluster-down to stop it)")
        else:
            cluster.stop(quiet=True)


if __name__ == "__main__":
    sys.exit(main())
