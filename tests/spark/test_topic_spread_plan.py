"""The topic spread on (issue 52), through the plan job and the validation: the planner keeps the caps, and the
re-check of plan.json, independent of it, finds none broken: the plan stage's table and summary, and the
validation's expectation passing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kafka_rebalancer.model.schemas import TOPIC_SPREAD
from kafka_rebalancer.operations.request import run_config
from kafka_rebalancer.plan.job import run_plan
from kafka_rebalancer.run_folder import PLAN, VALIDATION, RunFolder, read_json, read_table
from kafka_rebalancer.snapshot import write_snapshot
from kafka_rebalancer.snapshot.synthetic import SyntheticSpec, generate
from kafka_rebalancer.validate.suite import validate_plan
from tests.helpers import write_config

pytestmark = pytest.mark.spark

# New empty brokers: a planner without the caps fills them from few topics.
SPEC = SyntheticSpec(n_brokers=9, n_racks=3, n_pools=1, n_partitions=240, replication_factor=3,
                     partitions_per_topic=12, hot_brokers_per_pool=1, empty_brokers_per_pool=2,
                     under_replicated_fraction=0.0, placement="kafka", seed=2)


def test_a_plan_with_the_spread_on_passes_its_recheck_and_validation(spark: Any, tmp_path: Path) -> None:
    tables, body = generate(SPEC)
    config_path = write_config(tmp_path / "config.yaml", {**body, "run_root": str(tmp_path / "runs"),
                                                         "topic_spread": {"enabled": True}})
    config = run_config(config_path)
    run = RunFolder(config.run_dir("spread"))
    write_snapshot(run, tables, {"cluster": config.cluster.name})
    summary = run_plan(spark, config, run)
    assert summary["totals"]["replica_moves"] > 0 and summary["totals"]["topic_spread_over_cap"] == 0
    for facts in summary["pools"].values():
        assert {kind: f["over_cap_after"] for kind, f in facts["topic_spread"].items()} == {"replicas": 0,
                                                                                             "leaders": 0}
    table = read_table(run.stage_path(PLAN), TOPIC_SPREAD)
    assert (table["held"] <= table["cap"]).all()
    report = validate_plan(config, run)
    assert report["success"]
    results = read_json(run.stage_path(VALIDATION) / "gx_results.json")
    assert "plan_topic_spread" in {suite.get("suite_name") for suite in results}
