"""A local Spark standalone cluster on loopback: one master and two workers started from the pyspark package
(`spark-class org.apache.spark.deploy.master.Master` / `...deploy.worker.Worker`), for running the plan job
the way it runs on a real cluster. State (ports, pids, logs) lives in .state/spark/<name>.

    python -m tools.local_spark start|stop|status [--name NAME]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path

import pyspark

from tools.ports import free_ports

REPO = Path(__file__).resolve().parents[1]
STATE_ROOT = REPO / ".state" / "spark"
SPARK_HOME = Path(pyspark.__file__).parent
MARKER = "org.apache.spark.deploy"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


@dataclass
class SparkClusterState:
    name: str
    master_port: int
    master_ui_port: int
    pids: dict[str, int]

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"


def _running(pid: int) -> bool:
    """True while pid is a live (not zombie) process of ours. spark-class execs java, and while it does the
    process's command line reads empty for a moment: that counts as ours, a different command line does not
    (a recycled pid)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, IndexError):
        return False
    return state != "Z" and (not cmdline or MARKER.encode() in cmdline)


class LocalSparkCluster:
    def __init__(self, name: str = "demo", workers: int = 2, root: Path = STATE_ROOT) -> None:
        self.name, self.workers = name, workers
        self.dir = root / name
        self.state_file = self.dir / "state.json"

    def load(self) -> SparkClusterState | None:
        if not self.state_file.exists():
            return None
        return SparkClusterState(**json.loads(self.state_file.read_text()))

    def _launch(self, role: str, args: list[str]) -> int:
        log_file = (self.dir / f"{role}.log").open("w")
        env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1",
               "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
               "SPARK_WORKER_DIR": str(self.dir / f"{role}-work"), "SPARK_LOG_DIR": str(self.dir)}
        cmd = [str(SPARK_HOME / "bin" / "spark-class"), *args]
        proc = subprocess.Popen(cmd, stdout=log_file, stderr=subprocess.STDOUT, env=env,
                                cwd=self.dir, start_new_session=True)
        return proc.pid

    def start(self, timeout_s: float = 120.0) -> SparkClusterState:
        """Start master and workers; returns once every worker has registered with the master."""
        self.stop(quiet=True)
        self.dir.mkdir(parents=True, exist_ok=True)
        master_port, ui_port, *worker_ui = free_ports(2 + self.workers)
        pids = {"master": self._launch("master", [MASTER_CLASS, "--host", "127.0.0.1", "--port", str(master_port),
                                                  "--webui-port", str(ui_port)])}
        state = SparkClusterState(self.name, master_port, ui_port, pids)
        self.state_file.write_text(json.dumps(asdict(state)))
        for i, port in enumerate(worker_ui, 1):
            pids[f"worker-{i}"] = self._launch(f"worker-{i}", [WORKER_CLASS, "--host", "127.0.0.1", "--cores", "1",
                                                               "--memory", "2g", "--webui-port", str(port),
                                                               "--work-dir", str(self.dir / f"worker-{i}-work"),
                                                               state.master_url])
        self.state_file.write_text(json.dumps(asdict(state)))
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.alive_workers(state) == self.workers:
                return state
            for role, pid in pids.items():
                if not _running(pid):
                    log = (self.dir / f"{role}.log").read_text()[-3000:]
                    self.stop(quiet=True)
                    raise RuntimeError(f"Spark {role} exited during start:\n{log}")
            time.sleep(0.5)
        self.stop(quiet=True)
        raise TimeoutError(f"Spark standalone '{self.name}': {self.workers} workers not registered after "
                           f"{timeout_s:.0f}s (logs in {self.dir})")

    @staticmethod
    def alive_workers(state: SparkClusterState) -> int:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{state.master_ui_port}/json/", timeout=2) as response:
                return int(json.load(response).get("aliveworkers", 0))
        except OSError:
            return 0

    def stop(self, quiet: bool = False, timeout_s: float = 30.0) -> None:
        state = self.load()
        if state is None:
            return
        running = {role: pid for role, pid in state.pids.items() if _running(pid)}
        for pid in running.values():
            os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        for pid in running.values():
            while _running(pid) and time.monotonic() < deadline:
                time.sleep(0.2)
            if _running(pid):
                os.killpg(pid, signal.SIGKILL)
        self.state_file.unlink()
        if not quiet:
            print(f"local Spark '{self.name}' stopped")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["start", "stop", "status"])
    parser.add_argument("--name", default="demo")
    args = parser.parse_args(argv)
    cluster = LocalSparkCluster(args.name)
    if args.action == "start":
        state = cluster.start()
        print(f"local Spark '{args.name}': {state.master_url}, UI http://127.0.0.1:{state.master_ui_port}")
    elif args.action == "stop":
        cluster.stop()
    else:
        state = cluster.load()
        print("not running" if state is None else
              f"{state.master_url}: {cluster.alive_workers(state)} alive worker(s), pids {state.pids}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
