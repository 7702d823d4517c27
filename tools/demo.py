"""`make demo`: a local Kafka cluster with an unbalanced workload, a local Prometheus scraping its brokers, one run
of the nightly DAG that plans and executes (its snapshot reads the traffic from Prometheus), then the before/after
table per pool and the run's artifacts.

Set KEEP_CLUSTER=1 to leave the cluster and Prometheus running afterwards (stop them with `make cluster-down` and
`python -m tools.prometheus stop --name demo`).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from tools.airflow_run import airflow_env, ensure_database, run_dag, write_connections
from tools.demo_workload import TopicSpec, consume_and_check, create_topics, create_workload
from tools.local_kafka import LocalKafkaCluster
from tools.prometheus import SCRAPE_INTERVAL, LocalPrometheus

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "config" / "demo.yaml"
STATE = REPO / ".state" / "demo"
# Traffic while the DAG runs, into a topic of its own (the workload's topics keep the counts their check expects),
# spread evenly over pool b so it does not change what the plan has to fix.
LIVE_TOPIC = TopicSpec("clicks-live", [[4, 5], [5, 6], [6, 4]], [0, 0, 0])
LIVE_BYTES_PER_S = 16 * 1024


class SteadyTraffic:
    """Produces to each topic at its rate (bytes/s, acks=all) from a background thread until stop(): traffic that
    Prometheus' window sees. `acked_bytes` per topic and `failures` say what happened."""

    def __init__(self, bootstrap: str, rates: dict[str, float], message_bytes: int = 4096) -> None:
        self.bootstrap, self.rates, self.message_bytes = bootstrap, rates, message_bytes
        self.acked_bytes: dict[str, int] = dict.fromkeys(rates, 0)
        self.failures: list[str] = []
        self.started = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._produce, name="steady-traffic", daemon=True)

    def start(self) -> SteadyTraffic:
        self.started = time.monotonic()
        self._thread.start()
        return self

    def running_for(self) -> float:
        return time.monotonic() - self.started

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(120)

    def _produce(self) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "enable.idempotence": True,
                             "linger.ms": 20, "compression.type": "none", "log_level": 3})
        value = os.urandom(self.message_bytes)  # incompressible, and the same for every message: cheap to send
        sent = dict.fromkeys(self.rates, 0)

        def on_delivery(err: Any, msg: Any) -> None:
            if err is not None:
                self.failures.append(f"{msg.topic()}: {err}")
            else:
                self.acked_bytes[msg.topic()] += len(msg.value())

        while not self._stop.is_set():
            elapsed = time.monotonic() - self.started
            for topic, rate in self.rates.items():
                # Catch up with the rate a bounded burst at a time, so one topic cannot starve the others.
                for _ in range(min(int(rate * elapsed / self.message_bytes) - sent[topic], 1000)):
                    try:
                        producer.produce(topic, value, on_delivery=on_delivery)
                    except BufferError:  # the client's queue is full: let it drain
                        break
                    sent[topic] += 1
            producer.poll(0.01)
        unsent = producer.flush(60)
        if unsent:
            self.failures.append(f"{unsent} message(s) unacknowledged at the end")


def step(text: str) -> None:
    print(f"\n==> {text}", flush=True)


def wait_for_window(traffic: SteadyTraffic, settings: Any) -> None:
    """Until the traffic has run over the whole metrics window and the rate range before it (at most a step and
    four scrapes), with a few scrapes to spare: every series the snapshot asks for then covers the window. The time
    Airflow's preparation took counts."""
    needed = settings.window + settings.step + 8 * settings.scrape_interval
    wait = needed - traffic.running_for()
    if wait > 0:
        print(f"waiting {wait:.0f}s until Prometheus' {settings.window:g}s window holds the traffic", flush=True)
        time.sleep(wait)


def metrics_line(manifest: dict[str, Any]) -> str:
    """Where the snapshot's traffic came from, from its manifest."""
    metrics = manifest.get("metrics")
    if metrics is None:
        return "metrics: none from Prometheus (metrics.source is not prometheus)"
    below = sum(manifest["metrics_completeness"][kind]["count"] for kind in ("brokers", "topics", "partitions"))
    return (f"metrics: Prometheus at {metrics['url']}, {metrics['queries']} range queries in "
            f"{metrics['query_seconds']:.2f}s ({metrics['statistic']} over {metrics['window_s']:g}s at "
            f"{metrics['step_s']:g}s steps); {below} series below the completeness bar; snapshot took "
            f"{manifest['capture_seconds']:.1f}s")


def revert_earlier_overrides(config: Any) -> list[str]:
    """The demo's cluster is new every time: the pool overrides earlier demo runs recorded (a drain, an isolation)
    were about the cluster they ran on, so they are reverted (kept in the store's history) and named, instead of
    silently shaping this run's pools."""
    from kafka_rebalancer.operations.overrides import OverrideStore

    store = OverrideStore.of(config)
    return [store.revert(o.id, "make demo (a new cluster)").describe() for o in store.active()]


def main() -> int:
    from kafka_rebalancer.config import load_config

    config = load_config(CONFIG)
    for override in revert_earlier_overrides(config):
        print(f"reverted {override}: recorded by an earlier demo run on another cluster")
    cluster = LocalKafkaCluster("demo")
    prometheus = LocalPrometheus("demo")
    traffic: SteadyTraffic | None = None
    started = time.monotonic()
    try:
        step("starting a local Kafka cluster (KRaft: 1 controller, 6 brokers on 3 racks)")
        if cluster.is_running():
            cluster.stop(quiet=True)
        state = cluster.start()
        bootstrap = state.bootstrap_servers
        print(f"bootstrap servers: {bootstrap}")

        step(f"starting a local Prometheus scraping the brokers' JMX exporters every {SCRAPE_INTERVAL}")
        prometheus.stop(quiet=True)  # one left behind by an interrupted demo
        prometheus_url = prometheus.start(cluster)
        print(f"Prometheus: {prometheus_url}")

        step("creating an unbalanced workload (explicit replica assignments, skewed sizes, acks=all)")
        manifest = create_workload(bootstrap, STATE / "workload.json")
        produced = sum(p["count"] for t in manifest.values() for p in t.values())
        print(f"{len(manifest)} topics, {produced} messages produced")
        create_topics(bootstrap, [LIVE_TOPIC])
        traffic = SteadyTraffic(bootstrap, {LIVE_TOPIC.name: LIVE_BYTES_PER_S}).start()
        print(f"live traffic: {LIVE_BYTES_PER_S // 1024} KiB/s into {LIVE_TOPIC.name} until Prometheus' window "
              "holds it")

        step("preparing Airflow (sqlite metadata database in .state/airflow)")
        env = airflow_env(REPO / ".state" / "airflow", CONFIG)
        env["KAFKA_REBALANCER_PROMETHEUS_URL"] = prometheus_url  # config/demo.yaml reads it
        ensure_database(env)
        connections = write_connections(STATE / "airflow-connections.json", config.cluster.airflow_connection_id,
                                        bootstrap)
        if config.metrics.prometheus is not None:
            wait_for_window(traffic, config.metrics.prometheus)
        # Stopped before the run: data still arriving would shift the disk figures between the plan and verify.
        traffic.stop()

        step("running the nightly DAG once: snapshot (Kafka + Prometheus) -> plan (Spark) -> validate (GX) -> "
             "approve -> execute[pool] -> verify -> report")
        log_file = STATE / "dag-run.log"
        result = run_dag(env, connections, {"mode": "execute"}, log_file)
        print(f"DAG run {result['run_id']}: {result['state']} (log: {log_file})")
        run_dir = config.run_dir(result["run_id"])
        if result["state"] != "success":
            print(f"the run failed; task logs in {log_file}, artifacts in {run_dir}", file=sys.stderr)
            return 1
        print(metrics_line(json.loads((run_dir / "snapshot" / "manifest.json").read_text())))

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
        if traffic is not None:
            traffic.stop()
        if os.environ.get("KEEP_CLUSTER") == "1":
            print(f"cluster left running: {cluster.load().bootstrap_servers} (make cluster-down to stop it)")
            if prometheus.is_running():
                print(f"Prometheus left running: {prometheus.url} (python -m tools.prometheus stop --name demo)")
        else:
            prometheus.stop(quiet=True)
            cluster.stop(quiet=True)


if __name__ == "__main__":
    sys.exit(main())
