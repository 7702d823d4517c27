"""The "Kafka rebalancer" page of the Airflow UI: every run of every cluster, newest first, each linking to its
report; and a link to the run's report on the pipeline's tasks.

A FastAPI app mounted by the API server under /kafka-rebalancer, behind the same authentication as the rest of the
UI (the UI's session cookie or a bearer token; reading DAG runs is the permission it asks for), shown in the UI's
navigation as an external view. The run folders are found through the config the DAGs use
(KAFKA_REBALANCER_CONFIG).
"""

from __future__ import annotations

import html
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
from airflow.api_fastapi.core_api.security import requires_access_dag
from airflow.sdk import BaseOperatorLink
from fastapi import Depends, FastAPI, HTTPException
from fastapi.responses import FileResponse, HTMLResponse

from kafka_rebalancer.airflow.tasks import report_url

if TYPE_CHECKING:
    from airflow.sdk import BaseOperator
    from airflow.sdk.types import TaskInstanceKey

RUN_ID = re.compile(r"^[A-Za-z0-9_.:+-]+$")
COLUMNS = ("run", "started", "trigger", "action", "mode", "status", "moves", "bytes", "out of band", "approval",
           "notifications failed")
EVENT_COLUMNS = ("seen", "event", "broker", "pool", "decision", "why")
REPORTED_TASKS = {"plan", "approve", "execute", "verify", "report"}

runs_app = FastAPI(title="Kafka rebalancer runs", docs_url=None, redoc_url=None, openapi_url=None,
                   dependencies=[Depends(requires_access_dag("GET", DagAccessEntity.RUN))])


def _run_root() -> Path:
    from kafka_rebalancer.config import load_config

    return load_config(os.environ["KAFKA_REBALANCER_CONFIG"]).run_root


@runs_app.get("/", response_class=HTMLResponse)
def runs_page() -> str:
    from kafka_rebalancer.errors import RebalancerError
    from kafka_rebalancer.model.units import human_bytes
    from kafka_rebalancer.report.overview import list_runs

    try:
        run_root = _run_root()
    except (RebalancerError, KeyError) as exc:  # the page says what is wrong instead of a bare 500
        return _page("<p>Cannot read the kafka-rebalancer config (KAFKA_REBALANCER_CONFIG): "
                     f"{html.escape(str(exc))}</p>")
    runs = list_runs(run_root)
    sections = []
    watched = {folder.parent.name for folder in run_root.glob("*/.automation")}  # events, maybe no run yet
    for cluster in sorted({r.cluster for r in runs} | watched):
        rows = []
        for r in (r for r in runs if r.cluster == cluster):
            band = "-" if r.out_of_band_before is None else f"{r.out_of_band_before} → {r.out_of_band_after}" + (
                "" if r.out_of_band_after_measured else " (planned)")
            run_cell = f'<a href="{report_url(r.run_id)}">{html.escape(r.run_id)}</a>' if r.report \
                else f"{html.escape(r.run_id)} <small>(no report yet)</small>"
            cells = [run_cell, *(html.escape(str(v)) for v in (
                r.started_at, r.trigger, r.action, r.mode, r.status,
                "-" if r.replica_moves is None else r.replica_moves,
                "-" if r.moved_bytes is None else human_bytes(r.moved_bytes), band, r.approval))]
            cells.append("<br>".join(html.escape(line) for line in r.notifications_failed) or "-")
            rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
        sections.append(f"<h2>cluster {html.escape(cluster)}</h2><table><thead><tr>"
                        + "".join(f"<th>{c}</th>" for c in COLUMNS) + "</tr></thead><tbody>" + "".join(rows)
                        + "</tbody></table>" + _events_table(run_root, cluster))
    body = "".join(sections) or f"<p>No runs yet under {html.escape(str(run_root))}.</p>"
    return _page(body)


def _events_table(run_root: Path, cluster: str, shown: int = 20) -> str:
    """The watcher's latest events on the cluster and what was decided on each (started runs linked)."""
    from kafka_rebalancer.automation.events_log import cluster_events, event_fields

    entries = cluster_events(run_root, cluster)
    if not entries:
        return ""
    rows = []
    for entry in reversed(entries[-shown:]):
        cells = [html.escape(c) for c in event_fields(entry)]
        if entry.get("run_id") and RUN_ID.match(str(entry["run_id"])):
            cells[-1] += f' <a href="{report_url(entry["run_id"])}">report</a>'
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    return (f"<h3>events of the cluster's watcher (latest {min(shown, len(entries))} of {len(entries)})</h3>"
            "<table><thead><tr>" + "".join(f"<th>{c}</th>" for c in EVENT_COLUMNS) + "</tr></thead><tbody>"
            + "".join(rows) + "</tbody></table>")


@runs_app.get("/report/{run_id}")
def run_report(run_id: str) -> FileResponse:
    from kafka_rebalancer.config import safe_run_id

    if not RUN_ID.match(run_id):
        raise HTTPException(404, "no such run")
    run_root = _run_root()
    for report in sorted(run_root.glob(f"*/{safe_run_id(run_id)}/report/index.html")):  # folder names are safe
        if report.resolve().is_relative_to(run_root.resolve()):
            return FileResponse(report, media_type="text/html")
    raise HTTPException(404, f"run {run_id} has no report yet (kafka-rebalancer report --config C {run_id})")


def _page(body: str) -> str:
    return ("<!doctype html><html><head><meta charset='utf-8'><title>Kafka rebalancer runs</title><style>"
            "body{font-family:system-ui,sans-serif;margin:1.5em}table{border-collapse:collapse;font-size:13px}"
            "th,td{border-bottom:1px solid #ddd;padding:4px 8px;text-align:left}th{background:#f4f4f4}"
            "</style></head><body><h1>Kafka rebalancer runs</h1>" + body + "</body></html>")


class RunReportLink(BaseOperatorLink):
    """On the pipeline's tasks: the run's report."""

    name = "Run report"

    def get_link(self, operator: BaseOperator, *, ti_key: TaskInstanceKey) -> str:
        if not ti_key.dag_id.startswith("kafka_rebalance_") or operator.task_id not in REPORTED_TASKS:
            return ""
        return report_url(ti_key.run_id)
