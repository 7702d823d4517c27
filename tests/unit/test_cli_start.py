"""How the CLI starts: nothing heavy is imported before the arguments are read, and `plan` begins its Spark JVM only
once its run and snapshot are checked (the JVM's start and the planner's imports then run on different cores), so
bad input stops it before any JVM starts."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

HEAVY = ("pandas", "numpy", "pyspark", "pyarrow", "pydantic", "confluent_kafka", "rich", "great_expectations")


def test_the_cli_imports_nothing_heavy_before_reading_its_arguments() -> None:
    probe = f"import sys, kafka_rebalancer.cli; print(sorted(set({HEAVY!r}) & set(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    assert result.stdout.strip() == "[]"


def test_plan_of_a_missing_run_stops_on_the_error_before_spark_starts(
        config_factory: Callable[..., Any], tmp_path: Path) -> None:
    config_factory({"cluster": {"name": "c"}, "pools": {"a": {"brokers": [1]}}})
    cli = Path(sys.executable).parent / "kafka-rebalancer"
    result = subprocess.run([str(cli), "plan", "--config", str(tmp_path / "config.yaml"), "--run-id", "no-such-run"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 2, result.stderr
    assert "error:" in result.stderr and "no-such-run" in result.stderr
    assert "Traceback" not in result.stderr
