"""A local Apache Kafka cluster (KRaft: one controller, N brokers) on loopback, for the demo and the tests.

The broker jars come from Maven Central through `tools/kafka/pom.xml` and are cached in `.cache/kafka-libs`.
Each cluster lives in `.state/kafka/<name>/` (configs, data, logs, `cluster.json` with ports and pids), so
`stop` and `status` work from another process than the one that started it.

Every broker runs the Prometheus JMX exporter agent (`tools/kafka/jmx_exporter/`: the jar from Maven Central,
cached in `.cache/jmx-exporter`, and the rules naming the series) on a loopback port of its own, recorded in
`cluster.json`; `scrape-targets` lists them for Prometheus (`tools/prometheus.py` scrapes them).

    python -m tools.local_kafka fetch                     # the broker jars and the exporter agent, once
    python -m tools.local_kafka start [--name demo] [--brokers 6] [--secured] [--log-dirs 2]
    python -m tools.local_kafka status [--name demo]
    python -m tools.local_kafka bootstrap [--name demo]   # prints the bootstrap servers of a running cluster
    python -m tools.local_kafka scrape-targets [--name demo]  # prints each broker's exporter: id host:port
    python -m tools.local_kafka stop [--name demo]

A secured cluster (`--secured`) has the KRaft StandardAuthorizer with allow.everyone.if.no.acl.found=false, and
brokers that only listen for SASL_PLAINTEXT with SCRAM-SHA-512 (clients and brokers alike); the controller
listener takes SASL PLAIN. The only user at first is the super user `admin`, whose generated password lives in
`.state/kafka/<name>/admin.secret` (mode 0600; `admin_config()` reads it); create further users with
`add_user` and grant them ACLs as admin.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import hashlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tools.ports import free_ports

REPO = Path(__file__).resolve().parents[1]
POM = REPO / "tools" / "kafka" / "pom.xml"
LIBS = REPO / ".cache" / "kafka-libs"
EXPORTER_POM = REPO / "tools" / "kafka" / "jmx_exporter" / "pom.xml"
EXPORTER_LIBS = REPO / ".cache" / "jmx-exporter"
EXPORTER_RULES = REPO / "tools" / "kafka" / "jmx_exporter" / "rules.yaml"
STATE_ROOT = REPO / ".state" / "kafka"
CONTROLLER_ID = 100
RACKS = ("rack-a", "rack-b", "rack-c")
ADMIN_USER = "admin"
SCRAM_MECHANISM = "SCRAM-SHA-512"
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
# A broker's start (a new cluster's, one started again or added) on a loaded machine, a crash's log recovery included.
BROKER_START_S = 300.0

LOG4J2 = """\
status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = ${sys:kafka.logs.dir}/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.raft.name = org.apache.kafka.raft
logger.raft.level = WARN
"""


class ClusterError(RuntimeError):
    """The local cluster could not be started, reached or stopped."""


@dataclass
class Node:
    node_id: int
    role: str  # "controller" or "broker"
    port: int
    rack: str | None
    pid: int | None = None
    exporter_port: int | None = None  # the JMX exporter agent's HTTP port (brokers only)

    @property
    def name(self) -> str:
        return "controller" if self.role == "controller" else f"broker-{self.node_id}"


@dataclass
class ClusterState:
    name: str
    cluster_id: str
    kafka_version: str
    nodes: list[Node] = field(default_factory=list)
    secured: bool = False
    log_dirs: int = 1  # per broker: several make each broker a JBOD broker (data-1, data-2, ...)
    # Broker properties over the defaults below (an operator's tuning: the execute bench's fetch settings)
    broker_configs: dict[str, str] = field(default_factory=dict)

    @property
    def brokers(self) -> list[Node]:
        return [n for n in self.nodes if n.role == "broker"]

    @property
    def controller(self) -> Node:
        return next(n for n in self.nodes if n.role == "controller")

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"127.0.0.1:{n.port}" for n in self.brokers)


def kafka_version() -> str:
    text = POM.read_text()
    return text.split("<kafka.version>", 1)[1].split("</kafka.version>", 1)[0].strip()


def fetch(pom: Path, dest: Path) -> Path:
    """Copy a pom's runtime dependencies from Maven Central into dest, once (a marker names the pom's content)."""
    marker = dest / f".complete-{hashlib.sha256(pom.read_bytes()).hexdigest()[:16]}"
    if marker.exists():
        return dest
    shutil.rmtree(dest, ignore_errors=True)
    print(f"fetching the jars of {pom.relative_to(REPO)} from Maven Central into {dest} ...", flush=True)
    staging = dest.with_name(dest.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    cmd = ["mvn", "-q", "-B", "-f", str(pom), "dependency:copy-dependencies",
           f"-DoutputDirectory={staging}", "-DincludeScope=runtime"]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        raise ClusterError(f"mvn failed ({result.returncode}):\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    staging.rename(dest)
    marker.touch()
    return dest


def fetch_jars() -> Path:
    """The broker jars of the local cluster."""
    return fetch(POM, LIBS)


def fetch_exporter_agent() -> Path:
    """The Prometheus JMX exporter java agent jar every broker starts with."""
    jars = list(fetch(EXPORTER_POM, EXPORTER_LIBS).glob("jmx_prometheus_javaagent-*.jar"))
    if len(jars) != 1:
        raise ClusterError(f"expected one jmx_prometheus_javaagent jar in {EXPORTER_LIBS}, found {jars}")
    return jars[0]


def scram_client_config(username: str, password: str) -> dict[str, str]:
    """librdkafka settings to log in to a secured local cluster as this user."""
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": SCRAM_MECHANISM, "sasl.username": username,
            "sasl.password": password}


def _write_private(path: Path, text: str) -> None:
    """Write a file only its owner can read (it may hold a password)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def pid_alive(pid: int | None, marker: str) -> bool:
    """True if pid runs and its command line mentions marker (guards against a recycled pid)."""
    if not pid:
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False
    return marker in cmdline


class LocalKafkaCluster:
    """One named local cluster; its state file makes it controllable from any process."""

    def __init__(self, name: str = "demo", root: Path = STATE_ROOT) -> None:
        self.name = name
        self.dir = root / name
        self.state_file = self.dir / "cluster.json"

    # -- state -------------------------------------------------------------------------------
    def load(self) -> ClusterState:
        if not self.state_file.exists():
            raise ClusterError(f"no local cluster '{self.name}' (missing {self.state_file}); start it first")
        raw = json.loads(self.state_file.read_text())
        raw["nodes"] = [Node(**n) for n in raw["nodes"]]
        return ClusterState(**raw)

    def _save(self, state: ClusterState) -> None:
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(state), indent=2))
        tmp.replace(self.state_file)

    def _node_dir(self, node: Node) -> Path:
        return self.dir / node.name

    def log_dirs(self, node: Node, state: ClusterState | None = None) -> list[Path]:
        """The node's log directories, as its `log.dirs` names them (the controller's metadata log: one)."""
        count = (state or self.load()).log_dirs if node.role == "broker" else 1
        return [self._node_dir(node) / "data"] if count == 1 else \
            [self._node_dir(node) / f"data-{i}" for i in range(1, count + 1)]

    def _config_path(self, node: Node) -> Path:
        return self._node_dir(node) / "server.properties"

    @property
    def admin_secret_file(self) -> Path:
        """The super user's password (mode 0600), on a secured cluster."""
        return self.dir / "admin.secret"

    def _client_config(self, state: ClusterState) -> dict[str, str]:
        config = {"bootstrap.servers": state.bootstrap_servers}
        if state.secured:
            config.update(scram_client_config(ADMIN_USER, self.admin_secret_file.read_text().strip()))
        return config

    def admin_config(self) -> dict[str, str]:
        """librdkafka settings of the super user (on an unsecured cluster just the bootstrap servers)."""
        return self._client_config(self.load())

    def is_running(self) -> bool:
        try:
            state = self.load()
        except ClusterError:
            return False
        return all(pid_alive(n.pid, str(self._config_path(n))) for n in state.nodes)

    # -- configuration -----------------------------------------------------------------------
    def _properties(self, state: ClusterState, node: Node) -> str:
        voters = f"{CONTROLLER_ID}@127.0.0.1:{state.controller.port}"
        common = {
            "node.id": node.node_id,
            "controller.quorum.voters": voters,
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": ",".join(str(d) for d in self.log_dirs(node, state)),
        }
        listener = "PLAINTEXT"
        if state.secured:
            common.update(self._security_properties(node))
            listener = "SASL_PLAINTEXT"
        if node.role == "controller":
            props = {**common, "process.roles": "controller", "listeners": f"CONTROLLER://127.0.0.1:{node.port}",
                     **{k: v for k, v in state.broker_configs.items() if k == "remote.log.storage.system.enable"}}
        else:
            props = {
                **common,
                "process.roles": "broker",
                "listeners": f"{listener}://127.0.0.1:{node.port}",
                "advertised.listeners": f"{listener}://127.0.0.1:{node.port}",
                "inter.broker.listener.name": listener,
                "broker.rack": node.rack,
                "num.network.threads": 2,
                "num.io.threads": 4,
                "auto.create.topics.enable": "false",
                # Leadership is the rebalancer's job here; the controller must not move leaders behind its back.
                "auto.leader.rebalance.enable": "false",
                "offsets.topic.replication.factor": 3,
                "offsets.topic.num.partitions": 6,
                "transaction.state.log.replication.factor": 3,
                "transaction.state.log.min.isr": 2,
                "transaction.state.log.num.partitions": 3,
                "group.initial.rebalance.delay.ms": 0,
                # Deleted replicas leave the disk quickly, so a fresh snapshot sees the new usage.
                "file.delete.delay.ms": 1000,
                **state.broker_configs,
            }
        return "".join(f"{k}={v}\n" for k, v in props.items())

    def _security_properties(self, node: Node) -> dict[str, str]:
        """Authorizer, SCRAM on the broker listener (brokers log in to each other as admin) and PLAIN on the
        controller listener: KRaft controllers cannot take SCRAM, whose credentials live in the metadata they
        serve; so the controller checks admin's PLAIN login against its static JAAS user list."""
        password = self.admin_secret_file.read_text().strip()
        plain = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
                 f'username="{ADMIN_USER}" password="{password}"')
        props = {
            "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
            "sasl.mechanism.controller.protocol": "PLAIN",
            "authorizer.class.name": AUTHORIZER,
            "allow.everyone.if.no.acl.found": "false",
            "super.users": f"User:{ADMIN_USER}",
        }
        if node.role == "controller":
            props["sasl.enabled.mechanisms"] = "PLAIN"
            props["listener.name.controller.plain.sasl.jaas.config"] = f'{plain} user_{ADMIN_USER}="{password}";'
        else:
            props["sasl.enabled.mechanisms"] = SCRAM_MECHANISM
            props["sasl.mechanism.inter.broker.protocol"] = SCRAM_MECHANISM
            props["listener.name.controller.plain.sasl.jaas.config"] = f"{plain};"
            props[f"listener.name.sasl_plaintext.{SCRAM_MECHANISM.lower()}.sasl.jaas.config"] = (
                "org.apache.kafka.common.security.scram.ScramLoginModule required "
                f'username="{ADMIN_USER}" password="{password}";')
        return props

    def _java_cmd(self, node: Node, main: list[str], jvm_options: list[str] | None = None) -> list[str]:
        return [
            "java", *(jvm_options or []), "-Xms128m", "-Xmx512m", "-XX:+UseG1GC", "-Djava.awt.headless=true",
            f"-Dkafka.logs.dir={self._node_dir(node)}",
            f"-Dlog4j2.configurationFile={self.dir / 'log4j2.properties'}",
            "-cp", f"{LIBS}/*", *main,
        ]

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self, n_brokers: int = 6, timeout_s: float = BROKER_START_S, secured: bool = False,
              log_dirs: int = 1, broker_configs: dict[str, str] | None = None) -> ClusterState:
        """Start a fresh cluster (any previous data of this name is wiped) and wait until all brokers serve;
        `secured`: SASL/SCRAM and ACLs, see the module's doc; `log_dirs`: log directories per broker;
        `broker_configs`: broker properties over this module's (kept for brokers started or added later)."""
        fetch_jars()
        fetch_exporter_agent()
        if self.is_running():
            raise ClusterError(f"local cluster '{self.name}' is already running; stop it first")
        self.stop(quiet=True)
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir.mkdir(parents=True)
        (self.dir / "log4j2.properties").write_text(LOG4J2)
        if secured:
            _write_private(self.admin_secret_file, secrets.token_urlsafe(24) + "\n")
        ports = free_ports(2 * n_brokers + 1)
        # "=" form on the command line: a base64 id may start with "-", which argparse takes for an option.
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        nodes = [Node(CONTROLLER_ID, "controller", ports[0], None)]
        nodes += [Node(i, "broker", ports[i], RACKS[(i - 1) % len(RACKS)], exporter_port=ports[n_brokers + i])
                  for i in range(1, n_brokers + 1)]
        state = ClusterState(self.name, cluster_id, kafka_version(), nodes, secured, log_dirs,
                             {k: str(v) for k, v in (broker_configs or {}).items()})
        for node in nodes:
            self._node_dir(node).mkdir(parents=True)
            _write_private(self._config_path(node), self._properties(state, node))
        self._format(state)
        for node in nodes:
            self._launch(node)
        self._save(state)
        try:
            self.wait_ready(timeout_s)
        except Exception:
            self.stop(quiet=True)
            raise
        return state

    def _format(self, state: ClusterState) -> None:
        procs = []
        argfiles = []
        for node in state.nodes:
            main = ["kafka.tools.StorageTool", "format", f"--cluster-id={state.cluster_id}",
                    "-c", str(self._config_path(node)), "--ignore-formatted"]
            if state.secured and node.role == "controller":
                # The admin credential goes into the first metadata; through a java @argfile, so the password
                # stays off the process list.
                password = self.admin_secret_file.read_text().strip()
                argfile = self._node_dir(node) / "format.args"
                _write_private(argfile, "\n".join(
                    [*main, "--add-scram", f"{SCRAM_MECHANISM}=[name={ADMIN_USER},password={password}]"]) + "\n")
                argfiles.append(argfile)
                main = [f"@{argfile}"]
            cmd = self._java_cmd(node, main)
            procs.append((node, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)))
        deadline = time.monotonic() + BROKER_START_S
        try:
            for node, proc in procs:
                try:
                    out, _ = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    raise ClusterError(f"formatting {node.name} took over {BROKER_START_S:.0f}s") from None
                if proc.returncode != 0:
                    raise ClusterError(f"formatting {node.name} failed:\n{out[-2000:]}")
        finally:
            for _, proc in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            for argfile in argfiles:
                argfile.unlink(missing_ok=True)

    def _exporter_agent_args(self, node: Node) -> list[str]:
        """The JMX exporter agent on the node's loopback exporter port (agent syntax `[host:]port:rules`)."""
        if node.exporter_port is None:
            return []
        return [f"-javaagent:{fetch_exporter_agent()}=127.0.0.1:{node.exporter_port}:{EXPORTER_RULES}"]

    def _launch(self, node: Node) -> None:
        out = open(self._node_dir(node) / "stdout.log", "ab")  # noqa: SIM115 - handed to the child process
        cmd = self._java_cmd(node, ["kafka.Kafka", str(self._config_path(node))], self._exporter_agent_args(node))
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        out.close()
        node.pid = proc.pid
        # Until the child has exec'd java, /proc shows our own command line: wait, or a check right after this
        # would take the starting broker for a dead one.
        deadline = time.monotonic() + 10
        while not pid_alive(proc.pid, str(self._config_path(node))) and proc.poll() is None \
                and time.monotonic() < deadline:
            time.sleep(0.05)

    def wait_ready(self, timeout_s: float = 120.0, broker_ids: list[int] | None = None) -> None:
        """Wait until every (or the given) broker is registered and answers metadata requests."""
        from confluent_kafka.admin import AdminClient

        state = self.load()
        wanted = set(broker_ids if broker_ids is not None else [b.node_id for b in state.brokers])
        # log_level 0: brokers refuse connections until they are up; that is expected, not worth logging.
        admin = AdminClient({**self._client_config(state), "socket.timeout.ms": 3000, "log_level": 0})
        deadline = time.monotonic() + timeout_s
        seen: set[int] = set()
        while time.monotonic() < deadline:
            for node in (n for n in state.nodes if n.pid is not None):  # None: stopped on purpose (stop_broker)
                if not pid_alive(node.pid, str(self._config_path(node))):
                    # The log written last: a JVM that died before logging (e.g. the exporter agent could not
                    # bind its port) says why in stdout.log, beside a server.log of its earlier run.
                    logs = [f for f in (self._node_dir(node) / n for n in ("server.log", "stdout.log"))
                            if f.exists() and f.stat().st_size]
                    log = max(logs, key=lambda f: f.stat().st_mtime, default=None)
                    tail = log.read_text(errors="replace")[-3000:] if log else "(no log)"
                    raise ClusterError(f"{node.name} (pid {node.pid}) exited during start; log tail:\n{tail}")
            try:
                seen = set(admin.list_topics(timeout=3).brokers)
            except Exception:  # noqa: BLE001 - not up yet, retry until the deadline
                seen = set()
            if wanted <= seen:
                return
            time.sleep(0.5)
        raise ClusterError(f"brokers {sorted(wanted - seen)} not ready after {timeout_s:.0f}s "
                           f"(logs in {self.dir})")

    def stop(self, quiet: bool = False, timeout_s: float = 60.0) -> None:
        """Stop every JVM this cluster started: brokers first (controlled shutdown), then the controller."""
        try:
            state = self.load()
        except ClusterError:
            if not quiet:
                print(f"local cluster '{self.name}': nothing to stop")
            return
        for group in (state.brokers, [state.controller]):
            self._terminate([n for n in group if pid_alive(n.pid, str(self._config_path(n)))], timeout_s)
        for node in state.nodes:
            node.pid = None
        self._save(state)
        if not quiet:
            print(f"local cluster '{self.name}' stopped")

    def _terminate(self, nodes: list[Node], timeout_s: float, sig: int = signal.SIGTERM) -> None:
        for node in nodes:
            os.killpg(node.pid, sig)
        deadline = time.monotonic() + timeout_s
        for node in nodes:
            marker = str(self._config_path(node))
            while pid_alive(node.pid, marker) and time.monotonic() < deadline:
                time.sleep(0.2)
            if pid_alive(node.pid, marker):
                os.killpg(node.pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):  # reap it if it is our own child
                os.waitpid(node.pid, os.WNOHANG)

    def stop_broker(self, broker_id: int, hard: bool = False) -> None:
        """Stop one broker (SIGTERM: controlled shutdown; hard: SIGKILL, like a crashed machine)."""
        state = self.load()
        node = next(n for n in state.brokers if n.node_id == broker_id)
        self._terminate([node], 60.0, signal.SIGKILL if hard else signal.SIGTERM)
        node.pid = None
        self._save(state)

    def start_broker(self, broker_id: int, timeout_s: float = BROKER_START_S, attempts: int = 3) -> None:
        """Start a stopped broker again on its ports; a start that failed to bind one (held for a moment by
        something else on the machine) is tried again, `attempts` in all."""
        state = self.load()
        node = next(n for n in state.brokers if n.node_id == broker_id)
        if pid_alive(node.pid, str(self._config_path(node))):
            return
        for attempt in range(1, attempts + 1):
            self._launch(node)
            self._save(state)
            try:
                self.wait_ready(timeout_s, broker_ids=[broker_id])
                return
            except ClusterError as exc:
                if "Address already in use" not in str(exc) or attempt == attempts:
                    raise
                time.sleep(5)

    def add_broker(self, broker_id: int, rack: str, timeout_s: float = BROKER_START_S) -> None:
        """Start a new, empty broker in the running cluster (as an operator adds a machine)."""
        state = self.load()
        if any(n.node_id == broker_id for n in state.nodes):
            raise ClusterError(f"node {broker_id} already exists in local cluster '{self.name}'")
        port, exporter_port = free_ports(2)
        node = Node(broker_id, "broker", port, rack, exporter_port=exporter_port)
        state.nodes.append(node)
        self._node_dir(node).mkdir(parents=True)
        _write_private(self._config_path(node), self._properties(state, node))
        self._format(ClusterState(state.name, state.cluster_id, state.kafka_version, [node], state.secured,
                                  state.log_dirs))
        self._launch(node)
        self._save(state)
        self.wait_ready(timeout_s, broker_ids=[broker_id])

    def remove_broker(self, broker_id: int) -> None:
        """Stop a broker added by add_broker and forget it (its registration stays fenced in the metadata)."""
        state = self.load()
        node = next(n for n in state.brokers if n.node_id == broker_id)
        self._terminate([node], 60.0)
        state.nodes.remove(node)
        self._save(state)
        shutil.rmtree(self._node_dir(node), ignore_errors=True)

    def add_user(self, name: str, password: str, timeout_s: float = 60.0) -> None:
        """Create (or reset) a SCRAM user of a secured cluster, as admin; returns once every broker takes its
        login (each applies the credential from the metadata on its own)."""
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import (
            AdminClient,
            ScramCredentialInfo,
            ScramMechanism,
            UserScramCredentialUpsertion,
        )

        state = self.load()
        if not state.secured:
            raise ClusterError(f"local cluster '{self.name}' is not secured: it has no users")
        upsert = UserScramCredentialUpsertion(name, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
                                              password.encode())
        admin = AdminClient(self.admin_config())  # a name for it: the futures fail once the client is gone
        for future in admin.alter_user_scram_credentials([upsert]).values():
            future.result()
        deadline = time.monotonic() + timeout_s
        for broker in state.brokers:
            client = AdminClient({**scram_client_config(name, password), "log_level": 0,
                                  "bootstrap.servers": f"127.0.0.1:{broker.port}"})
            while True:
                try:
                    client.list_topics(timeout=3)
                    break
                except KafkaException:
                    if time.monotonic() > deadline:
                        raise ClusterError(f"broker {broker.node_id} refuses the login of user {name!r} after "
                                           f"{timeout_s:.0f}s") from None
                    time.sleep(0.3)

    def status(self) -> list[dict]:
        state = self.load()
        return [{"node": n.name, "id": n.node_id, "rack": n.rack, "port": n.port, "exporter_port": n.exporter_port,
                 "pid": n.pid, "running": pid_alive(n.pid, str(self._config_path(n)))} for n in state.nodes]

    def scrape_targets(self) -> dict[int, str]:
        """Each broker's JMX exporter as Prometheus scrapes it: broker id -> host:port."""
        return {n.node_id: f"127.0.0.1:{n.exporter_port}" for n in self.load().brokers if n.exporter_port}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.local_kafka", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["fetch", "start", "stop", "status", "bootstrap", "scrape-targets"])
    parser.add_argument("--name", default="demo", help="cluster name (folder under .state/kafka)")
    parser.add_argument("--brokers", type=int, default=6)
    parser.add_argument("--log-dirs", type=int, default=1,
                        help="log directories per broker (JBOD: 2 or more; each its own data-N folder)")
    parser.add_argument("--secured", action="store_true",
                        help="start: SASL/SCRAM listeners and ACLs; admin's password in .state/kafka/NAME/admin.secret")
    args = parser.parse_args(argv)
    cluster = LocalKafkaCluster(args.name)
    try:
        if args.command == "fetch":
            print(fetch_jars())
            print(fetch_exporter_agent())
        elif args.command == "start":
            if cluster.is_running():
                print(f"local cluster '{args.name}' already running: {cluster.load().bootstrap_servers}")
                return 0
            t0 = time.monotonic()
            state = cluster.start(args.brokers, secured=args.secured, log_dirs=args.log_dirs)
            print(f"local cluster '{args.name}' (Kafka {state.kafka_version}, KRaft) ready in "
                  f"{time.monotonic() - t0:.0f}s: bootstrap {state.bootstrap_servers}; logs in {cluster.dir}")
            if state.secured:
                print(f"SASL_PLAINTEXT with {SCRAM_MECHANISM} only; super user {ADMIN_USER!r}, password in "
                      f"{cluster.admin_secret_file}")
        elif args.command == "stop":
            cluster.stop()
        elif args.command == "bootstrap":
            if not cluster.is_running():
                raise ClusterError(f"local cluster '{args.name}' is not running (make cluster-up)")
            print(cluster.load().bootstrap_servers)
        elif args.command == "scrape-targets":
            for broker_id, target in cluster.scrape_targets().items():
                print(broker_id, target)
        else:
            for row in cluster.status():
                print(f"{row['node']:<12} id={row['id']:<4} rack={row['rack'] or '-':<7} "
                      f"port={row['port']:<6} exporter={row['exporter_port'] or '-':<6} "
                      f"pid={row['pid'] or '-':<8} {'up' if row['running'] else 'down'}")
    except ClusterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
