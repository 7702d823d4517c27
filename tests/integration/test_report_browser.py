"""The report of a run whose plan failed validation, opened in a real headless Chromium: the failed expectation
and the rows that broke it are on the page, the charts render, the moves table filters, no console errors.
(The report of a real DAG run is opened by tests/integration/test_nightly_dag.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kafka_rebalancer.errors import ValidationFailed
from kafka_rebalancer.report.run_report import write_report
from kafka_rebalancer.validate.suite import validate_plan
from tests.browser import SCREENSHOTS, check_report_in_browser, every_chart_drawn
from tests.unit.test_run_report import SMALL, make_cluster, replica_moves, write_large_run, write_plan

pytestmark = pytest.mark.browser


def test_a_failed_validation_report_renders_in_chromium(tmp_path: Path) -> None:
    config, tables, run = make_cluster(tmp_path, SMALL, "scheduled__2026-11-23T02_00_00_00_00")
    moves = replica_moves(tables, 30)
    first = moves.iloc[0]
    moves.loc[0, "target_broker"] = tables.brokers.loc[tables.brokers["broker_pool"] != first["broker_pool"],
                                                       "broker_id"].iloc[0]  # a broker of the other pool
    write_plan(run, config, tables, moves)
    with pytest.raises(ValidationFailed):
        validate_plan(config, run)
    report = write_report(run)
    assert "FAILED" in report.read_text()
    shown = check_report_in_browser(report, "failed-validation-run")
    assert shown["errors"] == [], shown["errors"]
    assert every_chart_drawn(shown), shown["charts"]
    assert shown["rows"] > 0 and 0 < shown["filtered_rows"] <= shown["rows"]
    assert shown["screenshot"].stat().st_size > 10_000


def test_the_report_of_100000_moves_over_1000_brokers_renders_in_chromium(tmp_path: Path) -> None:
    run, _ = write_large_run(tmp_path)
    shown = check_report_in_browser(write_report(run), "large-run")
    assert shown["errors"] == [], shown["errors"]
    assert every_chart_drawn(shown), shown["charts"]
    assert shown["rows"] == 2_000 and 0 < shown["filtered_rows"] < shown["rows"]
    # How long it took to open is a figure for BENCHMARKS.md, not a pass/fail condition of the test.
    timing = SCREENSHOTS / "large-run-load.json"
    timing.write_text(json.dumps({"load_ms": shown["load_ms"], "bytes": (run.path / "report" / "index.html")
                                 .stat().st_size}))
