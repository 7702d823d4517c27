"""A real local Airflow on loopback: API server (UI and REST), scheduler, DAG processor and triggerer, each its
own process, with an isolated home and sqlite database, our DAGs and plugins, and connections from the
environment. The approval tests drive it through Airflow's REST API as an operator's script would; `start`
leaves one running for a person to try the UI's required actions against the demo cluster.

    python -m tools.airflow_services start --config CONFIG --bootstrap HOST:PORT [--port 8080]
    python -m tools.airflow_services stop
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from tools.airflow_run import REPO, VENV_BIN, airflow_env, connections, ensure_database
from tools.ports import free_ports

SERVICES = ("api-server", "scheduler", "dag-processor", "triggerer")
DEFAULT_HOME = REPO / ".cache" / "airflow-services"
USER = "approver"  # the one Airflow user (admin role); its password is in <home>/passwords.json
FINISHED = {"success", "failed"}
ANSWER_AFTER_S = 10.0  # see wait_for_input
ANSWER_TIMEOUT_S = 120.0  # for one answer of the API server (see request_text)
READ_RETRY_S = 300.0  # how long a read is asked again


class AirflowError(RuntimeError):
    pass


class AirflowServices:
    """Start, drive and stop one local Airflow. Processes are stopped by their ids (process groups)."""

    def __init__(self, home: Path, config: Path, airflow_connections: dict[str, dict[str, Any]], *,
                 port: int | None = None, settings: dict[str, str] | None = None,
                 database_template: Path | None = None) -> None:
        self.home = Path(home)
        self.database_template = database_template  # see ensure_database
        free_port, worker_logs_port, trigger_logs_port = free_ports(3)  # distinct: held together while chosen
        self.port = port or free_port
        self.url = f"http://127.0.0.1:{self.port}"
        self.password_file = self.home / "passwords.json"
        self.pid_file = self.home / "services.json"
        self.env = airflow_env(self.home, config)
        self.env.update({
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__CORE__PARALLELISM": "4",
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.url}/execution/",
            # A task's calls to the API server (5 s by default): past it, and its retries, the task is killed; on a
            # loaded machine the server's one worker answered later than that (a snapshot task killed in a test).
            "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": "60",
            "AIRFLOW__API__BASE_URL": self.url,
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(self.port),
            "AIRFLOW__API__WORKERS": "1",
            # One set of secrets for every process: the four start at once, and each would write its own into the
            # airflow.cfg it finds missing (a trigger's arguments encrypted by the DAG processor with one Fernet key
            # could not be read by the triggerer, which died).
            "AIRFLOW__API_AUTH__JWT_SECRET": os.urandom(16).hex(),
            "AIRFLOW__API__SECRET_KEY": os.urandom(16).hex(),
            "AIRFLOW__CORE__FERNET_KEY": base64.urlsafe_b64encode(os.urandom(32)).decode(),
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{USER}:admin",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(self.password_file),
            "AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK": "False",
            # The log servers of the workers and the triggerer: another Airflow on the machine holds the defaults.
            "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(worker_logs_port),
            "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(trigger_logs_port),
            **{f"AIRFLOW_CONN_{conn_id.upper()}": json.dumps(body) for conn_id, body in airflow_connections.items()},
            **(settings or {}),
        })
        self._token: str | None = None

    # processes

    def start(self, timeout_s: float = 180) -> AirflowServices:
        self.home.mkdir(parents=True, exist_ok=True)
        self.stop(quiet=True)  # services left behind by an interrupted run
        ensure_database(self.env, self.database_template)
        if not self.password_file.exists():
            self.password_file.write_text(json.dumps({USER: os.urandom(12).hex()}))
        pids = {}
        for service in SERVICES:
            log = (self.home / f"{service}.log").open("a")
            proc = subprocess.Popen([str(VENV_BIN / "airflow"), service], env=self.env, cwd=REPO, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)
            pids[service] = proc.pid
        self.pid_file.write_text(json.dumps({"url": self.url, "pids": pids}))
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self._check_alive(pids)
            try:
                health = self.request("GET", "/api/v2/monitor/health", auth=False)
                if health.get("metadatabase", {}).get("status") == "healthy" and \
                        health.get("scheduler", {}).get("status") == "healthy":
                    return self
            except (OSError, AirflowError):
                pass
            time.sleep(1)
        raise AirflowError(f"Airflow did not become healthy within {timeout_s:.0f} s; logs in {self.home}")

    def _check_alive(self, pids: dict[str, int]) -> None:
        for service, pid in pids.items():
            try:
                finished, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                continue  # not our child (stop() of an earlier session's processes)
            if finished:
                tail = (self.home / f"{service}.log").read_text()[-3000:]
                raise AirflowError(f"airflow {service} exited while starting:\n{tail}")

    def stop(self, quiet: bool = False, timeout_s: float = 30) -> None:
        if not self.pid_file.exists():
            return
        pids = json.loads(self.pid_file.read_text())["pids"]
        for pid in pids.values():
            _signal_group(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and any(_group_alive(pid) for pid in pids.values()):
            for pid in pids.values():  # reap our own children so they do not linger as zombies
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, os.WNOHANG)
            time.sleep(0.5)
        for pid in pids.values():
            _signal_group(pid, signal.SIGKILL)
        self.pid_file.unlink(missing_ok=True)  # its folder may be gone (a test session's tmp folders removed)
        if not quiet:
            print(f"stopped Airflow ({', '.join(f'{name} {pid}' for name, pid in pids.items())})")

    # REST API

    def token(self) -> str:
        if self._token is None:
            password = json.loads(self.password_file.read_text())[USER]
            self._token = self.request("POST", "/auth/token", {"username": USER, "password": password},
                                       auth=False)["access_token"]
        return self._token

    def request(self, method: str, path: str, body: Any = None, *, auth: bool = True) -> Any:
        text = self.request_text(method, path, body, auth=auth)
        return json.loads(text) if text else None

    def request_text(self, method: str, path: str, body: Any = None, *, auth: bool = True) -> str:
        headers = {"Content-Type": "application/json"}
        if auth:
            headers["Authorization"] = f"Bearer {self.token()}"
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        # A read is asked again while the server does not answer or fails inside (its one worker and the sqlite
        # database are slow on a loaded machine); a change is sent once, as asking twice may do it twice.
        deadline = time.monotonic() + (READ_RETRY_S if method == "GET" else 0.0)
        while True:
            try:
                with urllib.request.urlopen(req, timeout=ANSWER_TIMEOUT_S) as response:
                    return response.read().decode()
            except urllib.error.HTTPError as exc:
                if exc.code < 500 or time.monotonic() >= deadline:
                    raise AirflowError(f"{method} {path}: HTTP {exc.code} {exc.read().decode()[:1000]}") from exc
            except OSError:  # no answer in time, or no connection
                if time.monotonic() >= deadline:
                    raise
            time.sleep(2)

    def status_without_login(self, path: str) -> int:
        try:
            with urllib.request.urlopen(self.url + path, timeout=30) as response:
                return response.status
        except urllib.error.HTTPError as exc:
            return exc.code

    def wait_for_dag(self, dag_id: str, timeout_s: float = 180) -> None:
        """Until the DAG processor has parsed the DAG and it has no import error."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                self.request("GET", f"/api/v2/dags/{dag_id}")
                return
            except AirflowError:
                errors = self.request("GET", "/api/v2/importErrors")["import_errors"]
                if errors:
                    raise AirflowError(f"DAG import errors: {errors}") from None
                time.sleep(2)
        raise AirflowError(f"DAG {dag_id} was not parsed within {timeout_s:.0f} s; logs in {self.home}")

    def put_connection(self, connection_id: str, fields: dict[str, object]) -> None:
        """Store (or replace) an Airflow connection through the REST API."""
        body = {"connection_id": connection_id, **fields}
        try:
            self.request("PATCH", f"/api/v2/connections/{connection_id}", body)
        except AirflowError as exc:
            if "HTTP 404" not in str(exc):
                raise
            self.request("POST", "/api/v2/connections", body)

    def set_paused(self, dag_id: str, paused: bool) -> None:
        self.request("PATCH", f"/api/v2/dags/{dag_id}", {"is_paused": paused})

    def trigger(self, dag_id: str, conf: dict[str, Any]) -> str:
        run = self.request("POST", f"/api/v2/dags/{dag_id}/dagRuns", {"logical_date": None, "conf": conf})
        return run["dag_run_id"]

    def runs(self, dag_id: str) -> list[dict[str, Any]]:
        # The API's largest page: a shared Airflow holds the runs of many tests.
        return self.request("GET", f"/api/v2/dags/{dag_id}/dagRuns?order_by=-start_date&limit=100")["dag_runs"]

    def task_states(self, dag_id: str, run_id: str) -> dict[str, str]:
        """task id (with [map index] for mapped tasks) -> state."""
        instances = self.request("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances")["task_instances"]
        return {ti["task_id"] + (f"[{ti['map_index']}]" if ti["map_index"] >= 0 else ""): ti["state"]
                for ti in instances}

    def wait_for_input(self, dag_id: str, run_id: str, timeout_s: float = 600) -> dict[str, Any]:
        """Until a task of the run waits for a person, and has for ANSWER_AFTER_S; returns its human-in-the-loop
        details. An answer within a second of the pause races Airflow's scheduler: it can still be processing the
        paused worker's exit, see the task queued again by the answer, and mark it failed ("task state changed
        externally"); CI saw that end a run. A person never answers that fast; a script waits like this."""
        def waiting() -> dict[str, Any] | None:
            details = self.request("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/hitlDetails")["hitl_details"]
            found = next((d for d in details if d.get("response_received") is False), None)
            state = self.request("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}")["state"]
            if found is None and state in FINISHED:
                raise AirflowError(f"{dag_id} run {run_id} ended {state} before any task waited for input: "
                                   f"{self.task_states(dag_id, run_id)}")
            return found

        found = self._wait(waiting, dag_id, run_id, timeout_s, "a task waiting for input")
        time.sleep(ANSWER_AFTER_S)
        return found

    def respond(self, dag_id: str, run_id: str, task_id: str, chosen_options: list[str]) -> dict[str, Any]:
        return self.request("PATCH", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/-1/hitlDetails",
                            {"chosen_options": chosen_options})

    def wait_for_run(self, dag_id: str, run_id: str, timeout_s: float = 900) -> str:
        def finished() -> str | None:
            state = self.request("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}")["state"]
            return state if state in FINISHED else None

        return self._wait(finished, dag_id, run_id, timeout_s, "the run to finish")

    def _wait(self, probe: Any, dag_id: str, run_id: str, timeout_s: float, what: str) -> Any:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            found = probe()
            if found:
                return found
            time.sleep(2)
        raise AirflowError(f"{dag_id} run {run_id}: no {what} within {timeout_s:.0f} s: "
                           f"{self.task_states(dag_id, run_id)}")

    def task_log(self, dag_id: str, run_id: str, task_id: str, try_number: int = 1) -> str:
        entries = self.request("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/logs/"
                                      f"{try_number}")["content"]
        return "\n".join(e.get("event", "") if isinstance(e, dict) else str(e) for e in entries)


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def _group_alive(pid: int) -> bool:
    try:
        os.killpg(pid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["start", "stop"])
    parser.add_argument("--home", type=Path, default=DEFAULT_HOME)
    parser.add_argument("--config", type=Path, default=REPO / "config" / "demo.yaml")
    parser.add_argument("--bootstrap", help="Kafka bootstrap servers (default: the config's)")
    parser.add_argument("--port", type=int, default=8080)
    args = parser.parse_args(argv)
    from kafka_rebalancer.config import load_config

    config = load_config(args.config)
    services = AirflowServices(args.home, args.config.resolve(),
                               connections(config.cluster.airflow_connection_id,
                                           args.bootstrap or config.cluster.bootstrap_servers), port=args.port)
    if args.command == "stop":
        services.stop()
        return 0
    services.start()
    print(f"Airflow is up at {services.url} (user {USER}, password in {services.password_file}); "
          f"logs in {args.home}; stop with: python -m tools.airflow_services stop")
    return 0


if __name__ == "__main__":
    sys.exit(main())
