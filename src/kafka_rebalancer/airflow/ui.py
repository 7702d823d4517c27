"""The "Kafka rebalancer" page of the Airflow UI: every run of every cluster, newest first, each linking to its
report; and a link to the run's report on the pipeline's tasks.

A FastAPI app mounted by the API server under /kafka-rebalancer, behind the same authentication as the rest of the
UI (the UI's session cookie or a bearer token; reading DAG runs is the permission it asks for), shown in the UI's
navigation as an external view. The run folders are found through the configs the DAGs use: every cluster of the
fleet folder (KAFKA_REBALANCER_CONFIG_DIR), else every cluster under the run root of KAFKA_REBALANCER_CONFIG.
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

from kafka_rebalancer.airflow.deployment import cluster_of
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


def _cluster_folders() -> tuple[dict[str, Path], list[str]]:
    """Each cluster's folder of runs (`<run_root>/<cluster>`), and why each config of the fleet folder that does
    not load is left out."""
    from kafka_rebalancer.airflow.deployment import CONFIG_DIR_ENV, CONFIG_ENV
    from kafka_rebalancer.config import load_config
    from kafka_rebalancer.fleet import load_fleet

    if os.environ.get(CONFIG_DIR_ENV):
        fleet = load_fleet(Path(os.environ[CONFIG_DIR_ENV]))
        return ({c.name: c.config.run_root / c.name for c in fleet.clusters},
                [str(broken.error) for broken in fleet.broken])
    run_root = load_config(os.environ[CONFIG_ENV]).run_root
    return {folder.name: folder for folder in sorted(run_root.iterdir()) if folder.is_dir()
            and not folder.name.startswith(".")} if run_root.is_dir() else {}, []


@runs_app.get("/", response_class=HTMLResponse)
def runs_page() -> str:
    from kafka_rebalancer.errors import RebalancerError
    from kafka_rebalancer.model.units import human_bytes
    from kafka_rebalancer.report.overview import list_runs

    try:
        folders, broken = _cluster_folders()
    except (RebalancerError, KeyError) as exc:  # the page says what is wrong instead of a bare 500
        return _page("<p>Cannot read the kafka-rebalancer config (KAFKA_REBALANCER_CONFIG or "
                     f"KAFKA_REBALANCER_CONFIG_DIR): {html.escape(str(exc))}</p>")
    sections = [f"<p>Left out, its config does not load: {html.escape(error)}</p>" for error in broken]
    for cluster, folder in folders.items():
        runs = list_runs(folder.parent, cluster)
        if not runs and not (folder / ".automation").is_dir():  # neither a run nor an event yet
            continue
        rows = []
        for r in runs:
            band = "-" if r.out_of_band_before is None else f"{r.out_of_band_before} → {r.out_of_band_after}" + (
                "" if r.out_of_band_after_measured else " (planned)")
            run_cell = f'<a href="{_report_link(r.run_id, cluster)}">{html.escape(r.run_id)}</a>' if r.report \
                else f"{html.escape(r.run_id)} <small>(no report yet)</small>"
            cells = [run_cell, *(html.escape(str(v)) for v in (
                r.started_at, r.trigger, r.action, r.mode, r.status,
                "-" if r.replica_moves is None else r.replica_moves,
                "-" if r.moved_bytes is None else human_bytes(r.moved_bytes), band, r.approval))]
            cells.append("<br>".join(html.escape(line) for line in r.notifications_failed) or "-")
            rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
        sections.append(f"<h2>cluster {html.escape(cluster)}</h2><table><thead><tr>"
                        + "".join(f"<th>{c}</th>" for c in COLUMNS) + "</tr></thead><tbody>" + "".join(rows)
                        + "</tbody></table>" + _events_table(folder.parent, cluster))
    body = "".join(sections) or "<p>No runs yet.</p>"
    return _page(body)


def _report_link(run_id: str, cluster: str) -> str:
    """The report's address; in a fleet it names the cluster (two clusters' scheduled runs may share a run id)."""
    from kafka_rebalancer.airflow.deployment import CONFIG_DIR_ENV

    return html.escape(report_url(run_id, cluster if os.environ.get(CONFIG_DIR_ENV) else None))


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
            cells[-1] += f' <a href="{_report_link(entry["run_id"], cluster)}">report</a>'
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    return (f"<h3>events of the cluster's watcher (latest {min(shown, len(entries))} of {len(entries)})</h3>"
            "<table><thead><tr>" + "".join(f"<th>{c}</th>" for c in EVENT_COLUMNS) + "</tr></thead><tbody>"
            + "".join(rows) + "</tbody></table>")


@runs_app.get("/report/{run_id}")
def run_report(run_id: str, cluster: str | None = None) -> FileResponse:
    from kafka_rebalancer.config import safe_run_id

    if not RUN_ID.match(run_id):
        raise HTTPException(404, "no such run")
    folders, _ = _cluster_folders()
    for name, folder in folders.items():
        report = folder / safe_run_id(run_id) / "report" / "index.html"  # folder names are safe
        if cluster in (None, name) and report.is_file() and report.resolve().is_relative_to(folder.resolve()):
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
        return report_url(ti_key.run_id, cluster_of(ti_key.dag_id))
