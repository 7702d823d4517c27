"""The visual report of one run: `report/index.html` in the run folder, one self-contained page (plotly.js inlined
once, no CDN) that opens offline.

It shows whatever the run folder holds, wherever the run stopped (a snapshot only, a plan that failed validation, a
dry run, an executed, cancelled or failed execution); a stage that did not run says "not run", and an artifact that
cannot be read says so in its own section instead of failing the report. `collect` (collect.py) reads the folder
into the page's records (views.py) and `render` (render.py) turns them into the page; this module writes it as the
run's report stage.
"""

from __future__ import annotations

from pathlib import Path

from kafka_rebalancer.report.collect import collect
from kafka_rebalancer.report.render import render
from kafka_rebalancer.report.views import MOVES_SHOWN
from kafka_rebalancer.run_folder import REPORT, RunFolder

# What callers (the CLI, the Airflow plugin, the tests) import from here.
__all__ = ["MOVES_SHOWN", "collect", "render", "write_report"]


def write_report(run: RunFolder) -> Path:
    """Write the run's report/index.html atomically (a reader sees the old page or the new one) and return it."""
    page = render(collect(run))
    with run.stage(REPORT) as out:
        (out / "index.html").write_text(page, encoding="utf-8")
    return run.stage_path(REPORT) / "index.html"
