"""A local Prometheus server (Debian's `prometheus` package) scraping a local Kafka cluster's JMX exporters.

Each server lives in `.state/prometheus/<name>/`: its config, the targets file it re-reads (file_sd), its TSDB,
log, pid file and `prometheus.json` (port, cluster, targets, dropped brokers), so `stop`, `status` and
`drop_target` work from another process than the one that started it. Every broker's exporter
(`tools/local_kafka.py` starts them) is scraped every 2 s as `job="kafka"`, labelled `broker_id="<id>"`.

    python -m tools.prometheus ensure                                # apt-get install prometheus, once
    python -m tools.prometheus start [--name demo] [--cluster demo]  # waits for the first scrape of every broker
    python -m tools.prometheus status|url|stop [--name demo]
    python -m tools.prometheus drop-target|restore-target --broker ID [--name demo]

`drop_target` takes one broker out of the targets file, as if its exporter were gone: Prometheus stops
scraping it and its series go stale; `restore_target` puts it back.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

from tools.local_kafka import LocalKafkaCluster, pid_alive
from tools.ports import free_ports

REPO = Path(__file__).resolve().parents[1]
STATE_ROOT = REPO / ".state" / "prometheus"
# Where the binaries go when the package cannot be installed system-wide (extracted from its .deb).
CACHE = REPO / ".cache" / "prometheus"
PACKAGE = "prometheus"
JOB = "kafka"
SCRAPE_INTERVAL = "2s"
# file_sd also watches the file (inotify); the interval only bounds how late a missed change is seen.
TARGETS_REFRESH = "2s"


class PrometheusError(RuntimeError):
    """The local Prometheus could not be installed, started, reached or stopped."""


def binary(name: str = "prometheus") -> str | None:
    """The installed (or extracted) `prometheus` or `promtool` binary."""
    extracted = CACHE / "usr" / "bin" / name
    return shutil.which(name) or (str(extracted) if extracted.exists() else None)


def _run(cmd: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)


def ensure() -> str:
    """Install Debian's prometheus package once (the server only, no recommends); returns the binary.

    The package's postinst may try to start its system service, which fails where there is no init system;
    that failure does not matter here (we start our own servers), only whether the binary is there. Where apt
    cannot install system-wide, the binaries are extracted from the downloaded .deb into .cache/prometheus."""
    found = binary()
    if found:
        return found
    if shutil.which("apt-get") is None:
        raise PrometheusError("Prometheus is missing and there is no apt-get: install it and put it on the PATH")
    update = _run(["apt-get", "update", "-q"])
    if update.returncode != 0:
        raise PrometheusError(f"apt-get update failed:\n{update.stdout[-2000:]}{update.stderr[-2000:]}")
    install = _run(["apt-get", "install", "-y", "-q", "--no-install-recommends", PACKAGE])
    found = binary()
    if found:
        return found
    print(f"apt-get install {PACKAGE} did not install it ({install.returncode}): {install.stderr[-500:]}\n"
          f"extracting the package into {CACHE} instead", file=sys.stderr)
    extract_package(CACHE)
    found = binary()
    if not found:
        raise PrometheusError(f"{CACHE} has no usr/bin/prometheus after extracting the {PACKAGE} package")
    return found


def extract_package(dest: Path) -> None:
    """Download the package's .deb (no root needed) and unpack its files under dest (dest/usr/bin/...)."""
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    download = _run(["apt-get", "download", PACKAGE], cwd=dest)
    debs = list(dest.glob(f"{PACKAGE}_*.deb"))
    if download.returncode != 0 or len(debs) != 1:
        raise PrometheusError(f"apt-get download {PACKAGE} failed:\n{download.stdout[-2000:]}{download.stderr[-2000:]}")
    extract = _run(["dpkg-deb", "-x", str(debs[0]), str(dest)])
    if extract.returncode != 0:
        raise PrometheusError(f"could not extract {debs[0]}: {extract.stderr[-2000:]}")


def version() -> str:
    """`prometheus --version`'s first line."""
    found = ensure()
    return _run([found, "--version"]).stdout.splitlines()[0]


def scrape_config(targets_file: Path) -> dict[str, Any]:
    """The server's config: the brokers' exporters, from a targets file it re-reads."""
    return {
        "global": {"scrape_interval": SCRAPE_INTERVAL, "scrape_timeout": SCRAPE_INTERVAL,
                   "evaluation_interval": SCRAPE_INTERVAL},
        "scrape_configs": [{
            "job_name": JOB,
            "file_sd_configs": [{"files": [str(targets_file)], "refresh_interval": TARGETS_REFRESH}],
        }],
    }


def file_sd_targets(targets: dict[int, str]) -> list[dict[str, Any]]:
    """file_sd's format: one group per broker, so each exporter carries its broker_id label."""
    return [{"targets": [target], "labels": {"broker_id": str(broker_id)}}
            for broker_id, target in sorted(targets.items())]


class LocalPrometheus:
    """One named local Prometheus; its state folder makes it controllable from any process."""

    def __init__(self, name: str = "demo", root: Path = STATE_ROOT) -> None:
        self.name = name
        self.dir = root / name
        self.config_file = self.dir / "prometheus.yml"
        self.targets_file = self.dir / "targets.json"
        self.pid_file = self.dir / "prometheus.pid"
        self.state_file = self.dir / "prometheus.json"
        self.log_file = self.dir / "prometheus.log"

    # -- state -------------------------------------------------------------------------------
    def _load(self) -> dict[str, Any]:
        if not self.state_file.exists():
            raise PrometheusError(f"no local Prometheus '{self.name}' (missing {self.state_file}); start it first")
        return json.loads(self.state_file.read_text())

    def _save(self, state: dict[str, Any]) -> None:
        _write_atomically(self.state_file, json.dumps(state, indent=2))

    def _pid(self) -> int | None:
        return int(self.pid_file.read_text()) if self.pid_file.exists() else None

    def is_running(self) -> bool:
        return pid_alive(self._pid(), str(self.config_file))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._load()['port']}"

    def status(self) -> dict[str, Any]:
        state = self._load()
        return {"name": self.name, "cluster": state["cluster"], "url": self.url, "pid": self._pid(),
                "running": self.is_running(), "targets": state["targets"], "dropped": state["dropped"]}

    # -- targets -----------------------------------------------------------------------------
    def _write_targets(self, state: dict[str, Any]) -> None:
        """The targets file Prometheus watches: every broker not dropped. Replaced in one rename, so the
        server never reads half a file."""
        live = {int(b): t for b, t in state["targets"].items() if int(b) not in state["dropped"]}
        _write_atomically(self.targets_file, json.dumps(file_sd_targets(live), indent=2))

    def drop_target(self, broker_id: int, timeout_s: float = 30.0) -> None:
        """Stop scraping one broker (as if its exporter were stopped); returns once Prometheus has let go of it."""
        state = self._load()
        if str(broker_id) not in state["targets"]:
            raise PrometheusError(f"broker {broker_id} is not a target of Prometheus '{self.name}'")
        state["dropped"] = sorted({*state["dropped"], broker_id})
        self._save(state)
        self._write_targets(state)
        if not _wait(lambda: str(broker_id) not in self._active_targets(), timeout_s):
            raise PrometheusError(f"Prometheus '{self.name}' still scrapes broker {broker_id} after {timeout_s:.0f}s")

    def restore_target(self, broker_id: int, timeout_s: float = 30.0) -> None:
        """Scrape a dropped broker again; returns once a scrape of it succeeded."""
        state = self._load()
        state["dropped"] = [b for b in state["dropped"] if b != broker_id]
        self._save(state)
        self._write_targets(state)
        self.wait_scraped([broker_id], timeout_s)

    # -- queries -----------------------------------------------------------------------------
    def _api(self, path: str, params: dict[str, str] | None = None) -> Any:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        with urllib.request.urlopen(f"{self.url}{path}{query}", timeout=10) as response:
            body = json.loads(response.read())
        if body.get("status") != "success":
            raise PrometheusError(f"{path} {params}: {body}")
        return body["data"]

    def query(self, promql: str) -> list[dict[str, Any]]:
        """An instant query's samples: [{"metric": {labels}, "value": [time, "value"]}, ...]."""
        return self._api("/api/v1/query", {"query": promql})["result"]

    def _active_targets(self) -> dict[str, dict[str, Any]]:
        """broker_id -> the target's state (health, lastError) as Prometheus sees it."""
        targets = self._api("/api/v1/targets", {"state": "active"})["activeTargets"]
        return {t["labels"]["broker_id"]: t for t in targets if t["labels"].get("job") == JOB}

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self, cluster: LocalKafkaCluster, timeout_s: float = 60.0) -> str:
        """Start a fresh server (any previous TSDB of this name is wiped) scraping the cluster's brokers; returns
        its URL once it is ready and every broker has been scraped once."""
        prometheus = ensure()
        if self.is_running():
            raise PrometheusError(f"local Prometheus '{self.name}' is already running at {self.url}; stop it first")
        targets = cluster.scrape_targets()
        if not targets:
            raise PrometheusError(f"local cluster '{cluster.name}' has no broker with a JMX exporter")
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir.mkdir(parents=True)
        port = free_ports(1)[0]
        state = {"cluster": cluster.name, "port": port, "targets": {str(b): t for b, t in targets.items()},
                 "dropped": []}
        self._save(state)
        self._write_targets(state)
        self.config_file.write_text(yaml.safe_dump(scrape_config(self.targets_file), sort_keys=False))
        cmd = [prometheus, f"--config.file={self.config_file}", f"--storage.tsdb.path={self.dir / 'data'}",
               f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=1d"]
        with open(self.log_file, "ab") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
        self.pid_file.write_text(f"{proc.pid}\n")
        # Until the child has exec'd, /proc shows our command line: wait, or stop() would take the starting
        # server for a dead one and leave it running.
        _wait(lambda: proc.poll() is not None or self.is_running(), 10.0)
        try:
            if not _wait(lambda: _ready(proc, self.url, f"'{self.name}' (pid {proc.pid})", self._log_tail),
                         timeout_s):
                raise PrometheusError(f"Prometheus '{self.name}' not ready at {self.url} after {timeout_s:.0f}s; "
                                      f"log tail:\n{self._log_tail()}")
            self.wait_scraped(list(targets), timeout_s)
        except Exception:
            self.stop(quiet=True)
            raise
        return self.url

    def wait_scraped(self, broker_ids: list[int], timeout_s: float = 60.0) -> None:
        """Wait until `up` is 1 for each of these brokers (a scrape of its exporter succeeded)."""
        def all_up() -> bool:
            up = {s["metric"].get("broker_id") for s in self.query(f'up{{job="{JOB}"}} == 1')}
            return {str(b) for b in broker_ids} <= up

        if not _wait(all_up, timeout_s):
            seen = self._active_targets()
            failing = {b: seen.get(str(b), {}).get("lastError") or "not a target (yet)" for b in broker_ids
                       if seen.get(str(b), {}).get("health") != "up"}
            raise PrometheusError(f"Prometheus '{self.name}': no successful scrape of brokers {failing} after "
                                  f"{timeout_s:.0f}s (log {self.log_file})")

    def _log_tail(self) -> str:
        return self.log_file.read_text(errors="replace")[-3000:] if self.log_file.exists() else "(no log)"

    def stop(self, quiet: bool = False, timeout_s: float = 30.0) -> None:
        """SIGTERM the server by its pid file (it flushes its TSDB head), SIGKILL it after timeout_s."""
        pid = self._pid()
        marker = str(self.config_file)
        if not pid_alive(pid, marker):
            self.pid_file.unlink(missing_ok=True)
            if not quiet:
                print(f"local Prometheus '{self.name}': nothing to stop")
            return
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while pid_alive(pid, marker) and time.monotonic() < deadline:
            time.sleep(0.2)
        if pid_alive(pid, marker):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):  # reap it if it is our own child
            os.waitpid(pid, 0)
        self.pid_file.unlink(missing_ok=True)
        if not quiet:
            print(f"local Prometheus '{self.name}' stopped")


def backfill(openmetrics: Path, data_dir: Path) -> None:
    """promtool's `tsdb create-blocks-from openmetrics`: the file's samples (each series in time order, the file
    ending in `# EOF`) written as TSDB blocks into data_dir, which a server started on it then serves."""
    ensure()
    promtool = binary("promtool")
    if promtool is None:
        raise PrometheusError("promtool is missing: it comes with Debian's prometheus package")
    data_dir.mkdir(parents=True, exist_ok=True)
    done = _run([promtool, "tsdb", "create-blocks-from", "openmetrics", "--quiet", str(openmetrics), str(data_dir)])
    if done.returncode != 0:
        raise PrometheusError(f"promtool could not backfill {openmetrics}:\n{done.stdout[-2000:]}"
                              f"{done.stderr[-2000:]}")


@contextlib.contextmanager
def serving(data_dir: Path, retention: str, timeout_s: float = 60.0) -> Iterator[str]:
    """A server on data_dir (backfilled: it scrapes nothing) keeping `retention` (e.g. "60d": longer than the
    history, else its blocks are deleted on start); yields its URL, stopped by its pid on exit."""
    prometheus = ensure()
    config = data_dir.parent / f"{data_dir.name}.prometheus.yml"
    config.write_text(yaml.safe_dump({"global": {"scrape_interval": "1m"}}))
    port = free_ports(1)[0]
    url = f"http://127.0.0.1:{port}"
    log_path = data_dir.parent / f"{data_dir.name}.prometheus.log"
    with open(log_path, "ab") as log:
        proc = subprocess.Popen([prometheus, f"--config.file={config}", f"--storage.tsdb.path={data_dir}",
                                 f"--storage.tsdb.retention.time={retention}",
                                 f"--web.listen-address=127.0.0.1:{port}"],
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        def log_tail() -> str:
            return log_path.read_text(errors="replace")[-3000:]

        if not _wait(lambda: _ready(proc, url, f"on {data_dir}", log_tail), timeout_s):
            raise PrometheusError(f"Prometheus on {data_dir} not ready at {url} after {timeout_s:.0f}s")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _ready(proc: subprocess.Popen, url: str, what: str, log_tail: Callable[[], str]) -> bool:
    """Whether the server at url answers ready; an error with its log's tail if its process `what` has exited."""
    if proc.poll() is not None:
        raise PrometheusError(f"Prometheus {what} exited ({proc.returncode}) during start; log tail:\n{log_tail()}")
    try:
        with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _wait(done: Callable[[], bool], timeout_s: float) -> bool:
    """Poll done() until it is true (True) or timeout_s passed (False)."""
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.3)
    return True


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.prometheus", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["ensure", "start", "stop", "status", "url", "drop-target",
                                            "restore-target"])
    parser.add_argument("--name", default="demo", help="server name (folder under .state/prometheus)")
    parser.add_argument("--cluster", default="demo", help="start: the local Kafka cluster to scrape")
    parser.add_argument("--broker", type=int, help="drop-target / restore-target: the broker id")
    args = parser.parse_args(argv)
    server = LocalPrometheus(args.name)
    try:
        if args.command == "ensure":
            print(f"{ensure()} ({version()})")
        elif args.command == "start":
            if server.is_running():
                print(f"local Prometheus '{args.name}' already running: {server.url}")
                return 0
            cluster = LocalKafkaCluster(args.cluster)
            if not cluster.is_running():
                raise PrometheusError(f"local cluster '{args.cluster}' is not running (make cluster-up)")
            url = server.start(cluster)
            print(f"local Prometheus '{args.name}' ready at {url}, scraping cluster '{args.cluster}' every "
                  f"{SCRAPE_INTERVAL}; state in {server.dir}")
        elif args.command == "stop":
            server.stop()
        elif args.command == "url":
            print(server.url)
        elif args.command in ("drop-target", "restore-target"):
            if args.broker is None:
                parser.error(f"{args.command} needs --broker")
            (server.drop_target if args.command == "drop-target" else server.restore_target)(args.broker)
        else:
            row = server.status()
            print(f"{row['name']}: {'up' if row['running'] else 'down'} pid={row['pid'] or '-'} {row['url']} "
                  f"cluster={row['cluster']}")
            for broker_id, target in row["targets"].items():
                print(f"  broker {broker_id:<4} {target:<21} {'dropped' if int(broker_id) in row['dropped'] else ''}")
    except PrometheusError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
