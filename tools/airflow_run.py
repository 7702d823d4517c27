"""Run the nightly DAG once with `dag.test()` in a local Airflow (sqlite metadata database), as the demo and the
integration test do. Connections come from a file, the way an operator would configure them in Airflow.

    python -m tools.airflow_run --config CONFIG --connections FILE [--conf JSON] [--result FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
DATABASE = "airflow.db"  # the sqlite metadata database Airflow keeps in its home by default


def airflow_env(home: Path, config: Path) -> dict[str, str]:
    """Environment for an isolated Airflow: its own home and database, our DAGs and plugins, the venv's python
    for Spark (driver and workers) and spark-submit on the PATH."""
    env = dict(os.environ)
    env.update({
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
        "KAFKA_REBALANCER_CONFIG": str(config),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PATH": f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}",
    })
    return env


def ensure_database(env: dict[str, str], template: Path | None = None) -> None:
    """Create or upgrade the metadata database (idempotent). `template`: a database this Airflow migrated before
    (the test session's), copied in instead when the home has none; a migration takes a minute on a busy machine."""
    home = Path(env["AIRFLOW_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    if template is not None and not (home / DATABASE).exists():
        shutil.copyfile(template, home / DATABASE)
        return
    result = subprocess.run([str(VENV_BIN / "airflow"), "db", "migrate"], env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"airflow db migrate failed:\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}")


def connections(kafka_connection_id: str, bootstrap: str, spark_master: str = "local[2]") -> dict[str, dict]:
    """The Airflow connections the DAGs use: the Kafka cluster and the Spark master."""
    return {kafka_connection_id: {"conn_type": "kafka", "extra": {"bootstrap.servers": bootstrap}},
            "spark_rebalancer": {"conn_type": "spark", "host": spark_master,
                                 "extra": {"spark-binary": "spark-submit"}}}


def write_connections(path: Path, kafka_connection_id: str, bootstrap: str, spark_master: str = "local[2]") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(connections(kafka_connection_id, bootstrap, spark_master), indent=2))
    return path


def run_dag(env: dict[str, str], connections: Path, conf: dict, log_file: Path, timeout_s: float = 1200) -> dict:
    """One DAG run in a subprocess (Airflow reads its settings at import); returns {"run_id", "state"}."""
    result_file = log_file.with_suffix(".result.json")
    result_file.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "tools.airflow_run", "--connections", str(connections),
           "--conf", json.dumps(conf), "--result", str(result_file)]
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with log_file.open("w") as out:
        proc = subprocess.run(cmd, env=env, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, timeout=timeout_s)
    if not result_file.exists():
        raise RuntimeError(f"the DAG run did not finish (exit {proc.returncode}); see {log_file}")
    return json.loads(result_file.read_text())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--connections", required=True)
    parser.add_argument("--conf", default="{}")
    parser.add_argument("--result", required=True)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO / "dags"))
    from kafka_rebalance_nightly import dag

    run = dag.test(run_conf=json.loads(args.conf), conn_file_path=args.connections)
    state = str(getattr(run.state, "value", run.state))
    Path(args.result).write_text(json.dumps({"run_id": run.run_id, "state": state}))
    print(f"DAG run {run.run_id}: {state}")
    return 0 if state == "success" else 1


if __name__ == "__main__":
    sys.exit(main())
